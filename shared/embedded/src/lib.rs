//! `EmbeddedStore`: the `Store` port over [redb](https://docs.rs/redb), for local mode.
//!
//! # Why redb
//!
//! It is pure Rust (no C toolchain, one static binary), a single file in the data directory, and
//! gives ACID transactions whose commits are crash-safe: a commit flips between two checksummed
//! commit slots, so a killed process or a power cut leaves either the whole transaction or none
//! of it. Keys are ordered, which is what DynamoDB's range queries need. It has a single writer
//! at a time, which is exactly what makes conditional writes simple here: conditions are checked
//! and writes applied inside one write transaction, and nothing else can write in between.
//! Readers use MVCC read transactions and never wait for the writer.
//!
//! # Layout
//!
//! - Table `items`: key = (pk, sk) in an order-preserving encoding, value = the rest of the
//!   [`Item`] (version, expiry, gsi1 key, body).
//! - Table `gsi1`: key = (gsi1pk, gsi1sk, pk, sk), empty value. It is kept in step with `items`
//!   inside the same write transaction as every put, delete and increment, so the index is
//!   never stale.
//!
//! Strings in keys are encoded as their UTF-8 bytes with `0x00` escaped as `0x00 0xFF`, each
//! followed by the terminator `0x00 0x01`. Byte order of encoded tuples is then the byte order
//! of the strings (as in DynamoDB), part by part, and every key of one partition whose sort key
//! starts with a prefix lies in one contiguous range. Query cursors are the base64url of the
//! last returned key.
//!
//! # Durability and group commit
//!
//! Every commit uses [`Durability::Immediate`]: `transact` and `increment` return only once the
//! data is on disk (fsync), so an acknowledged write survives a killed process and a power cut,
//! and a crash mid-commit leaves the previous state. An fsync costs milliseconds, so writes go
//! through one writer thread that commits in groups: while one commit is syncing, further
//! transactions queue up, and the next redb transaction applies all of them (each one's
//! conditions checked against the state its predecessors left, each one all or nothing) and
//! syncs once. Sequential writers get one fsync per transaction; concurrent writers share them.
//!
//! A bulk writer (`nib import`, `nib import --bundle`, `nib reindex`: a short-lived process of
//! its own, [`EmbeddedStore::open_bulk`]) syncs lazily instead: a group is committed with an
//! fsync only when [`BULK_SYNC_EVERY`] has passed since the last one, the groups between
//! without ([`Durability::None`]); an idle writer syncs after that interval, and a closing
//! store (its last clone dropped) at once. redb keeps the unsynced commits in order, so a crash
//! loses the last second's commits, all of them and nothing before: the notebook is as it was
//! a moment earlier in the import, never half a page, and running the import again finishes it.
//! Reads run in their own read transactions: point reads of a few keys on the calling thread
//! (they take microseconds), queries and large batches on tokio's blocking pool. The exception
//! is `batch_get_each` (search's vector blocks): on the calling thread, one item at a time, so
//! that its caller opens each before the next is read.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as CURSOR;
use redb::backends::InMemoryBackend;
use redb::{Database, DatabaseError, Durability, ReadableDatabase, TableDefinition};
use tokio::sync::oneshot;

use nib_ports::{
    Clock, Cond, Index, Item, Query, QueryPage, Store, StoreError, SystemClock, Write,
    counter_value,
};

const ITEMS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("items");
const GSI1: TableDefinition<&[u8], ()> = TableDefinition::new("gsi1");

/// redb's page cache. Its default is 1 GiB, and the expiry sweep (`sweep_expired`, at the first
/// write after opening and hourly) reads every item: with the default, a server's memory grew
/// to the size of its data file at its first write (563 MiB for a 10,000-page notebook of
/// 558 MB). The sweep fills whatever size it is with pages of no use afterwards, so it is
/// small: reads that miss it come from the operating system's file cache (a `get_page` under
/// load ran as fast with 4 MiB as with 16, at 29 MiB of peak RSS instead of 42), and the
/// search index a server keeps open (`notebook::search_index`) does not depend on it. 1 MiB
/// still holds a 10,000-page store's branch pages; the search index's build filled 4 with
/// vector blocks it had already opened (bench/search-meaning.md, "A search server under 60 MiB").
const CACHE_BYTES: usize = 1 << 20;

/// redb's page cache for a bulk write (`nib import`, `nib reindex`, a bundle): a short-lived
/// process that writes postings all over the file. With [`CACHE_BYTES`] every insert reads its
/// branch and leaf pages again from the operating system (a fifth of the writer thread's time
/// was `pread`), and more of them the larger the notebook; 256 MiB holds a 10,000-page store's
/// hot pages (bench/findings.md, "Footprint, continued").
pub const BULK_CACHE_BYTES: usize = 256 << 20;

/// How often a bulk writer's commits are synced (see the module's documentation): an import
/// of 10,000 pages ran at a median 485 pages/s with every group synced, 658 this way
/// (bench/findings.md, "Footprint, third pass").
pub const BULK_SYNC_EVERY: Duration = Duration::from_secs(1);

/// At most this many queued transactions share one commit, which bounds the latency a
/// transaction adds to the others in its group.
const MAX_GROUP: usize = 64;

/// The first byte of an encoded item value; a new layout gets a new byte.
const VALUE_FORMAT: u8 = 1;
const FLAG_EXPIRES: u8 = 1;
const FLAG_GSI1: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    /// redb holds an exclusive lock on the file while it is open.
    #[error("the data directory is in use by another nib process (cannot lock {path})")]
    InUse {
        path: PathBuf,
        #[source]
        source: DatabaseError,
    },
    #[error("cannot open the store {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: DatabaseError,
    },
    #[error("cannot prepare the store's tables")]
    Init(#[source] redb::Error),
}

/// The redb-backed store. Cheap to clone; clones share the database and its writer.
#[derive(Clone)]
pub struct EmbeddedStore {
    shared: Arc<Shared>,
    /// The time expiry is judged by ([`nib_ports::is_live`]); each write takes its `now`
    /// when it is queued.
    clock: Arc<dyn Clock>,
}

struct Shared {
    db: Arc<Database>,
    /// The counters of `Store::write_counter`, by key prefix; few, registered at start.
    watched: Mutex<Vec<(&'static str, Arc<AtomicU64>)>>,
    /// Where writes queue for the writer thread. Taken on drop to stop the thread.
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
}

impl Drop for Shared {
    /// Stops the writer thread and waits for it, so the database file is closed (and its lock
    /// released) when the last clone of the store is dropped.
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore").finish_non_exhaustive()
    }
}

impl EmbeddedStore {
    /// Opens the store file, creating it if needed. Fails with [`EmbeddedError::InUse`] while
    /// another process has it open.
    pub fn open(path: &Path) -> Result<EmbeddedStore, EmbeddedError> {
        Self::open_with(path, CACHE_BYTES, None)
    }

    /// The store of a bulk writer, a process that writes much and then exits:
    /// [`BULK_CACHE_BYTES`] of page cache, and commits synced every [`BULK_SYNC_EVERY`] and
    /// when the store closes, not each one.
    pub fn open_bulk(path: &Path) -> Result<EmbeddedStore, EmbeddedError> {
        Self::open_with(path, BULK_CACHE_BYTES, Some(BULK_SYNC_EVERY))
    }

    fn open_with(
        path: &Path,
        cache_bytes: usize,
        sync_every: Option<Duration>,
    ) -> Result<EmbeddedStore, EmbeddedError> {
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(path)
            .map_err(|source| match source {
                DatabaseError::DatabaseAlreadyOpen => EmbeddedError::InUse {
                    path: path.to_owned(),
                    source,
                },
                source => EmbeddedError::Open {
                    path: path.to_owned(),
                    source,
                },
            })?;
        Self::init(db, sync_every)
    }

    /// A store that lives in memory only, for tests and throwaway runs.
    pub fn in_memory() -> EmbeddedStore {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .expect("an in-memory database always opens");
        Self::init(db, None).expect("an in-memory database always initialises")
    }

    /// Creates both tables up front, so read transactions can always open them, and starts the
    /// writer thread (`sync_every`: a bulk writer's lazy syncs).
    fn init(db: Database, sync_every: Option<Duration>) -> Result<EmbeddedStore, EmbeddedError> {
        let init = || -> Result<(), redb::Error> {
            let txn = db.begin_write()?;
            txn.open_table(ITEMS)?;
            txn.open_table(GSI1)?;
            txn.commit()?;
            Ok(())
        };
        init().map_err(EmbeddedError::Init)?;
        let db = Arc::new(db);
        let (jobs, queue) = mpsc::channel();
        let writer_db = db.clone();
        let writer = std::thread::Builder::new()
            .name("nib-store-writer".into())
            .spawn(move || write_loop(&writer_db, &queue, sync_every))
            .map_err(|e| EmbeddedError::Init(redb::StorageError::Io(e).into()))?;
        Ok(EmbeddedStore {
            shared: Arc::new(Shared {
                db,
                watched: Mutex::new(Vec::new()),
                jobs: Some(jobs),
                writer: Some(writer),
            }),
            clock: Arc::new(SystemClock),
        })
    }

    /// The same store, judging expiry by `clock` (the system clock by default).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> EmbeddedStore {
        self.clock = clock;
        self
    }

    /// Every key in the store, live or expired: the items' (pk, sk), then the index entries'
    /// (gsi1pk, gsi1sk). Tests use it to scan the whole store (the `Store` port has no scan).
    ///
    /// Nothing in nib calls it: it is public, and compiled into every build, only because the
    /// account-deletion tests (`tests/integration/account.rs`, another crate) must see every
    /// key left, and nothing else reads the file's key encoding.
    pub async fn all_keys(&self) -> Result<Vec<Vec<String>>, StoreError> {
        use redb::ReadableTable;
        self.blocking(|db| {
            let txn = db.begin_read().map_err(db_err)?;
            let mut out = Vec::new();
            let items = txn.open_table(ITEMS).map_err(db_err)?;
            for entry in items.iter().map_err(db_err)? {
                let (key, _) = entry.map_err(db_err)?;
                out.push(decode_key(key.value()).ok_or_else(|| corrupt("item key"))?);
            }
            let gsi = txn.open_table(GSI1).map_err(db_err)?;
            for entry in gsi.iter().map_err(db_err)? {
                let (key, _) = entry.map_err(db_err)?;
                out.push(decode_key(key.value()).ok_or_else(|| corrupt("gsi1 key"))?);
            }
            Ok(out)
        })
        .await
    }

    /// Runs blocking redb reads off the async runtime.
    async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    {
        let db = self.shared.db.clone();
        tokio::task::spawn_blocking(move || work(&db))
            .await
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?
    }

    /// Queues a write for the writer thread and waits for its commit.
    /// The write counters whose prefix `touches` says a write is under
    /// (`Store::write_counter`). Nothing is allocated for a write no counter watches.
    fn watching(&self, touches: impl Fn(&str) -> bool) -> Vec<Arc<AtomicU64>> {
        let watched = self
            .shared
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        watched
            .iter()
            .filter(|(prefix, _)| touches(prefix))
            .map(|(_, counter)| counter.clone())
            .collect()
    }

    /// Adds one to each counter once the write it counts has committed (or failed: a count
    /// too many only empties a cache), so a reader that sees the old count read the store
    /// before the write could be seen, and will not trust what it kept.
    fn counted(counters: Vec<Arc<AtomicU64>>) {
        for counter in counters {
            counter.fetch_add(1, Ordering::AcqRel);
        }
    }

    async fn write<T>(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> Job,
    ) -> Result<T, StoreError> {
        let (reply, result) = oneshot::channel();
        let stopped = || StoreError::Unavailable("the store's writer thread has stopped".into());
        self.shared
            .jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(job(reply))
            .map_err(|_| stopped())?;
        result.await.map_err(|_| stopped())?
    }
}

pub use nib_ports::SWEEP_EVERY_SECONDS;

impl EmbeddedStore {
    /// Deletes every expired item (and its index entry) now, by the store's clock; returns how
    /// many. The writer also sweeps by itself: with the first write after the store opens,
    /// then with the first write each [`SWEEP_EVERY_SECONDS`] after (expired items read as
    /// absent meanwhile, so a sweep changes what is stored, never what is seen).
    pub async fn sweep_expired(&self) -> Result<usize, StoreError> {
        let now = self.clock.unix();
        self.write(|reply| Job::Sweep { now, reply }).await
    }
}

/// A write waiting for the writer thread, with where to send its outcome.
enum Job {
    /// Delete every item expired at `now`.
    Sweep {
        now: i64,
        reply: oneshot::Sender<Result<usize, StoreError>>,
    },
    Transact {
        writes: Vec<Write>,
        /// The store clock's time when the write was asked for.
        now: i64,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Increment {
        pk: String,
        sk: String,
        by: u64,
        expires_at: i64,
        now: i64,
        reply: oneshot::Sender<Result<u64, StoreError>>,
    },
}

/// What one job of a group came to, before the group's commit.
enum Outcome {
    Transact(Result<(), StoreError>),
    Increment(Result<u64, StoreError>),
    Sweep(Result<usize, StoreError>),
}

impl Outcome {
    /// Splits off storage errors: only they can happen after a job started writing, so they
    /// end the whole group. Other errors belong to their job alone.
    fn or_fatal(self) -> Result<Outcome, StoreError> {
        match self {
            Outcome::Transact(Err(e @ StoreError::Unavailable(_)))
            | Outcome::Increment(Err(e @ StoreError::Unavailable(_)))
            | Outcome::Sweep(Err(e @ StoreError::Unavailable(_))) => Err(e),
            other => Ok(other),
        }
    }
}

/// Why a whole group failed, shared by every job in it: the original error is the cause.
#[derive(Debug, thiserror::Error)]
#[error("the store could not commit a group of writes")]
struct GroupFailed(#[source] Arc<StoreError>);

/// The writer thread: takes the queued jobs, applies them in one write transaction and commits.
fn write_loop(db: &Database, queue: &mpsc::Receiver<Job>, sync_every: Option<Duration>) {
    // The store-clock time of the last sweep; the first write after opening sweeps.
    let mut swept: Option<i64> = None;
    // Lazy syncs (a bulk writer): when the last one was, and whether a commit came since.
    let mut synced_at = Instant::now();
    let mut unsynced = false;
    loop {
        let received = match sync_every {
            Some(every) if unsynced => {
                match queue.recv_timeout(every.saturating_sub(synced_at.elapsed())) {
                    Ok(job) => Some(job),
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        // Idle for the interval: sync what was committed.
                        unsynced = !sync(db);
                        synced_at = Instant::now();
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => None,
                }
            }
            _ => queue.recv().ok(),
        };
        let Some(first) = received else { break };
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        let now = group.iter().map(Job::now).max().unwrap_or(i64::MIN);
        let sweep = swept.is_none_or(|at| now >= at.saturating_add(SWEEP_EVERY_SECONDS));
        if sweep {
            swept = Some(now);
        }
        let durable = sync_every.is_none_or(|every| synced_at.elapsed() >= every);
        match apply_group(db, &group, sweep.then_some(now), durable) {
            Ok(outcomes) => {
                if durable {
                    synced_at = Instant::now();
                }
                unsynced = !durable;
                for (job, outcome) in group.into_iter().zip(outcomes) {
                    // A caller that stopped waiting does not matter: the write is committed.
                    match (job, outcome) {
                        (Job::Transact { reply, .. }, Outcome::Transact(r)) => {
                            let _ = reply.send(r);
                        }
                        (Job::Increment { reply, .. }, Outcome::Increment(r)) => {
                            let _ = reply.send(r);
                        }
                        (Job::Sweep { reply, .. }, Outcome::Sweep(r)) => {
                            let _ = reply.send(r);
                        }
                        _ => unreachable!("outcomes follow the jobs' order and kinds"),
                    }
                }
            }
            Err(e) => {
                tracing::error!(error = %e, jobs = group.len(), "store write group failed");
                let e = Arc::new(e);
                let failed = || StoreError::Unavailable(Box::new(GroupFailed(e.clone())));
                for job in group {
                    match job {
                        Job::Transact { reply, .. } => {
                            let _ = reply.send(Err(failed()));
                        }
                        Job::Increment { reply, .. } => {
                            let _ = reply.send(Err(failed()));
                        }
                        Job::Sweep { reply, .. } => {
                            let _ = reply.send(Err(failed()));
                        }
                    }
                }
            }
        }
    }
    // The store is closing: what was committed lazily is synced now.
    if unsynced {
        sync(db);
    }
}

/// An empty commit with [`Durability::Immediate`], which takes the unsynced commits before it
/// to the disk. False (logged) when it fails: a crash would then lose them.
fn sync(db: &Database) -> bool {
    let synced = db
        .begin_write()
        .map_err(redb::Error::from)
        .and_then(|txn| txn.commit().map_err(redb::Error::from));
    if let Err(e) = &synced {
        tracing::error!(error = e as &dyn std::error::Error, "store sync failed");
    }
    synced.is_ok()
}

/// Applies a group in one write transaction. A job whose condition fails gets its own
/// `ConditionFailed` and writes nothing, while the others go ahead; a storage failure fails the
/// whole group, and then nothing of it is committed.
fn apply_group(
    db: &Database,
    group: &[Job],
    sweep: Option<i64>,
    durable: bool,
) -> Result<Vec<Outcome>, StoreError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(if durable {
        Durability::Immediate
    } else {
        Durability::None
    })
    .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
    let outcomes = {
        let mut items = txn.open_table(ITEMS).map_err(db_err)?;
        let mut gsi = txn.open_table(GSI1).map_err(db_err)?;
        if let Some(now) = sweep {
            // Expired items are absent to every read and condition already; this only frees
            // their space.
            let n = sweep_in(&mut items, &mut gsi, now)?;
            if n > 0 {
                tracing::info!(items = n, "swept expired items");
            }
        }
        let mut outcomes = Vec::with_capacity(group.len());
        for job in group {
            let outcome = match job {
                Job::Sweep { now, .. } => Outcome::Sweep(sweep_in(&mut items, &mut gsi, *now)),
                Job::Transact { writes, now, .. } => {
                    Outcome::Transact(transact_in(&mut items, &mut gsi, writes, *now))
                }
                Job::Increment {
                    pk,
                    sk,
                    by,
                    expires_at,
                    now,
                    ..
                } => Outcome::Increment(increment_in(
                    &mut items,
                    &mut gsi,
                    pk,
                    sk,
                    *by,
                    *expires_at,
                    *now,
                )),
            };
            outcomes.push(outcome.or_fatal()?);
        }
        outcomes
    };
    txn.commit().map_err(db_err)?;
    Ok(outcomes)
}

impl Job {
    /// The store-clock time the job was asked at.
    fn now(&self) -> i64 {
        match self {
            Job::Sweep { now, .. } | Job::Transact { now, .. } | Job::Increment { now, .. } => *now,
        }
    }
}

/// Deletes every item expired at `now`, with its index entry; returns how many.
fn sweep_in(
    items: &mut redb::Table<&'static [u8], &'static [u8]>,
    gsi: &mut redb::Table<&'static [u8], ()>,
    now: i64,
) -> Result<usize, StoreError> {
    // Only the value's header is looked at (`format | version | flags | [expires_at]`), so
    // a sweep reads no body it keeps.
    let expiry = |v: &[u8]| -> Option<i64> {
        (v.len() >= 18 && v[0] == VALUE_FORMAT && v[9] & FLAG_EXPIRES != 0)
            .then(|| i64::from_be_bytes(v[10..18].try_into().expect("8 bytes")))
    };
    let mut expired = Vec::new();
    for entry in redb::ReadableTable::iter(&*items).map_err(db_err)? {
        let (key, value) = entry.map_err(db_err)?;
        if !nib_ports::is_live(expiry(value.value()), now) {
            expired.push(key.value().to_vec());
        }
    }
    for key in &expired {
        let mut parts = decode_key(key).ok_or_else(|| corrupt("item key"))?;
        let (Some(sk), Some(pk)) = (parts.pop(), parts.pop()) else {
            return Err(corrupt("item key"));
        };
        delete_item(items, gsi, &pk, &sk)?;
    }
    Ok(expired.len())
}

/// One transaction inside the group's write transaction: every condition first, against the
/// state before this transaction, so a failure leaves nothing to undo; then every write.
fn transact_in(
    items: &mut redb::Table<&'static [u8], &'static [u8]>,
    gsi: &mut redb::Table<&'static [u8], ()>,
    writes: &[Write],
    now: i64,
) -> Result<(), StoreError> {
    // The new values of the counters added to, computed with the conditions so that nothing
    // is written when one of them cannot be.
    let mut counters = Vec::new();
    for (index, write) in writes.iter().enumerate() {
        let (pk, sk) = write.key();
        let cond = match write {
            Write::Put { cond, .. } | Write::Delete { cond, .. } | Write::Check { cond, .. } => {
                *cond
            }
            Write::Add { by, .. } => {
                let current =
                    read_item(items, &encode_key(&[pk, sk]))?.filter(|item| is_live(item, now));
                counters.push(added(pk, sk, current, *by, index)?);
                continue;
            }
        };
        if cond == Cond::None {
            continue;
        }
        let current = read_item(items, &encode_key(&[pk, sk]))?.filter(|item| is_live(item, now));
        if !holds(cond, current.as_ref()) {
            return Err(StoreError::ConditionFailed { index });
        }
    }
    for write in writes {
        match write {
            Write::Put { item, .. } => put_item(items, gsi, item)?,
            Write::Delete { pk, sk, .. } => delete_item(items, gsi, pk, sk)?,
            Write::Check { .. } | Write::Add { .. } => {}
        }
    }
    for item in &counters {
        put_item(items, gsi, item)?;
    }
    Ok(())
}

/// The counter item after adding `by` to `current` (absent: 0); `ConditionFailed { index }`
/// when it would go below 0.
fn added(
    pk: &str,
    sk: &str,
    current: Option<Item>,
    by: i64,
    index: usize,
) -> Result<Item, StoreError> {
    let (old, version) = match &current {
        Some(item) => (
            counter_value(item).ok_or_else(|| invalid(format!("({pk}, {sk}) is not a counter")))?,
            item.version + 1,
        ),
        None => (0, 1),
    };
    let sum = i128::from(old) + i128::from(by);
    if sum < 0 {
        return Err(StoreError::ConditionFailed { index });
    }
    let count =
        u64::try_from(sum).map_err(|_| invalid(format!("counter ({pk}, {sk}) would overflow")))?;
    Ok(Item {
        pk: pk.to_owned(),
        sk: sk.to_owned(),
        gsi1: None,
        version,
        expires_at: None,
        body: count.to_be_bytes().to_vec(),
    })
}

/// One counter increment inside the group's write transaction.
fn increment_in(
    items: &mut redb::Table<&'static [u8], &'static [u8]>,
    gsi: &mut redb::Table<&'static [u8], ()>,
    pk: &str,
    sk: &str,
    by: u64,
    expires_at: i64,
    now: i64,
) -> Result<u64, StoreError> {
    let current = read_item(items, &encode_key(&[pk, sk]))?.filter(|item| is_live(item, now));
    let (old, version, gsi1) = match current {
        Some(item) => {
            let old: [u8; 8] = item.body[..]
                .try_into()
                .map_err(|_| invalid(format!("({pk}, {sk}) is not a counter")))?;
            (u64::from_be_bytes(old), item.version + 1, item.gsi1)
        }
        None => (0, 1, None),
    };
    let count = old
        .checked_add(by)
        .ok_or_else(|| invalid(format!("counter ({pk}, {sk}) would overflow")))?;
    let item = Item {
        pk: pk.to_owned(),
        sk: sk.to_owned(),
        gsi1,
        version,
        expires_at: Some(expires_at),
        body: count.to_be_bytes().to_vec(),
    };
    put_item(items, gsi, &item)?;
    Ok(count)
}

/// Maps any redb failure to `Unavailable`, keeping it as the cause.
fn db_err(e: impl Into<redb::Error>) -> StoreError {
    StoreError::Unavailable(Box::new(e.into()))
}

/// A value in the store that does not decode: the file is damaged or not ours.
fn corrupt(what: &str) -> StoreError {
    StoreError::Unavailable(format!("corrupt store entry: {what}").into())
}

/// The port's one expiry rule ([`nib_ports::is_live`]): expired items read as absent.
fn is_live(item: &Item, now: i64) -> bool {
    item.is_live(now)
}

// ---- Key encoding -------------------------------------------------------------------------

/// Appends `s` escaped, without the terminator: the form of a prefix.
fn push_escaped(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        if b == 0 {
            out.extend_from_slice(&[0, 0xFF]);
        } else {
            out.push(b);
        }
    }
}

/// Appends `s` as one complete key part.
fn push_part(out: &mut Vec<u8>, s: &str) {
    push_escaped(out, s);
    out.extend_from_slice(&[0, 1]);
}

fn encode_key(parts: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 2).sum());
    for part in parts {
        push_part(&mut out, part);
    }
    out
}

/// Splits an encoded key back into its parts.
fn decode_key(mut key: &[u8]) -> Option<Vec<String>> {
    let mut parts = Vec::with_capacity(4);
    while !key.is_empty() {
        let (part, rest) = decode_part(key)?;
        parts.push(part);
        key = rest;
    }
    Some(parts)
}

/// Decodes the first part of an encoded key, and returns it with the rest of the key.
///
/// Every item a query returns goes through here, so it copies the runs between zero bytes in
/// one go (a part without an escaped zero is one copy into an exactly sized string) rather than
/// byte by byte, which grew each part one push at a time.
fn decode_part(mut key: &[u8]) -> Option<(String, &[u8])> {
    let mut part: Vec<u8> = Vec::new();
    loop {
        // Every part ends with `00 01`, so a part without a zero byte is malformed.
        let zero = key.iter().position(|&b| b == 0)?;
        part.extend_from_slice(&key[..zero]);
        match key.get(zero + 1) {
            Some(1) => return Some((String::from_utf8(part).ok()?, &key[zero + 2..])),
            Some(0xFF) => {
                part.push(0);
                key = &key[zero + 2..];
            }
            _ => return None,
        }
    }
}

/// The smallest byte string greater than every string that starts with `prefix`.
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

// ---- Value encoding -----------------------------------------------------------------------

/// `format | version u64 | flags | [expires_at i64] | [len u32, gsi1pk, len u32, gsi1sk] | body`,
/// integers big-endian. pk and sk are in the key.
fn encode_value(item: &Item) -> Vec<u8> {
    let gsi_len = item.gsi1.as_ref().map_or(0, |(p, s)| 8 + p.len() + s.len());
    let mut out = Vec::with_capacity(1 + 8 + 1 + 8 + gsi_len + item.body.len());
    out.push(VALUE_FORMAT);
    out.extend_from_slice(&item.version.to_be_bytes());
    let mut flags = 0;
    if item.expires_at.is_some() {
        flags |= FLAG_EXPIRES;
    }
    if item.gsi1.is_some() {
        flags |= FLAG_GSI1;
    }
    out.push(flags);
    if let Some(at) = item.expires_at {
        out.extend_from_slice(&at.to_be_bytes());
    }
    if let Some((gpk, gsk)) = &item.gsi1 {
        for s in [gpk, gsk] {
            out.extend_from_slice(&(s.len() as u32).to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
    }
    out.extend_from_slice(&item.body);
    out
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if bytes.len() < n {
        return None;
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Some(head)
}

fn take_string(bytes: &mut &[u8]) -> Option<String> {
    let len = u32::from_be_bytes(take(bytes, 4)?.try_into().ok()?) as usize;
    String::from_utf8(take(bytes, len)?.to_vec()).ok()
}

fn decode_value(pk: String, sk: String, mut bytes: &[u8]) -> Option<Item> {
    let b = &mut bytes;
    if take(b, 1)? != [VALUE_FORMAT] {
        return None;
    }
    let version = u64::from_be_bytes(take(b, 8)?.try_into().ok()?);
    let flags = take(b, 1)?[0];
    let expires_at = if flags & FLAG_EXPIRES != 0 {
        Some(i64::from_be_bytes(take(b, 8)?.try_into().ok()?))
    } else {
        None
    };
    let gsi1 = if flags & FLAG_GSI1 != 0 {
        Some((take_string(b)?, take_string(b)?))
    } else {
        None
    };
    Some(Item {
        pk,
        sk,
        gsi1,
        version,
        expires_at,
        body: b.to_vec(),
    })
}

/// The item stored under an `items` key, whether expired or not.
fn decode_item(key: &[u8], value: &[u8]) -> Result<Item, StoreError> {
    let mut parts = decode_key(key).ok_or_else(|| corrupt("item key"))?;
    if parts.len() != 2 {
        return Err(corrupt("item key"));
    }
    let sk = parts.pop().expect("two parts");
    let pk = parts.pop().expect("two parts");
    decode_value(pk, sk, value).ok_or_else(|| corrupt("item value"))
}

// ---- Table access shared by reads and writes ----------------------------------------------

/// The item under (pk, sk) in any table handle that can read `items`, expired or not.
fn read_item(
    table: &impl redb::ReadableTable<&'static [u8], &'static [u8]>,
    key: &[u8],
) -> Result<Option<Item>, StoreError> {
    match table.get(key).map_err(db_err)? {
        Some(value) => decode_item(key, value.value()).map(Some),
        None => Ok(None),
    }
}

fn holds(cond: Cond, live: Option<&Item>) -> bool {
    match cond {
        Cond::None => true,
        Cond::NotExists => live.is_none(),
        Cond::Exists => live.is_some(),
        Cond::Version(v) => live.is_some_and(|item| item.version == v),
    }
}

fn gsi_key(item: &Item) -> Option<Vec<u8>> {
    item.gsi1
        .as_ref()
        .map(|(gpk, gsk)| encode_key(&[gpk, gsk, &item.pk, &item.sk]))
}

/// Stores `item`, keeping `gsi1` in step with whatever it replaces.
fn put_item(
    items: &mut redb::Table<&'static [u8], &'static [u8]>,
    gsi: &mut redb::Table<&'static [u8], ()>,
    item: &Item,
) -> Result<(), StoreError> {
    let key = encode_key(&[&item.pk, &item.sk]);
    let old = match items
        .insert(&key[..], &encode_value(item)[..])
        .map_err(db_err)?
    {
        Some(old) => Some(decode_item(&key, old.value())?),
        None => None,
    };
    let old_gsi = old.as_ref().and_then(gsi_key);
    let new_gsi = gsi_key(item);
    if old_gsi != new_gsi {
        if let Some(old_gsi) = old_gsi {
            gsi.remove(&old_gsi[..]).map_err(db_err)?;
        }
        if let Some(new_gsi) = new_gsi {
            gsi.insert(&new_gsi[..], ()).map_err(db_err)?;
        }
    }
    Ok(())
}

/// Removes the item under (pk, sk) and its `gsi1` entry.
fn delete_item(
    items: &mut redb::Table<&'static [u8], &'static [u8]>,
    gsi: &mut redb::Table<&'static [u8], ()>,
    pk: &str,
    sk: &str,
) -> Result<(), StoreError> {
    let key = encode_key(&[pk, sk]);
    let old = match items.remove(&key[..]).map_err(db_err)? {
        Some(old) => Some(decode_item(&key, old.value())?),
        None => None,
    };
    if let Some(old_gsi) = old.as_ref().and_then(gsi_key) {
        gsi.remove(&old_gsi[..]).map_err(db_err)?;
    }
    Ok(())
}

// ---- Validation ---------------------------------------------------------------------------

fn invalid(msg: impl Into<String>) -> StoreError {
    StoreError::Invalid(msg.into())
}

// ---- Queries ------------------------------------------------------------------------------

/// The key range a query covers, before any cursor.
struct KeyRange {
    /// The encoded partition: every key of the range starts with it.
    partition: Vec<u8>,
    lower: Vec<u8>,
    /// Exclusive; `None` when unbounded.
    upper: Option<Vec<u8>>,
}

fn query_range(q: &Query) -> KeyRange {
    let partition = encode_key(&[&q.partition]);
    let mut lower = partition.clone();
    push_escaped(&mut lower, &q.prefix);
    let mut upper = prefix_end(&lower);
    if let Some(from) = &q.from {
        let mut from_key = partition.clone();
        push_part(&mut from_key, from);
        lower = lower.max(from_key);
    }
    if let Some(to) = &q.to {
        // Every key whose sort key is `to` is `partition | escaped(to) | 00 01 | ...`, and every
        // larger sort key encodes above `partition | escaped(to) | 00 02`.
        let mut to_end = partition.clone();
        push_escaped(&mut to_end, to);
        to_end.extend_from_slice(&[0, 2]);
        upper = Some(match upper {
            Some(upper) => upper.min(to_end),
            None => to_end,
        });
    }
    KeyRange {
        partition,
        lower,
        upper,
    }
}

fn run_query(db: &Database, q: &Query, now: i64) -> Result<QueryPage, StoreError> {
    if q.limit == 0 {
        return Err(invalid("query limit must be at least 1"));
    }
    let range = query_range(q);
    let after = match &q.after {
        Some(cursor) => {
            let key = CURSOR
                .decode(cursor)
                .map_err(|_| invalid("query cursor is not one this store returned"))?;
            if !key.starts_with(&range.partition) || decode_key(&key).is_none() {
                return Err(invalid("query cursor is not one this store returned"));
            }
            Some(key)
        }
        None => None,
    };
    let mut lower = Bound::Included(&range.lower[..]);
    let mut upper = match &range.upper {
        Some(upper) => Bound::Excluded(&upper[..]),
        None => Bound::Unbounded,
    };
    if let Some(after) = &after {
        if q.reverse {
            if range.upper.as_ref().is_none_or(|upper| after < upper) {
                upper = Bound::Excluded(&after[..]);
            }
        } else if *after >= range.lower {
            lower = Bound::Excluded(&after[..]);
        }
    }

    let txn = db.begin_read().map_err(db_err)?;
    let items = txn.open_table(ITEMS).map_err(db_err)?;
    let mut page = QueryPage::default();
    let mut last_key: Option<Vec<u8>> = None;

    // Walks the range of one table, turning each entry into the live item it stands for.
    let mut visit = |key: &[u8], value: Option<&[u8]>| -> Result<bool, StoreError> {
        let item = match value {
            // Every key of the range starts with the encoded partition, which is the items'
            // pk: only the sort key needs decoding (a query may return thousands of items).
            Some(value) => {
                let sk = key
                    .strip_prefix(&range.partition[..])
                    .and_then(decode_part)
                    .and_then(|(sk, rest)| rest.is_empty().then_some(sk))
                    .ok_or_else(|| corrupt("item key"))?;
                Some(
                    decode_value(q.partition.clone(), sk, value)
                        .ok_or_else(|| corrupt("item value"))?,
                )
            }
            None => {
                let parts = decode_key(key).ok_or_else(|| corrupt("gsi1 key"))?;
                let [_, _, pk, sk] = &parts[..] else {
                    return Err(corrupt("gsi1 key"));
                };
                read_item(&items, &encode_key(&[pk, sk]))?
            }
        };
        let Some(item) = item.filter(|item| is_live(item, now)) else {
            return Ok(true);
        };
        if page.items.len() == q.limit {
            // A live item beyond the page: there is more, so hand out a cursor.
            page.next = last_key.take().map(|k| CURSOR.encode(k));
            return Ok(false);
        }
        page.items.push(item);
        last_key = Some(key.to_vec());
        Ok(true)
    };

    match q.index {
        Index::Table => {
            let entries = items.range::<&[u8]>((lower, upper)).map_err(db_err)?;
            let entries: Box<dyn Iterator<Item = _>> = if q.reverse {
                Box::new(entries.rev())
            } else {
                Box::new(entries)
            };
            for entry in entries {
                let (key, value) = entry.map_err(db_err)?;
                if !visit(key.value(), Some(value.value()))? {
                    break;
                }
            }
        }
        Index::Gsi1 => {
            let gsi = txn.open_table(GSI1).map_err(db_err)?;
            let entries = gsi.range::<&[u8]>((lower, upper)).map_err(db_err)?;
            let entries: Box<dyn Iterator<Item = _>> = if q.reverse {
                Box::new(entries.rev())
            } else {
                Box::new(entries)
            };
            for entry in entries {
                let (key, _) = entry.map_err(db_err)?;
                if !visit(key.value(), None)? {
                    break;
                }
            }
        }
    }
    Ok(page)
}

/// Point reads of at most this many keys run on the calling thread (see [`read_keys`]).
const INLINE_READ_KEYS: usize = 64;

/// The live items under `keys`, from one read transaction (one consistent snapshot).
///
/// Point reads of a few keys run right where they are called, not on tokio's blocking pool: a
/// redb lookup takes microseconds, less than handing the work to a pool thread and waking the
/// task again (two thread switches), which every `get_page` and every token check paid several
/// times per request. Queries, which may walk thousands of items, and large batches still go to
/// the blocking pool.
fn read_keys(db: &Database, keys: &[Vec<u8>], now: i64) -> Result<Vec<Option<Item>>, StoreError> {
    let txn = db.begin_read().map_err(db_err)?;
    let items = txn.open_table(ITEMS).map_err(db_err)?;
    keys.iter()
        .map(|key| Ok(read_item(&items, key)?.filter(|item| is_live(item, now))))
        .collect()
}

#[async_trait]
impl Store for EmbeddedStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let key = encode_key(&[pk, sk]);
        let mut items = read_keys(&self.shared.db, &[key], self.clock.unix())?;
        Ok(items.pop().flatten())
    }

    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError> {
        let keys: Vec<Vec<u8>> = keys.iter().map(|(pk, sk)| encode_key(&[pk, sk])).collect();
        let now = self.clock.unix();
        if keys.len() <= INLINE_READ_KEYS {
            return read_keys(&self.shared.db, &keys, now);
        }
        self.blocking(move |db| read_keys(db, &keys, now)).await
    }

    /// On the calling thread, in one read transaction, one item at a time: each is copied out
    /// of the database only after the previous one was handed over (search opens its vector
    /// blocks this way, ~230 KB each at 10,000 pages, instead of holding all 96 sealed at
    /// once). It takes about as long as the items take to copy, a few milliseconds at most.
    async fn batch_get_each(
        &self,
        keys: &[(String, String)],
        each: &mut (dyn FnMut(usize, Item) + Send),
    ) -> Result<(), StoreError> {
        let now = self.clock.unix();
        let txn = self.shared.db.begin_read().map_err(db_err)?;
        let items = txn.open_table(ITEMS).map_err(db_err)?;
        for (i, (pk, sk)) in keys.iter().enumerate() {
            if let Some(item) =
                read_item(&items, &encode_key(&[pk, sk]))?.filter(|item| is_live(item, now))
            {
                each(i, item);
            }
        }
        Ok(())
    }

    async fn query(&self, query: &Query) -> Result<QueryPage, StoreError> {
        let query = query.clone();
        let now = self.clock.unix();
        self.blocking(move |db| run_query(db, &query, now)).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        nib_ports::validate_writes(&writes)?;
        if writes.is_empty() {
            return Ok(());
        }
        let now = self.clock.unix();
        let counters = self.watching(|prefix| writes.iter().any(|w| w.key().0.starts_with(prefix)));
        let done = self
            .write(|reply| Job::Transact { writes, now, reply })
            .await;
        Self::counted(counters);
        done
    }

    async fn increment(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
    ) -> Result<u64, StoreError> {
        nib_ports::validate_key(pk, sk)?;
        let counters = self.watching(|prefix| pk.starts_with(prefix));
        let (pk, sk) = (pk.to_owned(), sk.to_owned());
        let now = self.clock.unix();
        let done = self
            .write(|reply| Job::Increment {
                pk,
                sk,
                by,
                expires_at,
                now,
                reply,
            })
            .await;
        Self::counted(counters);
        done
    }

    /// This process is the store's only writer (the file is locked), so every write passes
    /// here and is counted.
    fn write_counter(&self, prefix: &'static str) -> Option<Arc<AtomicU64>> {
        let mut watched = self
            .shared
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((_, counter)) = watched.iter().find(|(p, _)| *p == prefix) {
            return Some(counter.clone());
        }
        let counter = Arc::new(AtomicU64::new(0));
        watched.push((prefix, counter.clone()));
        Some(counter)
    }
}

#[cfg(test)]
mod tests {
    //! The store conformance suite runs on this store from `nib-testkit`
    //! (`testkit/tests/library/embedded.rs`); these are the embedded store's own checks.

    use super::*;

    #[test]
    fn a_second_open_reports_the_directory_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nib.redb");
        let _first = EmbeddedStore::open(&path).unwrap();
        let err = EmbeddedStore::open(&path).unwrap_err();
        assert!(matches!(err, EmbeddedError::InUse { .. }), "{err:?}");
        assert!(err.to_string().contains("in use by another nib process"));
    }

    #[tokio::test]
    async fn data_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nib.redb");
        let item = Item {
            pk: "U#a".into(),
            sk: "PAGE#1".into(),
            gsi1: Some(("U#a#PAGES".into(), "2024-01-01#1".into())),
            version: 1,
            expires_at: None,
            body: b"body".to_vec(),
        };
        {
            let store = EmbeddedStore::open(&path).unwrap();
            store.put(item.clone(), Cond::NotExists).await.unwrap();
        }
        let store = EmbeddedStore::open(&path).unwrap();
        assert_eq!(
            store.get("U#a", "PAGE#1").await.unwrap(),
            Some(item.clone())
        );
        let page = store.query(&Query::gsi1("U#a#PAGES", "")).await.unwrap();
        assert_eq!(page.items, vec![item]);
    }

    /// A bulk writer's commits are not each synced, and the process sees each of them at once;
    /// closing the store syncs them, so all of them are there when the file is opened again.
    #[tokio::test]
    async fn a_bulk_writers_lazy_commits_are_synced_when_it_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nib.redb");
        let item = |n: usize| Item {
            pk: "U#a".into(),
            sk: format!("PAGE#{n:03}"),
            gsi1: None,
            version: 1,
            expires_at: None,
            body: vec![n as u8; 64],
        };
        {
            let store = EmbeddedStore::open_bulk(&path).unwrap();
            // One after the other: each its own commit.
            for n in 0..50 {
                store.put(item(n), Cond::NotExists).await.unwrap();
            }
            // Read back before any sync: the same process sees every commit.
            let page = store.query(&Query::table("U#a", "PAGE#")).await.unwrap();
            assert_eq!(page.items.len(), 50);
        }
        let store = EmbeddedStore::open(&path).unwrap();
        let page = store.query(&Query::table("U#a", "PAGE#")).await.unwrap();
        assert_eq!(page.items, (0..50).map(item).collect::<Vec<_>>());
    }

    #[test]
    fn key_encoding_preserves_order_and_round_trips() {
        let strings = [
            "",
            "a",
            "a\0",
            "a\0b",
            "a\x01",
            "ab",
            "b",
            "é",
            "\u{10000}",
            "a#b",
        ];
        for x in strings {
            for y in strings {
                for (x2, y2) in [(x, "z"), (x, ""), ("q", y)] {
                    let a = encode_key(&[x, x2]);
                    let b = encode_key(&[y, y2]);
                    let expected =
                        (x.as_bytes(), x2.as_bytes()).cmp(&(y.as_bytes(), y2.as_bytes()));
                    assert_eq!(a.cmp(&b), expected, "{x:?},{x2:?} vs {y:?},{y2:?}");
                }
            }
            assert_eq!(decode_key(&encode_key(&[x, "s"])).unwrap(), vec![x, "s"]);
        }
        assert!(decode_key(&[b'a', 0]).is_none());
        assert!(decode_key(b"a").is_none());
    }

    #[test]
    fn values_round_trip() {
        for item in [
            Item {
                pk: "p".into(),
                sk: "s".into(),
                gsi1: None,
                version: 0,
                expires_at: None,
                body: vec![],
            },
            Item {
                pk: "p\0".into(),
                sk: "s".into(),
                gsi1: Some(("g".into(), "".into())),
                version: u64::MAX,
                expires_at: Some(-5),
                body: vec![0, 1, 2],
            },
        ] {
            let key = encode_key(&[&item.pk, &item.sk]);
            assert_eq!(decode_item(&key, &encode_value(&item)).unwrap(), item);
        }
    }
}
