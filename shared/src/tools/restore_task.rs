//! `restore_task {task_link_id}` -> `{"restored","task_link_id"}`: brings a task deleted with
//! `delete_task` back exactly as it was.

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;

pub fn def() -> ToolDef {
    ToolDef {
        name: "restore_task",
        title: "Restore a deleted task",
        description: "Bring a task back from the trash (list_trash) exactly as it was: status, history and every page it appears on. Tasks stay in the trash for 30 days. A task deleted with its page comes back with restore_page. Restoring a task that is not deleted changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({ "task_link_id": { "type": "string", "description": "A task id from list_trash." } }),
            &["task_link_id"],
        ),
        output_schema: object_schema(
            json!({
                "restored": { "type": "boolean", "description": "False when the task was not deleted." },
                "task_link_id": { "type": "string" }
            }),
            &["restored", "task_link_id"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let id = ctx.args.task_link_id("task_link_id")?;
    let r = ctx.notebook.restore_task(&ctx.principal.user, &id).await?;
    Ok(json!({ "restored": r.restored, "task_link_id": id }))
}
