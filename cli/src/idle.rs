//! An idle `nib serve` gives memory back (issue 31, target 7).
//!
//! Under load the process's caches fill to their bounds (the open search indexes' posting
//! lists and opened pages, the kept answers) and the allocator keeps what requests freed for
//! the next ones. After [`IDLE_AFTER`] without a request, [`run`] drops those caches
//! ([`nib::notebook::Notebook::release_caches`]: the indexes' statistics and vectors stay, so
//! the first query after reads only its terms' postings again) and asks the allocator to
//! return its free pages to the system. Once per quiet period: the next request starts a new
//! one.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nib::notebook::Notebook;

/// How long without a request before the caches are dropped.
pub const IDLE_AFTER: Duration = Duration::from_secs(30);
/// How often the request count is looked at.
const CHECK_EVERY: Duration = Duration::from_secs(5);

/// The requests the server has answered so far (counted by the router's outermost layer).
#[derive(Clone, Default)]
pub struct Activity(Arc<AtomicU64>);

impl Activity {
    pub fn saw_request(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Decides from the request count at each check when a quiet period is long enough.
struct Quiet {
    last_count: u64,
    quiet_checks: u32,
    needed: u32,
    released: bool,
}

impl Quiet {
    fn new(needed: u32) -> Quiet {
        Quiet {
            last_count: 0,
            quiet_checks: 0,
            needed: needed.max(1),
            released: false,
        }
    }

    /// Whether to release now: true once per quiet period, at the check that completes
    /// `needed` checks without a request.
    fn check(&mut self, count: u64) -> bool {
        if count != self.last_count {
            self.last_count = count;
            self.quiet_checks = 0;
            self.released = false;
            return false;
        }
        self.quiet_checks = self.quiet_checks.saturating_add(1);
        if self.released || self.quiet_checks < self.needed {
            return false;
        }
        self.released = true;
        true
    }
}

/// Watches `activity` for as long as it runs (the server aborts it when it stops).
pub async fn run(activity: Activity, notebook: Arc<Notebook>) {
    let needed = (IDLE_AFTER.as_secs() / CHECK_EVERY.as_secs()) as u32;
    let mut quiet = Quiet::new(needed);
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if quiet.check(activity.count()) {
            let cache_bytes = notebook.release_caches();
            let trimmed = return_free_memory();
            tracing::info!(cache_bytes, trimmed, "idle: caches dropped");
        }
    }
}

/// Asks glibc's allocator to give its free pages back to the system (`malloc_trim`);
/// whether it could.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn return_free_memory() -> bool {
    // SAFETY: malloc_trim takes the allocator's own locks and only releases memory no
    // allocation holds; any `pad` is valid (0: keep nothing spare at the heap's top).
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_free_memory() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_period_releases_once_and_a_request_starts_another() {
        let mut quiet = Quiet::new(3);
        // Requests keep coming: never.
        assert!(!(1..=10).any(|n| quiet.check(n)));
        // Two quiet checks are not enough, the third is, and only once.
        assert!(!quiet.check(10));
        assert!(!quiet.check(10));
        assert!(quiet.check(10));
        assert!(!quiet.check(10));
        assert!(!quiet.check(10));
        // A request, then quiet again: released again after three more checks.
        assert!(!quiet.check(11));
        assert!(!quiet.check(11));
        assert!(!quiet.check(11));
        assert!(quiet.check(11));
    }

    #[test]
    fn a_server_that_never_had_a_request_releases_once() {
        let mut quiet = Quiet::new(2);
        assert!(!quiet.check(0));
        assert!(quiet.check(0));
        assert!(!quiet.check(0));
    }
}
