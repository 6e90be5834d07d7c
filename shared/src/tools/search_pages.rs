//! `search_pages {query, limit?}` -> `{"query","results":[{page_id,date,snippet}]}`, best first.

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;
use crate::notebook::MAX_TEXT_CHARS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "search_pages",
        title: "Search notebook pages",
        description: "Full-text search over the pages (ranked by BM25). Words match in any form (\"specs\" finds \"spec\"); put a phrase in double quotes to require it as written. Returns page ids, dates and a snippet around the match; `limit` defaults to 20 (max 100).",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({
                "query": { "type": "string", "minLength": 1, "description": "Words, or a \"quoted phrase\"." },
                "limit": { "type": "integer", "minimum": 1, "maximum": 100, "default": 20 }
            }),
            &["query"],
        ),
        output_schema: object_schema(
            json!({
                "query": { "type": "string" },
                "results": { "type": "array", "items": object_schema(json!({
                    "page_id": { "type": "string" }, "date": { "type": "string" }, "snippet": { "type": "string" }
                }), &["page_id", "date", "snippet"]) }
            }),
            &["query", "results"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let query = ctx.args.text("query", MAX_TEXT_CHARS)?;
    let limit = ctx.args.limit("limit", 20, 100)?;
    let hits = ctx
        .notebook
        .search(&ctx.principal.user, query, limit)
        .await?;
    let results: Vec<Value> = hits
        .into_iter()
        .map(|h| json!({ "page_id": h.page_id, "date": h.date, "snippet": h.snippet }))
        .collect();
    Ok(json!({ "query": query, "results": results }))
}
