//! Linking two tasks that are the same work written differently ("call dentist" on one page,
//! "Call the dentist re: filling" on another): `link_tasks` merges one into the other,
//! `unlink_tasks` splits it off again.
//!
//! A link is a merge, in one transaction: the merged task's record moves inside the kept one
//! (`TaskRecord::merged`, exactly as it was, its sealed fields still bound to its own key), its
//! lines' appearances join the kept task's, its dedup key names the kept task (so a re-import
//! of its page, or its text on a new page, reconciles with the kept task: `answers_to`), and
//! the lines on its pages are rewritten to the kept task's id. Unlinking reverses that for the
//! lines whose text is the merged task's text; the merged task comes back with its own
//! update history and Notion link.

use std::collections::BTreeSet;

use super::records::{
    self, PageRecord, StoredLine, TaskKeyRecord, TaskRecord, decode, encode, task_gsi_sk, task_sk,
    taskkey_sk, tasks_partition, user_pk,
};
use super::{MAX_ATTEMPTS, Notebook, NotebookError, backoff, is_retryable};
use crate::crypto::UserKeys;
use crate::domain::tasks::{self, Appearance, ChangedBy};
use crate::domain::{TaskLinkId, UserId};
use crate::ports::{Cond, Item, MAX_TRANSACTION_ITEMS, Write};

/// What `link_tasks` / `unlink_tasks` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linked {
    /// False when there was nothing to do (already linked / not linked).
    pub changed: bool,
}

/// Who asked for a link or unlink: the tool and the client, for the status log.
#[derive(Debug, Clone)]
pub struct LinkActor {
    pub tool: &'static str,
    pub client: Option<String>,
}

impl LinkActor {
    fn by(&self, other: &TaskLinkId) -> ChangedBy {
        ChangedBy::Link {
            tool: self.tool.to_owned(),
            client: self.client.clone(),
            other: other.clone(),
        }
    }
}

fn task_item(pk: &str, user: &UserId, rec: &TaskRecord, version: u64) -> Item {
    Item {
        pk: pk.to_owned(),
        sk: task_sk(&rec.task_link_id),
        gsi1: Some((
            tasks_partition(user, rec.status),
            task_gsi_sk(rec.first_seen_date, &rec.task_link_id),
        )),
        version,
        expires_at: None,
        body: encode(rec),
    }
}

fn sort_appearances(apps: &mut [Appearance]) {
    apps.sort_by(|a, b| (a.date, &a.page_id, &a.line_id).cmp(&(b.date, &b.page_id, &b.line_id)));
}

impl Notebook {
    async fn live_task(
        &self,
        user: &UserId,
        id: &TaskLinkId,
    ) -> Result<(Item, TaskRecord), NotebookError> {
        match self.store.get(&user_pk(user), &task_sk(id)).await? {
            Some(item) => {
                let rec = decode("task", &item.body)?;
                Ok((item, rec))
            }
            None => Err(self
                .task_in_trash(user, id)
                .await?
                .unwrap_or(NotebookError::NotFound("task"))),
        }
    }

    /// The pages of `page_ids` (as read: item and record) with their lines opened.
    async fn pages_with_lines(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page_ids: BTreeSet<&crate::domain::PageId>,
    ) -> Result<Vec<(Item, PageRecord, Vec<StoredLine>)>, NotebookError> {
        let pk = user_pk(user);
        let wanted: Vec<(String, String)> = page_ids
            .iter()
            .map(|p| (pk.clone(), records::page_sk(p)))
            .collect();
        let mut out = Vec::new();
        for item in self.store.batch_get(&wanted).await?.into_iter().flatten() {
            let record: PageRecord = decode("page", &item.body)?;
            let lines = self.open_lines(user, keys, &record)?;
            out.push((item, record, lines));
        }
        Ok(out)
    }

    /// The page rewritten with `lines` (only task links changed: its `rev`, terms and postings
    /// stay), conditional on the version read.
    fn page_rewrite(
        user: &UserId,
        keys: &UserKeys,
        item: &Item,
        mut record: PageRecord,
        lines: &[StoredLine],
    ) -> Write {
        let pk = user_pk(user);
        let psk = records::page_sk(&record.page_id);
        record.lines = records::seal(keys, user, &pk, &psk, "lines", &encode(&lines));
        let mut new = item.clone();
        new.version = item.version + 1;
        new.body = encode(&record);
        Write::put(new, Cond::Version(item.version))
    }

    /// Makes `same_as` one task with `id`: `same_as` is merged into `id` (see the module docs).
    /// Linking a task already merged into `id` changes nothing.
    pub async fn link_tasks(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        same_as: &TaskLinkId,
        actor: &LinkActor,
    ) -> Result<Linked, NotebookError> {
        if id == same_as {
            return Err(NotebookError::Invalid(
                "task_link_id and same_as name the same task".into(),
            ));
        }
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            let (item, mut keep) = self.live_task(user, id).await?;
            if keep.merged.iter().any(|m| &m.task_link_id == same_as) {
                return Ok(Linked { changed: false });
            }
            let (other_item, other) = self.live_task(user, same_as).await?;
            if !other.merged.is_empty() {
                return Err(NotebookError::Invalid(format!(
                    "task {same_as} has tasks linked into it; link them to {id} one by one, or unlink them first"
                )));
            }
            let pages: BTreeSet<_> = other.appearances.iter().map(|a| &a.page_id).collect();
            if pages.len() + 5 > MAX_TRANSACTION_ITEMS {
                return Err(NotebookError::Invalid(format!(
                    "task {same_as} is on too many pages to link in one step"
                )));
            }
            let dedup = self.store.get(&pk, &taskkey_sk(&other.key)).await?;

            let mut writes = Vec::new();
            // The merged task's lines name the kept task from now on.
            for (page_item, record, mut lines) in self.pages_with_lines(user, &keys, pages).await? {
                for l in &mut lines {
                    if l.task_link_id.as_ref() == Some(same_as) {
                        l.task_link_id = Some(id.clone());
                    }
                }
                writes.push(Self::page_rewrite(user, &keys, &page_item, record, &lines));
            }
            if let Some(d) = &dedup
                && decode::<TaskKeyRecord>("task key", &d.body)?.task_link_id == *same_as
            {
                let mut new = d.clone();
                new.version = d.version + 1;
                new.body = encode(&TaskKeyRecord {
                    task_link_id: id.clone(),
                });
                writes.push(Write::put(new, Cond::Version(d.version)));
            }
            writes.push(Write::delete(
                pk.clone(),
                task_sk(same_as),
                Cond::Version(other_item.version),
            ));
            keep.appearances.extend(other.appearances.iter().cloned());
            sort_appearances(&mut keep.appearances);
            keep.first_seen_date = keep.appearances[0].date;
            let mut other = other;
            // Its appearances are the kept task's now; unlink finds its lines by its text.
            other.appearances.clear();
            keep.merged.push(other);
            keep.reconcile();
            // Logged whether or not the status moved: the link changed what decides it.
            keep.log_status(&keys, user, &pk, self.clock.unix(), actor.by(same_as))?;
            if self
                .commit_link(&pk, user, &keep, item.version, writes)
                .await?
            {
                return Ok(Linked { changed: true });
            }
            backoff(attempt).await;
        }
        Err(NotebookError::Contention)
    }

    /// Splits `same_as` off `id` again: the lines whose text is `same_as`'s go back to it, with
    /// its own update history. Unlinking a task not linked into `id` changes nothing.
    pub async fn unlink_tasks(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        same_as: &TaskLinkId,
        actor: &LinkActor,
    ) -> Result<Linked, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            let (item, mut keep) = self.live_task(user, id).await?;
            let Some(at) = keep.merged.iter().position(|m| &m.task_link_id == same_as) else {
                return Ok(Linked { changed: false });
            };
            let mut back = keep.merged.remove(at);
            let pages: BTreeSet<_> = keep.appearances.iter().map(|a| &a.page_id).collect();
            if pages.len() + 5 > MAX_TRANSACTION_ITEMS {
                return Err(NotebookError::Invalid(format!(
                    "task {id} is on too many pages to unlink in one step"
                )));
            }
            let mut writes = Vec::new();
            // The lines written with the merged task's text (its dedup key) go back to it.
            let mut moved: BTreeSet<(crate::domain::PageId, String)> = BTreeSet::new();
            for (page_item, record, mut lines) in self.pages_with_lines(user, &keys, pages).await? {
                let mut changed = false;
                for l in &mut lines {
                    if l.task_link_id.as_ref() == Some(id)
                        && keys.blind("task", &tasks::normalize(&l.text)) == back.key
                    {
                        l.task_link_id = Some(same_as.clone());
                        moved.insert((record.page_id.clone(), l.line_id.clone()));
                        changed = true;
                    }
                }
                if changed {
                    writes.push(Self::page_rewrite(user, &keys, &page_item, record, &lines));
                }
            }
            let (theirs, ours): (Vec<Appearance>, Vec<Appearance>) = keep
                .appearances
                .drain(..)
                .partition(|a| moved.contains(&(a.page_id.clone(), a.line_id.clone())));
            if ours.is_empty() {
                return Err(NotebookError::Invalid(format!(
                    "every line of task {id} is written as the linked task's text; unlinking would leave {id} on no page"
                )));
            }
            keep.appearances = ours;
            keep.first_seen_date = keep.appearances[0].date;
            keep.reconcile_logged(&keys, user, &pk, self.clock.unix(), actor.by(same_as))?;
            let dedup = self.store.get(&pk, &taskkey_sk(&back.key)).await?;
            let names_keep = match &dedup {
                Some(d) => decode::<TaskKeyRecord>("task key", &d.body)?.task_link_id == *id,
                None => false,
            };
            if theirs.is_empty() {
                // No page shows the merged task's text any more: it does not come back, and
                // its text is free for a new task.
                if let Some(d) = dedup.filter(|_| names_keep) {
                    writes.push(Write::delete(
                        pk.clone(),
                        taskkey_sk(&back.key),
                        Cond::Version(d.version),
                    ));
                }
            } else {
                back.appearances = theirs;
                sort_appearances(&mut back.appearances);
                back.first_seen_date = back.appearances[0].date;
                back.reconcile();
                back.log_status(&keys, user, &pk, self.clock.unix(), actor.by(id))?;
                writes.push(Write::put(task_item(&pk, user, &back, 1), Cond::NotExists));
                match dedup {
                    Some(d) if names_keep => {
                        let mut new = d.clone();
                        new.version = d.version + 1;
                        new.body = encode(&TaskKeyRecord {
                            task_link_id: same_as.clone(),
                        });
                        writes.push(Write::put(new, Cond::Version(d.version)));
                    }
                    // Another task took the text meanwhile: it keeps it.
                    Some(_) => {}
                    None => writes.push(Write::put(
                        Item {
                            pk: pk.clone(),
                            sk: taskkey_sk(&back.key),
                            gsi1: None,
                            version: 1,
                            expires_at: None,
                            body: encode(&TaskKeyRecord {
                                task_link_id: same_as.clone(),
                            }),
                        },
                        Cond::NotExists,
                    )),
                }
            }
            if self
                .commit_link(&pk, user, &keep, item.version, writes)
                .await?
            {
                return Ok(Linked { changed: true });
            }
            backoff(attempt).await;
        }
        Err(NotebookError::Contention)
    }

    /// A link's or unlink's `writes`, with the kept task's record (conditional on the version
    /// read) and the notebook's revision, in one transaction. False when another writer got
    /// there first and the caller should read again.
    async fn commit_link(
        &self,
        pk: &str,
        user: &UserId,
        keep: &TaskRecord,
        version: u64,
        mut writes: Vec<Write>,
    ) -> Result<bool, NotebookError> {
        writes.push(Write::put(
            task_item(pk, user, keep, version + 1),
            Cond::Version(version),
        ));
        writes.push(records::revision_write(pk));
        match self.store.transact(writes).await {
            Ok(()) => Ok(true),
            Err(e) => {
                let e = NotebookError::from(e);
                if is_retryable(&e) { Ok(false) } else { Err(e) }
            }
        }
    }
}
