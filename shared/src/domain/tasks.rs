//! Task links: the same task written on several pages is one task, and its status is
//! reconciled from the pages that show it and from explicit updates.
//!
//! STUB: the contract below is fixed; the body is being written.

use serde::{Deserialize, Serialize};

use super::{Date, PageId, PageStatus, StatusSource, TaskStatus};

/// The key under which the same task is recognised across pages: lowercase, inner whitespace
/// collapsed to one space, trimmed, trailing punctuation (`.`, `!`, `?`, `,`, `;`, `:`) removed.
pub fn normalize(text: &str) -> String {
    let _ = text;
    todo!()
}

/// One line on one page that shows the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appearance {
    pub page_id: PageId,
    pub line_id: String,
    pub date: Date,
    pub page_status: PageStatus,
}

/// An explicit status change (from `update_task_status` or `create_task`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusUpdate {
    /// The day it happened (from the clock).
    pub date: Date,
    /// Unix seconds, to order updates on the same day.
    pub at: i64,
    pub status: TaskStatus,
}

/// The outcome of reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconciled {
    pub status: TaskStatus,
    /// The date of the event that made it done (the first `done` after the last event that was
    /// not `done`); `None` unless `status` is `Done`.
    pub completed_date: Option<Date>,
}

/// Reconciles a task's status. Events are ordered by date; on the same date page appearances
/// come before updates, and updates by `at`. The latest deciding event wins: an update always
/// decides; a page appearance decides open -> todo, done -> done, cancelled -> cancelled, and a
/// `migrated` appearance decides nothing. No deciding event -> `Todo`.
pub fn reconcile(appearances: &[Appearance], updates: &[StatusUpdate]) -> Reconciled {
    let _ = (appearances, updates);
    todo!()
}

/// What a page status says about the task, if anything (`Migrated` says nothing).
pub fn page_status_to_task(s: PageStatus) -> Option<TaskStatus> {
    match s {
        PageStatus::Open => Some(TaskStatus::Todo),
        PageStatus::Done => Some(TaskStatus::Done),
        PageStatus::Cancelled => Some(TaskStatus::Cancelled),
        PageStatus::Migrated => None,
    }
}

/// `Page` when the line's own page status agrees with the reconciled status (a migrated line
/// agrees with `Todo`), else `Reconciled`.
pub fn status_source(page_status: PageStatus, status: TaskStatus) -> StatusSource {
    let said = page_status_to_task(page_status).unwrap_or(TaskStatus::Todo);
    if said == status {
        StatusSource::Page
    } else {
        StatusSource::Reconciled
    }
}
