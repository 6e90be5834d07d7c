//! `list_tags {}` -> `{"tags":[{tag,notes}]}`: every tag of the typed notes, most used first.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_tags",
        title: "List note tags",
        description: "Every tag used on typed notes (add_note) with how many notes carry it, most used first. Pass one to list_notes as `tag`.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(json!({}), &[]),
        output_schema: output_schema::<Tags>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

#[derive(Serialize, JsonSchema)]
struct Tags {
    tags: Vec<TagRow>,
}

#[derive(Serialize, JsonSchema)]
struct TagRow {
    tag: String,
    /// How many notes carry it.
    notes: usize,
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let tags = ctx.notebook.list_tags(&ctx.principal.user).await?;
    output(&Tags {
        tags: tags
            .into_iter()
            .map(|(tag, notes)| TagRow { tag, notes })
            .collect(),
    })
}
