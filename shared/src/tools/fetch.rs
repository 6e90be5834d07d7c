//! `fetch {id}` -> `{"id","title","text","url","metadata"}`: the ChatGPT connector shape.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::domain::{Date, PageId};

/// The connector shape: the page's text, title and stable link.
#[derive(Serialize, JsonSchema)]
struct Fetched<'a> {
    id: &'a PageId,
    title: String,
    text: String,
    url: String,
    metadata: Metadata,
}

#[derive(Serialize, JsonSchema)]
struct Metadata {
    date: Date,
}
use crate::auth::Scope;

pub fn def() -> ToolDef {
    ToolDef {
        name: "fetch",
        title: "Fetch a notebook page",
        description: "Fetch the full text of a page by the id `search` returned, with its stable link (`url`: the page for its owner after sign-in).",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(json!({ "id": { "type": "string" } }), &["id"]),
        output_schema: output_schema::<Fetched>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let page_id = ctx.args.page_id("id")?;
    let p = ctx.notebook.get_page(&ctx.principal.user, &page_id).await?;
    let text = p
        .lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    output(&Fetched {
        id: &p.page_id,
        title: format!("Page of {}", p.date),
        text,
        url: ctx.notebook.page_url(&p.page_id),
        metadata: Metadata { date: p.date },
    })
}
