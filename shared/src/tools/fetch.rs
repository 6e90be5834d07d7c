//! `fetch {id}` -> `{"id","title","text","url","metadata"}`: the ChatGPT connector shape.

use serde_json::{Value, json};

use super::{Ctx, ToolClass, ToolDef, ToolError, object_schema};
use crate::auth::Scope;

pub fn def() -> ToolDef {
    ToolDef {
        name: "fetch",
        title: "Fetch a notebook page",
        description: "Fetch the full text of a page by the id `search` returned, with its stable link (`url`: the page for its owner after sign-in).",
        scope: Scope::Read,
        class: ToolClass::Pages,
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
        input_schema: object_schema(json!({ "id": { "type": "string" } }), &["id"]),
        output_schema: object_schema(
            json!({
                "id": { "type": "string" },
                "title": { "type": "string" },
                "text": { "type": "string" },
                "url": { "type": "string" },
                "metadata": object_schema(json!({ "date": { "type": "string" } }), &["date"])
            }),
            &["id", "title", "text", "url", "metadata"],
        ),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

async fn run(ctx: Ctx<'_>) -> Result<Value, ToolError> {
    let page_id = ctx.args.page_id("id")?;
    let p = ctx.notebook.get_page(&ctx.principal.user, &page_id).await?;
    let text = p
        .lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    Ok(json!({
        "id": p.page_id,
        "title": format!("Page of {}", p.date),
        "text": text,
        "url": ctx.notebook.page_url(&p.page_id),
        "metadata": { "date": p.date },
    }))
}
