//! Logging: `tracing` with JSON lines when `NIB_LOG_FORMAT=json`, and the helpers that keep
//! every failure logged once with its whole cause chain.

use std::error::Error;
use std::io::IsTerminal;

use tracing::Subscriber;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Crates that log what must never reach a log line at their verbose levels, and the most
/// they may log whatever `RUST_LOG` says. Matched as target prefixes (`aws_smithy` covers
/// every `aws_smithy_*` crate).
///
/// - `rmcp`, debug: every JSON-RPC request and result (tool arguments, page text, tasks); its
///   info lines are per-request chatter.
/// - `aws_smithy` (`aws_smithy_runtime`), trace: every request and response with its body
///   (items, KMS `Decrypt` answers with plaintext data keys, object keys naming uploads).
/// - `aws_sigv4`, trace: canonical requests (headers, the session token). `aws_config` and
///   `aws_runtime`, trace: credential sources, unredacted. `aws_sdk`: the service crates.
/// - `lambda_runtime`, trace: every raw event (API Gateway requests with their headers and
///   bodies, S3 events with object keys); `lambda_http` likewise.
/// - `hyper`, `h2`, trace: frames and headers (request paths carry object keys); `reqwest`,
///   debug: URLs.
pub const CAPPED: [(&str, LevelFilter); 11] = [
    ("rmcp", LevelFilter::ERROR),
    ("aws_smithy", LevelFilter::INFO),
    ("aws_sigv4", LevelFilter::INFO),
    ("aws_config", LevelFilter::INFO),
    ("aws_runtime", LevelFilter::INFO),
    ("aws_sdk", LevelFilter::INFO),
    ("lambda_runtime", LevelFilter::INFO),
    ("lambda_http", LevelFilter::INFO),
    ("hyper", LevelFilter::INFO),
    ("h2", LevelFilter::INFO),
    ("reqwest", LevelFilter::INFO),
];

/// The caps of [`CAPPED`] as a filter: everything else passes to the `RUST_LOG` filter.
fn caps() -> Targets {
    Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_targets(CAPPED)
}

/// The subscriber [`init`] installs, writing to `writer`. `rust_log` filters (`info` when
/// absent or unparsable); [`CAPPED`] is a second filter that every event must also pass, so no
/// `RUST_LOG` (a bare `debug`, a more specific `rmcp::service=trace`, a span directive) can
/// let those crates log more. Appending `rmcp=error` to `RUST_LOG` would not be enough: a more
/// specific directive wins over it.
pub fn subscriber<W>(
    rust_log: Option<&str>,
    json: bool,
    writer: W,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let filter = rust_log
        .and_then(|directives| EnvFilter::try_new(directives).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    // Colours only for a person at a terminal: a log file or a collector gets plain lines
    // (the escape codes were a tenth of each line's formatting under load).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none())
        .with_target(false);
    if json {
        Box::new(builder.json().flatten_event(true).finish().with(caps()))
    } else {
        Box::new(builder.compact().finish().with(caps()))
    }
}

/// Installs the global subscriber: [`subscriber`] over `RUST_LOG`, on stderr so stdout stays
/// for the CLI's output, JSON lines when `NIB_LOG_FORMAT=json`.
pub fn init() {
    let rust_log = std::env::var("RUST_LOG").ok();
    let json = std::env::var("NIB_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    // A second init (tests) is harmless: keep the first subscriber.
    let _ = subscriber(rust_log.as_deref(), json, std::io::stderr).try_init();
}

/// How often [`init_batched`]'s thread writes the lines gathered since.
const LOG_BATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(50);
/// Past this many bytes waiting, a line's writer writes the batch itself.
const LOG_BATCH_BYTES: usize = 1 << 20;

/// [`init`], but the lines are gathered in memory and written to stderr a batch at a time, by
/// a thread of their own, every 50 ms (a request's worker formats its line and appends it:
/// no system call, no thread woken per line; handing each line to a writer thread woke it
/// every time and cost more than the write). `nib` and its commands use it; the Lambda
/// functions do not (an instance may be frozen right after a reply, its lines still waiting).
/// The guard writes what is left when it drops; a process killed outright loses at most the
/// last 50 ms of lines.
pub fn init_batched() -> LogGuard {
    let rust_log = std::env::var("RUST_LOG").ok();
    let json = std::env::var("NIB_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let batch = Batched::default();
    let shared = batch.0.clone();
    let thread = std::thread::Builder::new()
        .name("nib-log".into())
        .spawn(move || {
            let mut stopped = shared.stopped.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let done = *stopped;
                drop(stopped);
                shared.write_out();
                if done {
                    return;
                }
                stopped = shared
                    .wake
                    .wait_timeout(
                        shared.stopped.lock().unwrap_or_else(|e| e.into_inner()),
                        LOG_BATCH_INTERVAL,
                    )
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        })
        .ok();
    let _ = subscriber(rust_log.as_deref(), json, batch.clone()).try_init();
    LogGuard {
        shared: batch.0,
        thread,
    }
}

/// Keeps [`init_batched`]'s writer running; dropping it writes what is left.
pub struct LogGuard {
    shared: std::sync::Arc<BatchShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        *self
            .shared
            .stopped
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.wake.notify_all();
        match self.thread.take() {
            Some(t) => {
                let _ = t.join();
            }
            None => self.shared.write_out(),
        }
    }
}

#[derive(Default)]
struct BatchShared {
    lines: std::sync::Mutex<Vec<u8>>,
    stopped: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl BatchShared {
    /// Writes the lines waiting to stderr (outside the lock).
    fn write_out(&self) {
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(|e| e.into_inner()));
        if !lines.is_empty() {
            use std::io::Write as _;
            let _ = std::io::stderr().lock().write_all(&lines);
        }
    }
}

/// The lines of [`init_batched`], appended in memory.
#[derive(Clone, Default)]
struct Batched(std::sync::Arc<BatchShared>);

impl std::io::Write for Batched {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let full = {
            let mut lines = self.0.lines.lock().unwrap_or_else(|e| e.into_inner());
            lines.extend_from_slice(buf);
            lines.len() > LOG_BATCH_BYTES
        };
        if full {
            self.0.write_out();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Batched {
    type Writer = Batched;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// An error and its sources, joined with `: `, for one log line.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        out.push_str(": ");
        out.push_str(&e.to_string());
        source = e.source();
    }
    out
}

/// A fresh correlation id for a request: short, random, safe in headers and logs.
pub fn correlation_id() -> String {
    hex::encode(rand::random::<[u8; 8]>())
}

/// A log sink for tests: [`subscriber`]'s lines, kept in memory.
#[derive(Clone, Default)]
pub struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logs one event per target at each level under `rust_log`, and returns what was written.
    fn logged(rust_log: Option<&str>) -> String {
        let logs = CapturedLogs::default();
        let subscriber = subscriber(rust_log, true, logs.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "rmcp::service", "rmcp-error");
            tracing::info!(target: "rmcp::service", "rmcp-info");
            tracing::debug!(target: "rmcp::service", "rmcp-debug");
            tracing::trace!(target: "aws_smithy_runtime::client::orchestrator", "smithy-trace");
            tracing::info!(target: "aws_smithy_runtime::client::orchestrator", "smithy-info");
            tracing::trace!(target: "lambda_runtime::layers::api_response", "lambda-trace");
            tracing::trace!(target: "aws_sigv4::http_request::sign", "sigv4-trace");
            tracing::debug!(target: "h2::codec", "h2-debug");
            tracing::debug!(target: "nib::functions::ingest", "nib-debug");
            tracing::info!(target: "nib::functions::ingest", "nib-info");
        });
        logs.text()
    }

    #[test]
    fn rust_log_debug_still_leaves_rmcp_at_error_and_body_loggers_at_info() {
        let out = logged(Some("debug"));
        assert!(out.contains("nib-debug"), "RUST_LOG applies to nib: {out}");
        assert!(out.contains("rmcp-error"), "{out}");
        assert!(out.contains("smithy-info"), "{out}");
        for hidden in [
            "rmcp-info",
            "rmcp-debug",
            "smithy-trace",
            "lambda-trace",
            "sigv4-trace",
            "h2-debug",
        ] {
            assert!(
                !out.contains(hidden),
                "{hidden} logged under RUST_LOG=debug: {out}"
            );
        }
    }

    #[test]
    fn no_directive_lifts_a_cap() {
        // More specific than `rmcp=error`, so appending that directive would lose to these.
        let out = logged(Some(
            "trace,rmcp::service=trace,aws_smithy_runtime::client::orchestrator=trace,[span]=trace",
        ));
        assert!(out.contains("rmcp-error"));
        for hidden in ["rmcp-debug", "smithy-trace", "lambda-trace"] {
            assert!(!out.contains(hidden), "{hidden}: {out}");
        }
    }

    #[test]
    fn without_rust_log_the_level_is_info() {
        for rust_log in [None, Some("not a = valid [directive")] {
            let out = logged(rust_log);
            assert!(out.contains("nib-info"), "{out}");
            assert!(!out.contains("nib-debug"), "{out}");
            assert!(!out.contains("rmcp-info"), "{out}");
        }
    }
}
