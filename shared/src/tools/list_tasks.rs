//! `list_tasks {status?, since?, limit?, cursor?}` -> `{"tasks":[...],"next_cursor","limit_applied"}`.

use serde_json::{Value, json};

use super::cursor::{self, Cursor};
use super::{
    Ctx, DATE_PATTERN, ToolClass, ToolDef, ToolError, cursor_schema, if_revision_schema,
    limit_schema, nullable, object_schema, paged_object_schema, revisable, unchanged,
    with_revision,
};
use crate::auth::Scope;
use crate::notebook::{TaskFilter, revision_token};

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_tasks",
        title: "List tasks",
        description: "List the tasks written in the notebook (a task copied across pages is one task). `status`: open (default, not done), done, or all; `since` (YYYY-MM-DD) keeps tasks first seen on or after that date; `limit` defaults to 50 (max 200; more counts as 200). Oldest first. When more tasks follow, `next_cursor` is set: pass it as `cursor` to continue. Pass the revision of an answer you have to the same call as `if_revision`: if the notebook did not change, the answer is only {unchanged: true, revision}.",
        scope: Scope::Read,
        class: ToolClass::Tasks,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "status": { "type": "string", "enum": ["open", "done", "all"], "default": "open" },
                "since": { "type": "string", "pattern": DATE_PATTERN },
                "limit": limit_schema(50, 200),
                "cursor": cursor_schema(),
                "if_revision": if_revision_schema()
            }),
            &[],
        ),
        output_schema: revisable(paged_object_schema(
            json!({ "tasks": { "type": "array", "items": object_schema(json!({
                "task_link_id": { "type": "string" },
                "text": { "type": "string" },
                "status": { "type": "string", "enum": ["todo", "done", "cancelled"] },
                "first_seen_date": { "type": "string" },
                "completed_date": nullable("string"),
                "source_page_id": { "type": "string" },
                "notion_url": nullable("string")
            }), &["task_link_id", "text", "status", "first_seen_date", "completed_date", "source_page_id", "notion_url"]) } }),
            &["tasks"],
        )),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let status = ctx
        .args
        .choice("status", &["open", "done", "all"], Some("open"))?;
    let filter = match status {
        "done" => TaskFilter::Done,
        "all" => TaskFilter::All,
        _ => TaskFilter::Open,
    };
    let since = ctx.args.opt_date("since")?;
    let limit = ctx.args.limit("limit", 50, 200)?;
    let cursor = ctx.args.opt_str("cursor")?;
    let after = cursor::task(cursor)?;
    // Read before the tasks (see list_pages).
    let notebook = ctx.notebook.notebook_revision(&ctx.principal.user).await?;
    let revision = revision_token(&[
        "list_tasks",
        &notebook.to_string(),
        status,
        &since.map(|d| d.to_string()).unwrap_or_default(),
        &limit.to_string(),
        cursor.unwrap_or_default(),
    ]);
    if ctx.args.opt_str("if_revision")? == Some(revision.as_str()) {
        return Ok(unchanged(revision));
    }
    let (tasks, more) = ctx
        .notebook
        .list_tasks_after(
            &ctx.principal.user,
            filter,
            since,
            after.as_ref().map(|(d, t)| (*d, t)),
            limit,
        )
        .await?;
    let next_cursor = tasks
        .last()
        .filter(|_| more)
        .map(|t| Cursor::Task(t.first_seen_date, t.task_link_id.clone()).encode());
    Ok(with_revision(
        json!({ "tasks": tasks, "next_cursor": next_cursor, "limit_applied": limit }),
        revision,
    ))
}
