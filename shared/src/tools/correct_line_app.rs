//! The owner's correction of a page's line in the web app's page view:
//! `correct_line {page_id, line_id, text?, box?}` (`box`: `ticked` or `empty`, a task line's
//! box). An app operation ([`super::app_operations`]), not a tool: what the page says is the
//! owner's to correct, not a model's. The pages function runs it on AWS, as it runs the other
//! page writes (delete and restore); `notebook::corrections` does the work.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::PageStatus;
use crate::notebook::{Correction, MAX_LINE_CHARS};

#[derive(Serialize, JsonSchema)]
struct CorrectedLine {
    line_id: String,
    text: String,
    page_status: Option<PageStatus>,
    /// Whether the line is now marked corrected (false when it was set back to its reading).
    corrected: bool,
    /// False when the line already read so.
    changed: bool,
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "correct_line",
        title: "Correct a line",
        description: "The web app's: correct a page line's text and, for a task line, its box.",
        scope: Scope::Write,
        class: ToolClass::Pages,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({
                "page_id": { "type": "string" },
                "line_id": { "type": "string", "maxLength": 64 },
                "text": { "type": "string", "maxLength": MAX_LINE_CHARS * 4 },
                "box": { "type": "string", "enum": ["ticked", "empty"] }
            }),
            &["page_id", "line_id"],
        ),
        output_schema: output_schema::<CorrectedLine>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let page_id = ctx.args.page_id("page_id")?;
    let line_id = ctx.args.str("line_id")?;
    let text = ctx.args.opt_str("text")?.map(str::to_owned);
    let ticked = match ctx.args.opt_str("box")? {
        None => None,
        Some("ticked") => Some(true),
        Some("empty") => Some(false),
        Some(_) => return Err(ToolError::invalid("box", "must be ticked or empty")),
    };
    if text.is_none() && ticked.is_none() {
        return Err(ToolError::invalid("text", "give a text or a box"));
    }
    let done = ctx
        .notebook
        .correct_line(
            &ctx.principal.user,
            &page_id,
            line_id,
            Correction { text, ticked },
        )
        .await?;
    output(&CorrectedLine {
        line_id: done.line_id,
        text: done.text,
        page_status: done.page_status,
        corrected: done.corrected,
        changed: done.changed,
    })
}
