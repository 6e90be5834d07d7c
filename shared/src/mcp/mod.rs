//! The MCP server: ours, on rmcp's model types. [`protocol`] takes one typed JSON-RPC message
//! and applies each protocol revision's lifecycle rules; the methods here answer the requests
//! (server info, `tools/list` filtered by the caller's scope and paginated, `tools/call`
//! through the [`Dispatch`] port, resources and prompts).
//!
//! The HTTP layer in front (`crate::http`) authenticates, decides from [`access`] what each
//! request needs of its caller (401/403 are its answers, never this module's), checks the
//! transport's rules of each revision, and hands every message here with its [`Ctx`]: the
//! verified [`Principal`], the request's correlation id and the revision it speaks.

use std::sync::{Arc, LazyLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResult, ContentBlock, DiscoverResult, ErrorData,
    GetPromptRequestParams, GetPromptResult, Icon, Implementation, InitializeRequestParams,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResult, RequestMetaObject, ServerCapabilities,
    ServerConfig, ServerResult, Tool, ToolAnnotations,
};
use serde_json::Value;

use crate::auth::{Principal, Scope};
use crate::telemetry;
use crate::tools::{self, Dispatch, Output, ToolError};

/// Tools per `tools/list` page.
pub const TOOLS_PAGE_SIZE: usize = 50;

/// How long a client may keep a `tools/list` result (2026-07-28 caching hints).
const TOOLS_TTL_MS: u64 = 300_000;

const INSTRUCTIONS: &str = "nib serves the user's handwritten notebook: pages (OCR text, markdown, structured lines, signed links to the page images) and the tasks written on them. Use search_pages or list_pages to find pages, get_page to read one, list_tasks / create_task / update_task_status for tasks (get_task for a task's pages and who changed its status; link_tasks makes two tasks that are the same work one), list_access for who read the notebook. delete_page and delete_task move an item to the trash (list_trash), restorable for 30 days with restore_page / restore_task. get_page, list_pages and list_tasks answer a revision: pass it back as if_revision to hear {unchanged: true} when nothing changed. Pages are also resources (nib://pages/{page_id}, its image nib://pages/{page_id}/image.png, tasks nib://tasks/{task_link_id}); the prompts daily_review, weekly_review and carry_forward review the notebook.";

/// nib's icon: a notebook page with ruled lines and a ticked box, as an SVG data URI (no host
/// to fetch it from, so it shows behind any CSP that allows `data:` images).
const ICON_SVG: &str = "data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCA2NCA2NCI+PHJlY3QgeD0iMTAiIHk9IjYiIHdpZHRoPSI0NCIgaGVpZ2h0PSI1MiIgcng9IjQiIGZpbGw9IiNmZmY4ZTEiIHN0cm9rZT0iIzMzMyIgc3Ryb2tlLXdpZHRoPSIzIi8+PHBhdGggZD0iTTIyIDIwaDI0TTIyIDMwaDI0TTIyIDQwaDE2IiBzdHJva2U9IiM1NTciIHN0cm9rZS13aWR0aD0iMyIvPjxwYXRoIGQ9Ik0xNCAxOGw0IDQgNi04IiBmaWxsPSJub25lIiBzdHJva2U9IiMyYTciIHN0cm9rZS13aWR0aD0iMyIvPjwvc3ZnPg==";

/// The icons of the server, its tools, templates and prompts.
pub fn icons() -> Vec<Icon> {
    vec![
        Icon::new(ICON_SVG)
            .with_mime_type("image/svg+xml")
            .with_sizes(vec!["any".into()]),
    ]
}

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
                    Some(t.annotations.read_only),
                    Some(t.annotations.destructive),
                    Some(t.annotations.idempotent),
                    Some(t.annotations.open_world),
                ))
                .with_icons(icons());
            let tool = match viewer::tool_meta(t.name) {
                Some(meta) => tool.with_meta(meta),
                None => tool,
            };
            (t.scope, tool)
        })
        .collect()
});

/// What a message is answered with, besides its id: a result to serialize, or a result
/// already serialized for the revision it is sent to (`tools/list` pages are rendered once).
#[derive(Debug)]
pub enum Reply {
    Result(Box<rmcp::model::ServerResult>),
    Json(Bytes),
}

/// What the HTTP layer tells the server about a message.
#[derive(Debug)]
pub struct Ctx<'a> {
    /// The verified caller; `None` only for what needs no token ([`access`]).
    pub principal: Option<&'a Principal>,
    pub correlation_id: &'a str,
    /// The revision the message speaks: the initialize request's, else the
    /// `MCP-Protocol-Version` header (which must equal a `_meta` version), else 2025-03-26
    /// (the transport's rule for a request without the header).
    pub version: ProtocolVersion,
    /// The request's `_meta` (2026-07-28: its version and the client's capabilities).
    pub meta: RequestMetaObject,
    /// The transport can put a question to the client while this request waits (the eras
    /// with sessions: a session whose client declared elicitation, and a reply it accepts as
    /// an event stream). A question then comes back as an `InputRequiredResult`, which the
    /// transport asks on the stream and answers by calling again ([`confirm`]).
    pub elicits_on_stream: bool,
}

impl Ctx<'_> {
    /// Whether the message speaks 2026-07-28 or later.
    pub fn is_stateless_era(&self) -> bool {
        self.version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
    }

    /// The caller of a request that needs one. The HTTP layer let the request through only
    /// with a principal whose scope allows it ([`access::need`]), so a missing one is our
    /// own fault.
    fn caller(&self) -> Result<&Principal, ErrorData> {
        self.principal.ok_or_else(|| {
            tracing::error!(correlation_id = %self.correlation_id, "a request that needs a principal reached the handler without one");
            internal_error(self.correlation_id)
        })
    }
}

fn internal_error(correlation_id: &str) -> ErrorData {
    ErrorData::internal_error(
        "internal error",
        Some(serde_json::json!({ "correlationId": correlation_id })),
    )
}

/// The MCP server. Cheap to clone; one serves every request of a process.
#[derive(Clone)]
pub struct NibMcp {
    dispatch: Arc<dyn Dispatch>,
    /// The origin of signed page image URLs: the page viewer's CSP allows images from it only.
    image_origin: Arc<str>,
    /// `tools/list` pages, rendered once per scope, offset and result shape.
    tool_lists: Arc<protocol::ToolLists>,
}

impl NibMcp {
    pub fn new(dispatch: Arc<dyn Dispatch>) -> Self {
        NibMcp {
            dispatch,
            image_origin: Arc::from("http://127.0.0.1"),
            tool_lists: Arc::default(),
        }
    }

    /// Where signed page images come from (an origin or any URL on it): the server's public URL
    /// locally, the S3 bucket's endpoint on AWS.
    pub fn with_image_origin(mut self, url: &str) -> Self {
        self.image_origin = Arc::from(viewer::origin_of(url));
        self
    }

    /// The tool calls' dispatch (the `/pages` route reads pages through it too).
    pub fn dispatch(&self) -> &Arc<dyn Dispatch> {
        &self.dispatch
    }
}

/// The tools a caller with `scope` sees, in catalog order.
pub fn visible_tools(scope: Scope) -> impl Iterator<Item = &'static Tool> {
    let fixtures = fixtures::enabled()
        .then(|| fixtures::TOOLS.iter())
        .into_iter()
        .flatten();
    fixtures.chain(
        TOOLS
            .iter()
            .filter(move |(needed, _)| scope.allows(*needed))
            .map(|(_, t)| t),
    )
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

/// Server name, version, capabilities and instructions.
fn server_info() -> ServerConfig {
    let mut info = Implementation::new("nib", env!("CARGO_PKG_VERSION"));
    info.title = Some("nib notebook".into());
    info.icons = Some(icons());
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build(),
    )
    .with_server_info(info)
    .with_instructions(INSTRUCTIONS)
}

impl NibMcp {
    /// `initialize`: the server info, at the version negotiated with the client's.
    fn initialize(&self, request: &InitializeRequestParams) -> Result<InitializeResult, ErrorData> {
        let mut info = server_info();
        info.protocol_version = protocol::negotiate(&request.protocol_version)?;
        Ok(info)
    }

    /// `server/discover` (2026-07-28).
    fn discover(&self) -> DiscoverResult {
        DiscoverResult::from_server_info(SUPPORTED_VERSIONS.to_vec(), server_info())
    }

    /// One page of the tools the caller may see: rendered once per scope, offset and shape.
    fn list_tools(
        &self,
        request: Option<&PaginatedRequestParams>,
        ctx: &Ctx<'_>,
    ) -> Result<Bytes, ErrorData> {
        // Without a principal (public discovery) the caller sees what a read token would.
        let scope = ctx.principal.map_or(Scope::Read, |p| p.scope);
        let offset = match request.and_then(|r| r.cursor.as_deref()) {
            Some(c) => decode_cursor(c)
                .filter(|&o| o <= visible_tools(scope).count())
                .ok_or_else(|| ErrorData::invalid_params("invalid cursor", None))?,
            None => 0,
        };
        Ok(self
            .tool_lists
            .page(scope, offset, ctx.is_stateless_era(), || {
                tools_page(scope, offset)
            }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: &Ctx<'_>,
    ) -> Result<Reply, ErrorData> {
        let name = request.name.as_ref();
        if fixtures::enabled()
            && let Some(result) = fixtures::call(name, &ctx.meta)
        {
            return result.map(|r| Reply::Result(Box::new(ServerResult::CallToolResult(r))));
        }
        // An unknown name is a protocol error whoever asks: it reveals nothing tools/list
        // does not, and it is a malformed request, which the design answers before auth.
        let Some(tool) = tools::find(name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            ));
        };
        let principal = ctx.caller()?;
        debug_assert!(principal.scope.allows(tool.scope));
        let args = request.arguments.unwrap_or_default();
        if confirm::must_ask(tool.annotations.destructive, ctx) {
            if let Err(e) = confirm::check_arguments(tool, &args) {
                return Ok(Reply::Result(Box::new(ServerResult::CallToolResult(
                    error_result(e.to_string()),
                ))));
            }
            let state = confirm::state(principal, name, &args);
            match confirm::answer(
                &state,
                request.request_state.as_deref(),
                request.input_responses.as_ref(),
            )? {
                confirm::Answer::Accept => {}
                confirm::Answer::Refused(how) => {
                    tracing::info!(correlation_id = %ctx.correlation_id, tool = name, answer = how, "destructive tool not run");
                    return Ok(Reply::Result(Box::new(ServerResult::CallToolResult(
                        confirm::refused(name, how),
                    ))));
                }
                confirm::Answer::None => {
                    // What the tool would change, named; when it names nothing (an unknown
                    // id), the tool runs and says so itself.
                    if let Some(what) = self.what_would_change(principal, name, &args).await {
                        return Ok(Reply::Result(Box::new(ServerResult::InputRequiredResult(
                            confirm::ask(what, state),
                        ))));
                    }
                }
            }
        }
        match self.dispatch.call(principal, name, args).await {
            Ok(output) => {
                // The text block stays first and unchanged; links follow where the revision
                // has them.
                let links = resources::links_for(name, &output, &ctx.version);
                // What the page viewer needs to know: whether ticking a box may change a task.
                let can_write = viewer::WIDGET_TOOLS
                    .contains(&name)
                    .then(|| principal.scope.allows(Scope::Edit));
                Ok(Reply::Json(tool_result(
                    &output,
                    &links,
                    can_write,
                    ctx.is_stateless_era(),
                )))
            }
            Err(ToolError::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            )),
            Err(e @ (ToolError::Internal(_) | ToolError::Unavailable(_))) => {
                tracing::error!(correlation_id = %ctx.correlation_id, tool = name, error = %telemetry::chain(&e), "tool failed");
                Err(internal_error(ctx.correlation_id))
            }
            Err(business) => Ok(Reply::Result(Box::new(ServerResult::CallToolResult(
                error_result(business.to_string()),
            )))),
        }
    }

    async fn read_resource(
        &self,
        request: &ReadResourceRequestParams,
        ctx: &Ctx<'_>,
    ) -> Result<ReadResourceResult, ErrorData> {
        let uri = request.uri.as_str();
        // The viewer holds no user data: anyone may read it (hosts prefetch it).
        if uri == viewer::VIEWER_URI {
            return Ok(viewer::read(&self.image_origin));
        }
        if fixtures::enabled()
            && let Some(result) = fixtures::read_resource(uri)
        {
            return Ok(result);
        }
        // Not one of nib's URIs: not found whoever asks (it reveals nothing).
        if !resources::is_nib_uri(uri) {
            return Err(resources::resource_not_found(uri));
        }
        let principal = ctx.caller()?;
        self.read_nib_resource(principal, uri, ctx.correlation_id)
            .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: &Ctx<'_>,
    ) -> Result<GetPromptResult, ErrorData> {
        let name = request.name.as_str();
        let args = request.arguments.unwrap_or_default();
        if fixtures::enabled()
            && let Some(result) = fixtures::get_prompt(name, &args)
        {
            return Ok(result);
        }
        if !prompts::is_prompt(name) {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt: {name}"),
                None,
            ));
        }
        let principal = ctx.caller()?;
        let builder = prompts::Builder {
            dispatch: self.dispatch.as_ref(),
            principal,
        };
        match builder.get(name, &args).await {
            Ok(result) => Ok(result),
            Err(e @ prompts::PromptError::Argument(..)) => {
                Err(ErrorData::invalid_params(e.to_string(), None))
            }
            Err(prompts::PromptError::Tool(ToolError::InvalidArgument { name: arg, reason })) => {
                Err(ErrorData::invalid_params(
                    format!("invalid argument '{arg}': {reason}"),
                    None,
                ))
            }
            Err(e) => {
                tracing::error!(correlation_id = %ctx.correlation_id, prompt = name, error = %telemetry::chain(&e), "prompt failed");
                Err(internal_error(ctx.correlation_id))
            }
        }
    }
}

/// A successful `tools/call` result, written in one pass: the tool's output as
/// `structuredContent` and, escaped, as the first (text) content block, then the resource
/// links, `isError: false`, and `_meta["nib/canWrite"]` for the tools the page viewer calls.
/// It is what rmcp's `CallToolResult::structured` serializes to, for `stateless_era` with its
/// `resultType` (tested against it), without building the output as a tree first.
fn tool_result(
    output: &Output,
    links: &[rmcp::model::Resource],
    can_write: Option<bool>,
    stateless_era: bool,
) -> Bytes {
    let json = output.get();
    let mut out = Vec::with_capacity(2 * json.len() + 128 + 160 * links.len());
    out.push(b'{');
    if stateless_era {
        out.extend_from_slice(b"\"resultType\":\"complete\",");
    }
    out.extend_from_slice(b"\"content\":[{\"type\":\"text\",\"text\":");
    output.write_text(&mut out);
    out.push(b'}');
    // Writing JSON into a Vec cannot fail.
    for link in links {
        out.push(b',');
        let _ = serde_json::to_writer(&mut out, &ContentBlock::resource_link(link.clone()));
    }
    out.extend_from_slice(b"],\"structuredContent\":");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b",\"isError\":false");
    if let Some(can_write) = can_write {
        out.extend_from_slice(b",\"_meta\":{\"nib/canWrite\":");
        out.extend_from_slice(if can_write { b"true" } else { b"false" });
        out.push(b'}');
    }
    out.push(b'}');
    out.into()
}

/// The `tools/list` result of one page of a scope's tools.
fn tools_page(scope: Scope, offset: usize) -> ListToolsResult {
    let total = visible_tools(scope).count();
    let page: Vec<Tool> = visible_tools(scope)
        .skip(offset)
        .take(TOOLS_PAGE_SIZE)
        .cloned()
        .collect();
    // The list depends on the caller's scope: private, and stable for a while.
    let mut result = ListToolsResult::with_all_items(page)
        .with_ttl_ms(TOOLS_TTL_MS)
        .with_cache_scope(CacheScope::Private);
    if offset + TOOLS_PAGE_SIZE < total {
        result.next_cursor = Some(encode_cursor(offset + TOOLS_PAGE_SIZE));
    }
    result
}

pub mod access;
pub mod confirm;
mod fixtures;
mod prompts;
pub mod protocol;
mod resources;
pub mod viewer;

pub use prompts::max_dispatches as prompt_max_dispatches;
pub use resources::page_resource;

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

#[cfg(test)]
mod tool_result_tests {
    use super::*;

    /// Our one-pass writer says what rmcp's `CallToolResult::structured` (shaped for the
    /// revision) says, with links and the viewer's `_meta`.
    #[test]
    fn a_tool_result_is_what_rmcps_structured_result_serializes_to() {
        let value = serde_json::json!({
            "page_id": "p1", "text": "a \"quoted\" line\nand a second, ü",
            "lines": [{ "n": 1, "done": null }], "unchanged": false,
        });
        let output = Output::new(serde_json::value::to_raw_value(&value).unwrap());
        let links = [page_resource("p1", "2026-06-19")];
        for stateless in [false, true] {
            for (links, can_write) in [(&links[..0], None), (&links[..], Some(true))] {
                let ours: Value =
                    serde_json::from_slice(&tool_result(&output, links, can_write, stateless))
                        .unwrap();
                let mut theirs = CallToolResult::structured(value.clone());
                theirs
                    .content
                    .extend(links.iter().cloned().map(ContentBlock::resource_link));
                if let Some(w) = can_write {
                    theirs.meta =
                        serde_json::from_value(serde_json::json!({ "nib/canWrite": w })).ok();
                }
                let mut theirs = ServerResult::CallToolResult(theirs);
                protocol::tests::shape_for(&mut theirs, stateless);
                let theirs = serde_json::to_value(&theirs).unwrap();
                assert_eq!(ours, theirs, "stateless {stateless}, links {}", links.len());
            }
        }
    }
}
