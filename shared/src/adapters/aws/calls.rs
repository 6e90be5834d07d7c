//! `CallCounter`: an SDK interceptor that counts the requests each client sends, per service and
//! operation, so tests can assert exactly which AWS calls a tool call makes (and a process can
//! report them).
//!
//! It counts in `read_before_transmit`, once per attempt that is about to go on the wire: a
//! request the SDK retries counts once per attempt, which is what AWS bills and what a latency
//! budget pays for. Presigned URLs are computed by a client without this interceptor (see
//! `S3Assets`), since presigning sends nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// Requests sent, keyed by (service, operation), e.g. `("DynamoDB", "Query")`.
pub type CallCounts = BTreeMap<(String, String), u64>;

/// Counts requests per service and operation. Clones share one set of counts.
#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    counts: Arc<Mutex<CallCounts>>,
}

impl CallCounter {
    pub fn new() -> CallCounter {
        CallCounter::default()
    }

    /// Every count so far.
    pub fn snapshot(&self) -> CallCounts {
        self.lock().clone()
    }

    /// How many `operation` requests of `service` were sent so far.
    pub fn count(&self, service: &str, operation: &str) -> u64 {
        self.lock()
            .get(&(service.to_owned(), operation.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// The requests sent since `before` (a snapshot taken earlier), without zero entries.
    pub fn since(&self, before: &CallCounts) -> CallCounts {
        self.lock()
            .iter()
            .filter_map(|(key, &n)| {
                let d = n - before.get(key).copied().unwrap_or(0);
                (d > 0).then(|| (key.clone(), d))
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CallCounts> {
        // Each update is a single map increment, so a poisoned lock is still consistent.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "nib::CallCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, operation) = match cfg.load::<Metadata>() {
            Some(m) => (m.service().to_owned(), m.name().to_owned()),
            None => ("unknown".to_owned(), "unknown".to_owned()),
        };
        *self.lock().entry((service, operation)).or_insert(0) += 1;
        Ok(())
    }
}
