//! Tasks pushed to the user's Notion database (issue 16), over `adapters::notion`.
//!
//! Items, all in the user's partition `U#{user}` (so the tasks function's role reaches them):
//!
//! - `NOTION#CONN`: the connection. The database id in clear; the integration token and the
//!   property mapping sealed together (field `notion`), so neither reaches the store, a log
//!   or a client in clear. Written by connect, deleted by disconnect.
//! - `NOTION#HEALTH`: what happened last (last success, last error with Notion's message
//!   sealed, and until when to leave Notion alone: `retry_after_until` from a 429's
//!   `Retry-After`, `backoff_until` after other failures). Last writer wins.
//! - `NOTION#OUT#{task_link_id}`: the outbox, one item per task whose Notion page must be
//!   created or brought to the task's current status. It is the idempotency record: written
//!   in the very transaction that creates the task (so only the call that created a task
//!   pushes it, and a crash cannot lose it), leased (`lease_until`, a version-conditioned
//!   write; each claim reads the clock) by whoever pushes it, and deleted once done. The task
//!   item's `notion` link is the proof of a push: a page is created only for a task without
//!   one, so a task is pushed at most once even when a lease runs out mid-push and the next
//!   holder finds the link. A page created but never linked (the link's write failed, or the
//!   process died) carries the task's id in its `nib id` property: a later attempt queries
//!   for it and links that page instead of creating another.
//!
//! Pushing is best effort for the tool call: the task exists whatever Notion answers; a failed
//! push stays in the outbox, retried when it is due (after its backoff, and never before
//! `Retry-After`) by the outbox timer ([`Notebook::notion_drain_due`]: a background task of
//! `nib serve`, a scheduled invocation of the tasks function on AWS), by the next
//! `create_task`/`update_task_status` of the user, or by `nib notion sync`. Outbox items are
//! also in the index partition [`NOTION_DUE_PARTITION`], where the timer finds them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::records::{
    self, NOTION_CONN_SK, NOTION_DUE_PARTITION, NOTION_HEALTH_SK, NOTION_OUT_PREFIX, NotionLink,
    TaskRecord, b64, decode, encode, notion_out_sk, task_sk, user_pk,
};
use super::{CreatedTask, Notebook, NotebookError, UpdatedTask};
use crate::adapters::notion::{
    Mapping, NotionApi, NotionError, NotionToken, TaskPush, map_database, parse_id,
};
use crate::crypto::UserKeys;
use crate::domain::{Date, TaskLinkId, TaskStatus, UserId};
use crate::ports::{Cond, Item, Query, StoreError, Write};
use crate::telemetry;

/// How long the call holding an outbox item may take to push it before another may.
const LEASE_SECS: i64 = 60;
/// A page is created only while the pusher's lease has this long left: the query for an
/// earlier page and the create (each within Notion's 10 s request timeout) and the link's
/// write then end before anyone else may claim the task.
const CREATE_WITHIN: i64 = 30;
/// Transient failures (outage, timeouts) back off 5 s, 10 s, 20 s, ... up to an hour.
fn backoff_secs(failures: u32) -> i64 {
    (5i64 << failures.min(10)).min(3600)
}
/// After a failure someone must fix (bad token, database gone): tried again hourly, or on
/// `nib notion sync`.
const BLOCKED_SECS: i64 = 3600;
/// How many other outbox items one tool call pushes besides its own.
const DRAIN_PER_CALL: usize = 5;
/// A tool call starts no outbox push once it has waited this long on Notion (its own push
/// included), so that with Notion's 10 s request timeout a call stays well inside the tasks
/// function's 25 s. Only time waiting on Notion counts: a slow store does not cut a drain short.
const DRAIN_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);
/// How many outbox items the timer pushes for one user in one pass (each user's pass is also
/// bounded by [`DRAIN_WITHIN`] of waiting on Notion).
const DRAIN_PER_TICK: usize = 25;

#[derive(Debug, Serialize, Deserialize)]
struct ConnectionRecord {
    database_id: String,
    /// Sealed field `notion`: JSON of [`ConnectionSecret`].
    #[serde(with = "b64")]
    secret: Vec<u8>,
    connected_at: i64,
}

#[derive(Deserialize)]
struct ConnectionSecret {
    #[serde(deserialize_with = "zeroizing_string")]
    token: Zeroizing<String>,
    mapping: Mapping,
}

fn zeroizing_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Zeroizing<String>, D::Error> {
    String::deserialize(d).map(Zeroizing::new)
}

/// [`ConnectionSecret`] as it is sealed, borrowing the token rather than copying it.
#[derive(Serialize)]
struct ConnectionSecretRef<'a> {
    token: &'a str,
    mapping: &'a Mapping,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct HealthRecord {
    last_ok_at: Option<i64>,
    last_error_at: Option<i64>,
    last_error_kind: Option<String>,
    /// Sealed field `notion_error`: the error as nib tells it, with Notion's message.
    #[serde(with = "b64::opt", default)]
    last_error: Option<Vec<u8>>,
    /// A 429's `Retry-After`: nothing is sent before this unix second, not even by sync.
    retry_after_until: Option<i64>,
    /// Backoff after other failures: tool calls leave Notion alone until then (sync does not).
    backoff_until: Option<i64>,
    /// Consecutive transient failures.
    failures: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OutboxRecord {
    task_link_id: TaskLinkId,
    attempts: u32,
    /// Not retried by tool calls before this unix second.
    next_at: i64,
    /// Held by a pusher until this unix second.
    lease_until: i64,
    last_error_kind: Option<String>,
    created_at: i64,
}

/// A live connection, opened (for one call).
struct Connection {
    database_id: String,
    token: NotionToken,
    mapping: Mapping,
    /// How long this call has waited on Notion, in milliseconds.
    waited_ms: std::sync::atomic::AtomicU64,
}

impl Connection {
    /// Runs one Notion call, counting the wait.
    async fn timed<T>(&self, call: impl std::future::Future<Output = T>) -> T {
        let start = tokio::time::Instant::now();
        let out = call.await;
        let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.waited_ms
            .fetch_add(ms, std::sync::atomic::Ordering::Relaxed);
        out
    }

    fn waited(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.waited_ms.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// A task's Notion page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotionRef {
    pub page_id: String,
    pub url: String,
}

/// What `create_task` did in Notion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotionPushed {
    /// The task has its Notion page (created by this call, or earlier for a reused task).
    pub pushed: bool,
    pub page: Option<NotionRef>,
}

/// What `nib notion status` shows. Never the token.
#[derive(Debug, Clone)]
pub struct NotionStatus {
    pub database_id: String,
    pub mapping: Mapping,
    pub connected_at: i64,
    pub last_ok_at: Option<i64>,
    /// When, the kind, and the message (Notion's own message included).
    pub last_error: Option<(i64, String, String)>,
    pub retry_after_until: Option<i64>,
    pub backoff_until: Option<i64>,
    /// Tasks waiting in the outbox.
    pub pending: usize,
}

/// What `nib notion sync` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub created: usize,
    pub updated: usize,
    pub failed: usize,
    /// Still in the outbox afterwards.
    pub pending: usize,
    /// Notion asked (429) not to be called before this unix second.
    pub retry_after_until: Option<i64>,
    /// The tasks this drain brought to Notion: with their page when it was created (or found
    /// and linked), `None` when an existing page was updated.
    pub pushed: Vec<(TaskLinkId, Option<NotionRef>)>,
}

/// What one pass of the outbox timer ([`Notebook::notion_drain_due`]) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DueReport {
    /// Users whose outbox was drained.
    pub users: usize,
    pub created: usize,
    pub updated: usize,
    pub failed: usize,
    /// Users left for the next pass (the pass ran out of time).
    pub deferred: usize,
    /// When the next outbox item is due (unix seconds), if any is left.
    pub next_due: Option<i64>,
}

enum Synced {
    /// The task's page was created, or found (created by an earlier attempt) and linked.
    Created(NotionRef),
    Updated,
    Gone,
    /// Too little of the lease was left to create the page: left to a later attempt.
    Yielded,
}

/// An outbox item as its pusher holds it.
#[derive(Clone, Copy)]
struct Held {
    /// The item's version the pusher wrote.
    version: u64,
    /// The lease's end (unix seconds).
    until: i64,
    /// No earlier attempt can have created a page: the item was written, leased to this call,
    /// in the transaction that created the task.
    fresh: bool,
}

enum PushError {
    /// Creating the task's page failed.
    Notion(NotionError),
    /// Updating the task's existing page failed (a 404 then means that page, not the
    /// database, is gone).
    Page(NotionError),
    Notebook(NotebookError),
}

impl From<NotebookError> for PushError {
    fn from(e: NotebookError) -> Self {
        PushError::Notebook(e)
    }
}

impl From<StoreError> for PushError {
    fn from(e: StoreError) -> Self {
        PushError::Notebook(e.into())
    }
}

/// The outbox item of a task `create_task` is creating, leased to it (`pages::commit_page`
/// writes it in the task's transaction).
pub(super) fn new_outbox_write(user: &UserId, task: &TaskLinkId, now: i64, lease: i64) -> Write {
    Write::put(
        outbox_item(
            user,
            &OutboxRecord {
                task_link_id: task.clone(),
                attempts: 0,
                next_at: now,
                lease_until: lease,
                last_error_kind: None,
                created_at: now,
            },
            1,
        ),
        Cond::NotExists,
    )
}

fn outbox_item(user: &UserId, rec: &OutboxRecord, version: u64) -> Item {
    Item {
        pk: user_pk(user),
        sk: notion_out_sk(&rec.task_link_id),
        gsi1: Some((
            NOTION_DUE_PARTITION.into(),
            format!("{user}#{}", rec.task_link_id),
        )),
        version,
        expires_at: None,
        body: encode(rec),
    }
}

/// A task's Notion URL, opened.
pub(super) fn open_url(
    user: &UserId,
    keys: &UserKeys,
    task: &TaskLinkId,
    link: &NotionLink,
) -> Result<String, NotebookError> {
    records::open_string(
        keys,
        user,
        &user_pk(user),
        &task_sk(task),
        "notion_url",
        &link.url,
    )
}

fn is_retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::ConditionFailed { .. } | StoreError::Conflict)
}

impl Notebook {
    /// Pushes tasks to Notion through `api` (the services wire it; without it nothing is pushed).
    pub fn with_notion(mut self, api: NotionApi) -> Self {
        self.notion = Some(Arc::new(api));
        self
    }

    fn notion_api(&self) -> Result<&NotionApi, NotebookError> {
        self.notion
            .as_deref()
            .ok_or_else(|| NotebookError::Invalid("Notion is not configured here".into()))
    }

    /// Reads the database's schema with `token`, maps it (or refuses it, naming the property)
    /// and stores the connection, the token sealed. Replaces an earlier connection.
    pub async fn notion_connect(
        &self,
        user: &UserId,
        database: &str,
        token: NotionToken,
    ) -> Result<Mapping, NotebookError> {
        let api = self.notion_api()?;
        let database_id = parse_id(database)?;
        let db = api.database(&token, &database_id).await?;
        let mut mapping = map_database(&db)?;
        if mapping.task_id.is_none() {
            // The property by which a retried push finds a page it created but could not link.
            let db = api.add_task_id_property(&token, &database_id).await?;
            mapping = map_database(&db)?;
            if mapping.task_id.is_none() {
                return Err(NotionError::BadAnswer(
                    "the database has no task id property after adding it".into(),
                )
                .into());
            }
        }
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let plain = Zeroizing::new(encode(&ConnectionSecretRef {
            token: token.expose(),
            mapping: &mapping,
        }));
        let secret = records::seal(&keys, user, &pk, NOTION_CONN_SK, "notion", &plain);
        let record = ConnectionRecord {
            database_id,
            secret,
            connected_at: self.clock.unix(),
        };
        self.store
            .transact(vec![
                Write::put(
                    Item {
                        pk: pk.clone(),
                        sk: NOTION_CONN_SK.into(),
                        gsi1: None,
                        version: 1,
                        expires_at: None,
                        body: encode(&record),
                    },
                    Cond::None,
                ),
                Write::delete(pk, NOTION_HEALTH_SK, Cond::None),
            ])
            .await?;
        tracing::info!(user = %user, "notion connected");
        Ok(mapping)
    }

    /// Forgets the connection, its state and its outbox (tasks keep their Notion links).
    /// False when there was none.
    pub async fn notion_disconnect(&self, user: &UserId) -> Result<bool, NotebookError> {
        let pk = user_pk(user);
        let was = self.store.get(&pk, NOTION_CONN_SK).await?.is_some();
        let mut deletes = vec![
            Write::delete(pk.clone(), NOTION_CONN_SK, Cond::None),
            Write::delete(pk.clone(), NOTION_HEALTH_SK, Cond::None),
        ];
        for item in self.outbox_items(user).await? {
            deletes.push(Write::delete(pk.clone(), item.sk, Cond::None));
        }
        for chunk in deletes.chunks(crate::ports::MAX_TRANSACTION_ITEMS) {
            self.store.transact(chunk.to_vec()).await?;
        }
        Ok(was)
    }

    /// The connection and how pushing goes; `None` when not connected.
    pub async fn notion_status(
        &self,
        user: &UserId,
    ) -> Result<Option<NotionStatus>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let Some(conn) = self.notion_connection(user, &keys).await? else {
            return Ok(None);
        };
        let pk = user_pk(user);
        let item = self.store.get(&pk, NOTION_CONN_SK).await?;
        let connected_at = match item {
            Some(item) => decode::<ConnectionRecord>("notion connection", &item.body)?.connected_at,
            None => 0,
        };
        let health = self.notion_health(user).await?;
        let last_error = match (&health.last_error, health.last_error_at) {
            (Some(sealed), Some(at)) => Some((
                at,
                health.last_error_kind.clone().unwrap_or_default(),
                records::open_string(&keys, user, &pk, NOTION_HEALTH_SK, "notion_error", sealed)?,
            )),
            _ => None,
        };
        Ok(Some(NotionStatus {
            database_id: conn.database_id,
            mapping: conn.mapping,
            connected_at,
            last_ok_at: health.last_ok_at,
            last_error,
            retry_after_until: health.retry_after_until,
            backoff_until: health.backoff_until,
            pending: self.outbox_items(user).await?.len(),
        }))
    }

    /// Pushes everything in the outbox now, whatever its backoff, but not before a 429's
    /// `Retry-After` has passed. Stops at the first transient failure.
    pub async fn notion_sync(&self, user: &UserId) -> Result<SyncReport, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let Some(conn) = self.notion_connection(user, &keys).await? else {
            return Err(NotebookError::Invalid(
                "no Notion database is connected; run nib notion connect".into(),
            ));
        };
        let mut report = self
            .drain(user, &keys, &conn, true, usize::MAX, Own::None, false)
            .await?;
        report.pending = self.outbox_items(user).await?.len();
        Ok(report)
    }

    /// `create_task`, pushing a task it creates to the connected Notion database.
    pub async fn create_task_pushed(
        &self,
        user: &UserId,
        date: Date,
        text: &str,
        source_url: Option<&str>,
    ) -> Result<(CreatedTask, NotionPushed), NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let conn = match self.notion {
            Some(_) => self.connection_for_push(user, &keys).await,
            None => None,
        };
        let lease_until = self.clock.unix() + LEASE_SECS;
        let lease = conn.as_ref().map(|_| lease_until);
        let created = self
            .create_task_with(user, date, text, source_url, lease)
            .await?;
        let mut answer = NotionPushed {
            pushed: created.notion.is_some(),
            page: created.notion.clone(),
        };
        let Some(conn) = conn else {
            return Ok((created, answer));
        };
        if created.created {
            match self
                .push_new(user, &keys, &conn, &created.task_link_id, lease_until)
                .await
            {
                Ok(page) => {
                    answer = NotionPushed {
                        pushed: page.is_some(),
                        page,
                    }
                }
                Err(e) => tracing::error!(
                    user = %user,
                    task = %created.task_link_id,
                    error = %telemetry::chain(&e),
                    "notion bookkeeping failed after create_task"
                ),
            }
        }
        // A task reused (an open one with the same text) not pushed yet goes first, and the
        // answer says whether it reached Notion in this call.
        let own = match created.created {
            true => Own::Skip(&created.task_link_id),
            false => Own::First(&created.task_link_id),
        };
        let drained = self.drain_quietly(user, &keys, &conn, own).await;
        if !answer.pushed
            && let Some((_, Some(page))) = drained
                .into_iter()
                .find(|(id, _)| *id == created.task_link_id)
        {
            answer = NotionPushed {
                pushed: true,
                page: Some(page),
            };
        }
        Ok((created, answer))
    }

    /// `update_task_status`, bringing the task's Notion page to the new status. True when this
    /// call updated the page.
    pub async fn update_task_status_pushed(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        status: TaskStatus,
        by: crate::domain::tasks::ChangedBy,
    ) -> Result<(UpdatedTask, bool), NotebookError> {
        let updated = self.update_task_status_by(user, id, status, by).await?;
        if self.notion.is_none() {
            return Ok((updated, false));
        }
        let keys = self.vault.user_keys(user).await?;
        let Some(conn) = self.connection_for_push(user, &keys).await else {
            return Ok((updated, false));
        };
        let mut notion_updated = false;
        if updated.changed
            && let Some(page_id) = &updated.notion_page_id
        {
            match self
                .patch_now(user, &keys, &conn, id, page_id, updated.status)
                .await
            {
                Ok(done) => notion_updated = done,
                Err(e) => tracing::error!(
                    user = %user,
                    task = %id,
                    error = %telemetry::chain(&e),
                    "notion bookkeeping failed after update_task_status"
                ),
            }
        }
        // The task itself may wait in the outbox (not pushed yet, or an earlier update that
        // failed): tried first, and a push of it in this call is this call's update.
        let drained = self.drain_quietly(user, &keys, &conn, Own::First(id)).await;
        notion_updated |= drained.iter().any(|(t, _)| t == id);
        Ok((updated, notion_updated))
    }

    /// Patches the page now unless Notion is to be left alone; a failure goes to the outbox.
    async fn patch_now(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        id: &TaskLinkId,
        page_id: &str,
        status: TaskStatus,
    ) -> Result<bool, NotebookError> {
        let now = self.clock.unix();
        let health = self.notion_health(user).await?;
        if let Some(until) = paused(&health, now, false) {
            self.enqueue(user, id, until).await?;
            return Ok(false);
        }
        let api = self.notion_api()?;
        match conn
            .timed(api.update_status(&conn.token, page_id, &conn.mapping, status))
            .await
        {
            Ok(()) => {
                self.record_ok(user, health, now).await?;
                Ok(true)
            }
            Err(e) => {
                let until = self
                    .record_failure(user, keys, health, &e, true, now)
                    .await?;
                self.enqueue(user, id, until.unwrap_or(now)).await?;
                Ok(false)
            }
        }
    }

    /// Pushes a task `create_task` just created (its outbox item is leased to this call until
    /// `lease_until`).
    async fn push_new(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        id: &TaskLinkId,
        lease_until: i64,
    ) -> Result<Option<NotionRef>, NotebookError> {
        let now = self.clock.unix();
        let health = self.notion_health(user).await?;
        if let Some(until) = paused(&health, now, false) {
            self.reschedule(user, id, None, until).await?;
            return Ok(None);
        }
        let held = Held {
            version: 1,
            until: lease_until,
            fresh: true,
        };
        match self.sync_one(user, keys, conn, id, held).await {
            Ok(Synced::Created(page)) => {
                self.record_ok(user, health, now).await?;
                Ok(Some(page))
            }
            Ok(Synced::Updated | Synced::Gone | Synced::Yielded) => Ok(None),
            Err(PushError::Notion(e)) => {
                let until = self
                    .record_failure(user, keys, health, &e, false, now)
                    .await?;
                self.reschedule(user, id, Some(&e), until.unwrap_or(now))
                    .await?;
                Ok(None)
            }
            Err(PushError::Page(e)) => {
                let until = self
                    .record_failure(user, keys, health, &e, true, now)
                    .await?;
                self.reschedule(user, id, Some(&e), until.unwrap_or(now))
                    .await?;
                Ok(None)
            }
            Err(PushError::Notebook(e)) => Err(e),
        }
    }

    /// [`Notebook::drain`] for a tool call: a few items, failures logged, never failing it.
    /// What it brought to Notion (nothing when it failed).
    async fn drain_quietly(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        own: Own<'_>,
    ) -> Vec<(TaskLinkId, Option<NotionRef>)> {
        match self
            .drain(user, keys, conn, false, DRAIN_PER_CALL, own, true)
            .await
        {
            Ok(report) => report.pushed,
            Err(e) => {
                tracing::error!(user = %user, error = %telemetry::chain(&e), "notion outbox drain failed");
                Vec::new()
            }
        }
    }

    /// Resolves once an outbox item was put or rescheduled since the last call (or right away
    /// when one was before anyone waited): the outbox timer then looks again at what is due.
    pub async fn notion_outbox_changed(&self) {
        self.outbox_changed.notified().await;
    }

    /// The outbox timer's pass: pushes every user's due outbox items (found through
    /// [`NOTION_DUE_PARTITION`]), as a tool call's drain does (never before a 429's
    /// `Retry-After`, nor within a backoff; at most [`DRAIN_PER_TICK`] items and
    /// [`DRAIN_WITHIN`] of waiting on Notion per user), starting no user once `within` has
    /// passed. A user whose drain fails is logged and the pass goes on.
    pub async fn notion_drain_due(
        &self,
        within: std::time::Duration,
    ) -> Result<DueReport, NotebookError> {
        let started = tokio::time::Instant::now();
        let mut report = DueReport::default();
        if self.notion.is_none() {
            return Ok(report);
        }
        let now = self.clock.unix();
        let mut users: Vec<UserId> = Vec::new();
        for item in self.due_items().await? {
            let Some(user) = due_user(&item) else {
                continue;
            };
            let rec: OutboxRecord = decode("notion outbox", &item.body)?;
            if rec.next_at.max(rec.lease_until) <= now && users.last() != Some(&user) {
                users.push(user);
            }
        }
        // Until when each user's Notion is to be left alone (a 429, a backoff).
        let mut held_back = std::collections::HashMap::new();
        for user in users {
            if started.elapsed() >= within {
                report.deferred += 1;
                continue;
            }
            let drained = self.drain_user_due(&user).await;
            match self.notion_health(&user).await {
                Ok(health) => {
                    if let Some(until) = paused(&health, self.clock.unix(), false) {
                        held_back.insert(user.clone(), until);
                    }
                }
                Err(e) => {
                    tracing::error!(user = %user, error = %telemetry::chain(&e), "notion outbox timer: health unreadable")
                }
            }
            match drained {
                Ok(Some(r)) => {
                    report.users += 1;
                    report.created += r.created;
                    report.updated += r.updated;
                    report.failed += r.failed;
                }
                // No connection: nothing to push to until `nib notion connect` (whose sync
                // pushes what waits).
                Ok(None) => {
                    held_back.insert(user, self.clock.unix() + BLOCKED_SECS);
                }
                Err(e) => {
                    tracing::error!(user = %user, error = %telemetry::chain(&e), "notion outbox timer: drain failed")
                }
            }
        }
        for item in self.due_items().await? {
            let rec: OutboxRecord = decode("notion outbox", &item.body)?;
            let held = due_user(&item)
                .and_then(|u| held_back.get(&u).copied())
                .unwrap_or(0);
            let due = rec.next_at.max(rec.lease_until).max(held);
            report.next_due = Some(report.next_due.map_or(due, |d: i64| d.min(due)));
        }
        Ok(report)
    }

    /// One user's drain for the timer; `None` when the user has no connection (any outbox
    /// item left then waits for `nib notion connect`, whose sync pushes it).
    async fn drain_user_due(&self, user: &UserId) -> Result<Option<SyncReport>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let Some(conn) = self.notion_connection(user, &keys).await? else {
            return Ok(None);
        };
        self.drain(user, &keys, &conn, false, DRAIN_PER_TICK, Own::None, true)
            .await
            .map(Some)
    }

    /// Every user's outbox items, through the index.
    async fn due_items(&self) -> Result<Vec<Item>, NotebookError> {
        Ok(self
            .store
            .query_all(Query::gsi1(NOTION_DUE_PARTITION, ""))
            .await?)
    }

    /// Pushes outbox items due (all of them when `force`), at most `budget`, not leased by
    /// another call, none started once the call has waited [`DRAIN_WITHIN`] on Notion when
    /// `bounded`; stops at the first transient failure or while Notion is to be left alone.
    /// Unbounded (`nib notion sync`) it may run for minutes: each item is judged and claimed
    /// at the clock's time then, so each lease runs from its own claim.
    #[allow(clippy::too_many_arguments)]
    async fn drain(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        force: bool,
        budget: usize,
        own: Own<'_>,
        bounded: bool,
    ) -> Result<SyncReport, NotebookError> {
        let mut report = SyncReport::default();
        let now = self.clock.unix();
        let mut health = self.notion_health(user).await?;
        if let Some(until) = paused(&health, now, force) {
            report.retry_after_until = health.retry_after_until.filter(|_| until > now);
            return Ok(report);
        }
        let mut tried = 0;
        let mut items = self.outbox_items(user).await?;
        if let Own::First(first) = own {
            // The call's own task before the others (a stable sort keeps their order).
            let sk = notion_out_sk(first);
            items.sort_by_key(|item| item.sk != sk);
        }
        for item in items {
            if tried >= budget || (bounded && conn.waited() >= DRAIN_WITHIN) {
                break;
            }
            let now = self.clock.unix();
            let rec: OutboxRecord = decode("notion outbox", &item.body)?;
            if own == Own::Skip(&rec.task_link_id)
                || rec.lease_until > now
                || (!force && rec.next_at > now)
            {
                continue;
            }
            // Claim it: only one caller pushes an item at a time.
            let mut claimed = rec.clone();
            claimed.lease_until = now + LEASE_SECS;
            let version = item.version + 1;
            match self
                .store
                .put(
                    outbox_item(user, &claimed, version),
                    Cond::Version(item.version),
                )
                .await
            {
                Ok(()) => {}
                Err(e) if is_retryable(&e) => continue,
                Err(e) => return Err(e.into()),
            }
            tried += 1;
            let held = Held {
                version,
                until: claimed.lease_until,
                fresh: false,
            };
            let (e, on_page) = match self
                .sync_one(user, keys, conn, &rec.task_link_id, held)
                .await
            {
                Ok(synced) => {
                    match synced {
                        Synced::Created(page) => {
                            report.created += 1;
                            report.pushed.push((rec.task_link_id.clone(), Some(page)));
                        }
                        Synced::Updated => {
                            report.updated += 1;
                            report.pushed.push((rec.task_link_id.clone(), None));
                        }
                        Synced::Gone => {}
                        // Nothing was asked of Notion.
                        Synced::Yielded => continue,
                    }
                    health = self.record_ok(user, health, now).await?;
                    continue;
                }
                Err(PushError::Notion(e)) => (e, false),
                Err(PushError::Page(e)) => (e, true),
                Err(PushError::Notebook(e)) => return Err(e),
            };
            report.failed += 1;
            let until = self
                .record_failure(user, keys, health, &e, on_page, now)
                .await?;
            self.reschedule(user, &rec.task_link_id, Some(&e), until.unwrap_or(now))
                .await?;
            if let NotionError::RateLimited { .. } = e {
                report.retry_after_until = until;
            }
            if e.is_transient() || (!on_page && blocks_all(&e)) {
                break;
            }
            health = self.notion_health(user).await?;
        }
        Ok(report)
    }

    /// Pushes a task that has no Notion page linked yet: links the page an earlier attempt
    /// created (found by its `nib id`), else creates one; nothing when the lease is nearly over.
    async fn push_unlinked(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        id: &TaskLinkId,
        held: Held,
        t: &TaskRecord,
    ) -> Result<Synced, PushError> {
        let api = self.notion_api()?;
        if self.clock.unix() > held.until - CREATE_WITHIN {
            // Another call may claim the task before this one could link a
            // page it created now; the next attempt does it.
            tracing::warn!(user = %user, task = %id, "notion push left for later: its lease is nearly over");
            return Ok(Synced::Yielded);
        }
        let found = match (&conn.mapping.task_id, held.fresh) {
            (Some(property), false) => conn
                .timed(api.find_task_page(&conn.token, &conn.database_id, property, id.as_str()))
                .await
                .map_err(PushError::Notion)?,
            // A fresh item had no earlier attempt; a connection without the
            // property cannot tell (connect again maps it).
            _ => None,
        };
        Ok(match found {
            Some(page) => {
                self.save_link(user, keys, id, &page.id, &page.url).await?;
                tracing::info!(user = %user, task = %id, "task's notion page from an earlier push linked");
                // It was created with the status of its day.
                conn.timed(api.update_status(&conn.token, &page.id, &conn.mapping, t.status))
                    .await
                    .map_err(PushError::Page)?;
                Synced::Created(NotionRef {
                    page_id: page.id,
                    url: page.url,
                })
            }
            None => {
                let page = self.create_page(user, keys, conn, id, t).await?;
                self.save_link(user, keys, id, &page.page_id, &page.url)
                    .await?;
                tracing::info!(user = %user, task = %id, "task pushed to notion");
                Synced::Created(page)
            }
        })
    }

    /// Creates the task's page if it has none (or links the one an earlier attempt created),
    /// else brings the page to the task's status; then removes its outbox item (unless it
    /// changed since it was claimed as `held`).
    async fn sync_one(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        id: &TaskLinkId,
        held: Held,
    ) -> Result<Synced, PushError> {
        let api = self.notion_api()?;
        let pk = user_pk(user);
        let sk = task_sk(id);
        let outcome = match self.store.get(&pk, &sk).await? {
            None => Synced::Gone,
            Some(item) => {
                let t: TaskRecord = decode("task", &item.body)?;
                match &t.notion {
                    Some(link) => {
                        conn.timed(api.update_status(
                            &conn.token,
                            &link.page_id,
                            &conn.mapping,
                            t.status,
                        ))
                        .await
                        .map_err(PushError::Page)?;
                        Synced::Updated
                    }
                    // Yielded: the outbox item stays, for the next attempt.
                    None => match self.push_unlinked(user, keys, conn, id, held, &t).await? {
                        Synced::Yielded => return Ok(Synced::Yielded),
                        pushed => pushed,
                    },
                }
            }
        };
        match self
            .store
            .transact(vec![Write::delete(
                pk,
                notion_out_sk(id),
                Cond::Version(held.version),
            )])
            .await
        {
            Ok(()) => {}
            // Re-queued meanwhile (a status change): the next drain brings that too.
            Err(e) if is_retryable(&e) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(outcome)
    }

    /// Creates the task's page in the connected database.
    async fn create_page(
        &self,
        user: &UserId,
        keys: &UserKeys,
        conn: &Connection,
        id: &TaskLinkId,
        t: &TaskRecord,
    ) -> Result<NotionRef, PushError> {
        let api = self.notion_api()?;
        let pk = user_pk(user);
        let sk = task_sk(id);
        let text = records::open_string(keys, user, &pk, &sk, "text", &t.text)?;
        let source_url = match &t.source_url {
            Some(s) => Some(records::open_string(keys, user, &pk, &sk, "source_url", s)?),
            None => None,
        };
        let push = TaskPush {
            id: id.as_str(),
            text: &text,
            status: t.status,
            date: t.first_seen_date,
            source_url: source_url.as_deref(),
        };
        let page = conn
            .timed(api.create_page(&conn.token, &conn.database_id, &conn.mapping, &push))
            .await
            .map_err(PushError::Notion)?;
        Ok(NotionRef {
            page_id: page.id,
            url: page.url,
        })
    }

    /// Records the task's Notion page on its item (kept by every later commit of the task).
    async fn save_link(
        &self,
        user: &UserId,
        keys: &UserKeys,
        id: &TaskLinkId,
        page_id: &str,
        url: &str,
    ) -> Result<(), NotebookError> {
        let pk = user_pk(user);
        let sk = task_sk(id);
        for attempt in 0..super::MAX_ATTEMPTS {
            let Some(item) = self.store.get(&pk, &sk).await? else {
                return Ok(());
            };
            let mut t: TaskRecord = decode("task", &item.body)?;
            t.notion = Some(NotionLink {
                page_id: page_id.to_owned(),
                url: records::seal(keys, user, &pk, &sk, "notion_url", url.as_bytes()),
            });
            let new = Item {
                body: encode(&t),
                version: item.version + 1,
                ..item.clone()
            };
            // The link shows in list_tasks and get_page: a new notebook revision.
            let writes = vec![
                Write::put(new, Cond::Version(item.version)),
                records::revision_write(&pk),
            ];
            match self.store.transact(writes).await {
                Ok(()) => return Ok(()),
                Err(e) if is_retryable(&e) => super::backoff(attempt).await,
                Err(e) => return Err(e.into()),
            }
        }
        Err(NotebookError::Contention)
    }

    /// Puts a task in the outbox (due at `next_at`), unless it is there already.
    async fn enqueue(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        next_at: i64,
    ) -> Result<(), NotebookError> {
        let now = self.clock.unix();
        let rec = OutboxRecord {
            task_link_id: id.clone(),
            attempts: 0,
            next_at,
            lease_until: 0,
            last_error_kind: None,
            created_at: now,
        };
        match self
            .store
            .put(outbox_item(user, &rec, 1), Cond::NotExists)
            .await
        {
            Ok(()) => {
                self.outbox_changed.notify_one();
                Ok(())
            }
            Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Releases a task's outbox item after a failed or skipped push, due again at `next_at`.
    async fn reschedule(
        &self,
        user: &UserId,
        id: &TaskLinkId,
        error: Option<&NotionError>,
        next_at: i64,
    ) -> Result<(), NotebookError> {
        let pk = user_pk(user);
        for attempt in 0..8 {
            let Some(item) = self.store.get(&pk, &notion_out_sk(id)).await? else {
                return Ok(());
            };
            let mut rec: OutboxRecord = decode("notion outbox", &item.body)?;
            rec.lease_until = 0;
            rec.next_at = next_at;
            if let Some(e) = error {
                rec.attempts += 1;
                rec.last_error_kind = Some(e.kind().into());
            }
            match self
                .store
                .put(
                    outbox_item(user, &rec, item.version + 1),
                    Cond::Version(item.version),
                )
                .await
            {
                Ok(()) => {
                    self.outbox_changed.notify_one();
                    return Ok(());
                }
                Err(e) if is_retryable(&e) => super::backoff(attempt).await,
                Err(e) => return Err(e.into()),
            }
        }
        Err(NotebookError::Contention)
    }

    /// Records a failure (`on_page`: of a call on the task's own page, whose 404 concerns that
    /// page alone); returns until when the task, or all of Notion, is to be left alone.
    async fn record_failure(
        &self,
        user: &UserId,
        keys: &UserKeys,
        mut health: HealthRecord,
        e: &NotionError,
        on_page: bool,
        now: i64,
    ) -> Result<Option<i64>, NotebookError> {
        tracing::warn!(user = %user, kind = e.kind(), "notion call failed");
        let pk = user_pk(user);
        health.last_error_at = Some(now);
        health.last_error_kind = Some(e.kind().into());
        health.last_error = Some(records::seal(
            keys,
            user,
            &pk,
            NOTION_HEALTH_SK,
            "notion_error",
            e.to_string().as_bytes(),
        ));
        let until = match e {
            NotionError::RateLimited { retry_after } => {
                let until = now + i64::try_from(*retry_after).unwrap_or(3600);
                health.retry_after_until = Some(until);
                Some(until)
            }
            e if e.is_transient() => {
                let until = now + backoff_secs(health.failures);
                health.failures = health.failures.saturating_add(1);
                health.backoff_until = Some(until);
                Some(until)
            }
            e if blocks_all(e) && !on_page => {
                let until = now + BLOCKED_SECS;
                health.backoff_until = Some(until);
                Some(until)
            }
            // A task Notion refused (validation): that one waits, the others go on.
            _ => Some(now + BLOCKED_SECS),
        };
        self.put_health(user, &health).await?;
        Ok(until)
    }

    /// Records a success (written only when it changes something worth keeping).
    async fn record_ok(
        &self,
        user: &UserId,
        mut health: HealthRecord,
        now: i64,
    ) -> Result<HealthRecord, NotebookError> {
        let stale = health.last_ok_at.is_none_or(|at| now - at >= 60);
        if stale
            || health.failures > 0
            || health.backoff_until.is_some()
            || health.retry_after_until.is_some()
        {
            health.last_ok_at = Some(now);
            health.failures = 0;
            health.backoff_until = None;
            health.retry_after_until = None;
            self.put_health(user, &health).await?;
        }
        Ok(health)
    }

    async fn put_health(&self, user: &UserId, health: &HealthRecord) -> Result<(), NotebookError> {
        self.store
            .put(
                Item {
                    pk: user_pk(user),
                    sk: NOTION_HEALTH_SK.into(),
                    gsi1: None,
                    version: 1,
                    expires_at: None,
                    body: encode(health),
                },
                Cond::None,
            )
            .await?;
        Ok(())
    }

    async fn notion_health(&self, user: &UserId) -> Result<HealthRecord, NotebookError> {
        match self.store.get(&user_pk(user), NOTION_HEALTH_SK).await? {
            Some(item) => decode("notion health", &item.body),
            None => Ok(HealthRecord::default()),
        }
    }

    /// The connection for a tool call's push: one that cannot be read is logged and the call
    /// goes on without Notion.
    async fn connection_for_push(&self, user: &UserId, keys: &UserKeys) -> Option<Connection> {
        match self.notion_connection(user, keys).await {
            Ok(conn) => conn,
            Err(e) => {
                tracing::error!(user = %user, error = %telemetry::chain(&e), "cannot read the notion connection");
                None
            }
        }
    }

    async fn notion_connection(
        &self,
        user: &UserId,
        keys: &UserKeys,
    ) -> Result<Option<Connection>, NotebookError> {
        let pk = user_pk(user);
        let Some(item) = self.store.get(&pk, NOTION_CONN_SK).await? else {
            return Ok(None);
        };
        let rec: ConnectionRecord = decode("notion connection", &item.body)?;
        let plain = Zeroizing::new(records::open(
            keys,
            user,
            &pk,
            NOTION_CONN_SK,
            "notion",
            &rec.secret,
        )?);
        let secret: ConnectionSecret = decode("notion connection", &plain)?;
        let token = NotionToken::parse(&secret.token)
            .ok_or_else(|| NotebookError::Corrupt("notion connection: token".into()))?;
        Ok(Some(Connection {
            database_id: rec.database_id,
            token,
            mapping: secret.mapping,
            waited_ms: Default::default(),
        }))
    }

    async fn outbox_items(&self, user: &UserId) -> Result<Vec<Item>, NotebookError> {
        Ok(self
            .store
            .query_all(Query::table(user_pk(user), NOTION_OUT_PREFIX))
            .await?)
    }
}

/// The user of an outbox item found through [`NOTION_DUE_PARTITION`].
fn due_user(item: &Item) -> Option<UserId> {
    let (_, sk) = item.gsi1.as_ref()?;
    let (user, _) = sk.split_once('#')?;
    UserId::parse(user).ok()
}

/// Which of a call's own tasks its drain treats apart.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Own<'a> {
    None,
    /// Pushed by the call already (`create_task`'s new task): left out.
    Skip(&'a TaskLinkId),
    /// Tried before the others (the call reports whether it reached Notion).
    First(&'a TaskLinkId),
}

/// An error after which no call can succeed until someone acts (a new token, the database
/// shared again).
fn blocks_all(e: &NotionError) -> bool {
    matches!(
        e,
        NotionError::Unauthorized { .. }
            | NotionError::Forbidden { .. }
            | NotionError::NotFound { .. }
    )
}

/// Until when Notion is to be left alone at `now`, if it is: a 429's `Retry-After` always,
/// the backoff unless `force` (`nib notion sync`).
fn paused(health: &HealthRecord, now: i64, force: bool) -> Option<i64> {
    let retry = health.retry_after_until.filter(|&t| t > now);
    let backoff = health.backoff_until.filter(|&t| t > now && !force);
    retry.max(backoff)
}
