//! `resources/list`, `resources/templates/list` and `resources/read`, and the resource links
//! tool results carry.
//!
//! The front answers both lists itself: templates are static, and the page list is a
//! `list_pages` call through the [`Dispatch`] port (so on AWS the pages function reads it, as
//! for the tool). `resources/read` goes through [`Dispatch::read_resource`] to where the page
//! tools run. A URI that names none of nib's resources is not found before any
//! authentication (it reveals nothing), like an unknown tool name.

use rmcp::model::{
    CacheScope, ErrorData, ListResourceTemplatesResult, ListResourcesResult, ProtocolVersion,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{NibMcp, icons};
use crate::auth::Principal;
use crate::telemetry;
use crate::tools::resources::{IMAGE_TEMPLATE, NibUri, PAGE_TEMPLATE, TASK_TEMPLATE};
use crate::tools::{ToolError, resources, scan};

/// Pages per `resources/list` page.
pub const RESOURCES_PAGE_SIZE: usize = 50;

/// How long a client may keep a page list or a page read (pages change on import).
const LIST_TTL_MS: u64 = 30_000;
const READ_TTL_MS: u64 = 60_000;
/// The templates never change while this version runs.
const TEMPLATES_TTL_MS: u64 = 3_600_000;

/// The first revision with `resource_link` content blocks.
fn supports_resource_links(version: &ProtocolVersion) -> bool {
    version.as_str() >= ProtocolVersion::V_2025_06_18.as_str()
}

pub(super) fn resource_not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found("resource not found", Some(json!({ "uri": uri })))
}

/// The resource of a page, as `resources/list` and resource links show it.
pub fn page_resource(page_id: &str, date: &str) -> Resource {
    Resource::new(resources::page_uri(&page_id), date)
        .with_title(format!("Page of {date}"))
        .with_mime_type("text/markdown")
}

fn image_resource(page_id: &str, date: &str) -> Resource {
    Resource::new(resources::image_uri(&page_id), format!("{date}.png"))
        .with_title(format!("Image of the page of {date}"))
        .with_mime_type("image/png")
}

pub(super) fn templates() -> ListResourceTemplatesResult {
    let templates = vec![
        ResourceTemplate::new(PAGE_TEMPLATE, "page")
            .with_title("Notebook page")
            .with_description("A page's text as markdown (the OCR text when it has no markdown).")
            .with_mime_type("text/markdown")
            .with_icons(icons()),
        ResourceTemplate::new(IMAGE_TEMPLATE, "page-image")
            .with_title("Notebook page image")
            .with_description(format!(
                "The page's image: a PNG up to {} bytes inline, else a text/uri-list pointer to a signed URL.",
                resources::IMAGE_CAP_BYTES
            ))
            .with_mime_type("image/png")
            .with_icons(icons()),
        ResourceTemplate::new(TASK_TEMPLATE, "task")
            .with_title("Notebook task")
            .with_description("One task: text, status, first seen and completed dates, source page.")
            .with_mime_type("application/json")
            .with_icons(icons()),
    ];
    let templates: Vec<ResourceTemplate> = if super::fixtures::enabled() {
        super::fixtures::resource_templates()
            .into_iter()
            .chain(templates)
            .collect()
    } else {
        templates
    };
    // The same for every caller.
    ListResourceTemplatesResult::with_all_items(templates)
        .with_ttl_ms(TEMPLATES_TTL_MS)
        .with_cache_scope(CacheScope::Public)
}

impl NibMcp {
    /// One page of the caller's pages, newest first; `cursor` is `list_pages`'s own.
    pub(super) async fn list_page_resources(
        &self,
        principal: Option<&Principal>,
        cursor: Option<String>,
        cid: &str,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut items: Vec<Resource> = if super::fixtures::enabled() && cursor.is_none() {
            super::fixtures::resources()
        } else {
            Vec::new()
        };
        if cursor.is_none() {
            items.push(super::viewer::resource());
        }
        let mut next_cursor = None;
        // Without a principal (public discovery) there is no notebook to list.
        if let Some(principal) = principal {
            let mut args = Map::new();
            args.insert("limit".into(), json!(RESOURCES_PAGE_SIZE));
            if let Some(c) = cursor {
                args.insert("cursor".into(), Value::String(c));
            }
            let listed: Value = match self.dispatch.call(principal, "list_pages", args).await {
                Ok(v) => serde_json::from_str(v.get()).unwrap_or_default(),
                // The one argument a caller controls is the cursor (a class function's reply
                // carries a business error as `Rejected`).
                Err(ToolError::InvalidArgument { .. } | ToolError::Rejected(_)) => {
                    return Err(ErrorData::invalid_params("invalid cursor", None));
                }
                Err(e) => return Err(internal(cid, "resources/list", &e)),
            };
            for p in listed["pages"].as_array().into_iter().flatten() {
                if let (Some(id), Some(date)) = (p["page_id"].as_str(), p["date"].as_str()) {
                    items.push(page_resource(id, date));
                }
            }
            next_cursor = listed["next_cursor"].as_str().map(str::to_owned);
        }
        let mut result = ListResourcesResult::with_all_items(items)
            .with_ttl_ms(LIST_TTL_MS)
            .with_cache_scope(CacheScope::Private);
        result.next_cursor = next_cursor;
        Ok(result)
    }

    /// `resources/read` of one of nib's URIs for `principal`.
    pub(super) async fn read_nib_resource(
        &self,
        principal: &Principal,
        uri: &str,
        cid: &str,
    ) -> Result<ReadResourceResult, ErrorData> {
        let contents = match self.dispatch.read_resource(principal, uri).await {
            Ok(c) => c,
            Err(e @ (ToolError::Internal(_) | ToolError::Unavailable(_))) => {
                return Err(internal(cid, "resources/read", &e));
            }
            // Not found, another user's, or refused: the same answer.
            Err(_) => return Err(resource_not_found(uri)),
        };
        let contents: Vec<ResourceContents> =
            serde_json::from_value(Value::Array(contents)).map_err(|e| {
                tracing::error!(correlation_id = %cid, error = %e, "resources/read: contents do not parse");
                internal_error(cid)
            })?;
        if contents.is_empty() {
            return Err(resource_not_found(uri));
        }
        Ok(ReadResourceResult::new(contents)
            .with_ttl_ms(READ_TTL_MS)
            .with_cache_scope(CacheScope::Private))
    }
}

/// Whether `uri` names one of nib's notebook resources (it may still not exist).
pub(super) fn is_nib_uri(uri: &str) -> bool {
    NibUri::parse(uri).is_some()
}

fn internal_error(id: &str) -> ErrorData {
    ErrorData::internal_error("internal error", Some(json!({ "correlationId": id })))
}

fn internal(id: &str, method: &str, e: &ToolError) -> ErrorData {
    tracing::error!(correlation_id = %id, method, error = %telemetry::chain(e), "request failed");
    internal_error(id)
}

/// The resource links a tool's result names (only for revisions that have them): the pages
/// of `get_page`, `fetch`, `list_pages` and `search_pages`, and `get_page`'s image. Read from
/// the output's JSON by [`scan::fields`] (no parse): each page's id comes before its date, as
/// the outputs' types declare them, and pairs go in order.
pub(super) fn links_for(tool: &str, output: &RawValue, version: &ProtocolVersion) -> Vec<Resource> {
    let id_key = match tool {
        "get_page" | "list_pages" | "search_pages" => "page_id",
        "fetch" => "id",
        _ => return Vec::new(),
    };
    if !supports_resource_links(version) {
        return Vec::new();
    }
    let json = output.get();
    let mut pages: Vec<(&str, &str)> = Vec::new();
    let mut id = None;
    for (key, value) in scan::fields(json, &[id_key, "date"]) {
        match (key, id.take()) {
            (0, _) => id = Some(value),
            (_, Some(page)) => pages.push((page, value)),
            (_, None) => {}
        }
    }
    if tool == "get_page" {
        return match pages.first() {
            Some(&(id, date)) if scan::has_string(json, "png_url") => {
                vec![page_resource(id, date), image_resource(id, date)]
            }
            Some(&(id, date)) => vec![page_resource(id, date)],
            None => Vec::new(),
        };
    }
    pages
        .into_iter()
        .map(|(id, date)| page_resource(id, date))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_only_from_2025_06_18() {
        // As get_page writes it: the id, then the date.
        let page = serde_json::value::RawValue::from_string(
            r#"{"page_id":"p1","date":"2026-06-19","png_url":"https://x"}"#.into(),
        )
        .unwrap();
        assert!(links_for("get_page", &page, &ProtocolVersion::V_2025_03_26).is_empty());
        let links = links_for("get_page", &page, &ProtocolVersion::V_2025_06_18);
        let uris: Vec<&str> = links.iter().map(|l| l.uri.as_str()).collect();
        assert_eq!(uris, ["nib://pages/p1", "nib://pages/p1/image.png"]);
        assert!(links_for("list_tasks", &page, &ProtocolVersion::V_2026_07_28).is_empty());
    }
}
