//! `add_note {text, date?, tags?, source_url?}` -> `{"page_id","line_id","date","tags"}`: a
//! typed note on that day's page (by default today in the user's time zone, `notebook::settings`).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, DATE_PATTERN, Output, ToolClass, ToolDef, ToolError, object_schema, output,
    output_schema,
};
use crate::auth::Scope;
use crate::domain::{Date, PageId};
use crate::notebook::{MAX_TAGS, MAX_TEXT_CHARS};

pub fn def() -> ToolDef {
    ToolDef {
        name: "add_note",
        title: "Add a note",
        description: "Write a typed note on the page of `date` (YYYY-MM-DD; today in the user's time zone by default; the page is made if needed). Use it for what the user asks you to remember or write down. The note is marked typed (origin \"typed\" in get_page), is found by search like the handwriting, and stays when the page's ink is imported again. `tags` (at most 10) are kept lower case with spaces as dashes; `source_url` says where it came from. Each call adds a note.",
        scope: Scope::Edit,
        class: ToolClass::Tasks,
        annotations: Annotations::WRITE,
        input_schema: object_schema(
            json!({
                "text": { "type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS },
                "date": { "type": "string", "pattern": DATE_PATTERN, "description": "The page's day (default: today in the user's time zone, UTC unless they set one)." },
                "tags": { "type": "array", "items": { "type": "string", "minLength": 1, "maxLength": 40 }, "maxItems": MAX_TAGS },
                "source_url": { "type": "string", "description": "Where the note came from, kept with it." }
            }),
            &["text"],
        ),
        output_schema: output_schema::<Added>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The note written.
#[derive(Serialize, JsonSchema)]
struct Added<'a> {
    page_id: &'a PageId,
    /// The note's line on the page (get_page's line_id).
    line_id: &'a str,
    date: Date,
    /// The tags as kept.
    tags: &'a [String],
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let text = ctx.args.text("text", MAX_TEXT_CHARS)?;
    let date = match ctx.args.opt_date("date")? {
        Some(d) => d,
        None => ctx.notebook.today_for(&ctx.principal.user).await?,
    };
    let tags = ctx.args.str_list("tags")?;
    let source_url = ctx.args.opt_str("source_url")?;
    let note = ctx
        .notebook
        .add_note(&ctx.principal.user, date, text, &tags, source_url)
        .await?;
    output(&Added {
        page_id: &note.page_id,
        line_id: &note.line_id,
        date: note.date,
        tags: &note.tags,
    })
}
