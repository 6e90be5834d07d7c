//! `delete_task {task_link_id}` -> `{"deleted","task_link_id","purge_on","message"}`: moves the
//! task link to the trash on every page it appears on (restorable for 30 days).

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;
use crate::notebook::TRASH_DAYS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "delete_task",
        title: "Delete a task",
        description: "Move a task to the trash, with its status and history, on every page it appears on: it disappears from list_tasks, and the pages show its line as plain handwriting without a status. It can be restored with restore_task for 30 days, then it is purged for good. Deleting a task already in the trash changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({ "task_link_id": { "type": "string", "description": "A task_link_id from list_tasks or get_page." } }),
            &["task_link_id"],
        ),
        output_schema: object_schema(
            json!({
                "deleted": { "type": "boolean", "description": "False when the task was in the trash already." },
                "task_link_id": { "type": "string" },
                "purge_on": { "type": "string", "description": "The day (UTC) the task is purged for good unless restored before." },
                "message": { "type": "string" }
            }),
            &["deleted", "task_link_id", "purge_on", "message"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
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
    Ok(json!({
        "deleted": t.deleted,
        "task_link_id": id,
        "purge_on": t.purge_on,
        "message": message,
    }))
}
