//! `create_task {target_date, text, source_url?}`: adds a task line to that date's page, or
//! names the open task that already has this text.

use serde_json::{Value, json};

use super::{Ctx, DATE_PATTERN, ToolClass, ToolDef, ToolError, nullable, object_schema};
use crate::auth::Scope;
use crate::notebook::MAX_TEXT_CHARS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "create_task",
        title: "Create a task",
        description: "Add a task to the page of `target_date` (YYYY-MM-DD; the page is created if needed). If an open task with the same text exists, nothing is added and that task is returned with created: false. With a connected Notion database, a new task is also pushed there: notion_pushed says whether the task has its Notion page (a push that failed is retried later).",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "target_date": { "type": "string", "pattern": DATE_PATTERN },
                "text": { "type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS },
                "source_url": { "type": "string", "description": "Where the task came from, kept with it." }
            }),
            &["target_date", "text"],
        ),
        output_schema: object_schema(
            json!({
                "task_link_id": { "type": "string" },
                "block_id": { "type": "string" },
                "page_id": { "type": "string" },
                "created": { "type": "boolean" },
                "reused_existing_task": { "type": "boolean" },
                "notion_pushed": { "type": "boolean" },
                "notion_task_id": nullable("string"),
                "notion_url": nullable("string")
            }),
            &[
                "task_link_id",
                "block_id",
                "page_id",
                "created",
                "reused_existing_task",
                "notion_pushed",
                "notion_task_id",
                "notion_url",
            ],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let date = ctx.args.date("target_date")?;
    let text = ctx.args.text("text", MAX_TEXT_CHARS)?;
    let source_url = ctx.args.opt_str("source_url")?;
    if let Some(url) = source_url
        && url.chars().count() > MAX_TEXT_CHARS
    {
        return Err(ToolError::invalid(
            "source_url",
            format!("must be at most {MAX_TEXT_CHARS} characters"),
        ));
    }
    let (t, notion) = ctx
        .notebook
        .create_task_pushed(&ctx.principal.user, date, text, source_url)
        .await?;
    Ok(json!({
        "task_link_id": t.task_link_id,
        "block_id": t.block_id,
        "page_id": t.page_id,
        "created": t.created,
        "reused_existing_task": !t.created,
        "notion_pushed": notion.pushed,
        "notion_task_id": notion.page.as_ref().map(|p| &p.page_id),
        "notion_url": notion.page.as_ref().map(|p| &p.url),
    }))
}
