//! The structure parser: a page's markdown (or plain OCR text) in, structured lines out.
//!
//! STUB: the contract below is fixed; the body is being written.

use serde::{Deserialize, Serialize};

use super::{Notation, PageStatus};

/// One line of a page as the page itself wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedLine {
    /// Stable across re-imports of an unchanged line: derived from the line's section, its text
    /// and how many identical (section, text) lines came before it on the page. `ln_` + 12 hex.
    pub line_id: String,
    /// The line's text without its markdown markers (`## `, `- [ ] `, `- `).
    pub text: String,
    /// The slug of the nearest heading above (or of itself, for a heading); `None` before any.
    pub section: Option<String>,
    pub notation: Notation,
    /// Only for `Notation::Task`.
    pub page_status: Option<PageStatus>,
}

/// Parses a page. Never panics, whatever the input.
pub fn parse(markdown: &str) -> Vec<ParsedLine> {
    let _ = markdown;
    todo!()
}

/// The plain text of a page's lines, one per line, as `ocr_text` for a markdown page.
pub fn plain_text(lines: &[ParsedLine]) -> String {
    lines
        .iter()
        .map(|l| l.text.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `## Team Sync!` -> `team-sync`.
pub fn slugify(heading: &str) -> String {
    let _ = heading;
    todo!()
}
