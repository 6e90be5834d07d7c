//! `restore_task {task_link_id}` -> `{"restored","task_link_id"}`: brings a task deleted with
//! `delete_task` back exactly as it was.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::TaskLinkId;

pub fn def() -> ToolDef {
    ToolDef {
        name: "restore_task",
        title: "Restore a deleted task",
        description: "Bring a task back from the trash (list_trash) exactly as it was: status, history and every page it appears on. Tasks stay in the trash for 30 days. A task deleted with its page comes back with restore_page. Restoring a task that is not deleted changes nothing.",
        scope: Scope::Edit,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({ "task_link_id": { "type": "string", "description": "A task id from list_trash." } }),
            &["task_link_id"],
        ),
        output_schema: output_schema::<TaskRestored>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The task back from the trash.
#[derive(Serialize, JsonSchema)]
struct TaskRestored<'a> {
    /// False when the task was not deleted.
    restored: bool,
    task_link_id: &'a TaskLinkId,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let id = ctx.args.task_link_id("task_link_id")?;
    let r = ctx.notebook.restore_task(&ctx.principal.user, &id).await?;
    output(&TaskRestored {
        restored: r.restored,
        task_link_id: &id,
    })
}
