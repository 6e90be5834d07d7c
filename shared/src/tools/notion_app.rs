//! The Notion connection as the owner's web app manages it: `notion_connect {database, token}`,
//! `notion_status {}`, `notion_disconnect {}` (what `nib notion connect|status|disconnect`
//! do). They are app operations ([`super::app_operations`]), not tools: no MCP client lists or
//! calls them (an integration token has no business passing through a model), only a
//! principal of the web app ([`super::APP_CREDENTIAL`]) reaches them, through the same
//! dispatch as the tools, so on AWS the tasks function (which holds the Notion client and the
//! user's key) runs them.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::{
    Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output, output_schema,
};
use crate::adapters::notion::NotionToken;
use crate::auth::Scope;
use crate::notebook::NotebookError;

#[derive(Serialize, JsonSchema)]
struct Connected {
    database_id: String,
}

#[derive(Serialize, JsonSchema)]
struct Status {
    connected: bool,
    database_id: Option<String>,
    /// Unix seconds.
    connected_at: Option<i64>,
    last_ok_at: Option<i64>,
    last_error_at: Option<i64>,
    last_error: Option<String>,
    /// Tasks waiting to be pushed.
    pending: usize,
    /// Until when pushing waits (Notion's Retry-After, or a backoff), unix seconds.
    waiting_until: Option<i64>,
}

#[derive(Serialize, JsonSchema)]
struct Disconnected {
    disconnected: bool,
}

/// What Notion said is the owner's to read (a wrong token, a database not shared).
fn notion_refusal(e: NotebookError) -> ToolError {
    match e {
        NotebookError::Notion(e) => ToolError::Rejected(e.to_string()),
        other => other.into(),
    }
}

pub fn connect_def() -> ToolDef {
    ToolDef {
        name: "notion_connect",
        title: "Connect a Notion database",
        description: "The web app's: connect the database the tasks are pushed to.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(
            json!({
                "database": { "type": "string" },
                "token": { "type": "string" }
            }),
            &["database", "token"],
        ),
        output_schema: output_schema::<Connected>(),
        handler: |ctx| Box::pin(connect(ctx)),
    }
}

async fn connect(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let database = ctx.args.str("database")?;
    let token = NotionToken::parse(ctx.args.str("token")?)
        .ok_or_else(|| ToolError::invalid("token", "an integration token is one word"))?;
    ctx.notebook
        .notion_connect(&ctx.principal.user, database, token)
        .await
        .map_err(notion_refusal)?;
    let status = ctx
        .notebook
        .notion_status(&ctx.principal.user)
        .await?
        .ok_or(ToolError::NotFound("resource"))?;
    output(&Connected {
        database_id: status.database_id,
    })
}

pub fn status_def() -> ToolDef {
    ToolDef {
        name: "notion_status",
        title: "The Notion connection",
        description: "The web app's: the connected database and how pushing goes.",
        scope: Scope::Read,
        class: ToolClass::Tasks,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(json!({}), &[]),
        output_schema: output_schema::<Status>(),
        handler: |ctx| Box::pin(status(ctx)),
    }
}

async fn status(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let answer = match ctx.notebook.notion_status(&ctx.principal.user).await? {
        None => Status {
            connected: false,
            database_id: None,
            connected_at: None,
            last_ok_at: None,
            last_error_at: None,
            last_error: None,
            pending: 0,
            waiting_until: None,
        },
        Some(s) => Status {
            connected: true,
            waiting_until: s.retry_after_until.or(s.backoff_until),
            last_error_at: s.last_error.as_ref().map(|(at, _, _)| *at),
            last_error: s
                .last_error
                .map(|(_, kind, message)| format!("{kind}: {message}")),
            database_id: Some(s.database_id),
            connected_at: Some(s.connected_at),
            last_ok_at: s.last_ok_at,
            pending: s.pending,
        },
    };
    output(&answer)
}

pub fn disconnect_def() -> ToolDef {
    ToolDef {
        name: "notion_disconnect",
        title: "Disconnect Notion",
        description: "The web app's: forget the connection and its outbox.",
        scope: Scope::Write,
        class: ToolClass::Tasks,
        annotations: Annotations::IDEMPOTENT_WRITE,
        input_schema: object_schema(json!({}), &[]),
        output_schema: output_schema::<Disconnected>(),
        handler: |ctx| Box::pin(disconnect(ctx)),
    }
}

async fn disconnect(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let disconnected = ctx.notebook.notion_disconnect(&ctx.principal.user).await?;
    output(&Disconnected { disconnected })
}
