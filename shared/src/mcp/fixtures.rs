//! Diagnostic tools the MCP conformance suite calls. They answer only in a debug build started
//! with `NIB_CONFORMANCE_FIXTURES=1` (tests/conformance/run.sh); in a release build `enabled` is
//! a constant false and the optimiser drops them. They touch no user data, so they answer
//! without a token, which is what lets the suite (it sends none) exercise `tools/call` header
//! handling.
//!
//! A run-time switch rather than a cargo feature: a feature built the whole workspace a second
//! time in `make test` (every crate that depends on nib-shared, about three minutes of a clean
//! build on two cores).

use std::sync::{Arc, LazyLock};

/// Whether the fixtures answer: a debug build, and the variable set to 1.
pub fn enabled() -> bool {
    static ON: LazyLock<bool> =
        LazyLock::new(|| std::env::var_os("NIB_CONFORMANCE_FIXTURES").is_some_and(|v| v == "1"));
    cfg!(debug_assertions) && *ON
}

use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, ErrorData, RequestMetaObject, Tool};

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

/// Whether the request's `_meta` (2026-07-28) declares the client's sampling capability. A
/// stateless server keeps no handshake, so older revisions declare nothing.
fn declares_sampling(meta: &RequestMetaObject) -> bool {
    meta.client_capabilities()
        .is_some_and(|caps| caps.sampling.is_some())
}

/// Whether `name` is one of the fixture tools (they answer without a token).
pub fn is_tool(name: &str) -> bool {
    [SIMPLE, MISSING_CAPABILITY].contains(&name)
}

/// Answers a fixture tool, or `None` for every other name.
pub fn call(name: &str, meta: &RequestMetaObject) -> Option<Result<CallToolResult, ErrorData>> {
    match name {
        SIMPLE => Some(Ok(CallToolResult::success(vec![ContentBlock::text(
            "This is a simple text response for testing.",
        )]))),
        MISSING_CAPABILITY if !declares_sampling(meta) => Some(Err(ErrorData::new(
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            "this tool needs the client's sampling capability",
            Some(serde_json::json!({ "requiredCapabilities": { "sampling": {} } })),
        ))),
        MISSING_CAPABILITY => Some(Ok(CallToolResult::success(vec![ContentBlock::text(
            "sampling declared",
        )]))),
        _ => None,
    }
}

// Resources and prompts of the suite's scenarios (resources-*, prompts-*, caching). Like the
// tools, they hold no user data and answer without a token.

/// A 1x1 PNG.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const STATIC_TEXT: &str = "test://static-text";
const STATIC_BINARY: &str = "test://static-binary";

pub fn resources() -> Vec<rmcp::model::Resource> {
    use rmcp::model::Resource;
    vec![
        Resource::new(STATIC_TEXT, "static-text").with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary").with_mime_type("image/png"),
    ]
}

/// Reads a fixture resource, or `None` for every other URI.
pub fn read_resource(uri: &str) -> Option<rmcp::model::ReadResourceResult> {
    use rmcp::model::{CacheScope, ReadResourceResult, ResourceContents};
    let contents = if uri == STATIC_TEXT {
        ResourceContents::text("This is the content of the static text resource.", uri)
    } else if uri == STATIC_BINARY {
        ResourceContents::blob(PIXEL_PNG, uri).with_mime_type("image/png")
    } else {
        let id = uri
            .strip_prefix("test://template/")?
            .strip_suffix("/data")?;
        ResourceContents::text(
            serde_json::json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                .to_string(),
            uri,
        )
        .with_mime_type("application/json")
    };
    Some(
        ReadResourceResult::new(vec![contents])
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Public),
    )
}

pub fn resource_templates() -> Vec<rmcp::model::ResourceTemplate> {
    vec![
        rmcp::model::ResourceTemplate::new("test://template/{id}/data", "template")
            .with_mime_type("application/json"),
    ]
}

pub fn prompts() -> Vec<rmcp::model::Prompt> {
    use rmcp::model::{Prompt, PromptArgument};
    let required = |n: &str| {
        PromptArgument::new(n)
            .with_description("Conformance fixture argument.")
            .with_required(true)
    };
    vec![
        Prompt::new(
            "test_simple_prompt",
            Some("Conformance fixture: a fixed text."),
            None,
        ),
        Prompt::new(
            "test_prompt_with_arguments",
            Some("Conformance fixture: echoes its arguments."),
            Some(vec![required("arg1"), required("arg2")]),
        ),
        Prompt::new(
            "test_prompt_with_embedded_resource",
            Some("Conformance fixture: embeds a resource."),
            Some(vec![required("resourceUri")]),
        ),
        Prompt::new(
            "test_prompt_with_image",
            Some("Conformance fixture: an image."),
            None,
        ),
    ]
}

/// Answers a fixture prompt, or `None` for every other name.
pub fn get_prompt(
    name: &str,
    args: &serde_json::Map<String, serde_json::Value>,
) -> Option<rmcp::model::GetPromptResult> {
    use rmcp::model::{
        ContentBlock as C, EmbeddedResource, GetPromptResult, PromptMessage, ResourceContents, Role,
    };
    let arg = |n: &str| {
        args.get(n)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let messages = match name {
        "test_simple_prompt" => vec![PromptMessage::new_text(
            Role::User,
            "This is a simple prompt for testing.",
        )],
        "test_prompt_with_arguments" => vec![PromptMessage::new_text(
            Role::User,
            format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ),
        )],
        "test_prompt_with_embedded_resource" => vec![
            PromptMessage::new(
                Role::User,
                C::Resource(EmbeddedResource::new(ResourceContents::text(
                    "Embedded resource content for testing.",
                    arg("resourceUri"),
                ))),
            ),
            PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
        ],
        "test_prompt_with_image" => vec![
            PromptMessage::new(Role::User, C::image(PIXEL_PNG, "image/png")),
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ],
        _ => return None,
    };
    Some(GetPromptResult::new(messages))
}
