//! Diagnostic tools the MCP conformance suite calls (feature `conformance-fixtures`, built only
//! by `make test` for the conformance run; never in a release build). They touch no user data,
//! so they answer without a token, which is what lets the suite (it sends none) exercise
//! `tools/call` header handling.

use std::sync::{Arc, LazyLock};

use rmcp::RoleServer;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData, Tool};
use rmcp::service::RequestContext;

const SIMPLE: &str = "test_simple_text";
const MISSING_CAPABILITY: &str = "test_missing_capability";

pub static TOOLS: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    let empty = Arc::new(
        serde_json::json!({ "type": "object", "properties": {} })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    vec![
        Tool::new(
            SIMPLE,
            "Conformance fixture: returns a fixed text.",
            empty.clone(),
        ),
        Tool::new(
            MISSING_CAPABILITY,
            "Conformance fixture: needs the client's sampling capability.",
            empty,
        ),
    ]
});

/// The client's declared capabilities: from `_meta` (2026-07-28) or the initialize handshake.
fn declares_sampling(ctx: &RequestContext<RoleServer>) -> bool {
    let meta = serde_json::to_value(&ctx.meta).unwrap_or_default();
    if let Some(caps) = meta.get("io.modelcontextprotocol/clientCapabilities") {
        return caps.get("sampling").is_some();
    }
    ctx.peer
        .peer_info()
        .is_some_and(|info| info.capabilities.sampling.is_some())
}

/// Answers a fixture tool, or `None` for every other name.
pub fn call(
    name: &str,
    ctx: &RequestContext<RoleServer>,
) -> Option<Result<CallToolResponse, ErrorData>> {
    match name {
        SIMPLE => Some(Ok(CallToolResult::success(vec![ContentBlock::text(
            "This is a simple text response for testing.",
        )])
        .into())),
        MISSING_CAPABILITY if !declares_sampling(ctx) => Some(Err(ErrorData::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "this tool needs the client's sampling capability",
            Some(serde_json::json!({ "requiredCapabilities": { "sampling": {} } })),
        ))),
        MISSING_CAPABILITY => Some(Ok(CallToolResult::success(vec![ContentBlock::text(
            "sampling declared",
        )])
        .into())),
        _ => None,
    }
}
