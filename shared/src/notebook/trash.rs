//! The trash: pages and task links deleted by `delete_page` / `delete_task`, restorable for
//! [`TRASH_DAYS`] days, then purged by expiry (DynamoDB TTL on AWS, the embedded store's sweep
//! locally) together with everything derived from them.
//!
//! - **Trashing moves items, it does not flag them.** `PAGE#{id}` becomes `TRASH#P#{id}` (the
//!   record as it was, sealed fields untouched: they stay bound to `PAGE#{id}`, where restore
//!   puts them back), so every read that looks a page up (lists, search, fetch, resources,
//!   prompts, export) misses it without a filter; only the reads of one id look in the trash
//!   to say where it is. A task link moves from `TASK#{id}` to `TRASH#T#{id}` likewise.
//! - **Deleting a page** removes its index postings, its entry in its vector block (in the
//!   same transaction, so a sealed vector never outlives the purge; restore embeds the lines
//!   again under the same revision) and its share of the BM25 statistics, gives
//!   its stem item the purge time as expiry (a re-import of its files then finds the page in
//!   the trash and leaves it there), trashes the task links that were on no other page (with
//!   their dedup keys, expiring), and recomputes the reconciled status of the task links that
//!   also appear on other pages without this page's lines.
//! - **Deleting a task** trashes the link everywhere: its record (status, history, every
//!   appearance) and its dedup key. Pages are not rewritten: their lines keep the handwriting,
//!   shown without a task status; a re-import of such a page keeps the line on the trashed
//!   link rather than making a new task. `create_task` of the same text makes a new task.
//! - **Restore** puts back exactly what was there: the same records, postings recomputed from
//!   the page's lines with its revision (the same terms, frequencies and length), statistics,
//!   stem, dedup keys (unless another task holds the text meanwhile), and the appearances of
//!   the shared task links.
//! - **Page images** (the asset store's PDF/PNG) follow the committed record
//!   ([`Notebook::settle_images`]): marked trashed after the delete's transaction, unmarked
//!   before the restore's and again after it ([`crate::ports::Assets::trash`]), each mark or
//!   unmark checked against the record read again; the asset store purges marked files by
//!   itself a day after the page's own purge. Every failure leaves a trashed page's images
//!   unmarked (kept), never a live page's marked: a delete whose mark fails answers the
//!   error and its retry (the page in the trash) marks; a restore whose unmark fails answers
//!   the error with the page still in the trash.
//! - **One transaction per operation** where it fits, through [`Notebook::trash_transact`];
//!   postings that do not fit are written before a restore's transaction (they carry the
//!   page's revision, and count only once the page is back) and deleted after a delete's (a
//!   leftover posting names a page that is not there, and search skips it).

use std::collections::{BTreeMap, BTreeSet};

use super::pages::{LoadedPage, open_page_lines};
use super::records::{
    self, PageRecord, StemRecord, TaskKeyRecord, TaskRecord, TrashedPage, TrashedTask, decode,
    encode, page_gsi_sk, page_sk, pages_partition, stem_sk, task_gsi_sk, task_sk, taskkey_sk,
    tasks_partition, term_partition, trash_gsi_sk, trash_page_sk, trash_partition, trash_task_sk,
    user_pk,
};
use super::{MAX_ATTEMPTS, Notebook, NotebookError, backoff, is_retryable, search};
use crate::crypto::UserKeys;
use crate::domain::tasks::{Appearance, ChangedBy};
use crate::domain::{Date, PageId, PageStatus, TaskLinkId, UserId};
use crate::ports::{AssetKind, Cond, Item, MAX_TRANSACTION_ITEMS, Query, Write};

pub use crate::domain::TRASH_DAYS;
const DAY_SECONDS: i64 = 86_400;

/// What was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrashKind {
    Page,
    Task,
}

/// What `delete_page` / `delete_task` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trashed {
    /// False when it was in the trash already (nothing was written).
    pub deleted: bool,
    /// The day it is purged on (UTC), unless restored before.
    pub purge_on: Date,
    /// Task links trashed along with a page (they were on no other page).
    pub tasks: Vec<TaskLinkId>,
}

/// What `restore_page` / `restore_task` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// False when it was not deleted (nothing was written).
    pub restored: bool,
    /// Task links restored along with a page.
    pub tasks: Vec<TaskLinkId>,
}

/// One row of `list_trash`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TrashEntry {
    pub kind: TrashKind,
    pub id: String,
    /// A page's date, or a task's text.
    pub title: String,
    /// The page's date, or the day the task was first seen.
    pub date: Date,
    pub deleted_at: i64,
    pub deleted_on: Date,
    pub purge_on: Date,
    /// A page's task links that went with it.
    pub tasks: usize,
}

fn day_of(unix: i64) -> Date {
    let t =
        time::OffsetDateTime::from_unix_timestamp(unix).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    Date::from_time(t.date())
}

fn not_in_trash(what: &str, id: &str) -> NotebookError {
    NotebookError::Invalid(format!(
        "{what} {id} is not in the trash: it was never deleted, or it was deleted more than {TRASH_DAYS} days ago and has been purged for good"
    ))
}

/// `item` again with another expiry (`None`: never) and the next version, under a condition on
/// the version read.
fn reexpire(item: &Item, expires_at: Option<i64>) -> Write {
    Write::put(
        Item {
            version: item.version + 1,
            expires_at,
            ..item.clone()
        },
        Cond::Version(item.version),
    )
}

/// Where a page's record is, which its images follow (see [`Notebook::settle_images`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PageState {
    Live,
    Trashed,
    /// Neither: never there, or purged (its images go with the asset store's own purge).
    Gone,
}

/// The ink files `record` has in the asset store.
fn ink_kinds(record: &PageRecord) -> Vec<AssetKind> {
    [
        (AssetKind::Pdf, record.has_pdf),
        (AssetKind::Png, record.has_png),
    ]
    .into_iter()
    .filter_map(|(kind, has)| has.then_some(kind))
    .collect()
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

impl Notebook {
    /// The one store transaction of a trash operation (delete, restore): every write of one
    /// goes through here, so an item that must change with every notebook write joins them
    /// all in one line. (Purge is expiry: no write of ours.)
    async fn trash_transact(
        &self,
        user: &UserId,
        mut writes: Vec<Write>,
    ) -> Result<(), NotebookError> {
        // A new notebook revision, so unchanged reads see the change.
        writes.push(records::revision_write(&user_pk(user)));
        self.store.transact(writes).await?;
        Ok(())
    }

    /// The error a read of a page gives when the page is in the trash, if it is.
    pub(super) async fn page_in_trash(
        &self,
        user: &UserId,
        page: &PageId,
    ) -> Result<Option<NotebookError>, NotebookError> {
        match self.store.get(&user_pk(user), &trash_page_sk(page)).await? {
            Some(item) => page_trash_error(page, &item).map(Some),
            None => Ok(None),
        }
    }

    /// The error a read or write of a task gives when the task is in the trash, if it is.
    pub(super) async fn task_in_trash(
        &self,
        user: &UserId,
        task: &TaskLinkId,
    ) -> Result<Option<NotebookError>, NotebookError> {
        match self.store.get(&user_pk(user), &trash_task_sk(task)).await? {
            Some(item) => task_trash_error(task, &item).map(Some),
            None => Ok(None),
        }
    }

    /// The statistics deltas as writes, folding a legacy statistics record into the counters
    /// as a page commit does.
    async fn stats_writes(
        &self,
        pk: &str,
        mut pages: i64,
        mut len: i64,
    ) -> Result<Vec<Write>, NotebookError> {
        let mut writes = Vec::new();
        if let Some(legacy) = self.store.get(pk, records::LEGACY_STATS_SK).await? {
            let old: records::StatsRecord = decode("stats", &legacy.body)?;
            pages += i64::from(old.pages);
            len += i64::try_from(old.total_len).unwrap_or(i64::MAX);
            writes.push(Write::delete(
                pk,
                records::LEGACY_STATS_SK,
                Cond::Version(legacy.version),
            ));
        }
        if pages != 0 {
            writes.push(Write::add(pk, records::STATS_PAGES_SK, pages));
        }
        if len != 0 {
            writes.push(Write::add(pk, records::STATS_LEN_SK, len));
        }
        Ok(writes)
    }

    /// The dedup items of `tasks` that still name them, keyed by task.
    async fn owned_keys(
        &self,
        pk: &str,
        tasks: &[&TaskRecord],
    ) -> Result<BTreeMap<TaskLinkId, Item>, NotebookError> {
        let keys: Vec<(String, String)> = tasks
            .iter()
            .map(|t| (pk.to_owned(), taskkey_sk(&t.key)))
            .collect();
        let mut out = BTreeMap::new();
        if keys.is_empty() {
            return Ok(out);
        }
        for (t, item) in tasks.iter().zip(self.store.batch_get(&keys).await?) {
            if let Some(item) = item {
                let owner: TaskKeyRecord = decode("task key", &item.body)?;
                if owner.task_link_id == t.task_link_id {
                    out.insert(t.task_link_id.clone(), item);
                }
            }
        }
        Ok(out)
    }

    /// The page's stem item, when it still names the page.
    async fn own_stem(&self, pk: &str, record: &PageRecord) -> Result<Option<Item>, NotebookError> {
        let Some(stem) = &record.stem else {
            return Ok(None);
        };
        match self.store.get(pk, &stem_sk(stem)).await? {
            Some(item) if decode::<StemRecord>("stem", &item.body)?.page_id == record.page_id => {
                Ok(Some(item))
            }
            _ => Ok(None),
        }
    }

    /// `delete_page`: moves the page to the trash, with what derives from it (see the module).
    /// Deleting a page that is in the trash already writes nothing (and marks its images, in
    /// case the delete that trashed it could not).
    pub async fn trash_page(
        &self,
        user: &UserId,
        page_id: &PageId,
    ) -> Result<Trashed, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        match self.trash_page_commit(user, &keys, page_id).await {
            Ok((trashed, kinds)) => {
                self.settle_images(user, page_id, PageState::Trashed, kinds)
                    .await?;
                Ok(trashed)
            }
            Err(e) => {
                // A transaction that failed ambiguously may have landed: the images follow
                // whatever the store holds now.
                self.settle_images_after_failure(user, page_id).await;
                Err(e)
            }
        }
    }

    /// [`Notebook::trash_page`]'s attempts at its transaction; the trashed page's ink files.
    async fn trash_page_commit(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page_id: &PageId,
    ) -> Result<(Trashed, Vec<AssetKind>), NotebookError> {
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            let Some(page) = self.load_page(user, keys, page_id).await? else {
                if let Some(item) = self.store.get(&pk, &trash_page_sk(page_id)).await? {
                    let t: TrashedPage = decode("trashed page", &item.body)?;
                    let kinds = ink_kinds(&t.page);
                    return Ok((
                        Trashed {
                            deleted: false,
                            purge_on: day_of(t.purge_at),
                            tasks: t.tasks,
                        },
                        kinds,
                    ));
                }
                return Err(NotebookError::NotFound("page"));
            };
            let kinds = ink_kinds(&page.record);
            let now = self.clock.unix();
            let purge_at = now + TRASH_DAYS * DAY_SECONDS;
            let (writes, postings, tasks) = self
                .trash_page_writes(user, keys, page, now, purge_at)
                .await?;
            match self
                .commit_with_postings(user, writes, postings, false)
                .await
            {
                Ok(()) => {
                    tracing::info!(user = %user, page = %page_id, tasks = tasks.len(), "page moved to the trash");
                    return Ok((
                        Trashed {
                            deleted: true,
                            purge_on: day_of(purge_at),
                            tasks,
                        },
                        kinds,
                    ));
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// Where the page is now, and its ink files there; `expected` is read first (one read
    /// when the page is still where the caller left it).
    async fn page_state(
        &self,
        user: &UserId,
        page_id: &PageId,
        expected: PageState,
    ) -> Result<(PageState, Vec<AssetKind>), NotebookError> {
        let pk = user_pk(user);
        let order = match expected {
            PageState::Trashed => [PageState::Trashed, PageState::Live],
            _ => [PageState::Live, PageState::Trashed],
        };
        for state in order {
            let found = match state {
                PageState::Live => match self.store.get(&pk, &page_sk(page_id)).await? {
                    Some(item) => Some(ink_kinds(&decode::<PageRecord>("page", &item.body)?)),
                    None => None,
                },
                _ => match self.store.get(&pk, &trash_page_sk(page_id)).await? {
                    Some(item) => Some(ink_kinds(
                        &decode::<TrashedPage>("trashed page", &item.body)?.page,
                    )),
                    None => None,
                },
            };
            if let Some(kinds) = found {
                return Ok((state, kinds));
            }
        }
        Ok((PageState::Gone, Vec::new()))
    }

    /// Brings the page's images to its record, which the caller found in `state` with ink
    /// `kinds` after its own transaction: marked while the page is in the trash, unmarked
    /// while it is live. After each mark or unmark the record is read again, and while it
    /// moved meanwhile (a concurrent delete or restore of the page committed) the images
    /// follow it again. Every delete and restore ends with this, after its transaction, so
    /// whichever asset call lands last was made by a caller that then saw the record it
    /// followed still in place: the images end in the state of the last committed record.
    async fn settle_images(
        &self,
        user: &UserId,
        page_id: &PageId,
        mut state: PageState,
        mut kinds: Vec<AssetKind>,
    ) -> Result<(), NotebookError> {
        for _ in 0..MAX_ATTEMPTS {
            if kinds.is_empty() {
                return Ok(());
            }
            match state {
                PageState::Trashed => self.assets.trash(user, page_id, &kinds).await?,
                PageState::Live => self.assets.untrash(user, page_id, &kinds).await?,
                PageState::Gone => return Ok(()),
            }
            let now = self.page_state(user, page_id, state).await?;
            if now == (state, kinds) {
                return Ok(());
            }
            tracing::info!(user = %user, page = %page_id, "the page moved while its images followed it; following again");
            (state, kinds) = now;
        }
        Err(NotebookError::Contention)
    }

    /// [`Notebook::settle_images`] from the record as the store has it, after a delete or a
    /// restore that failed; its own failure is logged (the caller answers its first error).
    async fn settle_images_after_failure(&self, user: &UserId, page_id: &PageId) {
        let settled = match self.page_state(user, page_id, PageState::Live).await {
            Ok((state, kinds)) => self.settle_images(user, page_id, state, kinds).await,
            Err(e) => Err(e),
        };
        if let Err(e) = settled {
            tracing::error!(user = %user, page = %page_id, error = %crate::telemetry::chain(&e), "could not bring a page's images to its record after a failed delete or restore; delete_page or restore_page of the page does");
        }
    }

    /// The writes that move `page` to the trash, its posting deletes, and the task links that
    /// go with it.
    async fn trash_page_writes(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page: LoadedPage,
        now: i64,
        purge_at: i64,
    ) -> Result<(Vec<Write>, Vec<Write>, Vec<TaskLinkId>), NotebookError> {
        let pk = user_pk(user);
        let record = page.record;
        let page_id = record.page_id.clone();
        let lines = open_page_lines(user, keys, &page_id, &record.lines)?;
        let ids: Vec<TaskLinkId> = lines
            .iter()
            .filter_map(|l| l.task_link_id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let task_keys: Vec<(String, String)> =
            ids.iter().map(|id| (pk.clone(), task_sk(id))).collect();
        let mut found: Vec<(Item, TaskRecord)> = Vec::new();
        if !task_keys.is_empty() {
            for item in self
                .store
                .batch_get(&task_keys)
                .await?
                .into_iter()
                .flatten()
            {
                let rec: TaskRecord = decode("task", &item.body)?;
                found.push((item, rec));
            }
        }
        let only_here: Vec<&TaskRecord> = found
            .iter()
            .map(|(_, t)| t)
            .filter(|t| t.appearances.iter().all(|a| a.page_id == page_id))
            .collect();
        let owned = self.owned_keys(&pk, &only_here).await?;
        let mut writes = Vec::new();
        let mut with_page = Vec::new();
        for (item, mut rec) in found {
            let id = rec.task_link_id.clone();
            if rec.appearances.iter().all(|a| a.page_id == page_id) {
                writes.push(Write::delete(
                    pk.clone(),
                    task_sk(&id),
                    Cond::Version(item.version),
                ));
                if let Some(key) = owned.get(&id) {
                    writes.push(reexpire(key, Some(purge_at)));
                }
                writes.push(Write::put(
                    Item {
                        pk: pk.clone(),
                        sk: trash_task_sk(&id),
                        gsi1: None,
                        version: 1,
                        expires_at: Some(purge_at),
                        body: encode(&TrashedTask {
                            task: rec,
                            deleted_at: now,
                            purge_at,
                            with_page: Some(page_id.clone()),
                        }),
                    },
                    Cond::NotExists,
                ));
                with_page.push(id);
            } else {
                // Shown on other pages too: reconciled again without this page.
                rec.appearances.retain(|a| a.page_id != page_id);
                rec.first_seen_date = rec.appearances[0].date;
                rec.reconcile_logged(
                    keys,
                    user,
                    &pk,
                    now,
                    ChangedBy::PageDeleted {
                        page_id: page_id.clone(),
                        date: record.date,
                    },
                )?;
                writes.push(Write::put(
                    task_item(&pk, user, &rec, item.version + 1),
                    Cond::Version(item.version),
                ));
            }
        }
        writes.extend(
            self.stats_writes(&pk, -1, -i64::from(record.doc_len))
                .await?,
        );
        if let Some(stem) = self.own_stem(&pk, &record).await? {
            writes.push(reexpire(&stem, Some(purge_at)));
        }
        writes.push(Write::delete(
            pk.clone(),
            page_sk(&page_id),
            Cond::Version(page.item.version),
        ));
        // Its vectors leave their block, and any pending entry goes, in this transaction
        // (restore embeds its lines again).
        if let Some(w) = self.vector_block_removal(user, keys, &page_id).await? {
            writes.push(w);
        }
        writes.push(Write::delete(
            pk.clone(),
            super::vectors::pending_sk(&page_id),
            Cond::None,
        ));
        let postings: Vec<Write> = record
            .terms
            .iter()
            .map(|t| Write::delete(term_partition(user, t), page_id.to_string(), Cond::None))
            .collect();
        writes.push(Write::put(
            Item {
                pk: pk.clone(),
                sk: trash_page_sk(&page_id),
                gsi1: Some((
                    trash_partition(user),
                    trash_gsi_sk(now, 'p', &page_id.to_string()),
                )),
                version: 1,
                expires_at: Some(purge_at),
                body: encode(&TrashedPage {
                    page: record,
                    deleted_at: now,
                    purge_at,
                    tasks: with_page.clone(),
                }),
            },
            Cond::NotExists,
        ));
        Ok((writes, postings, with_page))
    }

    /// Commits `writes` with `postings` in the same transaction when they fit; else the
    /// postings go before it (`postings_first`, a restore: they count only once the page has
    /// their revision) or after it (a delete: leftovers name a page that is not there).
    async fn commit_with_postings(
        &self,
        user: &UserId,
        mut writes: Vec<Write>,
        postings: Vec<Write>,
        postings_first: bool,
    ) -> Result<(), NotebookError> {
        // `trash_transact` adds the notebook revision: one item more.
        if writes.len() + postings.len() < MAX_TRANSACTION_ITEMS {
            writes.extend(postings);
            return self.trash_transact(user, writes).await;
        }
        if writes.len() >= MAX_TRANSACTION_ITEMS {
            return Err(NotebookError::Invalid(format!(
                "a page may link at most about {} tasks",
                MAX_TRANSACTION_ITEMS / 2 - 4
            )));
        }
        if postings_first {
            for chunk in postings.chunks(MAX_TRANSACTION_ITEMS) {
                self.store.transact(chunk.to_vec()).await?;
            }
            return self.trash_transact(user, writes).await;
        }
        self.trash_transact(user, writes).await?;
        for chunk in postings.chunks(MAX_TRANSACTION_ITEMS) {
            if let Err(e) = self.store.transact(chunk.to_vec()).await {
                // Postings of a page that is not there are skipped by search.
                tracing::warn!(user = %user, error = %crate::telemetry::chain(&e), "could not remove a trashed page's postings");
            }
        }
        Ok(())
    }

    /// `restore_page`: brings the page back from the trash exactly as it was, with the task
    /// links trashed with it. Restoring a page that is not deleted writes nothing (and
    /// unmarks its images, in case the restore that brought it back could not).
    pub async fn restore_page(
        &self,
        user: &UserId,
        page_id: &PageId,
    ) -> Result<Restored, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        match self.restore_page_commit(user, &keys, page_id).await {
            Ok((restored, kinds)) => {
                self.settle_images(user, page_id, PageState::Live, kinds)
                    .await?;
                Ok(restored)
            }
            Err(e) => {
                self.settle_images_after_failure(user, page_id).await;
                Err(e)
            }
        }
    }

    /// [`Notebook::restore_page`]'s attempts at its transaction, each after unmarking the
    /// page's images; the live page's ink files.
    async fn restore_page_commit(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page_id: &PageId,
    ) -> Result<(Restored, Vec<AssetKind>), NotebookError> {
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            if let Some(live) = self.store.get(&pk, &page_sk(page_id)).await? {
                let record: PageRecord = decode("page", &live.body)?;
                return Ok((
                    Restored {
                        restored: false,
                        tasks: Vec::new(),
                    },
                    ink_kinds(&record),
                ));
            }
            let Some(trash) = self.store.get(&pk, &trash_page_sk(page_id)).await? else {
                return Err(not_in_trash("page", &page_id.to_string()));
            };
            let kinds = ink_kinds(&decode::<TrashedPage>("trashed page", &trash.body)?.page);
            let (writes, postings, tasks) = self.restore_page_writes(user, keys, trash).await?;
            // The images are unmarked before the page is live, so a restore that stops after
            // its transaction leaves no live page's image marked (one that stops before it
            // leaves a trashed page's images unmarked: kept, never lost).
            if !kinds.is_empty() {
                self.assets.untrash(user, page_id, &kinds).await?;
            }
            match self
                .commit_with_postings(user, writes, postings, true)
                .await
            {
                Ok(()) => {
                    tracing::info!(user = %user, page = %page_id, tasks = tasks.len(), "page restored from the trash");
                    return Ok((
                        Restored {
                            restored: true,
                            tasks,
                        },
                        kinds,
                    ));
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    async fn restore_page_writes(
        &self,
        user: &UserId,
        keys: &UserKeys,
        trash: Item,
    ) -> Result<(Vec<Write>, Vec<Write>, Vec<TaskLinkId>), NotebookError> {
        let pk = user_pk(user);
        let trashed: TrashedPage = decode("trashed page", &trash.body)?;
        let record = trashed.page;
        let page_id = record.page_id.clone();
        let lines = open_page_lines(user, keys, &page_id, &record.lines)?;
        let mut writes = Vec::new();

        // The task links that went with the page.
        let mut restored = Vec::new();
        let mut back: Vec<(Item, TrashedTask)> = Vec::new();
        if !trashed.tasks.is_empty() {
            let tkeys: Vec<(String, String)> = trashed
                .tasks
                .iter()
                .map(|id| (pk.clone(), trash_task_sk(id)))
                .collect();
            for item in self.store.batch_get(&tkeys).await?.into_iter().flatten() {
                let t: TrashedTask = decode("trashed task", &item.body)?;
                back.push((item, t));
            }
        }
        let recs: Vec<&TaskRecord> = back.iter().map(|(_, t)| &t.task).collect();
        let owned = self.owned_keys(&pk, &recs).await?;
        for (item, t) in &back {
            let id = &t.task.task_link_id;
            writes.push(Write::put(
                task_item(&pk, user, &t.task, 1),
                Cond::NotExists,
            ));
            writes.push(Write::delete(
                pk.clone(),
                trash_task_sk(id),
                Cond::Version(item.version),
            ));
            if let Some(key) = owned.get(id) {
                writes.push(reexpire(key, None));
            }
            restored.push(id.clone());
        }

        // The task links also shown on other pages get this page's appearances again.
        let mut appearances: BTreeMap<TaskLinkId, Vec<Appearance>> = BTreeMap::new();
        for l in &lines {
            if let Some(id) = &l.task_link_id
                && !trashed.tasks.contains(id)
            {
                appearances.entry(id.clone()).or_default().push(Appearance {
                    page_id: page_id.clone(),
                    line_id: l.line_id.clone(),
                    date: record.date,
                    page_status: l.page_status.unwrap_or(PageStatus::Open),
                });
            }
        }
        let shared: Vec<(String, String)> = appearances
            .keys()
            .map(|id| (pk.clone(), task_sk(id)))
            .collect();
        if !shared.is_empty() {
            for item in self.store.batch_get(&shared).await?.into_iter().flatten() {
                let mut rec: TaskRecord = decode("task", &item.body)?;
                let Some(apps) = appearances.remove(&rec.task_link_id) else {
                    continue;
                };
                rec.appearances.retain(|a| a.page_id != page_id);
                rec.appearances.extend(apps);
                rec.appearances.sort_by(|a, b| {
                    (a.date, &a.page_id, &a.line_id).cmp(&(b.date, &b.page_id, &b.line_id))
                });
                rec.first_seen_date = rec.appearances[0].date;
                rec.reconcile_logged(
                    keys,
                    user,
                    &pk,
                    self.clock.unix(),
                    ChangedBy::PageRestored {
                        page_id: page_id.clone(),
                        date: record.date,
                    },
                )?;
                writes.push(Write::put(
                    task_item(&pk, user, &rec, item.version + 1),
                    Cond::Version(item.version),
                ));
            }
        }

        writes.extend(self.stats_writes(&pk, 1, i64::from(record.doc_len)).await?);
        match self.own_stem(&pk, &record).await? {
            Some(stem) => writes.push(reexpire(&stem, None)),
            None => {
                if let Some(stem) = &record.stem
                    && self.store.get(&pk, &stem_sk(stem)).await?.is_none()
                {
                    writes.push(records::stem_write(&pk, stem, &page_id));
                }
            }
        }

        // The index, as the page's last commit wrote it: the same terms of the same lines,
        // under the page's revision.
        let mut tf: BTreeMap<String, u32> = BTreeMap::new();
        let mut doc_len = 0u32;
        for line in &lines {
            for term in crate::domain::text::terms(&line.text) {
                *tf.entry(keys.blind("term", &term)).or_default() += 1;
                doc_len += 1;
            }
        }
        let postings = search::posting_writes(user, &page_id, &tf, doc_len, record.rev);
        // Its vectors back in their block, computed again from the same lines under the same
        // revision and date (the model is deterministic: the entry it had).
        writes.push(
            self.vector_block_write(user, keys, &page_id, record.rev, record.date, &lines)
                .await?,
        );

        writes.push(Write::delete(
            pk.clone(),
            trash_page_sk(&page_id),
            Cond::Version(trash.version),
        ));
        writes.push(Write::put(
            Item {
                pk: pk.clone(),
                sk: page_sk(&page_id),
                gsi1: Some((pages_partition(user), page_gsi_sk(record.date, &page_id))),
                version: 1,
                expires_at: None,
                body: encode(&record),
            },
            Cond::NotExists,
        ));
        Ok((writes, postings, restored))
    }

    /// `delete_task`: moves the task link to the trash, everywhere it appears (see the
    /// module). Deleting a task that is in the trash already writes nothing.
    pub async fn trash_task(
        &self,
        user: &UserId,
        task: &TaskLinkId,
    ) -> Result<Trashed, NotebookError> {
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            let Some(item) = self.store.get(&pk, &task_sk(task)).await? else {
                if let Some(item) = self.store.get(&pk, &trash_task_sk(task)).await? {
                    let t: TrashedTask = decode("trashed task", &item.body)?;
                    return Ok(Trashed {
                        deleted: false,
                        purge_on: day_of(t.purge_at),
                        tasks: Vec::new(),
                    });
                }
                return Err(NotebookError::NotFound("task"));
            };
            let rec: TaskRecord = decode("task", &item.body)?;
            let now = self.clock.unix();
            let purge_at = now + TRASH_DAYS * DAY_SECONDS;
            let mut writes = vec![Write::delete(
                pk.clone(),
                task_sk(task),
                Cond::Version(item.version),
            )];
            if let Some(key) = self.owned_keys(&pk, &[&rec]).await?.get(task) {
                writes.push(reexpire(key, Some(purge_at)));
            }
            writes.push(Write::put(
                Item {
                    pk: pk.clone(),
                    sk: trash_task_sk(task),
                    gsi1: Some((
                        trash_partition(user),
                        trash_gsi_sk(now, 't', &task.to_string()),
                    )),
                    version: 1,
                    expires_at: Some(purge_at),
                    body: encode(&TrashedTask {
                        task: rec,
                        deleted_at: now,
                        purge_at,
                        with_page: None,
                    }),
                },
                Cond::NotExists,
            ));
            match self.trash_transact(user, writes).await {
                Ok(()) => {
                    tracing::info!(user = %user, task = %task, "task moved to the trash");
                    return Ok(Trashed {
                        deleted: true,
                        purge_on: day_of(purge_at),
                        tasks: Vec::new(),
                    });
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// `restore_task`: brings a task link deleted on its own back exactly as it was. One
    /// deleted with its page comes back with the page. Restoring a task that is not deleted
    /// writes nothing.
    pub async fn restore_task(
        &self,
        user: &UserId,
        task: &TaskLinkId,
    ) -> Result<Restored, NotebookError> {
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            if self.store.get(&pk, &task_sk(task)).await?.is_some() {
                return Ok(Restored {
                    restored: false,
                    tasks: Vec::new(),
                });
            }
            let Some(trash) = self.store.get(&pk, &trash_task_sk(task)).await? else {
                return Err(not_in_trash("task", &task.to_string()));
            };
            let t: TrashedTask = decode("trashed task", &trash.body)?;
            if let Some(page) = &t.with_page {
                return Err(NotebookError::Invalid(format!(
                    "task {task} was deleted with page {page}, the only page it was on; restore_page {{\"page_id\": \"{page}\"}} brings both back"
                )));
            }
            let mut writes = vec![
                Write::put(task_item(&pk, user, &t.task, 1), Cond::NotExists),
                Write::delete(
                    pk.clone(),
                    trash_task_sk(task),
                    Cond::Version(trash.version),
                ),
            ];
            if let Some(key) = self.owned_keys(&pk, &[&t.task]).await?.get(task) {
                writes.push(reexpire(key, None));
            }
            match self.trash_transact(user, writes).await {
                Ok(()) => {
                    tracing::info!(user = %user, task = %task, "task restored from the trash");
                    return Ok(Restored {
                        restored: true,
                        tasks: vec![task.clone()],
                    });
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// The trash, newest deletion first, after the entry `after` (its sort key: the last one
    /// of the previous call), and whether more follow.
    pub async fn list_trash(
        &self,
        user: &UserId,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<TrashEntry>, bool), NotebookError> {
        let mut query = Query::gsi1(trash_partition(user), "");
        query.reverse = true;
        query.to = after.map(str::to_owned);
        let want = limit + 1;
        query.limit = want + usize::from(after.is_some());
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let mut out = Vec::with_capacity(want);
        loop {
            let page = self.store.query(&query).await?;
            for item in page.items {
                if after.is_some() && item.gsi1.as_ref().map(|g| g.1.as_str()) == after {
                    continue;
                }
                let entry = if item.sk.starts_with("TRASH#P#") {
                    let t: TrashedPage = decode("trashed page", &item.body)?;
                    TrashEntry {
                        kind: TrashKind::Page,
                        id: t.page.page_id.to_string(),
                        title: format!("Page of {}", t.page.date),
                        date: t.page.date,
                        deleted_at: t.deleted_at,
                        deleted_on: day_of(t.deleted_at),
                        purge_on: day_of(t.purge_at),
                        tasks: t.tasks.len(),
                    }
                } else {
                    let t: TrashedTask = decode("trashed task", &item.body)?;
                    let id = &t.task.task_link_id;
                    let text =
                        records::open_string(&keys, user, &pk, &task_sk(id), "text", &t.task.text)?;
                    TrashEntry {
                        kind: TrashKind::Task,
                        id: id.to_string(),
                        title: text,
                        date: t.task.first_seen_date,
                        deleted_at: t.deleted_at,
                        deleted_on: day_of(t.deleted_at),
                        purge_on: day_of(t.purge_at),
                        tasks: 0,
                    }
                };
                out.push(entry);
            }
            match page.next {
                Some(next) if out.len() < want => {
                    query.after = Some(next);
                    query.limit = want - out.len();
                }
                _ => break,
            }
        }
        let more = out.len() > limit;
        out.truncate(limit);
        Ok((out, more))
    }

    /// Which of `ids` are task links deleted on their own (`delete_task`): a page commit keeps
    /// its lines on them rather than making new tasks of the same text.
    pub(super) async fn trashed_task_ids(
        &self,
        user: &UserId,
        ids: &[TaskLinkId],
    ) -> Result<BTreeSet<TaskLinkId>, NotebookError> {
        let pk = user_pk(user);
        let keys: Vec<(String, String)> = ids
            .iter()
            .map(|id| (pk.clone(), trash_task_sk(id)))
            .collect();
        let mut out = BTreeSet::new();
        if keys.is_empty() {
            return Ok(out);
        }
        for item in self.store.batch_get(&keys).await?.into_iter().flatten() {
            let t: TrashedTask = decode("trashed task", &item.body)?;
            if t.with_page.is_none() {
                out.insert(t.task.task_link_id);
            }
        }
        Ok(out)
    }
}

/// The sort key of a `list_trash` row, for its cursor.
pub fn trash_cursor_key(entry: &TrashEntry) -> String {
    let kind = match entry.kind {
        TrashKind::Page => 'p',
        TrashKind::Task => 't',
    };
    trash_gsi_sk(entry.deleted_at, kind, &entry.id)
}

/// The error a read or write of `page` gives, from its trash item.
pub(super) fn page_trash_error(page: &PageId, item: &Item) -> Result<NotebookError, NotebookError> {
    let t: TrashedPage = decode("trashed page", &item.body)?;
    Ok(NotebookError::InTrash(format!(
        "page {page} is in the trash (deleted on {}); restore_page {{\"page_id\": \"{page}\"}} brings it back until {}, when it is purged for good",
        day_of(t.deleted_at),
        day_of(t.purge_at)
    )))
}

/// The error a read or write of `task` gives, from its trash item.
pub(super) fn task_trash_error(
    task: &TaskLinkId,
    item: &Item,
) -> Result<NotebookError, NotebookError> {
    let t: TrashedTask = decode("trashed task", &item.body)?;
    let how = match &t.with_page {
        Some(page) => format!(
            "it was deleted with page {page}; restore_page {{\"page_id\": \"{page}\"}} brings both back"
        ),
        None => format!("restore_task {{\"task_link_id\": \"{task}\"}} brings it back"),
    };
    Ok(NotebookError::InTrash(format!(
        "task {task} is in the trash (deleted on {}); {how} until {}, when it is purged for good",
        day_of(t.deleted_at),
        day_of(t.purge_at)
    )))
}
