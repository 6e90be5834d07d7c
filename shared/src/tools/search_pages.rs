//! `search_pages {query, limit?, mode?, from?, to?, cursor?}` ->
//! `{"query","mode","results":[{page_id,date,snippet,line,page_url,match,score}],"next_cursor","limit_applied"}`,
//! best first.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::cursor::{self, Cursor};
use super::{
    Annotations, Ctx, Output, Paging, ToolClass, ToolDef, ToolError, cursor_schema, limit_schema,
    object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::text::{self, MAX_QUERY_CHARS, MAX_QUERY_TERMS};
use crate::domain::{Date, PageId};
use crate::notebook::{Match, SearchMode, SearchOptions};

/// The pages that match a query, best first.
#[derive(Serialize, JsonSchema)]
struct Found<'a> {
    query: &'a str,
    mode: SearchMode,
    results: Vec<Hit>,
    #[serde(flatten)]
    paging: Paging,
}

#[derive(Serialize, JsonSchema)]
struct Hit {
    page_id: PageId,
    date: Date,
    snippet: String,
    line: String,
    page_url: String,
    /// How the page matched: "words" (it holds query words), "meaning" (its meaning is near
    /// the query's, in other words: see `score`), or "both".
    #[serde(rename = "match")]
    matched: Match,
    /// How well, higher is better (3 decimals): in hybrid mode the cosine of meaning (a
    /// paraphrase's page is typically 0.2-0.4, above 0.5 is close) plus up to 0.2 for the words; in meaning mode the cosine; in
    /// keyword mode BM25 (unbounded, comparable within one query only).
    score: f64,
}

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
        description: "Search the pages by meaning and by words. `mode`: \"hybrid\" (default: both, fused), \"keyword\" (the words, ranked by BM25; they match in any form, \"specs\" finds \"spec\") or \"meaning\" (what the query means, in other words too: \"medical visit\" finds \"checkup with Dr. Alvarez\"). Put a phrase in double quotes to require it as written. `from`/`to` (YYYY-MM-DD, inclusive) keep only pages of those dates. Returns page ids, dates, a snippet, the best-matching line, how each page matched (`match`: \"words\", \"meaning\" or \"both\") and a `score`; results found by meaning alone with a low score are guesses; at most 512 characters and 32 distinct words. `limit` defaults to 20 (max 100; more counts as 100); when more results follow, `next_cursor` is set: pass it as `cursor`, with the same query and options, to continue.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
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
        output_schema: output_schema::<Found>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
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
    let results = hits
        .into_iter()
        .map(|h| Hit {
            page_url: ctx.notebook.page_url(&h.page_id),
            page_id: h.page_id,
            date: h.date,
            snippet: h.snippet,
            line: h.line,
            matched: h.matched,
            score: (h.score * 1000.0).round() / 1000.0,
        })
        .collect();
    output(&Found {
        query,
        mode: opts.mode,
        results,
        paging: Paging {
            next_cursor,
            limit_applied: limit,
        },
    })
}
