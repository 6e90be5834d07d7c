//! `search {query}` -> `{"results":[{id,title,url}]}`: the ChatGPT connector shape, over the
//! same index and ranking as `search_pages` (hybrid: words and meaning).

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::PageId;
use crate::notebook::MAX_TEXT_CHARS;

pub fn def() -> ToolDef {
    ToolDef {
        name: "search",
        title: "Search the notebook",
        description: "Search the notebook's pages. Returns ids to pass to `fetch`, with a title and the page's stable link (it shows the page to its owner after sign-in).",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(
            json!({ "query": { "type": "string", "minLength": 1 } }),
            &["query"],
        ),
        output_schema: output_schema::<Results>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// The connector shape: ids for `fetch`, titles, links.
#[derive(Serialize, JsonSchema)]
struct Results {
    results: Vec<Result_>,
}

#[derive(Serialize, JsonSchema)]
struct Result_ {
    id: PageId,
    title: String,
    url: String,
}

/// How many results `search` returns (the shape has no limit argument).
const RESULTS: usize = 10;

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let query = ctx.args.text("query", MAX_TEXT_CHARS)?;
    let hits = ctx
        .notebook
        .search(&ctx.principal.user, query, RESULTS)
        .await?;
    let results = hits
        .into_iter()
        .map(|h| Result_ {
            title: format!("Page of {}", h.date),
            url: ctx.notebook.page_url(&h.page_id),
            id: h.page_id,
        })
        .collect();
    output(&Results { results })
}
