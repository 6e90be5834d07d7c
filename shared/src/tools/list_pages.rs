//! `list_pages {from?, to?, limit?, cursor?}` ->
//! `{"pages":[{page_id,date,has_ink,has_ocr,title,page_url}],"next_cursor","limit_applied"}`,
//! newest first.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::cursor::{self, Cursor};
use super::{
    Annotations, Ctx, DATE_PATTERN, Output, Paging, Revisable, ToolClass, ToolDef, ToolError,
    cursor_schema, if_revision_schema, limit_schema, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::{Date, PageId};
use crate::notebook::revision_token;

/// One page of the notebook's pages, newest first.
#[derive(Serialize, JsonSchema)]
struct Pages {
    pages: Vec<PageRow>,
    #[serde(flatten)]
    paging: Paging,
}

#[derive(Serialize, JsonSchema)]
struct PageRow {
    page_id: PageId,
    date: Date,
    has_ink: bool,
    has_ocr: bool,
    /// The page's first heading or first line (shortened), to name it by; null for a page without text.
    title: Option<String>,
    /// The page's stable link: it shows the page to its owner after sign-in.
    page_url: String,
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_pages",
        title: "List notebook pages",
        description: "List the notebook's pages, newest first. `from` and `to` (YYYY-MM-DD, inclusive) narrow the dates; `limit` defaults to 50 (max 200; more counts as 200). When more pages follow, `next_cursor` is set: pass it as `cursor` to continue. Pass the revision of an answer you have to the same call as `if_revision`: if the notebook did not change, the answer is only {unchanged: true, revision}.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
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
        output_schema: output_schema::<Revisable<Pages>>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
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
        return output(&Revisable::<Pages>::Unchanged { revision });
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
    let pages = pages
        .into_iter()
        .map(|p| PageRow {
            page_url: ctx.notebook.page_url(&p.page_id),
            page_id: p.page_id,
            date: p.date,
            has_ink: p.has_ink,
            has_ocr: p.has_ocr,
            title: p.title,
        })
        .collect();
    let answer = Pages {
        pages,
        paging: Paging {
            next_cursor,
            limit_applied: limit,
        },
    };
    output(&Revisable::Full { answer, revision })
}
