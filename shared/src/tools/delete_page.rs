//! `delete_page {page_id}` -> `{"deleted","page_id","purge_on","tasks_deleted","message"}`: moves
//! the page to the trash (restorable for 30 days with `restore_page`).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::{Date, PageId, TaskLinkId};
use crate::notebook::TRASH_DAYS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "delete_page",
        title: "Delete a notebook page",
        description: "Move one page to the trash: it disappears from every list, search and read. Tasks written only on this page go with it; tasks also on other pages stay, reconciled without this page. It can be restored with restore_page for 30 days, then it is purged for good. Deleting a page already in the trash changes nothing.",
        scope: Scope::Write,
        class: ToolClass::Pages,
        annotations: Annotations::DESTRUCTIVE,
        input_schema: object_schema(
            json!({ "page_id": { "type": "string", "description": "A page_id from list_pages or search_pages." } }),
            &["page_id"],
        ),
        output_schema: output_schema::<PageDeleted>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The page in the trash.
#[derive(Serialize, JsonSchema)]
struct PageDeleted<'a> {
    /// False when the page was in the trash already.
    deleted: bool,
    page_id: &'a PageId,
    /// The day (UTC) the page is purged for good unless restored before.
    purge_on: Date,
    /// Task links that were only on this page, now in the trash with it.
    tasks_deleted: &'a [TaskLinkId],
    message: String,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
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
    output(&PageDeleted {
        deleted: t.deleted,
        page_id: &page_id,
        purge_on: t.purge_on,
        tasks_deleted: &t.tasks,
        message,
    })
}
