//! Two implementations of the [`RateLimiter`] port, both fixed windows keyed by
//! `(key, window length, window index)` where the index is `now / secs`:
//!
//! - [`InMemoryRateLimiter`]: one process's counters in memory (local mode), bounded.
//! - [`StoreRateLimiter`]: one counter item per window through [`Store::increment`], which is
//!   atomic in every store (DynamoDB's `ADD` update, redb's single writer). The item is
//!   `RL#{key}#{secs}#{index}` / `RL` and expires by TTL a minute after its window ends, so
//!   nothing ever has to clean up. This is what the AWS back end uses; it works over any store.
//!
//! The store judges an item's expiry by its own clock, so the limiter's clock must agree with
//! it (both are real time outside tests).
//!
//! Fixed windows let a client send up to twice the limit across a window boundary; in exchange a
//! hit costs one atomic write per window and no read, and the count is exact under concurrency.

use std::cmp::Reverse;
use std::collections::hash_map::RandomState;
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::ports::{Clock, RateDecision, RateLimitError, RateLimiter, Store, Window};

/// The partition-key prefix of every counter item of [`StoreRateLimiter`].
pub const COUNTER_PREFIX: &str = "RL#";
/// How long a counter item outlives its window (DynamoDB deletes expired items lazily anyway).
const TTL_SLACK_SECS: u64 = 60;
/// The in-memory limiter's default capacity: counters (one per key and window length) kept at
/// most, about 100 bytes each.
pub const DEFAULT_CAPACITY: usize = 100_000;
/// Shards of the in-memory limiter: keys hash to one, so hits on different keys rarely wait for
/// each other (`/mcp` and the sign-in page share the limiter).
const SHARDS: usize = 16;
/// Ended windows dropped per hit, at most: bounded work under a shard's lock, and more than the
/// windows a hit can start, so the dead never pile up.
const PRUNE_PER_HIT: usize = 8;

fn window_index(now: i64, window: Window) -> u64 {
    (now.max(0) as u64) / window.secs.max(1)
}

fn limited(now: i64, window: Window, index: u64) -> RateDecision {
    let end = (index + 1) * window.secs.max(1);
    RateDecision::Limited {
        window,
        retry_after_secs: end.saturating_sub(now.max(0) as u64).max(1),
    }
}

/// A counter's name: the key and the window length.
type CounterName = (Arc<str>, u64);

/// The count of one key in its current window.
struct Slot {
    index: u64,
    count: u64,
    /// When the window ends (unix seconds): `(index + 1) * secs`.
    end: u64,
}

/// One shard of the in-memory limiter: its counters, and when each counter's window ends.
#[derive(Default)]
struct Shard {
    counters: HashMap<CounterName, Slot>,
    /// `(end, counter)` for every window started, soonest end first. An entry whose counter has
    /// moved on to a later window (or is gone) is stale and skipped when it comes up; a stale
    /// entry's end is always past, so pruning soon drops it.
    ends: BinaryHeap<Reverse<(u64, CounterName)>>,
}

impl Shard {
    /// Drops up to `budget` windows that ended by `now`, soonest first: O(budget · log n).
    fn prune(&mut self, now: u64, budget: usize) {
        for _ in 0..budget {
            match self.ends.peek() {
                Some(Reverse((end, _))) if *end <= now => {}
                _ => return,
            }
            let Some(Reverse((end, name))) = self.ends.pop() else {
                return;
            };
            if self.counters.get(&name).is_some_and(|s| s.end == end) {
                self.counters.remove(&name);
            }
        }
    }

    /// Makes room for one more counter: drops the one whose window ends soonest (the one that
    /// would be forgotten first anyway), skipping stale entries.
    fn evict_one(&mut self) {
        while let Some(Reverse((end, name))) = self.ends.pop() {
            if self.counters.get(&name).is_some_and(|s| s.end == end) {
                self.counters.remove(&name);
                return;
            }
        }
    }
}

/// Counters in this process's memory, in [`SHARDS`] shards each behind its own mutex (a key
/// always lands in the same shard, so counts stay exact under concurrency).
///
/// Memory is bounded: at most `capacity` counters in all (one per key and window length).
/// Every hit first drops up to [`PRUNE_PER_HIT`] windows that have ended, soonest first, from
/// a heap ordered by window end, so ended windows go away without a pass over the map; when a
/// shard is full anyway (more live keys than the capacity), a new key evicts the counter whose
/// window ends soonest. Only that eviction can lose a count, so an attacker who can mint keys
/// faster than windows end can at worst reset counters early, never grow the process. Work
/// under a lock is O(log n) per hit.
pub struct InMemoryRateLimiter {
    clock: Arc<dyn Clock>,
    shards: Vec<Mutex<Shard>>,
    shard_capacity: usize,
    hasher: RandomState,
}

impl InMemoryRateLimiter {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self::with_capacity(clock, DEFAULT_CAPACITY)
    }

    /// A limiter that keeps at most `capacity` counters (rounded up to a multiple of the
    /// shard count).
    pub fn with_capacity(clock: Arc<dyn Clock>, capacity: usize) -> Self {
        InMemoryRateLimiter {
            clock,
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_capacity: capacity.div_ceil(SHARDS).max(1),
            hasher: RandomState::new(),
        }
    }

    /// The counters held now (each key and window length is one).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().expect("rate limiter lock").counters.len())
            .sum()
    }

    /// True when no counter is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl RateLimiter for InMemoryRateLimiter {
    /// `n` hits as one step per window, under the shard's lock.
    async fn hit_many(
        &self,
        key: &str,
        windows: &[Window],
        n: u64,
    ) -> Result<RateDecision, RateLimitError> {
        let now = self.clock.unix();
        let unix = now.max(0) as u64;
        let shard = &self.shards[(self.hasher.hash_one(key) % SHARDS as u64) as usize];
        let mut shard = shard.lock().expect("rate limiter lock");
        shard.prune(unix, PRUNE_PER_HIT.max(2 * windows.len()));
        let key: Arc<str> = Arc::from(key);
        for &window in windows {
            let index = window_index(now, window);
            let end = (index + 1) * window.secs.max(1);
            let name = (key.clone(), window.secs);
            if !shard.counters.contains_key(&name) && shard.counters.len() >= self.shard_capacity {
                shard.evict_one();
            }
            let Shard { counters, ends } = &mut *shard;
            let slot = counters.entry(name.clone()).or_insert(Slot {
                index,
                count: 0,
                end,
            });
            if slot.count == 0 || slot.index != index {
                *slot = Slot {
                    index,
                    count: 0,
                    end,
                };
                ends.push(Reverse((end, name)));
            }
            slot.count = slot.count.saturating_add(n);
            if slot.count > window.max {
                return Ok(limited(now, window, index));
            }
        }
        Ok(RateDecision::Allowed)
    }
}

/// Counter items in the store, one per key and window.
pub struct StoreRateLimiter {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

impl StoreRateLimiter {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        StoreRateLimiter { store, clock }
    }
}

#[async_trait]
impl RateLimiter for StoreRateLimiter {
    /// `n` hits as one atomic increment by `n` per window: a prompt or a batch costs the same
    /// writes as one call.
    async fn hit_many(
        &self,
        key: &str,
        windows: &[Window],
        n: u64,
    ) -> Result<RateDecision, RateLimitError> {
        let now = self.clock.unix();
        for &window in windows {
            let index = window_index(now, window);
            let pk = format!("{COUNTER_PREFIX}{key}#{}#{index}", window.secs);
            let expires_at = ((index + 1) * window.secs.max(1) + TTL_SLACK_SECS) as i64;
            let count = self.store.increment(&pk, "RL", n, expires_at).await?;
            if count > window.max {
                return Ok(limited(now, window, index));
            }
        }
        Ok(RateDecision::Allowed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::adapters::embedded::EmbeddedStore;

    struct TestClock(AtomicI64);

    impl Clock for TestClock {
        fn now(&self) -> SystemTime {
            SystemTime::UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
        }
    }

    /// An hour boundary in the future: counter items expire by the store's own clock (real
    /// time), so the test clock must not be in the past.
    const BASE: i64 = 4_000_000_000 / 3600 * 3600;
    const MINUTE: Window = Window { secs: 60, max: 3 };
    const HOUR: Window = Window { secs: 3600, max: 5 };

    /// The same script for both limiters: three hits pass, the fourth is refused until the
    /// minute ends, then the hour's limit bites; other keys are unaffected.
    async fn check(limiter: &dyn RateLimiter, clock: &TestClock) {
        clock.0.store(BASE + 10, Ordering::SeqCst);
        for _ in 0..3 {
            assert_eq!(
                limiter.hit("a", &[MINUTE, HOUR]).await.unwrap(),
                RateDecision::Allowed
            );
        }
        assert_eq!(
            limiter.hit("a", &[MINUTE, HOUR]).await.unwrap(),
            RateDecision::Limited {
                window: MINUTE,
                retry_after_secs: 50
            }
        );
        assert_eq!(
            limiter.hit("b", &[MINUTE, HOUR]).await.unwrap(),
            RateDecision::Allowed
        );
        clock.0.store(BASE + 60, Ordering::SeqCst);
        for _ in 0..2 {
            assert_eq!(
                limiter.hit("a", &[MINUTE, HOUR]).await.unwrap(),
                RateDecision::Allowed
            );
        }
        assert_eq!(
            limiter.hit("a", &[MINUTE, HOUR]).await.unwrap(),
            RateDecision::Limited {
                window: HOUR,
                retry_after_secs: 3540
            }
        );
    }

    #[tokio::test]
    async fn in_memory_windows() {
        let clock = Arc::new(TestClock(AtomicI64::new(0)));
        let limiter = InMemoryRateLimiter::new(clock.clone());
        check(&limiter, &clock).await;
    }

    /// However many keys are hit, the in-memory limiter holds at most its capacity (the old
    /// one swept only past 10,000 counters, and kept every live one), and the counts of the
    /// keys it holds stay exact.
    #[tokio::test]
    async fn in_memory_counters_stay_within_capacity() {
        let clock = Arc::new(TestClock(AtomicI64::new(BASE)));
        let limiter = InMemoryRateLimiter::with_capacity(clock.clone(), 64);
        for i in 0..5_000 {
            let key = format!("user-{i}");
            assert_eq!(
                limiter.hit(&key, &[MINUTE, HOUR]).await.unwrap(),
                RateDecision::Allowed
            );
            assert!(
                limiter.len() <= 64,
                "{} counters after {i} keys",
                limiter.len()
            );
        }
        // A key hit again right away still counts exactly.
        for _ in 0..3 {
            assert_eq!(
                limiter.hit("again", &[MINUTE]).await.unwrap(),
                RateDecision::Allowed
            );
        }
        assert!(matches!(
            limiter.hit("again", &[MINUTE]).await.unwrap(),
            RateDecision::Limited { .. }
        ));
    }

    /// Ended windows are dropped by later hits, soonest first and a few per hit, without a
    /// pass over the whole map; a counter whose window restarted is not dropped by its old
    /// window's entry.
    #[test]
    fn ended_windows_are_pruned_a_few_per_hit() {
        let mut shard = Shard::default();
        let name = |i: u64| (Arc::<str>::from(format!("k{i}")), 60);
        for i in 0..20 {
            shard.counters.insert(
                name(i),
                Slot {
                    index: i,
                    count: 1,
                    end: (i + 1) * 60,
                },
            );
            shard.ends.push(Reverse(((i + 1) * 60, name(i))));
        }
        // k0 restarted in a later window: its first entry is stale.
        shard.counters.get_mut(&name(0)).unwrap().end = 5000;
        shard.ends.push(Reverse((5000, name(0))));
        shard.prune(600, 4);
        assert_eq!(
            shard.counters.len(),
            17,
            "three ended windows and one stale entry"
        );
        assert!(shard.counters.contains_key(&name(0)));
        shard.prune(600, 100);
        // Windows ending at or before 600: k1..k9 are gone, k10.. and the restarted k0 stay.
        assert_eq!(shard.counters.len(), 11);
        assert!(!shard.counters.contains_key(&name(9)));
        assert!(shard.counters.contains_key(&name(10)));
        shard.evict_one();
        assert!(
            !shard.counters.contains_key(&name(10)),
            "the soonest end goes first"
        );
    }

    #[tokio::test]
    async fn store_windows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        let clock = Arc::new(TestClock(AtomicI64::new(0)));
        let limiter = StoreRateLimiter::new(store, clock.clone());
        check(&limiter, &clock).await;
    }

    /// The in-memory limiter and the store's (over an embedded store in a temporary folder,
    /// kept while the returned guard lives), both at [`BASE`].
    fn both_limiters() -> (tempfile::TempDir, Vec<Arc<dyn RateLimiter>>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        let clock = Arc::new(TestClock(AtomicI64::new(BASE)));
        let limiters: Vec<Arc<dyn RateLimiter>> = vec![
            Arc::new(InMemoryRateLimiter::new(clock.clone())),
            Arc::new(StoreRateLimiter::new(store, clock)),
        ];
        (dir, limiters)
    }

    /// `n` hits in one step count `n`, and pass only when all of them fit, in both
    /// implementations (the store's is one increment by `n` per window).
    #[tokio::test]
    async fn many_hits_count_as_many() {
        let (_dir, limiters) = both_limiters();
        for limiter in limiters {
            let allowed = |d: RateDecision| d == RateDecision::Allowed;
            assert!(allowed(limiter.hit_many("a", &[MINUTE], 2).await.unwrap()));
            assert!(allowed(limiter.hit("a", &[MINUTE]).await.unwrap()));
            assert!(!allowed(limiter.hit("a", &[MINUTE]).await.unwrap()));
            assert!(!allowed(limiter.hit_many("b", &[MINUTE], 4).await.unwrap()));
            assert!(allowed(limiter.hit_many("c", &[MINUTE], 3).await.unwrap()));
        }
    }

    /// 200 concurrent hits on a limit of 60: exactly 60 pass, in both implementations.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn exact_under_concurrency() {
        let (_dir, limiters) = both_limiters();
        let limit = [Window {
            secs: 3600,
            max: 60,
        }];
        for limiter in limiters {
            let hits = (0..200).map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move { limiter.hit("k", &limit).await.unwrap() })
            });
            let results = futures::future::join_all(hits).await;
            let allowed = results
                .into_iter()
                .filter(|r| *r.as_ref().unwrap() == RateDecision::Allowed)
                .count();
            assert_eq!(allowed, 60);
        }
    }
}
