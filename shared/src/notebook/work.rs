//! The work pool: where the CPU-heavy work a request brings runs (checking and rendering a
//! PDF, decoding an image, reading a page with the OCR engine, inflating a bundle), so that it
//! never runs on the async runtime's request workers, and at most one job per core runs at
//! once, however many uploads arrive together. A job waits for a slot; the request that
//! brought it waits too, while the workers go on serving everything else. Memory is bounded
//! the same way: each job's own caps (a PDF's decoded streams, an image's pixels, a bundle's
//! entries) times the number of slots.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// One slot per core; cheap to clone (the slots are shared).
#[derive(Clone)]
pub struct WorkPool {
    slots: Arc<Semaphore>,
    size: usize,
}

impl Default for WorkPool {
    fn default() -> Self {
        WorkPool::per_core()
    }
}

impl WorkPool {
    /// A pool of `size` slots (at least one).
    pub fn new(size: usize) -> WorkPool {
        let size = size.max(1);
        WorkPool {
            slots: Arc::new(Semaphore::new(size)),
            size,
        }
    }

    /// One slot per core of this machine.
    pub fn per_core() -> WorkPool {
        WorkPool::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// How many jobs may run at once.
    pub fn size(&self) -> usize {
        self.size
    }

    /// How many slots are free now.
    pub fn free(&self) -> usize {
        self.slots.available_permits()
    }

    /// A slot, held while a job awaits work done elsewhere (the OCR engine's own threads, a
    /// remote engine): the slot still counts it.
    pub async fn slot(&self) -> OwnedSemaphorePermit {
        self.slots
            .clone()
            .acquire_owned()
            .await
            .expect("the work pool's semaphore is never closed")
    }

    /// Runs `job` on a blocking thread once a slot is free. A job that panicked panics here.
    pub async fn run<T: Send + 'static>(&self, job: impl FnOnce() -> T + Send + 'static) -> T {
        let slot = self.slot().await;
        let done = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            job()
        })
        .await;
        match done {
            Ok(value) => value,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With two slots a third job starts only when one of the two has finished.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_waits_for_a_free_slot() {
        let pool = WorkPool::new(2);
        let (started, starts) = std::sync::mpsc::channel::<usize>();
        let mut gates = Vec::new();
        let mut jobs = Vec::new();
        for n in 0..3 {
            let (gate, wait) = std::sync::mpsc::channel::<()>();
            gates.push(gate);
            let (pool, started) = (pool.clone(), started.clone());
            jobs.push(tokio::spawn(async move {
                pool.run(move || {
                    started.send(n).unwrap();
                    wait.recv().unwrap();
                })
                .await
            }));
            if n < 2 {
                // The first two take the slots (in order, so the third is the one left out).
                assert_eq!(starts.recv().unwrap(), n);
            }
        }
        assert_eq!(pool.free(), 0);
        assert!(starts.try_recv().is_err(), "the third job waits");
        gates[0].send(()).unwrap();
        assert_eq!(starts.recv().unwrap(), 2, "it starts once a slot is free");
        gates[1].send(()).unwrap();
        gates[2].send(()).unwrap();
        for job in jobs {
            job.await.unwrap();
        }
        assert_eq!(pool.free(), 2);
    }
}
