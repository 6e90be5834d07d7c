//! Typed notes (`add_note`, `list_notes`, `list_tags`): what an assistant writes down for the
//! user ("remember this"), as a typed line on that day's page.
//!
//! A note is a [`StoredLine`] with `digital` set, in section [`NOTES_SECTION`], carrying its
//! tags, its source and when it was added. Being a line of the page, it is sealed with the page,
//! found by search by its words and by meaning (the page's postings and vectors are made from
//! all its lines), kept when a newer ink file of the page is imported (typed lines are never
//! replaced by files), and carried by export bundles, with nothing else to keep in step.
//!
//! Listing: each page record counts its notes (`PageRecord::notes`, a number in the clear like
//! `has_pdf`), so `list_notes` and `list_tags` read the pages index newest first and open only
//! the pages that have notes. That is a read of the index over the range asked, not of every
//! page; a tag index would make a rare tag's listing cheaper (not done: see
//! docs/decisions/0081-typed-notes-as-lines.md).

use std::collections::BTreeMap;

use serde::Serialize;

use super::records::{self, PageListing, StoredLine, decode, pages_partition};
use super::{MAX_ATTEMPTS, MAX_TEXT_CHARS, Notebook, NotebookError, backoff, is_retryable};
use crate::domain::{Date, Notation, PageId, UserId};
use crate::ports::Query;

/// The section typed notes go in.
pub const NOTES_SECTION: &str = "notes";
/// The most tags one note may carry.
pub const MAX_TAGS: usize = 10;
/// The longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 40;

/// How many notes these lines hold.
pub(super) fn count(lines: &[StoredLine]) -> u32 {
    u32::try_from(lines.iter().filter(|l| l.is_note()).count()).unwrap_or(u32::MAX)
}

/// A tag as kept: lower case, a leading `#` dropped, runs of spaces, `_` and `-` as one `-`,
/// trimmed. `"Project X"`, `"#project-x"` and `"project_x"` are one tag. `None` when nothing is
/// left.
pub fn normalize_tag(raw: &str) -> Option<String> {
    let mut out = String::new();
    let mut gap = false;
    for c in raw.trim().trim_start_matches('#').chars() {
        if c.is_whitespace() || c == '_' || c == '-' {
            gap = !out.is_empty();
            continue;
        }
        if gap {
            out.push('-');
            gap = false;
        }
        out.extend(c.to_lowercase());
    }
    (!out.is_empty()).then_some(out)
}

/// The tags of a call, normalised, without repeats, in their first order.
pub fn normalize_tags(raw: &[String]) -> Result<Vec<String>, NotebookError> {
    if raw.len() > MAX_TAGS {
        return Err(NotebookError::Invalid(format!(
            "at most {MAX_TAGS} tags per note"
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for t in raw {
        let Some(tag) = normalize_tag(t) else {
            return Err(NotebookError::Invalid(format!(
                "tag {t:?} has no letters or digits"
            )));
        };
        if tag.chars().count() > MAX_TAG_CHARS {
            return Err(NotebookError::Invalid(format!(
                "a tag is at most {MAX_TAG_CHARS} characters"
            )));
        }
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

/// The note added.
#[derive(Debug, Clone, Serialize)]
pub struct AddedNote {
    pub page_id: PageId,
    pub line_id: String,
    pub date: Date,
    pub tags: Vec<String>,
}

/// One note as listed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NoteView {
    pub page_id: PageId,
    pub line_id: String,
    pub date: Date,
    pub text: String,
    pub tags: Vec<String>,
    pub source_url: Option<String>,
    /// When it was added (unix seconds).
    pub added_at: Option<i64>,
}

impl Notebook {
    /// Appends a typed note to the page of `date` (made if there is none, under the date's
    /// file stem, so that ink imported later for that day lands on the same page).
    pub async fn add_note(
        &self,
        user: &UserId,
        date: Date,
        text: &str,
        tags: &[String],
        source_url: Option<&str>,
    ) -> Result<AddedNote, NotebookError> {
        super::tasks::check_text("text", text)?;
        let text = text.trim();
        let tags = normalize_tags(tags)?;
        if let Some(url) = source_url
            && url.chars().count() > MAX_TEXT_CHARS
        {
            return Err(NotebookError::Invalid(format!(
                "source_url is at most {MAX_TEXT_CHARS} characters"
            )));
        }
        let keys = self.vault.user_keys(user).await?;
        for attempt in 0..MAX_ATTEMPTS {
            let (page_id, existing, mut content) = self.date_page(user, &keys, date).await?;
            let line_id = format!("ln_{}", &hex::encode(rand::random::<[u8; 6]>()));
            content.lines.push(StoredLine {
                line_id: line_id.clone(),
                text: text.to_owned(),
                section: Some(NOTES_SECTION.into()),
                notation: Notation::Text,
                page_status: None,
                task_link_id: None,
                digital: true,
                tags: tags.clone(),
                source_url: source_url.map(str::to_owned),
                added_at: Some(self.clock.unix()),
                corrected: None,
            });
            match self
                .commit_page(user, &keys, &page_id, existing, content)
                .await
            {
                Ok(_) => {
                    return Ok(AddedNote {
                        page_id,
                        line_id,
                        date,
                        tags,
                    });
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// Notes newest first (by page date, then as added), `from`/`to` inclusive, only those with
    /// `tag` when given; `after` continues after a note `(date, page, line)` listed before.
    /// Returns at most `limit` and whether more follow.
    pub async fn list_notes(
        &self,
        user: &UserId,
        tag: Option<&str>,
        from: Option<Date>,
        to: Option<Date>,
        after: Option<(Date, &PageId, &str)>,
        limit: usize,
    ) -> Result<(Vec<NoteView>, bool), NotebookError> {
        let tag = match tag {
            Some(t) => Some(normalize_tag(t).ok_or_else(|| {
                NotebookError::Invalid(format!("tag {t:?} has no letters or digits"))
            })?),
            None => None,
        };
        let mut out = Vec::new();
        let mut more = false;
        self.each_noted_page(user, from, to, after.map(|(d, p, _)| (d, p)), |page| {
            // The page's notes, newest first; on the page the cursor names, only those
            // listed after its line.
            let mut notes: Vec<NoteView> = page.into_iter().rev().collect();
            if let Some((d, p, line)) = after
                && notes
                    .first()
                    .is_some_and(|n| n.date == d && &n.page_id == p)
            {
                match notes.iter().position(|n| n.line_id == line) {
                    Some(i) => {
                        notes.drain(..=i);
                    }
                    None => notes.clear(),
                }
            }
            for n in notes {
                if tag.as_ref().is_some_and(|t| !n.tags.contains(t)) {
                    continue;
                }
                if out.len() == limit {
                    more = true;
                    return false;
                }
                out.push(n);
            }
            true
        })
        .await?;
        Ok((out, more))
    }

    /// Every tag of the notebook's notes with how many notes carry it, most used first (then
    /// by name).
    pub async fn list_tags(&self, user: &UserId) -> Result<Vec<(String, usize)>, NotebookError> {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        self.each_noted_page(user, None, None, None, |notes| {
            for n in notes {
                for t in n.tags {
                    *counts.entry(t).or_default() += 1;
                }
            }
            true
        })
        .await?;
        let mut tags: Vec<(String, usize)> = counts.into_iter().collect();
        tags.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(tags)
    }

    /// Calls `visit` with the notes of each page that has some (in the page's order), pages
    /// newest first from the page `start` (inclusive) on, until it returns false. Pages without
    /// notes are passed over from the index alone.
    async fn each_noted_page(
        &self,
        user: &UserId,
        from: Option<Date>,
        to: Option<Date>,
        start: Option<(Date, &PageId)>,
        mut visit: impl FnMut(Vec<NoteView>) -> bool,
    ) -> Result<(), NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let mut query = Query::gsi1(pages_partition(user), "");
        query.reverse = true;
        query.from = from.map(|d| d.to_string());
        query.to = to.map(|d| format!("{d}#~"));
        if let Some((date, page)) = start {
            let here = records::page_gsi_sk(date, page);
            if query.to.as_ref().is_none_or(|to| &here < to) {
                query.to = Some(here);
            }
        }
        loop {
            let found = self.store.query(&query).await?;
            for item in found.items {
                let listing: PageListing = decode("page", &item.body)?;
                if listing.notes == 0 {
                    continue;
                }
                let record: records::PageRecord = decode("page", &item.body)?;
                let notes = self
                    .open_lines(user, &keys, &record)?
                    .into_iter()
                    .filter(StoredLine::is_note)
                    .map(|l| NoteView {
                        page_id: record.page_id.clone(),
                        line_id: l.line_id,
                        date: record.date,
                        text: l.text,
                        tags: l.tags,
                        source_url: l.source_url,
                        added_at: l.added_at,
                    })
                    .collect();
                if !visit(notes) {
                    return Ok(());
                }
            }
            match found.next {
                Some(next) => query.after = Some(next),
                None => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_one_whatever_their_case_spaces_and_hash() {
        for raw in [
            "Project X",
            "#project-x",
            "project_x",
            "  PROJECT   x ",
            "project--x",
        ] {
            assert_eq!(normalize_tag(raw).as_deref(), Some("project-x"), "{raw:?}");
        }
        assert_eq!(normalize_tag("Über"), Some("über".into()));
        assert_eq!(normalize_tag(" # "), None);
        assert_eq!(normalize_tag("-x-"), Some("x".into()));
    }

    #[test]
    fn a_calls_tags_are_checked_and_kept_once() {
        let tags =
            |v: &[&str]| normalize_tags(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(tags(&["Work", "work", "#Home"]).unwrap(), ["work", "home"]);
        assert!(tags(&["ok", "#"]).is_err());
        assert!(tags(&[&"x".repeat(MAX_TAG_CHARS + 1)]).is_err());
        assert!(tags(&["a"; MAX_TAGS + 1]).is_err());
    }
}
