//! `delete_task {task_link_id}` -> `{"deleted","task_link_id","purge_on","message"}`: moves the
//! task link to the trash on every page it appears on (restorable for 30 days).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::{Date, TaskLinkId};
use crate::notebook::TRASH_DAYS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "delete_task",
        title: "Delete a task",
        description: "Move a task to the trash, with its status and history, on every page it appears on: it disappears from list_tasks, and the pages show its line as plain handwriting without a status. It can be restored with restore_task for 30 days, then it is purged for good. Deleting a task already in the trash changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        annotations: Annotations::DESTRUCTIVE,
        input_schema: object_schema(
            json!({ "task_link_id": { "type": "string", "description": "A task_link_id from list_tasks or get_page." } }),
            &["task_link_id"],
        ),
        output_schema: output_schema::<TaskDeleted>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The task in the trash.
#[derive(Serialize, JsonSchema)]
struct TaskDeleted<'a> {
    /// False when the task was in the trash already.
    deleted: bool,
    task_link_id: &'a TaskLinkId,
    /// The day (UTC) the task is purged for good unless restored before.
    purge_on: Date,
    message: String,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let id = ctx.args.task_link_id("task_link_id")?;
    let t = ctx.notebook.trash_task(&ctx.principal.user, &id).await?;
    let already = if t.deleted {
        ""
    } else {
        " It was in the trash already."
    };
    let message = format!(
        "Task {id} is in the trash.{already} It can be restored for {TRASH_DAYS} days with restore_task {{\"task_link_id\": \"{id}\"}}; on {} it is purged for good.",
        t.purge_on
    );
    output(&TaskDeleted {
        deleted: t.deleted,
        task_link_id: &id,
        purge_on: t.purge_on,
        message,
    })
}
