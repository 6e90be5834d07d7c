//! One module per `nib` command: its clap arguments and its `run`; here the helpers several
//! of them share.

use nib::auth::oauth::OAuthConfig;
use nib::domain::UserId;
use nib::services::Services;

pub(crate) mod access;
pub(crate) mod client;
pub(crate) mod doctor;
pub(crate) mod export;
pub(crate) mod grant;
pub(crate) mod import;
pub(crate) mod notes;
pub(crate) mod notion;
pub(crate) mod ocr;
pub(crate) mod reindex;
pub(crate) mod serve;
pub(crate) mod smoke;
pub(crate) mod task;
pub(crate) mod token;
pub(crate) mod tools;
pub(crate) mod user;

/// The engine `nib import` reads ink-only pages with, unless told otherwise.
#[cfg(feature = "ocr-local")]
const DEFAULT_OCR: &str = "local";
#[cfg(not(feature = "ocr-local"))]
const DEFAULT_OCR: &str = "off";

fn user_id(s: &str) -> anyhow::Result<UserId> {
    UserId::parse(s).map_err(|e| anyhow::anyhow!("--user '{s}' {e}"))
}

fn date(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .map(|d| d.date().to_string())
        .unwrap_or_default()
}

/// The authorization server over the data directory (its URLs do not matter here).
fn oauth(app: &Services) -> nib::auth::oauth::OAuth {
    app.oauth(OAuthConfig::new("http://127.0.0.1"))
}

/// A bar of `len` pages: done, pages/s and the time left.
fn progress_bar(verb: &str, len: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {verb} [{{bar:30}}] {{pos}}/{{len}} pages {{per_sec}} ETA {{eta}} {{msg}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

/// Resolves at Ctrl-C or SIGTERM: the server and the watched folder stop there.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
