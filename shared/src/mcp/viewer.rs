//! The MCP App page viewer (`io.modelcontextprotocol/ui`): one self-contained HTML resource,
//! `ui://nib/page-viewer`, that hosts render for `get_page` and `search_pages` results (the tools
//! declare it in `_meta.ui.resourceUri`, and in `openai/outputTemplate` for ChatGPT's Apps SDK).
//!
//! The HTML (`templates/page-viewer.html`) has no external script, style or font; it talks to
//! the host over the postMessage bridge (`ui/initialize`, tool-result notifications,
//! `tools/call` of `get_page`, `list_pages` and `update_task_status`). Its CSP allows images
//! from one origin only: the one that serves signed page images (the server itself locally, the
//! S3 bucket on AWS). It holds no user data, so it is read without a token.

use rmcp::model::{CacheScope, MetaObject, ReadResourceResult, Resource, ResourceContents};
use serde_json::json;

pub const VIEWER_URI: &str = "ui://nib/page-viewer";
pub const VIEWER_MIME: &str = "text/html;profile=mcp-app";
const HTML: &str = include_str!("../../templates/page-viewer.html");
const TTL_MS: u64 = 3_600_000;

/// The tools that render with the viewer.
pub const VIEWER_TOOLS: [&str; 2] = ["get_page", "search_pages"];
/// The tools the viewer calls (ChatGPT lets a widget call only tools marked accessible).
pub const WIDGET_TOOLS: [&str; 4] = [
    "get_page",
    "search_pages",
    "list_pages",
    "update_task_status",
];

fn meta(value: serde_json::Value) -> MetaObject {
    serde_json::from_value(value).unwrap_or_default()
}

/// The `_meta` of a tool: the viewer for the tools it renders, widget access for those it calls.
pub fn tool_meta(tool: &str) -> Option<MetaObject> {
    let renders = VIEWER_TOOLS.contains(&tool);
    let called = WIDGET_TOOLS.contains(&tool);
    match (renders, called) {
        (true, _) => Some(meta(json!({
            "ui": { "resourceUri": VIEWER_URI, "visibility": ["model", "app"] },
            "openai/outputTemplate": VIEWER_URI,
            "openai/widgetAccessible": true,
        }))),
        (false, true) => Some(meta(json!({ "openai/widgetAccessible": true }))),
        _ => None,
    }
}

pub fn resource() -> Resource {
    Resource::new(VIEWER_URI, "page-viewer")
        .with_title("nib page viewer")
        .with_description("Shows a notebook page: its image beside its text, task checkboxes, previous and next page.")
        .with_mime_type(VIEWER_MIME)
}

/// The UI resource's contents, its CSP limited to `image_origin`.
pub fn read(image_origin: &str) -> ReadResourceResult {
    let ui = json!({
        "ui": {
            "csp": { "resourceDomains": [image_origin], "connectDomains": [] },
            "prefersBorder": true,
        },
        "openai/widgetCSP": { "resource_domains": [image_origin], "connect_domains": [] },
        "openai/widgetDescription": "The notebook page, its image beside its text.",
    });
    let contents = ResourceContents::text(HTML, VIEWER_URI)
        .with_mime_type(VIEWER_MIME)
        .with_meta(meta(ui));
    ReadResourceResult::new(vec![contents])
        .with_ttl_ms(TTL_MS)
        .with_cache_scope(CacheScope::Public)
}

/// The origin (`scheme://host[:port]`) of a URL, or the URL itself when it has no path.
pub fn origin_of(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_html_is_self_contained() {
        // No external script, style, font or image: only the bridge and inline code.
        for needle in ["<script src", "<link", "@import", "url(http", "src=\"http"] {
            assert!(!HTML.contains(needle), "{needle}");
        }
        assert!(HTML.contains("ui/initialize") && HTML.contains("update_task_status"));
    }

    #[test]
    fn origins_drop_the_path() {
        assert_eq!(
            origin_of("https://b.s3.eu-west-1.amazonaws.com/u/x?sig=1"),
            "https://b.s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(origin_of("http://127.0.0.1:8787"), "http://127.0.0.1:8787");
    }
}
