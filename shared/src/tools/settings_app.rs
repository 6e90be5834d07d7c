//! The user's time zone as the owner's web app shows and sets it: `time_zone_get {}`,
//! `time_zone_set {zone}` (what `nib user timezone` does). App operations
//! ([`super::app_operations`]), not tools: a setting of the account is the owner's to change,
//! not a model's. The tasks function runs them on AWS, the one that writes notes on the day
//! the zone decides.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::domain::Date;

#[derive(Serialize, JsonSchema)]
struct TimeZone {
    /// The IANA name (`UTC` until one is set).
    zone: String,
    /// Today in that zone.
    today: Date,
}

pub fn get_def() -> ToolDef {
    ToolDef {
        name: "time_zone_get",
        title: "The time zone",
        description: "The web app's: the user's time zone and today in it.",
        scope: Scope::Read,
        class: ToolClass::Tasks,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(json!({}), &[]),
        output_schema: output_schema::<TimeZone>(),
        handler: |ctx| Box::pin(get(ctx)),
    }
}

async fn get(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let user = &ctx.principal.user;
    let zone = ctx.notebook.time_zone(user).await?;
    let today = ctx.notebook.today_for(user).await?;
    output(&TimeZone {
        zone: zone.name().to_owned(),
        today,
    })
}

pub fn set_def() -> ToolDef {
    ToolDef {
        name: "time_zone_set",
        title: "Set the time zone",
        description: "The web app's: set the user's time zone (an IANA name).",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({ "zone": { "type": "string", "maxLength": 64 } }),
            &["zone"],
        ),
        output_schema: output_schema::<TimeZone>(),
        handler: |ctx| Box::pin(set(ctx)),
    }
}

async fn set(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let user = &ctx.principal.user;
    let zone = ctx
        .notebook
        .set_time_zone(user, ctx.args.str("zone")?)
        .await?;
    let today = ctx.notebook.today_for(user).await?;
    output(&TimeZone {
        zone: zone.name().to_owned(),
        today,
    })
}
