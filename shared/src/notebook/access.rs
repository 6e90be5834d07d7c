//! The access record (issue 14): which client or token opened which pages and tasks, when,
//! with which tool. Records hold ids only, never content or secrets, and expire after
//! [`ACCESS_TTL_SECS`] (the store's `expires_at`: DynamoDB TTL on AWS, `is_live` everywhere).
//!
//! Items: `U#{user}` / `ACCESS#{unix ms, 13 digits}#{16 hex digits}` (newest last in the
//! partition; the random suffix keeps two records of one millisecond apart).
//!
//! Writing is batched: [`AccessLog::record`] appends to a bounded buffer in memory;
//! [`AccessLog::flush`] writes what is there (transactions of up to 100 records, sent
//! concurrently). Locally a flusher task (started by the first record) flushes every
//! [`FLUSH_EVERY`] or as soon as [`FLUSH_BATCH`] records wait, and `nib serve` flushes at
//! shutdown; a class function on Lambda turns the flusher off ([`AccessLog::flush_per_call`])
//! and flushes before its reply leaves, so on AWS no answer leaves without its record.
//!
//! Locally each record is also appended to a journal beside the store ([`JOURNAL_FILE`], one
//! `write` of one JSON line, before the call answers), so a process killed with records in
//! memory loses none: the next process to open the data directory takes them back from the
//! journal, and its first flush (or listing) writes them. A flush moves the journal aside
//! while it writes (`.folding`) and deletes it once the records are in the store; a record
//! found twice is written twice to the same key, so a fold cut short is only done again.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::NotebookError;
use super::records::{decode, encode, user_pk};
use crate::domain::{PageId, TaskLinkId, UserId};
use crate::ports::{Clock, Cond, Item, MAX_TRANSACTION_ITEMS, Query, Store, Write};

/// How long a record is kept: 90 days.
pub const ACCESS_TTL_SECS: i64 = 90 * 86_400;
/// The sort-key prefix of access records.
pub const ACCESS_PREFIX: &str = "ACCESS#";
/// How often the local flusher writes what waits.
pub const FLUSH_EVERY: Duration = Duration::from_millis(500);
/// How many waiting records wake the flusher before its interval.
pub const FLUSH_BATCH: usize = 1_000;
/// At most this many records wait in memory; more are dropped (and counted in a warning) while
/// the store cannot take them.
pub const BUFFER_CAP: usize = 20_000;
/// At most this many ids of each kind per record (a list of 200 pages fits).
pub const MAX_IDS: usize = 500;
/// The local journal's file name in the data directory.
pub const JOURNAL_FILE: &str = "access.journal";

/// One access: when, by whom, with which tool, to which pages and tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessRecord {
    /// Unix milliseconds.
    pub at_ms: i64,
    /// The credential: an API token's id (`tok_...`), `grant_{id}` for an OAuth grant,
    /// `page_session` for the page link's signed-in browser.
    pub credential_id: String,
    /// Its name: the OAuth client's name, or the API token's label, when it has one.
    #[serde(default)]
    pub client: Option<String>,
    /// The tool (or `resources/read`).
    pub tool: String,
    #[serde(default)]
    pub page_ids: Vec<PageId>,
    #[serde(default)]
    pub task_ids: Vec<TaskLinkId>,
}

/// The position of a record in its partition, for cursors: its sort key's two parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessPosition {
    pub at_ms: i64,
    pub nonce: u64,
}

fn access_sk(p: AccessPosition) -> String {
    format!("{ACCESS_PREFIX}{:013}#{:016x}", p.at_ms.max(0), p.nonce)
}

fn parse_sk(sk: &str) -> Option<AccessPosition> {
    let rest = sk.strip_prefix(ACCESS_PREFIX)?;
    let (ms, nonce) = rest.split_once('#')?;
    Some(AccessPosition {
        at_ms: ms.parse().ok()?,
        nonce: u64::from_str_radix(nonce, 16).ok()?,
    })
}

type Pending = (UserId, AccessPosition, AccessRecord);

/// A record as the journal holds it: one JSON line. Written from borrowed parts (the call's
/// path makes no copies), read back owned.
#[derive(Serialize, Deserialize)]
struct JournalLine<U, R> {
    user: U,
    at_ms: i64,
    nonce: u64,
    record: R,
}

/// The records waiting in memory and, locally, the journal that holds them too: one lock, so
/// a flush that takes the records moves aside exactly the lines that name them.
#[derive(Default)]
struct Buffer {
    records: Vec<Pending>,
    journal: Option<Journal>,
}

/// The append-only file of the records not yet in the store.
struct Journal {
    path: PathBuf,
    file: std::fs::File,
}

fn folding_path(path: &Path) -> PathBuf {
    path.with_extension("journal.folding")
}

fn append_to(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

fn journal_line((user, position, record): &Pending) -> Vec<u8> {
    let mut line = serde_json::to_vec(&JournalLine {
        user,
        at_ms: position.at_ms,
        nonce: position.nonce,
        record,
    })
    .expect("a journal line serializes");
    line.push(b'\n');
    line
}

/// The records in a journal's bytes; a line cut short by a kill (the last) is skipped.
fn journal_records(bytes: &[u8]) -> Vec<Pending> {
    bytes
        .split(|&b| b == b'\n')
        .filter_map(|line| serde_json::from_slice::<JournalLine<UserId, AccessRecord>>(line).ok())
        .map(|l| {
            let position = AccessPosition {
                at_ms: l.at_ms,
                nonce: l.nonce,
            };
            (l.user, position, l.record)
        })
        .collect()
}

fn read_if_there(path: &Path) -> std::io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        other => other,
    }
}

impl Journal {
    /// Opens the journal at `path` and the records a killed process left in it (and in a fold
    /// it cut short), now all in the one journal.
    fn open(path: PathBuf) -> std::io::Result<(Journal, Vec<Pending>)> {
        let folding = folding_path(&path);
        let mut left = journal_records(&read_if_there(&folding)?);
        left.extend(journal_records(&read_if_there(&path)?));
        if !left.is_empty() || folding.exists() {
            let fresh = path.with_extension("journal.new");
            let mut file = std::fs::File::create(&fresh)?;
            for record in &left {
                file.write_all(&journal_line(record))?;
            }
            file.sync_all()?;
            std::fs::rename(&fresh, &path)?;
            match std::fs::remove_file(&folding) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let file = append_to(&path)?;
        Ok((Journal { path, file }, left))
    }

    /// Moves the journal aside (its records are being written) and starts an empty one. False
    /// when it could not: the records then stay in this journal until a later fold.
    fn set_aside(&mut self) -> bool {
        let folding = folding_path(&self.path);
        if folding.exists() {
            return false;
        }
        let moved = std::fs::rename(&self.path, &folding)
            .and_then(|()| append_to(&self.path))
            .map(|file| self.file = file);
        if let Err(e) = &moved {
            tracing::warn!(error = %e, "could not move the access journal aside");
        }
        moved.is_ok()
    }
}

/// The buffered writer of access records, one per notebook.
pub struct AccessLog {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    pending: std::sync::Mutex<Buffer>,
    /// Held across a whole flush, so a flush that returns has written everything that was
    /// waiting when it was called (also what a concurrent flush had taken).
    flushing: tokio::sync::Mutex<()>,
    wake: tokio::sync::Notify,
    /// Whether the first record starts the background flusher (local); off on Lambda.
    background: AtomicBool,
    started: AtomicBool,
    dropped: AtomicU64,
    /// Orders this process's records within one millisecond ([`ordered_nonce`]).
    sequence: AtomicU64,
}

/// A record's nonce: this process's record count in its top 24 bits, so that two records of
/// one millisecond sort in the order they were made (newest first stays newest first), and 40
/// random bits, so that records of different processes never share a key. The count wraps
/// every 16,777,216 records; only two records of one millisecond on either side of the wrap
/// could sort the wrong way round.
fn ordered_nonce(sequence: u64) -> u64 {
    ((sequence & 0xff_ffff) << 40) | (rand::random::<u64>() & 0xff_ffff_ffff)
}

impl AccessLog {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        AccessLog {
            store,
            clock,
            pending: std::sync::Mutex::new(Buffer::default()),
            flushing: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
            background: AtomicBool::new(true),
            started: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            sequence: AtomicU64::new(0),
        }
    }

    /// Keeps a journal of the records in `dir` ([`JOURNAL_FILE`]; the local back end's data
    /// directory, which one process holds at a time), taking back those a killed process left
    /// there: they wait with the others until the next flush.
    pub fn keep_journal(&self, dir: &Path) -> std::io::Result<()> {
        let (journal, left) = Journal::open(dir.join(JOURNAL_FILE))?;
        let mut buffer = self.pending.lock().expect("access buffer lock");
        if !left.is_empty() {
            tracing::info!(
                records = left.len(),
                "access records taken back from the journal"
            );
        }
        buffer.records.extend(left);
        buffer.journal = Some(journal);
        Ok(())
    }

    /// No background flusher: the caller flushes after each call (a class function on
    /// Lambda, where a frozen instance would hold records indefinitely).
    pub fn flush_per_call(&self) {
        self.background.store(false, Ordering::Relaxed);
    }

    /// Now, in unix milliseconds on the notebook's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock
            .now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// Appends a record of `user`'s notebook to the buffer (no I/O). Its time is now.
    pub fn record(
        self: &Arc<Self>,
        user: &UserId,
        credential_id: &str,
        client: Option<&str>,
        tool: &str,
        mut page_ids: Vec<PageId>,
        mut task_ids: Vec<TaskLinkId>,
    ) {
        page_ids.truncate(MAX_IDS);
        task_ids.truncate(MAX_IDS);
        let at_ms = self.now_ms();
        let position = AccessPosition {
            at_ms,
            nonce: ordered_nonce(self.sequence.fetch_add(1, Ordering::Relaxed)),
        };
        let record = AccessRecord {
            at_ms,
            credential_id: credential_id.to_owned(),
            client: client.map(str::to_owned),
            tool: tool.to_owned(),
            page_ids,
            task_ids,
        };
        let waiting = {
            let mut buffer = self.pending.lock().expect("access buffer lock");
            if buffer.records.len() >= BUFFER_CAP {
                drop(buffer);
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::warn!(%user, tool, dropped = n, "access record buffer full; records dropped");
                }
                return;
            }
            let pending = (user.clone(), position, record);
            if let Some(journal) = &mut buffer.journal
                && let Err(e) = journal.file.write_all(&journal_line(&pending))
            {
                tracing::warn!(%user, tool, error = %e, "could not append to the access journal");
            }
            buffer.records.push(pending);
            buffer.records.len()
        };
        if self.background.load(Ordering::Relaxed) {
            self.start_flusher();
            if waiting >= FLUSH_BATCH {
                self.wake.notify_one();
            }
        }
    }

    /// Records an operation that opened more than one record holds (an export: the whole
    /// notebook): as many records as it takes, [`MAX_IDS`] ids of each kind apiece, so no id
    /// is dropped; one record when it opened nothing.
    pub fn record_all(
        self: &Arc<Self>,
        user: &UserId,
        credential_id: &str,
        client: Option<&str>,
        tool: &str,
        page_ids: &[PageId],
        task_ids: &[TaskLinkId],
    ) {
        let mut pages = page_ids.chunks(MAX_IDS);
        let mut tasks = task_ids.chunks(MAX_IDS);
        let mut first = true;
        loop {
            let (p, t) = (pages.next(), tasks.next());
            if p.is_none() && t.is_none() && !first {
                return;
            }
            first = false;
            self.record(
                user,
                credential_id,
                client,
                tool,
                p.unwrap_or_default().to_vec(),
                t.unwrap_or_default().to_vec(),
            );
        }
    }

    fn start_flusher(self: &Arc<Self>) {
        if self.started.load(Ordering::Relaxed) || self.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.started.store(false, Ordering::Release);
            return;
        };
        // Weak between rounds: the task ends within a round of the notebook going away (after
        // writing what it left).
        let weak = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                let Some(log) = weak.upgrade() else { return };
                let _ = tokio::time::timeout(FLUSH_EVERY, log.wake.notified()).await;
                if let Err(e) = log.flush().await {
                    tracing::warn!(error = %crate::telemetry::chain(&e), "could not write access records; keeping them for the next flush");
                }
            }
        });
    }

    /// How many records wait.
    pub fn pending(&self) -> usize {
        self.pending
            .lock()
            .expect("access buffer lock")
            .records
            .len()
    }

    /// Writes every waiting record. On a failure the records not written go back into the
    /// buffer (room permitting) and the error is returned.
    pub async fn flush(&self) -> Result<usize, NotebookError> {
        let _one = self.flushing.lock().await;
        let (batch, set_aside) = {
            let mut buffer = self.pending.lock().expect("access buffer lock");
            let batch = std::mem::take(&mut buffer.records);
            if batch.is_empty() {
                return Ok(0);
            }
            let set_aside = buffer
                .journal
                .as_mut()
                .and_then(|journal| journal.set_aside().then(|| folding_path(&journal.path)));
            (batch, set_aside)
        };
        let chunks: Vec<Vec<Pending>> = batch
            .chunks(MAX_TRANSACTION_ITEMS)
            .map(<[_]>::to_vec)
            .collect();
        let results = futures::future::join_all(chunks.iter().map(|chunk| {
            let writes = chunk
                .iter()
                .map(|(user, position, record)| {
                    Write::put(
                        Item {
                            pk: user_pk(user),
                            sk: access_sk(*position),
                            gsi1: None,
                            version: 1,
                            expires_at: Some(record.at_ms / 1000 + ACCESS_TTL_SECS),
                            body: encode(record),
                        },
                        Cond::None,
                    )
                })
                .collect();
            self.store.transact(writes)
        }))
        .await;
        let mut written = 0;
        let mut failed = Vec::new();
        let mut error = None;
        for (chunk, result) in chunks.into_iter().zip(results) {
            match result {
                Ok(()) => written += chunk.len(),
                Err(e) => {
                    failed.extend(chunk);
                    error = Some(e);
                }
            }
        }
        if let Some(e) = error {
            let mut buffer = self.pending.lock().expect("access buffer lock");
            // The records not written go back into the journal, so that the one set aside can
            // go (if they cannot, it stays, and the next process takes them back from it).
            let rejournaled = match &mut buffer.journal {
                Some(journal) => failed
                    .iter()
                    .try_for_each(|r| journal.file.write_all(&journal_line(r)))
                    .is_ok(),
                None => true,
            };
            if let Some(folding) = set_aside.filter(|_| rejournaled) {
                let _ = std::fs::remove_file(folding);
            }
            let pending = &mut buffer.records;
            let room = BUFFER_CAP.saturating_sub(pending.len());
            let lost = failed.len().saturating_sub(room);
            failed.truncate(room);
            failed.append(pending);
            *pending = failed;
            if lost > 0 {
                self.dropped.fetch_add(lost as u64, Ordering::Relaxed);
                tracing::warn!(dropped = lost, "access record buffer full; records dropped");
            }
            return Err(e.into());
        }
        if let Some(folding) = set_aside
            && let Err(e) = std::fs::remove_file(folding)
        {
            // Its records are in the store; the next process writes them again, to the same keys.
            tracing::warn!(error = %e, "could not remove the folded access journal");
        }
        Ok(written)
    }

    /// The user's records, newest first: those at or after `since_ms`, before `before` (the
    /// last one of the previous call), at most `limit`, and whether more follow.
    pub async fn list(
        &self,
        user: &UserId,
        since_ms: Option<i64>,
        before: Option<AccessPosition>,
        limit: usize,
    ) -> Result<(Vec<(AccessPosition, AccessRecord)>, bool), NotebookError> {
        // What waits (a killed process's records taken back from the journal, this process's
        // latest) is part of the record.
        self.flush().await?;
        let mut query = Query::table(user_pk(user), ACCESS_PREFIX);
        query.reverse = true;
        query.from = since_ms.map(|ms| {
            access_sk(AccessPosition {
                at_ms: ms,
                nonce: 0,
            })
        });
        let skip = before.map(access_sk);
        query.to = skip.clone();
        let want = limit + 1;
        query.limit = want + usize::from(skip.is_some());
        let mut out = Vec::with_capacity(want);
        loop {
            let page = self.store.query(&query).await?;
            for item in page.items {
                if skip.as_deref() == Some(item.sk.as_str()) {
                    continue;
                }
                let Some(position) = parse_sk(&item.sk) else {
                    continue;
                };
                out.push((position, decode("access record", &item.body)?));
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
}

impl AccessPosition {
    /// For cursors: `{at_ms}.{nonce hex}`.
    pub fn encode(&self) -> String {
        format!("{}.{:016x}", self.at_ms, self.nonce)
    }

    pub fn parse(s: &str) -> Option<AccessPosition> {
        let (ms, nonce) = s.split_once('.')?;
        if nonce.len() != 16 {
            return None;
        }
        Some(AccessPosition {
            at_ms: ms.parse().ok().filter(|ms: &i64| *ms >= 0)?,
            nonce: u64::from_str_radix(nonce, 16).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::embedded::EmbeddedStore;
    use crate::ports::SystemClock;

    #[test]
    fn records_of_one_millisecond_sort_in_the_order_they_were_made() {
        let keys: Vec<String> = (0..1000)
            .map(|n| {
                access_sk(AccessPosition {
                    at_ms: 1_750_000_000_000,
                    nonce: ordered_nonce(n),
                })
            })
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, keys);
    }

    fn log() -> (tempfile::TempDir, Arc<AccessLog>) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        (dir, Arc::new(AccessLog::new(store, Arc::new(SystemClock))))
    }

    /// An export names more ids than one record holds: every one is recorded, none dropped.
    #[tokio::test]
    async fn record_all_spreads_many_ids_over_records_and_keeps_every_one() {
        let (_dir, log) = log();
        log.flush_per_call();
        let alice = UserId::parse("alice").unwrap();
        let pages: Vec<PageId> = (0..MAX_IDS * 2 + 1).map(|_| PageId::new()).collect();
        let tasks: Vec<TaskLinkId> = (0..3).map(|_| TaskLinkId::new()).collect();
        log.record_all(&alice, "web_app", None, "export_notebook", &pages, &tasks);
        assert_eq!(log.pending(), 3);
        log.record_all(&alice, "web_app", None, "export_notebook", &[], &[]);
        assert_eq!(log.pending(), 4, "an export of nothing is recorded too");
        log.flush().await.unwrap();
        let records = log.list(&alice, None, None, 10).await.unwrap().0;
        let mut recorded_pages: Vec<PageId> = records
            .iter()
            .flat_map(|(_, r)| r.page_ids.clone())
            .collect();
        let recorded_tasks: Vec<TaskLinkId> = records
            .iter()
            .flat_map(|(_, r)| r.task_ids.clone())
            .collect();
        let mut expected = pages.clone();
        recorded_pages.sort();
        expected.sort();
        assert_eq!(recorded_pages, expected);
        assert_eq!(recorded_tasks.len(), tasks.len());
        assert!(records.iter().all(|(_, r)| r.page_ids.len() <= MAX_IDS));
    }

    #[tokio::test]
    async fn records_wait_in_memory_until_flushed_then_list_newest_first() {
        let (_dir, log) = log();
        log.flush_per_call();
        let alice = UserId::parse("alice").unwrap();
        let bob = UserId::parse("bob").unwrap();
        let page = PageId::new();
        for tool in ["list_pages", "get_page", "search"] {
            log.record(
                &alice,
                "tok_a",
                Some("laptop"),
                tool,
                vec![page.clone()],
                vec![],
            );
        }
        log.record(&bob, "grant_b", None, "list_tasks", vec![], vec![]);
        assert_eq!(log.pending(), 4);
        assert_eq!(log.flush().await.unwrap(), 4);
        assert_eq!(log.pending(), 0);
        let (first, more) = log.list(&alice, None, None, 2).await.unwrap();
        assert!(more);
        assert_eq!(first.len(), 2);
        let (rest, more) = log.list(&alice, None, Some(first[1].0), 2).await.unwrap();
        assert!(!more);
        assert_eq!(rest.len(), 1);
        let all: Vec<_> = first.iter().chain(&rest).collect();
        assert!(all.windows(2).all(|w| w[0].0.at_ms >= w[1].0.at_ms));
        assert!(
            all.iter()
                .all(|(_, r)| r.client.as_deref() == Some("laptop"))
        );
        // Bob's record is in bob's partition only.
        let bobs = log.list(&bob, None, None, 10).await.unwrap().0;
        assert_eq!(bobs.len(), 1);
        assert_eq!(bobs[0].1.tool, "list_tasks");
        // Nothing since the future.
        let later = log.now_ms() + 60_000;
        assert!(
            log.list(&alice, Some(later), None, 10)
                .await
                .unwrap()
                .0
                .is_empty()
        );
    }

    /// A process killed with records in memory: the next one takes them back from the journal
    /// and lists every one, once; a line cut short by the kill is skipped.
    #[tokio::test]
    async fn records_a_killed_process_held_come_back_from_the_journal_once() {
        let dir = tempfile::tempdir().unwrap();
        let open = || {
            let store: Arc<dyn Store> =
                Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
            let log = Arc::new(AccessLog::new(store, Arc::new(SystemClock)));
            log.flush_per_call();
            log.keep_journal(dir.path()).unwrap();
            log
        };
        let alice = UserId::parse("alice").unwrap();
        let pages: Vec<PageId> = (0..5).map(|_| PageId::new()).collect();
        {
            let log = open();
            log.record(
                &alice,
                "tok_a",
                None,
                "get_page",
                vec![pages[0].clone()],
                vec![],
            );
            assert_eq!(log.flush().await.unwrap(), 1);
            for page in &pages[1..] {
                log.record(
                    &alice,
                    "tok_a",
                    None,
                    "get_page",
                    vec![page.clone()],
                    vec![],
                );
            }
            // Dropped unflushed, as a kill leaves it; then a line half written.
        }
        let journal = dir.path().join(JOURNAL_FILE);
        let mut torn = std::fs::OpenOptions::new()
            .append(true)
            .open(&journal)
            .unwrap();
        torn.write_all(br#"{"user":"alice","at_ms":1"#).unwrap();
        drop(torn);

        let log = open();
        assert_eq!(
            log.pending(),
            4,
            "the four unflushed records, the torn line skipped"
        );
        let listed = log.list(&alice, None, None, 100).await.unwrap().0;
        let mut seen: Vec<PageId> = listed
            .iter()
            .flat_map(|(_, r)| r.page_ids.clone())
            .collect();
        let mut expected = pages.clone();
        seen.sort();
        expected.sort();
        assert_eq!(seen, expected, "every record once");
        assert_eq!(std::fs::metadata(&journal).unwrap().len(), 0, "folded");
        assert!(!folding_path(&journal).exists());

        // A fold cut short (the journal set aside, the store not yet written) is done again.
        log.record(&alice, "tok_a", None, "list_pages", vec![], vec![]);
        std::fs::rename(&journal, folding_path(&journal)).unwrap();
        drop(log);
        let log = open();
        assert_eq!(log.pending(), 1);
        assert!(!folding_path(&journal).exists());
        assert_eq!(log.list(&alice, None, None, 100).await.unwrap().0.len(), 6);
    }

    #[test]
    fn positions_round_trip_and_garbage_does_not_parse() {
        let p = AccessPosition {
            at_ms: 1_780_000_000_123,
            nonce: 0xdead_beef,
        };
        assert_eq!(AccessPosition::parse(&p.encode()), Some(p));
        assert_eq!(parse_sk(&access_sk(p)), Some(p));
        for bad in ["", "1.2", "x.00000000deadbeef", "-1.00000000deadbeef", "1"] {
            assert_eq!(AccessPosition::parse(bad), None, "{bad}");
        }
    }
}
