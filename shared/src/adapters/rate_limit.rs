//! Two implementations of the [`RateLimiter`] port, both fixed windows keyed by
//! `(key, window length, window index)` where the index is `now / secs`:
//!
//! - [`InMemoryRateLimiter`]: one process's counters behind a mutex (local mode).
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::ports::{Clock, RateDecision, RateLimitError, RateLimiter, Store, Window};

/// How long a counter item outlives its window (DynamoDB deletes expired items lazily anyway).
const TTL_SLACK_SECS: u64 = 60;
/// Above this many counters, the in-memory limiter drops those of past windows.
const PRUNE_ABOVE: usize = 10_000;

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

/// Counters in this process's memory.
pub struct InMemoryRateLimiter {
    clock: Arc<dyn Clock>,
    /// (key, window secs) -> (window index, hits in it).
    counters: Mutex<HashMap<(String, u64), (u64, u64)>>,
}

impl InMemoryRateLimiter {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        InMemoryRateLimiter {
            clock,
            counters: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl RateLimiter for InMemoryRateLimiter {
    async fn hit(&self, key: &str, windows: &[Window]) -> Result<RateDecision, RateLimitError> {
        let now = self.clock.unix();
        let mut counters = self.counters.lock().expect("rate limiter lock");
        if counters.len() > PRUNE_ABOVE {
            counters.retain(|(_, secs), (index, _)| {
                *index
                    >= window_index(
                        now,
                        Window {
                            secs: *secs,
                            max: 0,
                        },
                    )
            });
        }
        for &window in windows {
            let index = window_index(now, window);
            let slot = counters
                .entry((key.to_owned(), window.secs))
                .or_insert((index, 0));
            if slot.0 != index {
                *slot = (index, 0);
            }
            slot.1 += 1;
            if slot.1 > window.max {
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
    async fn hit(&self, key: &str, windows: &[Window]) -> Result<RateDecision, RateLimitError> {
        let now = self.clock.unix();
        for &window in windows {
            let index = window_index(now, window);
            let pk = format!("RL#{key}#{}#{index}", window.secs);
            let expires_at = ((index + 1) * window.secs.max(1) + TTL_SLACK_SECS) as i64;
            let count = self.store.increment(&pk, "RL", 1, expires_at).await?;
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

    #[tokio::test]
    async fn store_windows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        let clock = Arc::new(TestClock(AtomicI64::new(0)));
        let limiter = StoreRateLimiter::new(store, clock.clone());
        check(&limiter, &clock).await;
    }

    /// 200 concurrent hits on a limit of 60: exactly 60 pass, in both implementations.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn exact_under_concurrency() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        let clock = Arc::new(TestClock(AtomicI64::new(BASE)));
        let limiters: Vec<Arc<dyn RateLimiter>> = vec![
            Arc::new(InMemoryRateLimiter::new(clock.clone())),
            Arc::new(StoreRateLimiter::new(store, clock.clone())),
        ];
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
