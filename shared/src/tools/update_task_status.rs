//! `update_task_status {task_link_id, status}` ->
//! `{"task_link_id","updated","status","text","notion_updated"}`.

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;
use crate::domain::TaskStatus;

pub fn def() -> ToolDef {
    ToolDef {
        name: "update_task_status",
        title: "Update a task's status",
        description: "Mark a task todo, done or cancelled. Idempotent. The status is reconciled with the pages: a page dated later than this update still decides.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "task_link_id": { "type": "string" },
                "status": { "type": "string", "enum": ["todo", "done", "cancelled"] }
            }),
            &["task_link_id", "status"],
        ),
        output_schema: object_schema(
            json!({
                "task_link_id": { "type": "string" },
                "updated": { "type": "boolean" },
                "status": { "type": "string", "enum": ["todo", "done", "cancelled"] },
                "text": { "type": "string" },
                "notion_updated": { "type": "boolean" }
            }),
            &[
                "task_link_id",
                "updated",
                "status",
                "text",
                "notion_updated",
            ],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let status = ctx
        .args
        .choice("status", &["todo", "done", "cancelled"], None)?;
    let status = TaskStatus::parse(status).expect("choice checked");
    let id = ctx.args.task_link_id("task_link_id")?;
    let (t, notion_updated) = ctx
        .notebook
        .update_task_status_pushed(&ctx.principal.user, &id, status)
        .await?;
    Ok(
        json!({ "task_link_id": id, "updated": true, "status": t.status, "text": t.text, "notion_updated": notion_updated }),
    )
}
