//! `list_tasks {status?, since?, limit?, cursor?}` -> `{"tasks":[...],"next_cursor","limit_applied"}`.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::cursor::{self, Cursor};
use super::{
    Annotations, Ctx, DATE_PATTERN, Output, Paging, Revisable, ToolClass, ToolDef, ToolError,
    cursor_schema, if_revision_schema, limit_schema, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::notebook::{TaskFilter, TaskView, revision_token};

/// One page of the notebook's tasks, oldest first seen first.
#[derive(Serialize, JsonSchema)]
struct Tasks {
    tasks: Vec<TaskView>,
    #[serde(flatten)]
    paging: Paging,
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_tasks",
        title: "List tasks",
        description: "List the tasks written in the notebook (a task copied across pages is one task). `status`: open (default, not done), done, or all; `since` (YYYY-MM-DD) keeps tasks first seen on or after that date; `limit` defaults to 50 (max 200; more counts as 200). Oldest first. When more tasks follow, `next_cursor` is set: pass it as `cursor` to continue. Pass the revision of an answer you have to the same call as `if_revision`: if the notebook did not change, the answer is only {unchanged: true, revision}.",
        scope: Scope::Read,
        class: ToolClass::Tasks,
        annotations: Annotations::READ_ONLY,
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
        output_schema: output_schema::<Revisable<Tasks>>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
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
        return output(&Revisable::<Tasks>::Unchanged { revision });
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
    let answer = Tasks {
        tasks,
        paging: Paging {
            next_cursor,
            limit_applied: limit,
        },
    };
    output(&Revisable::Full { answer, revision })
}
