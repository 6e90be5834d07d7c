//! `list_trash {limit?, cursor?}` ->
//! `{"items":[{kind,id,title,date,deleted_on,purge_on,tasks}],"next_cursor","limit_applied"}`,
//! newest deletion first.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::cursor::{self, Cursor};
use super::{
    Annotations, Ctx, Output, Paging, ToolClass, ToolDef, ToolError, cursor_schema, limit_schema,
    object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::Date;
use crate::notebook::{TrashKind, trash_cursor_key};

/// What is in the trash, newest deletion first.
#[derive(Serialize, JsonSchema)]
struct Trash<'a> {
    items: Vec<TrashItem<'a>>,
    #[serde(flatten)]
    paging: Paging,
}

#[derive(Serialize, JsonSchema)]
struct TrashItem<'a> {
    kind: TrashKind,
    /// The page_id (restore_page) or task_link_id (restore_task).
    id: &'a str,
    /// A page's date, or a task's text.
    title: &'a str,
    /// The page's date, or the day the task was first seen.
    date: Date,
    deleted_on: Date,
    /// The day (UTC) it is purged for good unless restored before.
    purge_on: Date,
    /// For a page: how many of its tasks went to the trash with it.
    tasks: usize,
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_trash",
        title: "List deleted pages and tasks",
        description: "List what is in the trash, newest deletion first: deleted pages and tasks, each with the day it is purged for good (30 days after deletion). restore_page or restore_task brings one back. `limit` defaults to 50 (max 200); pass `next_cursor` as `cursor` to continue.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(
            json!({
                "limit": limit_schema(50, 200),
                "cursor": cursor_schema()
            }),
            &[],
        ),
        output_schema: output_schema::<Trash>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
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
    let items = entries
        .iter()
        .map(|e| TrashItem {
            kind: e.kind,
            id: &e.id,
            title: &e.title,
            date: e.date,
            deleted_on: e.deleted_on,
            purge_on: e.purge_on,
            tasks: e.tasks,
        })
        .collect();
    output(&Trash {
        items,
        paging: Paging {
            next_cursor,
            limit_applied: limit,
        },
    })
}
