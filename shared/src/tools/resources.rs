//! The notebook's MCP resources: their URIs and `resources/read`, which runs where the page
//! tools run (the pages function on AWS) over the same [`Dispatch`](super::Dispatch) port.
//!
//! - `nib://pages/{page_id}`: the page's markdown (`text/markdown`);
//! - `nib://pages/{page_id}/image.png`: its PNG as a base64 `blob` when at most
//!   [`IMAGE_CAP_BYTES`], else a `text/uri-list` pointer to a signed URL;
//! - `nib://tasks/{task_link_id}`: one task as JSON.
//!
//! The read answers the `contents` array of a `ReadResourceResult` in MCP's wire shape, so it
//! crosses the Lambda payload as it is. Read scope, and the verified user's items only.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::ToolError;
use crate::auth::{Principal, Scope};
use crate::domain::{Notation, PageId, PageStatus, TaskLinkId};
use crate::notebook::{LineOrigin, LineView, Notebook, PageImage};

/// The invocation "tool" name a class function reads resources under (never in the catalog).
pub const READ_RESOURCE: &str = "resources/read";

/// The largest image sent inline (base64 adds a third); above it, a signed URL.
pub const IMAGE_CAP_BYTES: usize = 1 << 20;

pub const PAGE_TEMPLATE: &str = "nib://pages/{page_id}";
pub const IMAGE_TEMPLATE: &str = "nib://pages/{page_id}/image.png";
pub const TASK_TEMPLATE: &str = "nib://tasks/{task_link_id}";

/// A URI of one of the notebook's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NibUri {
    Page(PageId),
    PageImage(PageId),
    Task(TaskLinkId),
}

impl NibUri {
    /// The resource a URI names, or `None` for anything else (another scheme, a malformed id).
    pub fn parse(uri: &str) -> Option<NibUri> {
        if let Some(rest) = uri.strip_prefix("nib://pages/") {
            return match rest.strip_suffix("/image.png") {
                Some(id) => PageId::parse(id).ok().map(NibUri::PageImage),
                None => PageId::parse(rest).ok().map(NibUri::Page),
            };
        }
        let id = uri.strip_prefix("nib://tasks/")?;
        TaskLinkId::parse(id).ok().map(NibUri::Task)
    }
}

pub fn page_uri(page: &impl std::fmt::Display) -> String {
    format!("nib://pages/{page}")
}

pub fn image_uri(page: &impl std::fmt::Display) -> String {
    format!("nib://pages/{page}/image.png")
}

pub fn task_uri(task: &impl std::fmt::Display) -> String {
    format!("nib://tasks/{task}")
}

/// `resources/read` of `uri` for `principal`: the result's `contents`. A URI that names no
/// resource, and one of another user's, are the same `NotFound("resource")`.
pub async fn read(
    notebook: &Notebook,
    principal: &Principal,
    uri: &str,
) -> Result<Vec<Value>, ToolError> {
    if !principal.scope.allows(Scope::Read) {
        return Err(ToolError::Rejected(format!(
            "resources/read needs the {} scope",
            Scope::Read
        )));
    }
    // A page or task in the trash is no resource either.
    let not_found = |e: crate::notebook::NotebookError| match e {
        crate::notebook::NotebookError::NotFound(_)
        | crate::notebook::NotebookError::InTrash(_) => ToolError::NotFound("resource"),
        other => other.into(),
    };
    let user = &principal.user;
    match NibUri::parse(uri).ok_or(ToolError::NotFound("resource"))? {
        NibUri::Page(id) => {
            let p = notebook.get_page(user, &id).await.map_err(not_found)?;
            // As written when the page came as markdown (or was read by OCR); else its lines
            // as markdown (a text page, or a page create_task made), else its plain text.
            let (notes, lines): (Vec<LineView>, Vec<LineView>) =
                p.lines.into_iter().partition(is_typed_note);
            let mut text = match p.ocr_markdown {
                Some(md) => md,
                None if !lines.is_empty() => lines_markdown(&lines),
                None => p.ocr_text.unwrap_or_default(),
            };
            text.push_str(&notes_markdown(&notes));
            Ok(vec![json!({
                "uri": uri,
                "mimeType": "text/markdown",
                "text": text,
                "_meta": { "date": p.date, "page_url": notebook.page_url(&p.page_id) },
            })])
        }
        NibUri::PageImage(id) => {
            let image = notebook
                .page_image(user, &id, IMAGE_CAP_BYTES)
                .await
                .map_err(not_found)?;
            Ok(vec![match image {
                PageImage::Png(bytes) => json!({
                    "uri": uri,
                    "mimeType": "image/png",
                    "blob": STANDARD.encode(bytes),
                }),
                PageImage::Url { url, ttl_seconds } => json!({
                    "uri": uri,
                    "mimeType": "text/uri-list",
                    "text": url,
                    "_meta": { "image_mime_type": "image/png", "signed_url_ttl_seconds": ttl_seconds, "over_inline_cap_bytes": IMAGE_CAP_BYTES },
                }),
            }])
        }
        NibUri::Task(id) => {
            let t = notebook.get_task(user, &id).await.map_err(not_found)?;
            let mut value = serde_json::to_value(&t).map_err(|e| {
                ToolError::Internal(crate::notebook::NotebookError::Corrupt(e.to_string()))
            })?;
            value["source_page_uri"] = json!(page_uri(&t.source_page_id));
            Ok(vec![json!({
                "uri": uri,
                "mimeType": "application/json",
                "text": value.to_string(),
            })])
        }
    }
}

fn is_typed_note(l: &LineView) -> bool {
    l.origin == LineOrigin::Typed && l.section.as_deref() == Some(crate::notebook::NOTES_SECTION)
}

/// A page's typed notes as a markdown section of their own, after what was written on the
/// page, so that typed text is never taken for the handwriting: each a list item with its tags
/// and source. A model wrote them, so they are inline text only ([`inline_markdown`]): a note
/// cannot start a heading or ink lines of its own, nor a tag be a link. Empty without notes.
fn notes_markdown(notes: &[LineView]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n\n## Typed notes\n");
    for n in notes {
        out.push_str("\n- ");
        out.push_str(&inline_markdown(&n.text));
        for t in &n.tags {
            out.push_str(" #");
            out.push_str(&inline_markdown(t));
        }
        if let Some(url) = &n.source_url {
            out.push_str(" (source: ");
            // An autolink only for an http(s) URL as `url` writes it again (no space, `<` or
            // `>` left in it); anything else is shown as text.
            match url::Url::parse(url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {
                    out.push('<');
                    out.push_str(u.as_str());
                    out.push('>');
                }
                _ => out.push_str(&inline_markdown(url)),
            }
            out.push(')');
        }
    }
    out
}

/// `text` as markdown that stays text inside a list item: the characters that make links,
/// emphasis, code, HTML or entities backslash-escaped (CommonMark lets any ASCII punctuation
/// be), and so are those that start a heading, a list item, a quote or a setext underline at
/// the start of a line; each further line is a continuation line of the item (indented), blank
/// and control characters dropped.
fn inline_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    for (i, line) in lines.enumerate() {
        if i > 0 {
            out.push_str("\n  ");
        }
        let digits = line.chars().take_while(|c| c.is_ascii_digit()).count();
        for (j, c) in line.chars().enumerate() {
            if c.is_control() {
                continue;
            }
            let starts_block = j == 0 && matches!(c, '-' | '+' | '=');
            let numbers_item = digits > 0 && j == digits && matches!(c, '.' | ')');
            let inline = matches!(
                c,
                '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '|' | '~' | '&' | '!'
            );
            if starts_block || numbers_item || inline {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

/// A page's lines as markdown, each task with its effective status.
fn lines_markdown(lines: &[LineView]) -> String {
    let mut out = Vec::with_capacity(lines.len());
    for l in lines {
        out.push(match l.notation {
            Notation::Heading => format!("## {}", l.text),
            Notation::Task => {
                let mark = match l.status.or(l.page_status) {
                    Some(PageStatus::Done) => 'x',
                    Some(PageStatus::Cancelled) => '-',
                    Some(PageStatus::Migrated) => '>',
                    Some(PageStatus::Open) | None => ' ',
                };
                format!("- [{mark}] {}", l.text)
            }
            Notation::Bullet => format!("- {}", l.text),
            Notation::Text => l.text.clone(),
        });
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_text_stays_text_in_its_list_item() {
        assert_eq!(inline_markdown("Call Ann re: plan"), "Call Ann re: plan");
        assert_eq!(
            inline_markdown("ok\n## Handwritten page\n- [ ] pay\n1. one\n---"),
            "ok\n  \\#\\# Handwritten page\n  \\- \\[ \\] pay\n  1\\. one\n  \\---"
        );
        assert_eq!(
            inline_markdown("[x](https://e.example) <b>&amp;"),
            "\\[x\\](https://e.example) \\<b\\>\\&amp;"
        );
    }

    #[test]
    fn uris_parse_strictly() {
        let id = "0f9e8d7c-1234-4abc-8def-0123456789ab";
        assert!(matches!(
            NibUri::parse(&format!("nib://pages/{id}")),
            Some(NibUri::Page(_))
        ));
        assert!(matches!(
            NibUri::parse(&format!("nib://pages/{id}/image.png")),
            Some(NibUri::PageImage(_))
        ));
        for bad in [
            "nib://pages/",
            "nib://pages/../x",
            "nib://pages/{page_id}",
            "file:///etc/passwd",
            "test://static-text",
            "nib://tasks/",
        ] {
            assert_eq!(NibUri::parse(bad), None, "{bad}");
        }
    }
}
