//! `list_notes {tag?, from?, to?, limit?, cursor?}` ->
//! `{"notes":[{page_id,line_id,date,text,tags,source_url,added_at}],"next_cursor","limit_applied"}`,
//! newest first.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::cursor::{self, Cursor};
use super::{
    Annotations, Ctx, DATE_PATTERN, Output, Paging, ToolClass, ToolDef, ToolError, cursor_schema,
    limit_schema, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::{Date, PageId};

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_notes",
        title: "List notes",
        description: "List the typed notes (add_note), newest first. `tag` keeps those with that tag (any case; spaces as dashes), `from` and `to` (YYYY-MM-DD, inclusive) narrow the days; `limit` defaults to 50 (max 200). When more follow, pass `next_cursor` as `cursor`. Search finds notes by their words and meaning too (search_pages).",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(
            json!({
                "tag": { "type": "string", "minLength": 1 },
                "from": { "type": "string", "pattern": DATE_PATTERN, "description": "First date, inclusive (YYYY-MM-DD)." },
                "to": { "type": "string", "pattern": DATE_PATTERN, "description": "Last date, inclusive (YYYY-MM-DD)." },
                "limit": limit_schema(50, 200),
                "cursor": cursor_schema()
            }),
            &[],
        ),
        output_schema: output_schema::<Notes>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

#[derive(Serialize, JsonSchema)]
struct Notes {
    notes: Vec<NoteRow>,
    #[serde(flatten)]
    paging: Paging,
}

#[derive(Serialize, JsonSchema)]
struct NoteRow {
    page_id: PageId,
    /// The note's line on its page.
    line_id: String,
    date: Date,
    text: String,
    tags: Vec<String>,
    source_url: Option<String>,
    /// When the note was added (unix seconds).
    added_at: Option<i64>,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let tag = ctx.args.opt_str("tag")?;
    let from = ctx.args.opt_date("from")?;
    let to = ctx.args.opt_date("to")?;
    let limit = ctx.args.limit("limit", 50, 200)?;
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        return Err(ToolError::invalid("from", "must not be after 'to'"));
    }
    let after = cursor::note(ctx.args.opt_str("cursor")?)?;
    let (notes, more) = ctx
        .notebook
        .list_notes(
            &ctx.principal.user,
            tag,
            from,
            to,
            after.as_ref().map(|(d, p, l)| (*d, p, l.as_str())),
            limit,
        )
        .await?;
    let next_cursor = notes
        .last()
        .filter(|_| more)
        .map(|n| Cursor::Note(n.date, n.page_id.clone(), n.line_id.clone()).encode());
    output(&Notes {
        notes: notes
            .into_iter()
            .map(|n| NoteRow {
                page_id: n.page_id,
                line_id: n.line_id,
                date: n.date,
                text: n.text,
                tags: n.tags,
                source_url: n.source_url,
                added_at: n.added_at,
            })
            .collect(),
        paging: Paging {
            next_cursor,
            limit_applied: limit,
        },
    })
}
