//! `update_task_status {task_link_id, status}` ->
//! `{"task_link_id","updated","status","text","notion_updated"}`.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::TaskLinkId;
use crate::domain::TaskStatus;
use crate::domain::tasks::ChangedBy;

pub fn def() -> ToolDef {
    ToolDef {
        name: "update_task_status",
        title: "Update a task's status",
        description: "Mark a task todo, done or cancelled. Idempotent. The status is reconciled with the pages: a page dated later than this update still decides.",
        scope: Scope::Edit,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({
                "task_link_id": { "type": "string" },
                "status": { "type": "string", "enum": ["todo", "done", "cancelled"] }
            }),
            &["task_link_id", "status"],
        ),
        output_schema: output_schema::<Updated>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The task with its new status.
#[derive(Serialize, JsonSchema)]
struct Updated<'a> {
    task_link_id: &'a TaskLinkId,
    updated: bool,
    status: TaskStatus,
    text: &'a str,
    notion_updated: bool,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let status = ctx
        .args
        .choice("status", &["todo", "done", "cancelled"], None)?;
    let status = TaskStatus::parse(status).expect("choice checked");
    let id = ctx.args.task_link_id("task_link_id")?;
    let (t, notion_updated) = ctx
        .notebook
        .update_task_status_pushed(
            &ctx.principal.user,
            &id,
            status,
            ChangedBy::Tool {
                tool: "update_task_status".into(),
                client: ctx.principal.client.clone(),
            },
        )
        .await?;
    output(&Updated {
        task_link_id: &id,
        updated: true,
        status: t.status,
        text: &t.text,
        notion_updated,
    })
}
