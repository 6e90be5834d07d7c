//! The MCP server handler on top of `rmcp`: server info, `tools/list` filtered by the caller's
//! scope and paginated, and `tools/call` through the [`Dispatch`] port.
//!
//! rmcp does the protocol (version negotiation, the four eras, `server/discover`, `_meta` and
//! header checks); the HTTP layer in front of it (`crate::http`) authenticates and puts the
//! verified [`Principal`] and the request's correlation id into the request extensions, which
//! rmcp hands to this handler as `http::request::Parts`.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorData, Implementation,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::Value;

use crate::auth::{Principal, Scope};
use crate::telemetry;
use crate::tools::{self, Dispatch, ToolError};

/// The request's correlation id, set by the HTTP layer.
#[derive(Debug, Clone)]
pub struct CorrelationId(pub String);

/// Tools per `tools/list` page.
pub const TOOLS_PAGE_SIZE: usize = 50;

const INSTRUCTIONS: &str = "nib serves the user's handwritten notebook: pages (OCR text, markdown, structured lines, signed links to the page images) and the tasks written on them. Use search_pages or list_pages to find pages, get_page to read one, list_tasks / create_task / update_task_status for tasks.";

/// The catalog rendered as rmcp tools, once.
static TOOLS: LazyLock<Vec<(Scope, Tool)>> = LazyLock::new(|| {
    tools::catalog()
        .iter()
        .map(|t| {
            let object = |v: &Value| Arc::new(v.as_object().cloned().unwrap_or_default());
            let tool = Tool::new(t.name, t.description, object(&t.input_schema))
                .with_title(t.title)
                .with_raw_output_schema(object(&t.output_schema))
                .with_annotations(ToolAnnotations::from_raw(
                    Some(t.title.to_owned()),
                    Some(t.read_only),
                    Some(t.destructive),
                    Some(t.idempotent),
                    Some(t.open_world),
                ));
            (t.scope, tool)
        })
        .collect()
});

/// The rmcp server handler. Cheap to clone: rmcp's stateless transport builds one per request.
#[derive(Clone)]
pub struct NibMcp {
    dispatch: Arc<dyn Dispatch>,
}

impl NibMcp {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        NibMcp { dispatch }
    }
}

fn parts(ctx: &RequestContext<RoleServer>) -> Option<&http::request::Parts> {
    ctx.extensions.get::<http::request::Parts>()
}

fn principal(ctx: &RequestContext<RoleServer>) -> Option<&Principal> {
    parts(ctx).and_then(|p| p.extensions.get::<Principal>())
}

fn correlation(ctx: &RequestContext<RoleServer>) -> String {
    parts(ctx)
        .and_then(|p| p.extensions.get::<CorrelationId>())
        .map(|c| c.0.clone())
        .unwrap_or_else(telemetry::correlation_id)
}

/// The tools a caller with `scope` sees, in catalog order.
pub fn visible_tools(scope: Scope) -> impl Iterator<Item = &'static Tool> {
    TOOLS
        .iter()
        .filter(move |(needed, _)| scope.allows(*needed))
        .map(|(_, t)| t)
}

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("tools:{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
    raw.strip_prefix("tools:")?.parse().ok()
}

/// An `isError` result: a readable message. No structured content, since it would not match
/// the tool's output schema.
fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The protocol revisions nib speaks, oldest first.
pub const SUPPORTED_VERSIONS: [ProtocolVersion; 4] = [
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

impl ServerHandler for NibMcp {
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&SUPPORTED_VERSIONS)
    }

    fn get_info(&self) -> ServerConfig {
        let mut info = Implementation::new("nib", env!("CARGO_PKG_VERSION"));
        info.title = Some("nib notebook".into());
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(info)
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // Without a principal (public discovery) the caller sees what a read token would.
        let scope = principal(&ctx).map_or(Scope::Read, |p| p.scope);
        let offset = match request.and_then(|r| r.cursor) {
            Some(c) => decode_cursor(&c)
                .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
            None => 0,
        };
        let all: Vec<Tool> = visible_tools(scope).cloned().collect();
        let page: Vec<Tool> = all
            .iter()
            .skip(offset)
            .take(TOOLS_PAGE_SIZE)
            .cloned()
            .collect();
        let mut result = ListToolsResult::with_all_items(page);
        if offset + TOOLS_PAGE_SIZE < all.len() {
            result.next_cursor = Some(encode_cursor(offset + TOOLS_PAGE_SIZE));
        }
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, ErrorData> {
        let Some(principal) = principal(&ctx) else {
            // The HTTP layer never lets an unauthenticated tools/call through.
            return Err(ErrorData::invalid_request("authentication required", None));
        };
        let name = request.name.as_ref();
        let args = request.arguments.unwrap_or_default();
        match self.dispatch.call(principal, name, args).await {
            Ok(value) => Ok(CallToolResult::structured(value).into()),
            Err(ToolError::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            )),
            Err(ToolError::Internal(e)) => {
                let id = correlation(&ctx);
                tracing::error!(correlation_id = %id, tool = name, error = %telemetry::chain(&e), "tool failed");
                Err(ErrorData::internal_error(
                    "internal error",
                    Some(serde_json::json!({ "correlationId": id })),
                ))
            }
            Err(business) => Ok(error_result(business.to_string()).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_scope_sees_only_read_tools() {
        let names: Vec<&str> = visible_tools(Scope::Read)
            .map(|t| t.name.as_ref())
            .collect();
        assert!(names.contains(&"get_page"));
        assert!(!names.contains(&"create_task"));
        assert_eq!(visible_tools(Scope::Write).count(), tools::catalog().len());
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(decode_cursor(&encode_cursor(50)), Some(50));
        assert_eq!(decode_cursor("garbage!"), None);
    }
}
