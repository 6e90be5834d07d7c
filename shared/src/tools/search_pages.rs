//! `search_pages {query, limit?, cursor?}` ->
//! `{"query","results":[{page_id,date,snippet}],"next_cursor","limit_applied"}`, best first.

use serde_json::{Value, json};

use super::cursor::{self, Cursor};
use super::{
    Ctx, ToolClass, ToolDef, ToolError, cursor_schema, limit_schema, object_schema,
    paged_object_schema,
};
use crate::auth::Scope;
use crate::domain::text::{self, MAX_QUERY_CHARS, MAX_QUERY_TERMS};

pub fn def() -> ToolDef {
    ToolDef {
        name: "search_pages",
        title: "Search notebook pages",
        description: "Full-text search over the pages (ranked by BM25). Words match in any form (\"specs\" finds \"spec\"); put a phrase in double quotes to require it as written. Returns page ids, dates and a snippet around the match; At most 512 characters and 32 distinct words. `limit` defaults to 20 (max 100; more counts as 100); when more results follow, `next_cursor` is set: pass it as `cursor`, with the same query, to continue.",
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
                "cursor": cursor_schema()
            }),
            &["query"],
        ),
        output_schema: paged_object_schema(
            json!({
                "query": { "type": "string" },
                "results": { "type": "array", "items": object_schema(json!({
                    "page_id": { "type": "string" }, "date": { "type": "string" }, "snippet": { "type": "string" },
                    "page_url": { "type": "string" }
                }), &["page_id", "date", "snippet", "page_url"]) }
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
    let offset = cursor::search(ctx.args.opt_str("cursor")?, query)?;
    let (hits, more) = ctx
        .notebook
        .search_from(&ctx.principal.user, query, offset, limit)
        .await?;
    let next_cursor = more.then(|| Cursor::search(offset + hits.len(), query).encode());
    let results: Vec<Value> = hits
        .into_iter()
        .map(|h| json!({ "page_id": h.page_id, "date": h.date, "snippet": h.snippet, "page_url": ctx.notebook.page_url(&h.page_id) }))
        .collect();
    Ok(
        json!({ "query": query, "results": results, "next_cursor": next_cursor, "limit_applied": limit }),
    )
}
