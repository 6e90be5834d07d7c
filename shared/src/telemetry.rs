//! Logging: `tracing` with JSON lines when `NIB_LOG_FORMAT=json`, and the helpers that keep
//! every failure logged once with its whole cause chain.

use std::error::Error;

/// Installs the global subscriber. `RUST_LOG` filters (default `info`, with rmcp's
/// per-request chatter turned down). Logs go to stderr so stdout stays for the CLI's output.
pub fn init() {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=error"));
    let json = std::env::var("NIB_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    // A second init (tests) is harmless: keep the first subscriber.
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.compact().try_init()
    };
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
