//! `restore_page {page_id}` -> `{"restored","page_id","tasks_restored"}`: brings a page back
//! from the trash exactly as it was.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::{PageId, TaskLinkId};

pub fn def() -> ToolDef {
    ToolDef {
        name: "restore_page",
        title: "Restore a deleted page",
        description: "Bring a page back from the trash (list_trash) exactly as it was: its text, lines, tasks that went with it, and its place in search. Pages stay in the trash for 30 days. Restoring a page that is not deleted changes nothing.",
        scope: Scope::Edit,
        class: ToolClass::Pages,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({ "page_id": { "type": "string", "description": "A page id from list_trash." } }),
            &["page_id"],
        ),
        output_schema: output_schema::<PageRestored>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The page back from the trash.
#[derive(Serialize, JsonSchema)]
struct PageRestored<'a> {
    /// False when the page was not deleted.
    restored: bool,
    page_id: &'a PageId,
    /// Task links that came back with the page.
    tasks_restored: &'a [TaskLinkId],
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let page_id = ctx.args.page_id("page_id")?;
    let r = ctx
        .notebook
        .restore_page(&ctx.principal.user, &page_id)
        .await?;
    output(&PageRestored {
        restored: r.restored,
        page_id: &page_id,
        tasks_restored: &r.tasks,
    })
}
