//! `create_task {target_date, text, source_url?}`: adds a task line to that date's page, or
//! names the open task that already has this text.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, DATE_PATTERN, Output, ToolClass, ToolDef, ToolError, object_schema, output,
    output_schema,
};
use crate::auth::Scope;
use crate::domain::{PageId, TaskLinkId};
use crate::notebook::MAX_TEXT_CHARS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "create_task",
        title: "Create a task",
        description: "Add a task to the page of `target_date` (YYYY-MM-DD; the page is created if needed). If an open task with the same text exists, nothing is added and that task is returned with created: false. With a connected Notion database, a new task is also pushed there: notion_pushed says whether the task has its Notion page (a push that failed is retried later).",
        scope: Scope::Edit,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({
                "target_date": { "type": "string", "pattern": DATE_PATTERN },
                "text": { "type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS },
                "source_url": { "type": "string", "description": "Where the task came from, kept with it." }
            }),
            &["target_date", "text"],
        ),
        output_schema: output_schema::<Created>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The task created, or the open task of the same text.
#[derive(Serialize, JsonSchema)]
struct Created<'a> {
    task_link_id: &'a TaskLinkId,
    block_id: &'a str,
    page_id: &'a PageId,
    created: bool,
    reused_existing_task: bool,
    notion_pushed: bool,
    notion_task_id: Option<&'a str>,
    notion_url: Option<&'a str>,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
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
    output(&Created {
        task_link_id: &t.task_link_id,
        block_id: &t.block_id,
        page_id: &t.page_id,
        created: t.created,
        reused_existing_task: !t.created,
        notion_pushed: notion.pushed,
        notion_task_id: notion.page.as_ref().map(|p| p.page_id.as_str()),
        notion_url: notion.page.as_ref().map(|p| p.url.as_str()),
    })
}
