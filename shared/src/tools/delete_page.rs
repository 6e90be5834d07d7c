//! `delete_page {page_id}` -> `{"deleted","page_id","purge_on","tasks_deleted","message"}`: moves
//! the page to the trash (restorable for 30 days with `restore_page`).

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;
use crate::notebook::TRASH_DAYS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "delete_page",
        title: "Delete a notebook page",
        description: "Move one page to the trash: it disappears from every list, search and read. Tasks written only on this page go with it; tasks also on other pages stay, reconciled without this page. It can be restored with restore_page for 30 days, then it is purged for good. Deleting a page already in the trash changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Pages,
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({ "page_id": { "type": "string", "description": "A page_id from list_pages or search_pages." } }),
            &["page_id"],
        ),
        output_schema: object_schema(
            json!({
                "deleted": { "type": "boolean", "description": "False when the page was in the trash already." },
                "page_id": { "type": "string" },
                "purge_on": { "type": "string", "description": "The day (UTC) the page is purged for good unless restored before." },
                "tasks_deleted": { "type": "array", "items": { "type": "string" }, "description": "Task links that were only on this page, now in the trash with it." },
                "message": { "type": "string" }
            }),
            &["deleted", "page_id", "purge_on", "tasks_deleted", "message"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let page_id = ctx.args.page_id("page_id")?;
    let t = ctx
        .notebook
        .trash_page(&ctx.principal.user, &page_id)
        .await?;
    let already = if t.deleted {
        ""
    } else {
        " It was in the trash already."
    };
    let message = format!(
        "Page {page_id} is in the trash.{already} It can be restored for {TRASH_DAYS} days with restore_page {{\"page_id\": \"{page_id}\"}}; on {} it is purged for good.",
        t.purge_on
    );
    Ok(json!({
        "deleted": t.deleted,
        "page_id": page_id,
        "purge_on": t.purge_on,
        "tasks_deleted": t.tasks,
        "message": message,
    }))
}
