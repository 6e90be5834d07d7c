//! `upload_result {name}`: what became of the owner's latest browser upload of a file of that
//! name (`Notebook::upload_result`, recorded by the ingest function on AWS). An app operation
//! ([`super::app_operations`]): the web app's upload status asks it through the same dispatch
//! as the tools, so on AWS the pages function (which holds the user's key) reads it; the mcp
//! front reaches no user's partition itself.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;

#[derive(Serialize, JsonSchema)]
struct Result {
    /// False when no result of an upload of that name is kept.
    found: bool,
    /// When that upload was made, unix milliseconds.
    uploaded_at: Option<i64>,
    /// `new`, `updated`, `unchanged` or `refused`.
    outcome: Option<String>,
    page_id: Option<String>,
    /// Why it was refused.
    reason: Option<String>,
}

pub fn result_def() -> ToolDef {
    ToolDef {
        name: "upload_result",
        title: "An upload's result",
        description: "The web app's: what became of the latest upload of a file name.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(json!({ "name": { "type": "string" } }), &["name"]),
        output_schema: output_schema::<Result>(),
        handler: |ctx| Box::pin(result(ctx)),
    }
}

async fn result(ctx: Ctx<'_>) -> std::result::Result<Output, ToolError> {
    let name = ctx.args.str("name")?;
    let found = ctx
        .notebook
        .upload_result(&ctx.principal.user, name)
        .await?;
    output(&match found {
        None => Result {
            found: false,
            uploaded_at: None,
            outcome: None,
            page_id: None,
            reason: None,
        },
        Some(r) => Result {
            found: true,
            uploaded_at: Some(r.uploaded_at),
            outcome: Some(r.outcome),
            page_id: r.page_id.map(|p| p.to_string()),
            reason: r.reason,
        },
    })
}
