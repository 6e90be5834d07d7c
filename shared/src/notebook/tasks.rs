//! Task links: list, create (deduplicated, also under concurrent calls) and update status.

use std::collections::BTreeMap;

use serde::Serialize;

use super::pages::NewTask;
use super::records::{
    self, StoredLine, TaskKeyRecord, TaskRecord, decode, encode, task_gsi_sk, task_sk, taskkey_sk,
    tasks_partition, user_pk,
};
use super::{MAX_ATTEMPTS, MAX_TEXT_CHARS, Notebook, NotebookError, backoff, is_retryable};
use crate::domain::tasks::{self, ChangedBy};
use crate::domain::{Date, Notation, PageId, PageStatus, TaskLinkId, TaskStatus, UserId};
use crate::ports::{Cond, Item, Query, Write};

/// Which tasks `list_tasks` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskFilter {
    /// Not done: status `todo`.
    Open,
    Done,
    All,
}

// `list_tasks`'s output schema takes its descriptions from these doc comments: they are written
// for clients.
/// A task: its text, reconciled status, the day it was first written and the page it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TaskView {
    pub task_link_id: TaskLinkId,
    pub text: String,
    pub status: TaskStatus,
    pub first_seen_date: Date,
    pub completed_date: Option<Date>,
    pub source_page_id: PageId,
    pub notion_url: Option<String>,
}

/// One line showing a task, on one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLine {
    pub page_id: PageId,
    pub date: Date,
    pub line_id: String,
    /// The line's text as written (`None` if the page no longer has the line: a concurrent
    /// write of it).
    pub text: Option<String>,
    /// The line's own status on its page.
    pub page_status: PageStatus,
}

/// Everything `get_task` shows of one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDetail {
    pub task: TaskView,
    /// Every line showing it, oldest page first.
    pub lines: Vec<TaskLine>,
    /// Its status changes, oldest first (bounded: `dropped` older ones are not kept).
    pub changes: tasks::StatusLog,
    /// The explicit updates folded into the reconciliation checkpoint (the status log keeps
    /// its own bound).
    pub dropped_updates: u64,
}

/// What `create_task` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTask {
    pub task_link_id: TaskLinkId,
    /// The line that holds the task on its page.
    pub block_id: String,
    pub page_id: PageId,
    pub created: bool,
    /// The Notion page of a reused task that has one.
    pub notion: Option<super::NotionRef>,
}

/// What `update_task_status` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdatedTask {
    pub status: TaskStatus,
    pub text: String,
    /// Whether this call changed the task (an update of the same status writes nothing).
    pub changed: bool,
    /// The task's Notion page, if it was pushed.
    pub notion_page_id: Option<String>,
}

pub(super) fn check_text(arg: &str, text: &str) -> Result<(), NotebookError> {
    if text.trim().is_empty() {
        return Err(NotebookError::Invalid(format!("{arg} must not be empty")));
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err(NotebookError::Invalid(format!(
            "{arg} is longer than {MAX_TEXT_CHARS} characters"
        )));
    }
    Ok(())
}

impl Notebook {
    /// Tasks by status, oldest first seen first, optionally only those first seen on or after
    /// `since`.
    pub async fn list_tasks(
        &self,
        user: &UserId,
        filter: TaskFilter,
        since: Option<Date>,
        limit: usize,
    ) -> Result<Vec<TaskView>, NotebookError> {
        Ok(self
            .list_tasks_after(user, filter, since, None, limit)
            .await?
            .0)
    }

    /// [`Notebook::list_tasks`] after the task `after` (the last one of the previous call: its
    /// first-seen date and id), and whether more follow.
    pub async fn list_tasks_after(
        &self,
        user: &UserId,
        filter: TaskFilter,
        since: Option<Date>,
        after: Option<(Date, &TaskLinkId)>,
        limit: usize,
    ) -> Result<(Vec<TaskView>, bool), NotebookError> {
        let statuses: &[TaskStatus] = match filter {
            TaskFilter::Open => &[TaskStatus::Todo],
            TaskFilter::Done => &[TaskStatus::Done],
            TaskFilter::All => &[TaskStatus::Todo, TaskStatus::Done, TaskStatus::Cancelled],
        };
        // Every status partition is sorted by `{first_seen}#{id}`, the order of the merged
        // list, so one position continues all of them: from the last task shown (inclusive in
        // the store, skipped here), or from `since`.
        let from = match (after, since) {
            (Some((date, id)), since) => {
                let last = task_gsi_sk(date, id);
                Some(match since.map(|d| d.to_string()) {
                    Some(s) if s > last => s,
                    _ => last,
                })
            }
            (None, since) => since.map(|d| d.to_string()),
        };
        let skip = after.map(|(date, id)| task_gsi_sk(date, id));
        // One more than asked, to know whether more follow.
        let want = limit + 1;
        let mut rows: BTreeMap<(Date, TaskLinkId), TaskRecord> = BTreeMap::new();
        for status in statuses {
            let mut q = Query::gsi1(tasks_partition(user, *status), "");
            q.from = from.clone();
            q.limit = want + usize::from(skip.is_some());
            let mut found = 0;
            loop {
                let page = self.store.query(&q).await?;
                for item in page.items {
                    let t: TaskRecord = decode("task", &item.body)?;
                    if skip.as_deref() == Some(&task_gsi_sk(t.first_seen_date, &t.task_link_id)) {
                        continue;
                    }
                    rows.insert((t.first_seen_date, t.task_link_id.clone()), t);
                    found += 1;
                }
                match page.next {
                    Some(next) if found < want => {
                        q.after = Some(next);
                        q.limit = want - found;
                    }
                    _ => break,
                }
            }
        }
        let more = rows.len() > limit;
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let tasks = rows
            .into_values()
            .take(limit)
            .map(|t| {
                let text = records::open_string(
                    &keys,
                    user,
                    &pk,
                    &task_sk(&t.task_link_id),
                    "text",
                    &t.text,
                )?;
                let notion_url = match &t.notion {
                    Some(n) => Some(super::notion::open_url(user, &keys, &t.task_link_id, n)?),
                    None => None,
                };
                Ok(TaskView {
                    task_link_id: t.task_link_id,
                    text,
                    status: t.status,
                    first_seen_date: t.first_seen_date,
                    completed_date: t.completed_date,
                    source_page_id: t.source_page_id,
                    notion_url,
                })
            })
            .collect::<Result<Vec<_>, NotebookError>>()?;
        Ok((tasks, more))
    }

    /// One task with the lines that show it and its status changes. Another user's id, like a
    /// missing one, is not found; a task in the trash says so.
    pub async fn task_detail(
        &self,
        user: &UserId,
        id: &TaskLinkId,
    ) -> Result<TaskDetail, NotebookError> {
        let pk = user_pk(user);
        let sk = task_sk(id);
        let Some(item) = self.store.get(&pk, &sk).await? else {
            return Err(self
                .task_in_trash(user, id)
                .await?
                .unwrap_or(NotebookError::NotFound("task")));
        };
        let t: TaskRecord = decode("task", &item.body)?;
        let keys = self.vault.user_keys(user).await?;
        let text = records::open_string(&keys, user, &pk, &sk, "text", &t.text)?;
        let notion_url = match &t.notion {
            Some(n) => Some(super::notion::open_url(user, &keys, id, n)?),
            None => None,
        };
        let changes = t.open_status_log(&keys, user, &pk)?;

        // The pages' lines, for the text each line shows (the task's text is the first one
        // seen; another page may word it differently).
        let page_ids: Vec<&PageId> = t
            .appearances
            .iter()
            .map(|a| &a.page_id)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut line_texts: BTreeMap<(PageId, String), String> = BTreeMap::new();
        for chunk in page_ids.chunks(100) {
            let wanted: Vec<(String, String)> = chunk
                .iter()
                .map(|p| (pk.clone(), records::page_sk(p)))
                .collect();
            for page in self.store.batch_get(&wanted).await?.into_iter().flatten() {
                let record: records::PageRecord = decode("page", &page.body)?;
                for line in self.open_lines(user, &keys, &record)? {
                    if line.task_link_id.as_ref() == Some(id) {
                        line_texts.insert((record.page_id.clone(), line.line_id), line.text);
                    }
                }
            }
        }
        let lines = t
            .appearances
            .iter()
            .map(|a| TaskLine {
                page_id: a.page_id.clone(),
                date: a.date,
                line_id: a.line_id.clone(),
                text: line_texts
                    .get(&(a.page_id.clone(), a.line_id.clone()))
                    .cloned(),
                page_status: a.page_status,
            })
            .collect();
        Ok(TaskDetail {
            task: TaskView {
                task_link_id: t.task_link_id.clone(),
                text,
                status: t.status,
                first_seen_date: t.first_seen_date,
                completed_date: t.completed_date,
                source_page_id: t.source_page_id.clone(),
                notion_url,
            },
            lines,
            changes,
            dropped_updates: t.history.dropped_updates,
        })
    }

    /// Adds a task line to the page of `date` (creating that page if needed), unless an open
    /// task with the same normalized text exists: then that task is returned, `created: false`.
    pub async fn create_task(
        &self,
        user: &UserId,
        date: Date,
        text: &str,
        source_url: Option<&str>,
    ) -> Result<CreatedTask, NotebookError> {
        self.create_task_with(user, date, text, source_url, None)
            .await
    }

    /// [`Notebook::create_task`]; with `notion_lease`, a task it creates gets its Notion
    /// outbox item in the same transaction, leased to the caller until then.
    pub(super) async fn create_task_with(
        &self,
        user: &UserId,
        date: Date,
        text: &str,
        source_url: Option<&str>,
        notion_lease: Option<i64>,
    ) -> Result<CreatedTask, NotebookError> {
        check_text("text", text)?;
        let text = text.trim();
        let normalized = tasks::normalize(text);
        if normalized.is_empty() {
            return Err(NotebookError::Invalid(
                "text must contain more than punctuation".into(),
            ));
        }
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let key = keys.blind("task", &normalized);
        for attempt in 0..MAX_ATTEMPTS {
            // An open task with this text already? Then this call is a no-op that names it.
            let mut replaces = None;
            if let Some(item) = self.store.get(&pk, &taskkey_sk(&key)).await? {
                let owner: TaskKeyRecord = decode("task key", &item.body)?;
                if let Some(task) = self.store.get(&pk, &task_sk(&owner.task_link_id)).await? {
                    let t: TaskRecord = decode("task", &task.body)?;
                    if t.status == TaskStatus::Todo {
                        let notion = match &t.notion {
                            Some(n) => Some(super::NotionRef {
                                page_id: n.page_id.clone(),
                                url: super::notion::open_url(user, &keys, &t.task_link_id, n)?,
                            }),
                            None => None,
                        };
                        let first = t
                            .appearances
                            .iter()
                            .find(|a| a.page_id == t.source_page_id)
                            .or(t.appearances.first());
                        return Ok(CreatedTask {
                            task_link_id: t.task_link_id,
                            block_id: first.map(|a| a.line_id.clone()).unwrap_or_default(),
                            page_id: first.map(|a| a.page_id.clone()).unwrap_or(t.source_page_id),
                            created: false,
                            notion,
                        });
                    }
                }
                replaces = Some(owner.task_link_id);
            }

            let (page_id, existing, mut content) = self.date_page(user, &keys, date).await?;
            let line_id = format!("ln_{}", &hex::encode(rand::random::<[u8; 6]>()));
            content.lines.push(StoredLine {
                line_id: line_id.clone(),
                text: text.to_owned(),
                section: Some("tasks".into()),
                notation: Notation::Task,
                page_status: Some(PageStatus::Open),
                task_link_id: None,
                digital: true,
                tags: Vec::new(),
                source_url: None,
                added_at: None,
                corrected: None,
            });
            content.new_task = Some(NewTask {
                key: key.clone(),
                replaces,
                notion_lease,
            });
            content.source_url = source_url.map(str::to_owned);
            match self
                .commit_page(user, &keys, &page_id, existing, content)
                .await
            {
                Ok(c) => {
                    let task_link_id = c.tasks.get(&line_id).cloned().ok_or_else(|| {
                        NotebookError::Corrupt("new task line was not linked".into())
                    })?;
                    return Ok(CreatedTask {
                        task_link_id,
                        block_id: line_id,
                        page_id,
                        created: true,
                        notion: None,
                    });
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// Sets a task's status. Idempotent: setting the status it already has writes nothing.
    /// The change is logged as `update_task_status` by no named client.
    pub async fn update_task_status(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        status: TaskStatus,
    ) -> Result<UpdatedTask, NotebookError> {
        let by = ChangedBy::Tool {
            tool: "update_task_status".into(),
            client: None,
        };
        self.update_task_status_by(user, id, status, by).await
    }

    /// [`Notebook::update_task_status`], the change logged as made `by` (a tool call and its
    /// client).
    pub async fn update_task_status_by(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        status: TaskStatus,
        by: ChangedBy,
    ) -> Result<UpdatedTask, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let sk = task_sk(id);
        for attempt in 0..MAX_ATTEMPTS {
            let Some(item) = self.store.get(&pk, &sk).await? else {
                return Err(self
                    .task_in_trash(user, id)
                    .await?
                    .unwrap_or(NotebookError::NotFound("task")));
            };
            let mut t: TaskRecord = decode("task", &item.body)?;
            let text = records::open_string(&keys, user, &pk, &sk, "text", &t.text)?;
            let notion_page_id = t.notion.as_ref().map(|n| n.page_id.clone());
            if t.status == status && t.last_update() == Some(status) {
                return Ok(UpdatedTask {
                    status,
                    text,
                    changed: false,
                    notion_page_id,
                });
            }
            let before = t.status;
            // Appended with the next sequence number, so updates apply in the order they were
            // made (also within one second); the history stays bounded (`History`).
            t.record_update(self.clock.today(), self.clock.unix(), status);
            if t.status != before {
                t.log_status(&keys, user, &pk, self.clock.unix(), by.clone())?;
            }
            let new = Item {
                pk: pk.clone(),
                sk: sk.clone(),
                gsi1: Some((
                    tasks_partition(user, t.status),
                    task_gsi_sk(t.first_seen_date, id),
                )),
                version: item.version + 1,
                expires_at: None,
                body: encode(&t),
            };
            let writes = vec![
                Write::put(new, Cond::Version(item.version)),
                records::revision_write(&pk),
            ];
            match self.store.transact(writes).await {
                Ok(()) => {
                    return Ok(UpdatedTask {
                        changed: t.status != before,
                        status: t.status,
                        text,
                        notion_page_id,
                    });
                }
                Err(e) => {
                    let e = NotebookError::from(e);
                    if !is_retryable(&e) {
                        return Err(e);
                    }
                    backoff(attempt).await;
                }
            }
        }
        Err(NotebookError::Contention)
    }
}
