//! The notebook's domain: ids, dates, pages and lines, task links, and the pure functions over
//! them (structure parsing, task reconciliation, search text). Nothing here does I/O or knows
//! JSON-RPC or HTTP.

mod ids;
pub mod structure;
pub mod tasks;
pub mod text;

pub use ids::{Date, IdError, PageId, TaskLinkId, UserId};

use serde::{Deserialize, Serialize};

/// How long a deleted page or task can be restored, in days; then it is purged for good.
pub const TRASH_DAYS: i64 = 30;

/// How a line was written on the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Notation {
    /// A markdown heading (`#`, `##`, ...).
    Heading,
    /// A checkbox line: `- [ ]`, `- [x]`, `- [>]`, `- [-]`.
    Task,
    /// A list item without a checkbox (`-`, `*`, `+`, `1.`).
    Bullet,
    /// Anything else: a line of prose.
    Text,
}

/// What the page itself says about a task line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PageStatus {
    /// `- [ ]`
    Open,
    /// `- [x]` or `- [X]`
    Done,
    /// `- [>]`: copied forward to a later page.
    Migrated,
    /// `- [-]`
    Cancelled,
}

/// The reconciled status of a task link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    Todo,
    Done,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Todo => "todo",
            TaskStatus::Done => "done",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "todo" => Some(TaskStatus::Todo),
            "done" => Some(TaskStatus::Done),
            "cancelled" => Some(TaskStatus::Cancelled),
            _ => None,
        }
    }
}

/// Whether a line's effective status is what its own page says, or was decided elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StatusSource {
    Page,
    Reconciled,
}
