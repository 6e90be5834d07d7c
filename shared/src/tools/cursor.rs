//! List cursors: the `next_cursor` one call returns and the next call passes as `cursor`.
//!
//! Opaque to clients: base64url (no padding) of `v1|{kind}|...` naming the last row shown (a
//! list's sort position) or, for search, an offset and a fingerprint of the query. A cursor
//! never names a user or a partition: the notebook reads only the verified principal's items,
//! so an edited cursor can at most move within the caller's own list, and it is parsed
//! strictly (a date, an id, a number), never spliced into a key as given.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::ToolError;
use crate::domain::{Date, PageId, TaskLinkId};
use crate::notebook::AccessPosition;

/// Where a list continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    /// `list_pages`: after this page (newest first).
    Page(Date, PageId),
    /// `list_tasks`: after this task (oldest first seen first).
    Task(Date, TaskLinkId),
    /// `search_pages`: skip this many hits of the same query.
    Search { offset: usize, query: String },
    /// `list_access`: before this record (newest first).
    Access(AccessPosition),
    /// `list_trash`: after this entry (its sort key `{deleted_at:012}#{p|t}#{id}`).
    Trash(String),
    /// `list_notes`: after this note (its page's date and id, its line id).
    Note(Date, PageId, String),
}

/// A short fingerprint of a search query, so a cursor is not applied to another query.
fn fingerprint(query: &str) -> String {
    hex::encode(&Sha256::digest(query.as_bytes())[..8])
}

impl Cursor {
    pub fn search(offset: usize, query: &str) -> Cursor {
        Cursor::Search {
            offset,
            query: fingerprint(query),
        }
    }

    pub fn encode(&self) -> String {
        let plain = match self {
            Cursor::Page(date, id) => format!("v1|p|{date}|{id}"),
            Cursor::Task(date, id) => format!("v1|t|{date}|{id}"),
            Cursor::Search { offset, query } => format!("v1|s|{offset}|{query}"),
            Cursor::Access(p) => format!("v1|a|{}", p.encode()),
            Cursor::Trash(key) => format!("v1|r|{key}"),
            Cursor::Note(date, page, line) => format!("v1|n|{date}|{page}|{line}"),
        };
        URL_SAFE_NO_PAD.encode(plain)
    }

    fn decode(s: &str) -> Option<Cursor> {
        if s.len() > 256 {
            return None;
        }
        let plain = String::from_utf8(URL_SAFE_NO_PAD.decode(s).ok()?).ok()?;
        let parts: Vec<&str> = plain.split('|').collect();
        match parts.as_slice() {
            ["v1", "p", date, id] => Some(Cursor::Page(
                Date::parse(date).ok()?,
                PageId::parse(id).ok()?,
            )),
            ["v1", "t", date, id] => Some(Cursor::Task(
                Date::parse(date).ok()?,
                TaskLinkId::parse(id).ok()?,
            )),
            ["v1", "s", offset, query]
                if query.len() == 16 && query.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                Some(Cursor::Search {
                    offset: offset.parse().ok()?,
                    query: (*query).to_owned(),
                })
            }
            ["v1", "a", position] => AccessPosition::parse(position).map(Cursor::Access),
            ["v1", "n", date, page, line]
                if line.len() <= 32
                    && line.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                Some(Cursor::Note(
                    Date::parse(date).ok()?,
                    PageId::parse(page).ok()?,
                    (*line).to_owned(),
                ))
            }
            ["v1", "r", key] => {
                // `{deleted_at:012}#{p|t}#{id}`, each part parsed.
                let mut parts = key.splitn(3, '#');
                let (at, kind, id) = (parts.next()?, parts.next()?, parts.next()?);
                let at: i64 = at.parse().ok().filter(|_| at.len() == 12)?;
                match kind {
                    "p" => PageId::parse(id).ok().map(|id| id.to_string()),
                    "t" => TaskLinkId::parse(id).ok().map(|id| id.to_string()),
                    _ => None,
                }
                .map(|id| Cursor::Trash(format!("{at:012}#{kind}#{id}")))
            }
            _ => None,
        }
    }
}

/// The cursor argument as given; an empty string is no cursor (a first call).
fn given(s: Option<&str>) -> Option<Option<Cursor>> {
    s.filter(|s| !s.is_empty()).map(Cursor::decode)
}

fn refused() -> ToolError {
    ToolError::invalid(
        "cursor",
        "is not a cursor of this list; pass the next_cursor of the previous call unchanged, with the same query",
    )
}

/// The `cursor` of `list_pages`.
pub fn page(s: Option<&str>) -> Result<Option<(Date, PageId)>, ToolError> {
    match given(s) {
        None => Ok(None),
        Some(Some(Cursor::Page(date, id))) => Ok(Some((date, id))),
        Some(_) => Err(refused()),
    }
}

/// The `cursor` of `list_tasks`.
pub fn task(s: Option<&str>) -> Result<Option<(Date, TaskLinkId)>, ToolError> {
    match given(s) {
        None => Ok(None),
        Some(Some(Cursor::Task(date, id))) => Ok(Some((date, id))),
        Some(_) => Err(refused()),
    }
}

/// The `cursor` of `list_notes`.
pub fn note(s: Option<&str>) -> Result<Option<(Date, PageId, String)>, ToolError> {
    match given(s) {
        None => Ok(None),
        Some(Some(Cursor::Note(date, page, line))) => Ok(Some((date, page, line))),
        Some(_) => Err(refused()),
    }
}

/// The `cursor` of `list_access`.
pub fn access(s: Option<&str>) -> Result<Option<AccessPosition>, ToolError> {
    match given(s) {
        None => Ok(None),
        Some(Some(Cursor::Access(p))) => Ok(Some(p)),
        Some(_) => Err(refused()),
    }
}

/// The `cursor` of `list_trash`: the sort key to continue after.
pub fn trash(s: Option<&str>) -> Result<Option<String>, ToolError> {
    match given(s) {
        None => Ok(None),
        Some(Some(Cursor::Trash(key))) => Ok(Some(key)),
        Some(_) => Err(refused()),
    }
}

/// The `cursor` of `search_pages` for `query`: the offset to continue at.
pub fn search(s: Option<&str>, query: &str) -> Result<usize, ToolError> {
    match given(s) {
        None => Ok(0),
        Some(Some(Cursor::Search { offset, query: q })) if q == fingerprint(query) => Ok(offset),
        Some(_) => Err(refused()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_checked() {
        let date = Date::parse("2026-06-19").unwrap();
        let page_id = PageId::new();
        let c = Cursor::Page(date, page_id.clone()).encode();
        assert_eq!(page(Some(&c)).unwrap(), Some((date, page_id.clone())));
        // Not a task cursor, nor a search cursor.
        assert!(task(Some(&c)).is_err());
        assert!(search(Some(&c), "x").is_err());

        let s = Cursor::search(20, "api spec").encode();
        assert_eq!(search(Some(&s), "api spec").unwrap(), 20);
        assert!(search(Some(&s), "other words").is_err());

        let key = format!("{:012}#p#{page_id}", 1_780_000_000);
        let r = Cursor::Trash(key.clone()).encode();
        assert_eq!(trash(Some(&r)).unwrap(), Some(key));
        assert!(page(Some(&r)).is_err() && trash(Some(&c)).is_err());
        for bad in [
            "v1|r|1780000000#p#x",
            "v1|r|001780000000#q#0f9e8d7c-1234-4abc-8def-0123456789ab",
            "v1|r|001780000000#p#../U#mallory",
            "v1|r|1780000000000#p#0f9e8d7c-1234-4abc-8def-0123456789ab",
        ] {
            assert!(trash(Some(&URL_SAFE_NO_PAD.encode(bad))).is_err(), "{bad}");
        }

        assert_eq!(page(Some("")).unwrap(), None, "empty is no cursor");
        for bad in [
            "not base64!",
            &URL_SAFE_NO_PAD.encode("v1|p|2026-06-19|../../U#mallory"),
            &URL_SAFE_NO_PAD.encode("v1|t|yesterday|x"),
            &URL_SAFE_NO_PAD.encode("v2|s|1|0011223344556677"),
            &"A".repeat(300),
        ] {
            assert!(page(Some(bad)).is_err(), "{bad}");
            assert!(task(Some(bad)).is_err(), "{bad}");
            assert!(search(Some(bad), "x").is_err(), "{bad}");
            assert!(access(Some(bad)).is_err(), "{bad}");
        }
        let position = AccessPosition {
            at_ms: 1_780_000_000_000,
            nonce: 7,
        };
        let a = Cursor::Access(position).encode();
        assert_eq!(access(Some(&a)).unwrap(), Some(position));
        assert!(page(Some(&a)).is_err(), "not a page cursor");
        assert_eq!(page(None).unwrap(), None);
        assert!(
            refused().to_string().contains("'cursor'"),
            "the error names the argument"
        );
    }
}
