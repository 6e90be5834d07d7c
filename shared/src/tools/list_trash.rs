//! `list_trash {limit?, cursor?}` ->
//! `{"items":[{kind,id,title,date,deleted_on,purge_on,tasks}],"next_cursor","limit_applied"}`,
//! newest deletion first.

use serde_json::{Value, json};

use super::cursor::{self, Cursor};
use super::{
    Ctx, ToolClass, ToolDef, ToolError, cursor_schema, limit_schema, object_schema,
    paged_object_schema,
};
use crate::auth::Scope;
use crate::notebook::trash_cursor_key;

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_trash",
        title: "List deleted pages and tasks",
        description: "List what is in the trash, newest deletion first: deleted pages and tasks, each with the day it is purged for good (30 days after deletion). restore_page or restore_task brings one back. `limit` defaults to 50 (max 200); pass `next_cursor` as `cursor` to continue.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "limit": limit_schema(50, 200),
                "cursor": cursor_schema()
            }),
            &[],
        ),
        output_schema: paged_object_schema(
            json!({ "items": { "type": "array", "items": object_schema(json!({
                "kind": { "type": "string", "enum": ["page", "task"] },
                "id": { "type": "string", "description": "The page_id (restore_page) or task_link_id (restore_task)." },
                "title": { "type": "string", "description": "A page's date, or a task's text." },
                "date": { "type": "string", "description": "The page's date, or the day the task was first seen." },
                "deleted_on": { "type": "string" },
                "purge_on": { "type": "string", "description": "The day (UTC) it is purged for good unless restored before." },
                "tasks": { "type": "integer", "description": "For a page: how many of its tasks went to the trash with it." }
            }), &["kind", "id", "title", "date", "deleted_on", "purge_on", "tasks"]) } }),
            &["items"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let limit = ctx.args.limit("limit", 50, 200)?;
    let after = cursor::trash(ctx.args.opt_str("cursor")?)?;
    let (entries, more) = ctx
        .notebook
        .list_trash(&ctx.principal.user, after.as_deref(), limit)
        .await?;
    let next_cursor = entries
        .last()
        .filter(|_| more)
        .map(|e| Cursor::Trash(trash_cursor_key(e)).encode());
    let items: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "kind": e.kind,
                "id": e.id,
                "title": e.title,
                "date": e.date,
                "deleted_on": e.deleted_on,
                "purge_on": e.purge_on,
                "tasks": e.tasks,
            })
        })
        .collect();
    Ok(json!({ "items": items, "next_cursor": next_cursor, "limit_applied": limit }))
}
