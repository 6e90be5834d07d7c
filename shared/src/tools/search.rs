//! `search {query}` -> `{"results":[{id,title,url}]}`: the ChatGPT connector shape, over the
//! same index and ranking as `search_pages` (hybrid: words and meaning).

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;
use crate::notebook::MAX_TEXT_CHARS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "search",
        title: "Search the notebook",
        description: "Search the notebook's pages. Returns ids to pass to `fetch`, with a title and the page's stable link (it shows the page to its owner after sign-in).",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(
            json!({ "query": { "type": "string", "minLength": 1 } }),
            &["query"],
        ),
        output_schema: object_schema(
            json!({ "results": { "type": "array", "items": object_schema(json!({
                "id": { "type": "string" }, "title": { "type": "string" }, "url": { "type": "string" }
            }), &["id", "title", "url"]) } }),
            &["results"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// How many results `search` returns (the shape has no limit argument).
const RESULTS: usize = 10;

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let query = ctx.args.text("query", MAX_TEXT_CHARS)?;
    let hits = ctx
        .notebook
        .search(&ctx.principal.user, query, RESULTS)
        .await?;
    let results: Vec<Value> = hits
        .into_iter()
        .map(|h| json!({ "id": h.page_id, "title": format!("Page of {}", h.date), "url": ctx.notebook.page_url(&h.page_id) }))
        .collect();
    Ok(json!({ "results": results }))
}
