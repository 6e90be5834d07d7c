//! `list_access {since?, limit?, cursor?}` -> `{"records":[{at,client,credential_id,tool,
//! page_ids,task_ids}],"next_cursor","limit_applied"}`, newest first: the notebook's access
//! record (who opened what; `notebook::access`). Itself not recorded.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::cursor::{self, Cursor};
use super::{
    Annotations, Ctx, DATE_PATTERN, Output, Paging, ToolClass, ToolDef, ToolError, cursor_schema,
    limit_schema, object_schema, output, output_schema,
};
use crate::auth::Scope;
use crate::notebook::AccessRecord;

/// The access record, newest first.
#[derive(Serialize, JsonSchema)]
struct Records<'a> {
    records: Vec<AccessRecordView<'a>>,
    #[serde(flatten)]
    paging: Paging,
}

/// A record as the tool and `nib access list --json` show it.
#[derive(Serialize, JsonSchema)]
pub struct AccessRecordView<'a> {
    /// When, RFC 3339 in UTC with milliseconds.
    at: String,
    /// The OAuth client's name, or the API token's label; null for a token without one.
    client: Option<&'a str>,
    /// The API token's id (tok_...), grant_{id} for an OAuth connection, or page_session for the page link in a signed-in browser.
    credential_id: &'a str,
    /// The tool called, or resources/read.
    tool: &'a str,
    page_ids: &'a [crate::domain::PageId],
    task_ids: &'a [crate::domain::TaskLinkId],
}

impl<'a> AccessRecordView<'a> {
    pub fn of(r: &'a AccessRecord) -> Self {
        AccessRecordView {
            at: rfc3339_ms(r.at_ms),
            client: r.client.as_deref(),
            credential_id: &r.credential_id,
            tool: &r.tool,
            page_ids: &r.page_ids,
            task_ids: &r.task_ids,
        }
    }
}

pub fn def() -> ToolDef {
    ToolDef {
        name: "list_access",
        title: "List who read the notebook",
        description: "The notebook's access record, newest first: each tool call that opened the notebook, with when (UTC), which client or token (its name and credential id), which tool, and the ids of the pages and tasks it opened (never their content). `since` (YYYY-MM-DD, UTC) keeps records from that day on; records are kept 90 days. `limit` defaults to 50 (max 200; more counts as 200); when more follow, `next_cursor` is set: pass it as `cursor` to continue. Recent calls can take up to a second to appear.",
        scope: Scope::Read,
        class: ToolClass::Pages,
        annotations: Annotations::READ_ONLY,
        input_schema: object_schema(
            json!({
                "since": { "type": "string", "pattern": DATE_PATTERN, "description": "First day, inclusive (YYYY-MM-DD, UTC)." },
                "limit": limit_schema(50, 200),
                "cursor": cursor_schema()
            }),
            &[],
        ),
        output_schema: output_schema::<Records>(),
        handler: |ctx| Box::pin(run(ctx)),
    }
}

/// `2026-06-19T08:15:02.123Z`.
pub fn rfc3339_ms(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|d| {
            d.format(time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
            ))
            .ok()
        })
        .unwrap_or_default()
}

async fn run(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let since = ctx.args.opt_date("since")?;
    let limit = ctx.args.limit("limit", 50, 200)?;
    let before = cursor::access(ctx.args.opt_str("cursor")?)?;
    let since_ms = since.map(|d| d.inner().midnight().assume_utc().unix_timestamp() * 1000);
    let (records, more) = ctx
        .notebook
        .access_log()
        .list(&ctx.principal.user, since_ms, before, limit)
        .await?;
    let next_cursor = records
        .last()
        .filter(|_| more)
        .map(|(p, _)| Cursor::Access(*p).encode());
    output(&Records {
        records: records
            .iter()
            .map(|(_, r)| AccessRecordView::of(r))
            .collect(),
        paging: Paging {
            next_cursor,
            limit_applied: limit,
        },
    })
}
