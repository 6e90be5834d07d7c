//! `get_task {task_link_id}` -> the task (text, status, dates, Notion link), every line that
//! shows it (`pages`) and its status changes (`history`: when, the new status, and who).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
    rfc3339_ms,
};
use crate::auth::Scope;
use crate::domain::tasks::ChangedBy;
use crate::domain::{Date, PageId, PageStatus};
use crate::notebook::{TaskDetail, TaskView};

pub fn def() -> ToolDef {
    ToolDef {
        name: "get_task",
        title: "Get a task with its history",
        description: "One task: its text, reconciled status, completed date and Notion link, every page it is written on (the line's id and text, the page's date and the line's own status there), and its status history: each change with when, the new status and who made it (a tool call and its client, or a page import, deletion or restore that changed it by reconciliation). The history keeps the newest 100 changes; history_truncated counts older ones no longer kept.",
        scope: Scope::Read,
        class: ToolClass::Tasks,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(
            json!({ "task_link_id": { "type": "string", "description": "A task_link_id from list_tasks or get_page." } }),
            &["task_link_id"],
        ),
        output_schema: output_schema::<TaskOut>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// A task with the lines that show it and its status history.
#[derive(Serialize, JsonSchema)]
pub struct TaskOut {
    #[serde(flatten)]
    pub task: TaskView,
    /// Every line showing the task, oldest page first.
    pub pages: Vec<TaskLineOut>,
    /// Status changes, oldest first.
    pub history: Vec<ChangeOut>,
    /// How many older changes are no longer kept (0: the history is complete since it began
    /// being recorded).
    pub history_truncated: u64,
}

/// One line showing the task.
#[derive(Serialize, JsonSchema)]
pub struct TaskLineOut {
    pub page_id: PageId,
    pub date: Date,
    pub line_id: String,
    /// The line as written on that page (it may word the task differently).
    pub line_text: Option<String>,
    /// The line's own status on its page.
    pub page_status: PageStatus,
}

/// One change of the task's status.
#[derive(Serialize, JsonSchema)]
pub struct ChangeOut {
    /// When (RFC 3339, UTC).
    pub at: String,
    /// The status after the change (the first entry: the status the task was created with).
    pub status: crate::domain::TaskStatus,
    /// Who or what changed it.
    pub by: ChangedBy,
    /// The same, in words.
    pub summary: String,
}

/// A change's cause in words, as `get_task` and `nib task show` print it.
pub fn describe(by: &ChangedBy) -> String {
    fn client(c: &Option<String>) -> String {
        match c {
            Some(name) => format!(" by \"{name}\""),
            None => String::new(),
        }
    }
    match by {
        ChangedBy::Tool { tool, client: c } => format!("{tool}{}", client(c)),
        ChangedBy::Page { page_id, date } => {
            format!("a write (import, upload, OCR or create_task) of page {page_id} ({date})")
        }
        ChangedBy::PageDeleted { page_id, date } => {
            format!("page {page_id} ({date}) moved to the trash")
        }
        ChangedBy::PageRestored { page_id, date } => {
            format!("page {page_id} ({date}) restored from the trash")
        }
        ChangedBy::Link {
            tool,
            client: c,
            other,
        } => format!("{tool} with task {other}{}", client(c)),
    }
}

/// The tool's answer for a task detail.
pub fn task_out(d: TaskDetail) -> TaskOut {
    TaskOut {
        pages: d
            .lines
            .into_iter()
            .map(|l| TaskLineOut {
                page_id: l.page_id,
                date: l.date,
                line_id: l.line_id,
                line_text: l.text,
                page_status: l.page_status,
            })
            .collect(),
        history: d
            .changes
            .changes
            .into_iter()
            .map(|c| ChangeOut {
                at: rfc3339_ms(c.at.saturating_mul(1000)),
                status: c.status,
                summary: describe(&c.by),
                by: c.by,
            })
            .collect(),
        history_truncated: d.changes.dropped,
        task: d.task,
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let id = ctx.args.task_link_id("task_link_id")?;
    let detail = ctx.notebook.task_detail(&ctx.principal.user, &id).await?;
    output(&task_out(detail))
}
