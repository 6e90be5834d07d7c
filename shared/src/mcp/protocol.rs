//! One JSON-RPC request, served by the rules of the protocol revision it speaks: the typed
//! request (rmcp's model types) to [`NibMcp`]'s methods, and the result shaped for that
//! revision. This is what rmcp's `ServerHandler` dispatch did for us, written for a stateless
//! server that answers every message on its own (no session, no handshake kept):
//!
//! - a `_meta` protocol version (2026-07-28's inline negotiation) must be one nib speaks
//!   (-32022), and a request that negotiates inline, or `server/discover`, must carry the
//!   2026-07-28 request metadata (-32602);
//! - `ping`, `resources/subscribe` and `resources/unsubscribe` exist only for the revisions
//!   with an initialize handshake;
//! - results for 2026-07-28 and later carry caching hints and `resultType`; older revisions
//!   get the shape they knew (no `resultType`, object-only tool output), and on 2026-07-28 a
//!   missing resource is -32602 instead of -32002.
//!
//! The transport's rules (headers against the body, HTTP statuses) are `http::mcp_endpoint`'s.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;

use rmcp::model::{ClientRequest, ErrorCode, ErrorData, GetMeta, ProtocolVersion, ServerResult};

use super::{Ctx, NibMcp, Reply, SUPPORTED_VERSIONS, prompts, resources};
use crate::auth::Scope;

/// The version `initialize` agrees to: the client's when nib speaks it and it has a handshake,
/// else the newest nib speaks that has one (the client decides whether it can go on).
pub fn negotiate(requested: &ProtocolVersion) -> Result<ProtocolVersion, ErrorData> {
    if requested.has_initialize() && SUPPORTED_VERSIONS.contains(requested) {
        return Ok(requested.clone());
    }
    SUPPORTED_VERSIONS
        .iter()
        .filter(|v| v.has_initialize())
        .max_by(|a, b| a.as_str().cmp(b.as_str()))
        .cloned()
        .ok_or_else(|| {
            ErrorData::unsupported_protocol_version(requested.clone(), &SUPPORTED_VERSIONS)
        })
}

/// Whether a request negotiates its version inline: it names one in `_meta`, or it is
/// `server/discover`. The transport answers such a request's protocol errors with HTTP 4xx
/// statuses; the others are answered in band, with 200.
pub fn negotiates_inline(request: &ClientRequest) -> bool {
    request.get_meta().protocol_version().is_some()
        || matches!(request, ClientRequest::DiscoverRequest(_))
}

/// Whether a request that negotiates inline lacks the 2026-07-28 request metadata.
pub fn meta_malformed(request: &ClientRequest) -> bool {
    !request
        .get_meta()
        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
        .is_empty()
}

/// Serves one request.
pub async fn serve(
    mcp: &NibMcp,
    request: ClientRequest,
    ctx: &Ctx<'_>,
) -> Result<Reply, ErrorData> {
    let stateless_era = ctx.is_stateless_era();
    let is_initialize = matches!(request, ClientRequest::InitializeRequest(_));
    let requested = request.get_meta().protocol_version();
    if !is_initialize
        && let Some(v) = &requested
        && !SUPPORTED_VERSIONS.contains(v)
    {
        return Err(ErrorData::unsupported_protocol_version(
            v.clone(),
            &SUPPORTED_VERSIONS,
        ));
    }
    // Self-contained metadata is required of requests that use the inline lifecycle: discover,
    // and any request that declares 2026-07-28 or later in its own `_meta`.
    let inline = !is_initialize
        && (matches!(request, ClientRequest::DiscoverRequest(_))
            || requested
                .as_ref()
                .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str()));
    if inline && meta_malformed(&request) {
        let missing = request
            .get_meta()
            .missing_required_keys(&ProtocolVersion::V_2026_07_28);
        return Err(ErrorData::invalid_params(
            format!(
                "request _meta is missing or has malformed required fields: {}",
                missing.join(", ")
            ),
            None,
        ));
    }
    let legacy = !inline && ctx.version.has_initialize();
    let answer = dispatch(mcp, request, ctx, legacy).await;
    match answer {
        Ok(Reply::Result(mut result)) => {
            shape(&mut result, stateless_era);
            Ok(Reply::Result(result))
        }
        Ok(raw) => Ok(raw),
        Err(mut error) => {
            if stateless_era && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                error.code = ErrorCode::INVALID_PARAMS;
            }
            Err(error)
        }
    }
}

/// The request to its method; what nib does not offer is "method not found".
async fn dispatch(
    mcp: &NibMcp,
    request: ClientRequest,
    ctx: &Ctx<'_>,
    legacy: bool,
) -> Result<Reply, ErrorData> {
    use ClientRequest as R;
    let result = match request {
        R::InitializeRequest(r) => ServerResult::InitializeResult(mcp.initialize(&r.params)?),
        R::DiscoverRequest(_) => ServerResult::DiscoverResult(mcp.discover()),
        R::PingRequest(_) if legacy => ServerResult::empty(()),
        R::ListToolsRequest(r) => {
            return mcp.list_tools(r.params.as_ref(), ctx).map(Reply::Json);
        }
        R::CallToolRequest(r) => return mcp.call_tool(r.params, ctx).await,
        R::ListResourcesRequest(r) => ServerResult::ListResourcesResult(
            mcp.list_page_resources(
                ctx.principal,
                r.params.and_then(|p| p.cursor),
                ctx.correlation_id,
            )
            .await?,
        ),
        R::ListResourceTemplatesRequest(_) => {
            ServerResult::ListResourceTemplatesResult(resources::templates())
        }
        R::ReadResourceRequest(r) => {
            ServerResult::ReadResourceResult(mcp.read_resource(&r.params, ctx).await?)
        }
        R::ListPromptsRequest(_) => ServerResult::ListPromptsResult(prompts::list()),
        R::GetPromptRequest(r) => {
            ServerResult::GetPromptResult(mcp.get_prompt(r.params, ctx).await?)
        }
        // What nib does not offer (logging, subscriptions, completions, tasks, skills, ping
        // past the handshake revisions) and methods it does not know.
        other => {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                other.method().to_owned(),
                None,
            ));
        }
    };
    Ok(Reply::Result(Box::new(result)))
}

/// A result in the shape of its revision: caching hints and `resultType` from 2026-07-28; the
/// older shape (no `resultType`, object-only tool output) before.
fn shape(result: &mut ServerResult, stateless_era: bool) {
    if stateless_era {
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
}

/// `tools/list` results, serialized once per scope, offset and result shape: the list is the
/// same for every caller of a scope, and serializing its ~20 KB of schemas was most of the
/// cost of answering it.
#[derive(Debug, Default)]
pub struct ToolLists {
    rendered: Mutex<HashMap<(Scope, usize, bool), Bytes>>,
}

impl ToolLists {
    /// The page, rendered by `build` the first time.
    pub fn page(
        &self,
        scope: Scope,
        offset: usize,
        stateless_era: bool,
        build: impl FnOnce() -> rmcp::model::ListToolsResult,
    ) -> Bytes {
        let key = (scope, offset, stateless_era);
        if let Some(json) = self.lock().get(&key) {
            return json.clone();
        }
        let mut result = ServerResult::ListToolsResult(build());
        shape(&mut result, stateless_era);
        let json: Bytes = serde_json::to_vec(&result)
            .expect("a tool list serializes")
            .into();
        self.lock().insert(key, json.clone());
        json
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Scope, usize, bool), Bytes>> {
        self.rendered.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// [`shape`], for the tests of other modules.
    pub fn shape_for(result: &mut ServerResult, stateless_era: bool) {
        shape(result, stateless_era);
    }

    #[test]
    fn initialize_agrees_to_a_version_with_a_handshake() {
        assert_eq!(
            negotiate(&ProtocolVersion::V_2025_06_18).unwrap(),
            ProtocolVersion::V_2025_06_18
        );
        // 2026-07-28 has no handshake, and 2024-11-05 is not spoken: the newest with one.
        for asked in [ProtocolVersion::V_2026_07_28, ProtocolVersion::V_2024_11_05] {
            assert_eq!(negotiate(&asked).unwrap(), ProtocolVersion::V_2025_11_25);
        }
    }
}
