//! `search_pages {query, limit?, mode?, from?, to?, cursor?}` ->
//! `{"query","mode","results":[{page_id,date,snippet,line,page_url}],"next_cursor","limit_applied"}`,
//! best first.

use serde_json::{Value, json};

use super::cursor::{self, Cursor};
use super::{
    Ctx, ToolClass, ToolDef, ToolError, cursor_schema, limit_schema, object_schema,
    paged_object_schema,
};
use crate::auth::Scope;
use crate::domain::text::{self, MAX_QUERY_CHARS, MAX_QUERY_TERMS};
use crate::notebook::{SearchMode, SearchOptions};

/// The `search_pages` options of `ctx`'s arguments: `mode` (default hybrid), `from`, `to`.
pub(super) fn options(ctx: &Ctx<'_>) -> Result<SearchOptions, ToolError> {
    let mode = ctx
        .args
        .choice("mode", &SearchMode::NAMES, Some("hybrid"))?;
    let from = ctx.args.opt_date("from")?;
    let to = ctx.args.opt_date("to")?;
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        return Err(ToolError::invalid("from", "must not be after 'to'"));
    }
    Ok(SearchOptions {
        mode: SearchMode::parse(mode).unwrap_or_default(),
        from,
        to,
    })
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "search_pages",
        title: "Search notebook pages",
        description: "Search the pages by meaning and by words. `mode`: \"hybrid\" (default: both, fused), \"keyword\" (the words, ranked by BM25; they match in any form, \"specs\" finds \"spec\") or \"meaning\" (what the query means, in other words too: \"medical visit\" finds \"checkup with Dr. Alvarez\"). Put a phrase in double quotes to require it as written. `from`/`to` (YYYY-MM-DD, inclusive) keep only pages of those dates. Returns page ids, dates, a snippet and the best-matching line; at most 512 characters and 32 distinct words. `limit` defaults to 20 (max 100; more counts as 100); when more results follow, `next_cursor` is set: pass it as `cursor`, with the same query and options, to continue.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "query": { "type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "description": format!("Words, or a \"quoted phrase\"; at most {MAX_QUERY_CHARS} characters and {MAX_QUERY_TERMS} distinct words.") },
                "limit": limit_schema(20, 100),
                "mode": { "type": "string", "enum": SearchMode::NAMES, "default": "hybrid", "description": "hybrid (words and meaning, fused), keyword (words only) or meaning (meaning only)." },
                "from": { "type": "string", "pattern": super::DATE_PATTERN, "description": "First date, inclusive (YYYY-MM-DD)." },
                "to": { "type": "string", "pattern": super::DATE_PATTERN, "description": "Last date, inclusive (YYYY-MM-DD)." },
                "cursor": cursor_schema()
            }),
            &["query"],
        ),
        output_schema: paged_object_schema(
            json!({
                "query": { "type": "string" },
                "mode": { "type": "string", "enum": SearchMode::NAMES },
                "results": { "type": "array", "items": object_schema(json!({
                    "page_id": { "type": "string" }, "date": { "type": "string" }, "snippet": { "type": "string" },
                    "line": { "type": "string" }, "page_url": { "type": "string" }
                }), &["page_id", "date", "snippet", "line", "page_url"]) }
            }),
            &["query", "results"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let query = ctx.args.text("query", MAX_QUERY_CHARS)?;
    // Refused here, naming the argument, before the notebook reads anything.
    text::parse_bounded_query(query).map_err(|e| ToolError::invalid("query", e.to_string()))?;
    let limit = ctx.args.limit("limit", 20, 100)?;
    let opts = options(&ctx)?;
    // A cursor continues one ranking: the query with its mode and dates.
    let ranking = format!(
        "{query}\u{0}{}\u{0}{}\u{0}{}",
        opts.mode.as_str(),
        opts.from.map(|d| d.to_string()).unwrap_or_default(),
        opts.to.map(|d| d.to_string()).unwrap_or_default()
    );
    let offset = cursor::search(ctx.args.opt_str("cursor")?, &ranking)?;
    let (hits, more) = ctx
        .notebook
        .search_with(&ctx.principal.user, query, &opts, offset, limit)
        .await?;
    let next_cursor = more.then(|| Cursor::search(offset + hits.len(), &ranking).encode());
    let results: Vec<Value> = hits
        .into_iter()
        .map(|h| json!({ "page_id": h.page_id, "date": h.date, "snippet": h.snippet, "line": h.line, "page_url": ctx.notebook.page_url(&h.page_id) }))
        .collect();
    Ok(
        json!({ "query": query, "mode": opts.mode.as_str(), "results": results, "next_cursor": next_cursor, "limit_applied": limit }),
    )
}
