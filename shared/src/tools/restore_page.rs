//! `restore_page {page_id}` -> `{"restored","page_id","tasks_restored"}`: brings a page back
//! from the trash exactly as it was.

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;

pub fn def() -> ToolDef {
    ToolDef {
        name: "restore_page",
        title: "Restore a deleted page",
        description: "Bring a page back from the trash (list_trash) exactly as it was: its text, lines, tasks that went with it, and its place in search. Pages stay in the trash for 30 days. Restoring a page that is not deleted changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Pages,
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({ "page_id": { "type": "string", "description": "A page id from list_trash." } }),
            &["page_id"],
        ),
        output_schema: object_schema(
            json!({
                "restored": { "type": "boolean", "description": "False when the page was not deleted." },
                "page_id": { "type": "string" },
                "tasks_restored": { "type": "array", "items": { "type": "string" }, "description": "Task links that came back with the page." }
            }),
            &["restored", "page_id", "tasks_restored"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let page_id = ctx.args.page_id("page_id")?;
    let r = ctx
        .notebook
        .restore_page(&ctx.principal.user, &page_id)
        .await?;
    Ok(json!({ "restored": r.restored, "page_id": page_id, "tasks_restored": r.tasks }))
}
