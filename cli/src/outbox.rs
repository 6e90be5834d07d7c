//! `nib serve`'s Notion outbox timer: pushes that met Notion's rate limit (429 with
//! `Retry-After`) or an outage wait in the users' outboxes; this task pushes them once due
//! ([`nib::notebook::Notebook::notion_drain_due`], which never calls Notion before a
//! `Retry-After` has passed), without waiting for the user's next write. The AWS stack does
//! the same from a schedule (`infra/schedule.tf`, the tasks function).
//!
//! It sleeps until the next item is due (at least [`MIN_WAIT`], at most [`MAX_WAIT`]), or
//! until a call puts or reschedules an outbox item (`notion_outbox_changed`), and then looks
//! again.

use std::sync::Arc;
use std::time::Duration;

use nib::notebook::Notebook;

/// The shortest sleep between passes (Notion's `Retry-After` is in whole seconds).
const MIN_WAIT: Duration = Duration::from_secs(1);
/// The longest sleep: an item due later, or a pass that failed, is looked at again by then.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// How long one pass starts new users' drains.
const PASS: Duration = Duration::from_secs(20);

/// Runs until aborted.
pub async fn run(notebook: Arc<Notebook>) {
    loop {
        let wait = match notebook.notion_drain_due(PASS).await {
            Ok(report) => {
                if report.users > 0 {
                    tracing::info!(
                        users = report.users,
                        created = report.created,
                        updated = report.updated,
                        failed = report.failed,
                        "notion outbox pass"
                    );
                }
                match (report.deferred, report.next_due) {
                    // Users left over: the next pass right after.
                    (d, _) if d > 0 => MIN_WAIT,
                    (_, Some(due)) => {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_secs());
                        Duration::from_secs(u64::try_from(due).unwrap_or(0).saturating_sub(now))
                    }
                    (_, None) => MAX_WAIT,
                }
            }
            Err(e) => {
                tracing::error!(error = %nib::telemetry::chain(&e), "notion outbox pass failed");
                MAX_WAIT
            }
        };
        let wait = wait.clamp(MIN_WAIT, MAX_WAIT);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = notebook.notion_outbox_changed() => {
                // A new item may be due sooner than the one waited for; a short pause lets the
                // call that put it finish its own push first.
                tokio::time::sleep(MIN_WAIT).await;
            }
        }
    }
}
