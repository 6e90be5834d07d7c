//! `list_pages {from?, to?, limit?, cursor?}` ->
//! `{"pages":[{page_id,date,has_ink,has_ocr}],"next_cursor","limit_applied"}`, newest first.

use serde_json::{Value, json};

use super::cursor::{self, Cursor};
use super::{
    Ctx, DATE_PATTERN, ToolClass, ToolDef, ToolError, cursor_schema, if_revision_schema,
    limit_schema, object_schema, paged_object_schema, revisable, unchanged, with_revision,
};
use crate::auth::Scope;
use crate::notebook::revision_token;

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_pages",
        title: "List notebook pages",
        description: "List the notebook's pages, newest first. `from` and `to` (YYYY-MM-DD, inclusive) narrow the dates; `limit` defaults to 50 (max 200; more counts as 200). When more pages follow, `next_cursor` is set: pass it as `cursor` to continue. Pass the revision of an answer you have to the same call as `if_revision`: if the notebook did not change, the answer is only {unchanged: true, revision}.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "from": { "type": "string", "pattern": DATE_PATTERN, "description": "First date, inclusive (YYYY-MM-DD)." },
                "to": { "type": "string", "pattern": DATE_PATTERN, "description": "Last date, inclusive (YYYY-MM-DD)." },
                "limit": limit_schema(50, 200),
                "cursor": cursor_schema(),
                "if_revision": if_revision_schema()
            }),
            &[],
        ),
        output_schema: revisable(paged_object_schema(
            json!({ "pages": { "type": "array", "items": object_schema(json!({
                "page_id": { "type": "string" },
                "date": { "type": "string" },
                "has_ink": { "type": "boolean" },
                "has_ocr": { "type": "boolean" },
                "page_url": { "type": "string", "description": "The page's stable link: it shows the page to its owner after sign-in." }
            }), &["page_id", "date", "has_ink", "has_ocr", "page_url"]) } }),
            &["pages"],
        )),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let from = ctx.args.opt_date("from")?;
    let to = ctx.args.opt_date("to")?;
    let limit = ctx.args.limit("limit", 50, 200)?;
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        return Err(ToolError::invalid("from", "must not be after 'to'"));
    }
    let cursor = ctx.args.opt_str("cursor")?;
    let after = cursor::page(cursor)?;
    // Read before the pages: a write in between gives an older revision with newer pages, so
    // the next call gets the whole answer again (never a stale "unchanged").
    let notebook = ctx.notebook.notebook_revision(&ctx.principal.user).await?;
    let revision = revision_token(&[
        "list_pages",
        &notebook.to_string(),
        &from.map(|d| d.to_string()).unwrap_or_default(),
        &to.map(|d| d.to_string()).unwrap_or_default(),
        &limit.to_string(),
        cursor.unwrap_or_default(),
    ]);
    if ctx.args.opt_str("if_revision")? == Some(revision.as_str()) {
        return Ok(unchanged(revision));
    }
    let (pages, more) = ctx
        .notebook
        .list_pages_after(
            &ctx.principal.user,
            from,
            to,
            after.as_ref().map(|(d, p)| (*d, p)),
            limit,
        )
        .await?;
    let next_cursor = pages
        .last()
        .filter(|_| more)
        .map(|p| Cursor::Page(p.date, p.page_id.clone()).encode());
    let pages: Vec<Value> = pages
        .iter()
        .map(|p| {
            json!({
                "page_id": p.page_id,
                "date": p.date,
                "has_ink": p.has_ink,
                "has_ocr": p.has_ocr,
                "page_url": ctx.notebook.page_url(&p.page_id),
            })
        })
        .collect();
    Ok(with_revision(
        json!({ "pages": pages, "next_cursor": next_cursor, "limit_applied": limit }),
        revision,
    ))
}
