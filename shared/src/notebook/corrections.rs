//! Corrections the owner makes to a page's text (the web app's page view): a line's text and a
//! task's box.
//!
//! A correction is written onto the line itself ([`StoredLine::corrected`] keeps what the
//! reading said), through the one page write ([`Notebook::commit_page`]), so the corrected text
//! is the page's text everywhere from then on: `get_page` (`text_source: "corrected"`), search
//! (postings and vectors are the page's), tasks (a task line's text and box go through the
//! normal reconciliation), resources and export, and bundles (they carry the stored lines).
//! Reading the page again ([`carry_corrections`]) keeps them.
//!
//! The words of a correction join the user's vocabulary (`U#{user}` / `VOCAB#WORDS`, one sealed
//! list beside the user's settings, so no function needs new access), which the OCR engine
//! takes as a decoding prior when it reads that user's ink ([`crate::ports::Ocr::recognize_with`]).
//! The vocabulary is written after the page: a prior, not content, so a crash between the two
//! loses at most a few words of it, never a correction.

use serde::{Deserialize, Serialize};

use super::pages::PageContent;
use super::records::{self, Reading, StoredLine, decode, encode, user_pk};
use super::{MAX_ATTEMPTS, Notebook, NotebookError, backoff, is_retryable};
use crate::crypto::UserKeys;
use crate::domain::{Notation, PageId, PageStatus, UserId};
use crate::ports::{Cond, Item, Write};

/// The sort key of a user's decoding vocabulary.
pub const VOCABULARY_SK: &str = "VOCAB#WORDS";
/// The most words a vocabulary keeps (the newest); a few thousand cost the decoder nothing.
pub const MAX_VOCABULARY_WORDS: usize = 5_000;
/// The longest corrected line, in characters.
pub const MAX_LINE_CHARS: usize = 1_000;

/// What the owner changes on one line: its text, and for a task line whether its box is ticked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Correction {
    pub text: Option<String>,
    pub ticked: Option<bool>,
}

/// A corrected line as it now reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrected {
    pub line_id: String,
    pub text: String,
    pub page_status: Option<PageStatus>,
    /// False when the correction gave the line back what the reading said (no mark left).
    pub corrected: bool,
    /// False when the line already read so.
    pub changed: bool,
}

/// The sealed body of the vocabulary item.
#[derive(Serialize, Deserialize, Default)]
struct VocabularyRecord {
    /// Sealed field `words`: JSON of `Vec<String>`, oldest first.
    #[serde(with = "super::records::b64")]
    words: Vec<u8>,
}

impl Notebook {
    /// Corrects line `line_id` of a page written on the page (not a typed one): its text
    /// and, for a task line, its box. The page is written as any page write (tasks, index,
    /// revision), the line marked corrected; the new words join the user's vocabulary.
    pub async fn correct_line(
        &self,
        user: &UserId,
        page_id: &PageId,
        line_id: &str,
        correction: Correction,
    ) -> Result<Corrected, NotebookError> {
        let text = correction.text.as_deref().map(clean_text).transpose()?;
        let keys = self.vault.user_keys(user).await?;
        for attempt in 0..MAX_ATTEMPTS {
            let Some(page) = self.load_page(user, &keys, page_id).await? else {
                return Err(self
                    .page_in_trash(user, page_id)
                    .await?
                    .unwrap_or(NotebookError::NotFound("page")));
            };
            let mut lines = self.open_lines(user, &keys, &page.record)?;
            let Some(line) = lines.iter_mut().find(|l| l.line_id == line_id) else {
                return Err(NotebookError::NotFound("line"));
            };
            if line.digital {
                return Err(NotebookError::Invalid(
                    "a typed line is not corrected here: it is kept as it was typed".into(),
                ));
            }
            if correction.ticked.is_some() && line.notation != Notation::Task {
                return Err(NotebookError::Invalid("only a task line has a box".into()));
            }
            let before = (line.text.clone(), line.page_status);
            let changed = apply(line, text.as_deref(), correction.ticked);
            let result = Corrected {
                line_id: line.line_id.clone(),
                text: line.text.clone(),
                page_status: line.page_status,
                corrected: line.corrected.is_some(),
                changed,
            };
            if !changed {
                return Ok(result);
            }
            let content = PageContent {
                date: page.record.date,
                has_pdf: page.record.has_pdf,
                has_png: page.record.has_png,
                ocr: page
                    .record
                    .ocr_kind
                    .zip(self.open_ocr(user, &keys, &page.record)?),
                lines,
                stem: None,
                new_task: None,
                source_url: None,
            };
            match self
                .commit_page(user, &keys, page_id, Some(page), content)
                .await
            {
                Ok(_) => {
                    if result.corrected && result.text != before.0 {
                        self.add_vocabulary(user, &keys, &result.text).await?;
                    }
                    return Ok(result);
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// The user's decoding vocabulary: the words they corrected, oldest first.
    pub async fn vocabulary(&self, user: &UserId) -> Result<Vec<String>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        Ok(self.read_vocabulary(user, &keys).await?.1)
    }

    pub(super) async fn read_vocabulary(
        &self,
        user: &UserId,
        keys: &UserKeys,
    ) -> Result<(Option<Item>, Vec<String>), NotebookError> {
        let pk = user_pk(user);
        let Some(item) = self.store.get(&pk, VOCABULARY_SK).await? else {
            return Ok((None, Vec::new()));
        };
        let rec: VocabularyRecord = decode("vocabulary", &item.body)?;
        let plain = records::open(keys, user, &pk, VOCABULARY_SK, "words", &rec.words)?;
        let words: Vec<String> = serde_json::from_slice(&plain)
            .map_err(|e| NotebookError::Corrupt(format!("vocabulary: {e}")))?;
        Ok((Some(item), words))
    }

    /// Adds the words of `text` to the user's vocabulary (a word seen again moves to the
    /// newest end; past [`MAX_VOCABULARY_WORDS`] the oldest go).
    pub(super) async fn add_vocabulary(
        &self,
        user: &UserId,
        keys: &UserKeys,
        text: &str,
    ) -> Result<(), NotebookError> {
        let new = words_of(text);
        if new.is_empty() {
            return Ok(());
        }
        let pk = user_pk(user);
        for attempt in 0..MAX_ATTEMPTS {
            let (item, mut words) = self.read_vocabulary(user, keys).await?;
            let before = words.clone();
            for w in &new {
                words.retain(|old| !old.eq_ignore_ascii_case(w));
                words.push(w.clone());
            }
            if words == before {
                return Ok(());
            }
            if words.len() > MAX_VOCABULARY_WORDS {
                words.drain(..words.len() - MAX_VOCABULARY_WORDS);
            }
            let sealed = records::seal(
                keys,
                user,
                &pk,
                VOCABULARY_SK,
                "words",
                &serde_json::to_vec(&words).expect("words serialize"),
            );
            let (cond, version) = match &item {
                Some(item) => (Cond::Version(item.version), item.version + 1),
                None => (Cond::NotExists, 1),
            };
            let write = Write::put(
                Item {
                    pk: pk.clone(),
                    sk: VOCABULARY_SK.into(),
                    gsi1: None,
                    version,
                    expires_at: None,
                    body: encode(&VocabularyRecord { words: sealed }),
                },
                cond,
            );
            match self
                .store
                .transact(vec![write])
                .await
                .map_err(NotebookError::from)
            {
                Ok(()) => return Ok(()),
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }
}

/// A corrected text on one line: whitespace runs made one space, trimmed, not empty, not too
/// long.
fn clean_text(text: &str) -> Result<String, NotebookError> {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return Err(NotebookError::Invalid(
            "a corrected line needs some text".into(),
        ));
    }
    if text.chars().count() > MAX_LINE_CHARS {
        return Err(NotebookError::Invalid(format!(
            "a line holds at most {MAX_LINE_CHARS} characters"
        )));
    }
    Ok(text)
}

/// Applies a correction to a line; whether it changed. The first correction keeps what the
/// reading said; a correction back to the reading drops the mark.
pub(super) fn apply(line: &mut StoredLine, text: Option<&str>, ticked: Option<bool>) -> bool {
    let status = match (line.notation, ticked) {
        (Notation::Task, Some(true)) => Some(PageStatus::Done),
        // An unticked box is open, whatever else the reading made of it.
        (Notation::Task, Some(false)) => Some(PageStatus::Open),
        _ => line.page_status,
    };
    let text = text.unwrap_or(&line.text).to_owned();
    if text == line.text && status == line.page_status {
        return false;
    }
    let reading = line.corrected.take().unwrap_or_else(|| Reading {
        text: line.text.clone(),
        page_status: line.page_status,
    });
    line.text = text;
    line.page_status = status;
    if line.text != reading.text || line.page_status != reading.page_status {
        line.corrected = Some(reading);
    }
    true
}

/// Keeps the owner's corrections when a page's text is read again (`nib ocr`, `--force-ocr`,
/// a newer file): `new` are the lines of the new reading, `old` the page's lines before. A new
/// line with the id of a corrected line takes its correction (the same ink read the same).
/// A corrected line whose id the new reading lacks (the engine now reads it otherwise, perhaps
/// thanks to the correction's own words) gives its correction to the line at its place, when
/// the new reading has as many lines as the old and that line has the same notation.
pub(super) fn carry_corrections(old: &[StoredLine], new: &mut [StoredLine]) {
    let old_page: Vec<&StoredLine> = old.iter().filter(|l| !l.digital).collect();
    if !old_page.iter().any(|l| l.corrected.is_some()) {
        return;
    }
    let same_shape = old_page.len() == new.len();
    let new_ids: std::collections::HashSet<String> =
        new.iter().map(|l| l.line_id.clone()).collect();
    for (i, line) in new.iter_mut().enumerate() {
        let by_id = old_page
            .iter()
            .find(|o| o.corrected.is_some() && o.line_id == line.line_id);
        let by_place = || {
            old_page.get(i).filter(|o| {
                same_shape
                    && o.corrected.is_some()
                    && o.notation == line.notation
                    && !new_ids.contains(&o.line_id)
            })
        };
        let Some(old) = by_id.or_else(by_place) else {
            continue;
        };
        line.corrected = Some(Reading {
            text: line.text.clone(),
            page_status: line.page_status,
        });
        line.text.clone_from(&old.text);
        if line.notation == Notation::Task {
            line.page_status = old.page_status;
        }
    }
}

/// The words of a text as the vocabulary keeps them: runs of letters, digits, `'` and `-`,
/// at least two characters, each once.
pub fn words_of(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-')) {
        let word = word.trim_matches(|c| c == '\'' || c == '-');
        if word.chars().count() >= 2 && !out.iter().any(|w| w.eq_ignore_ascii_case(word)) {
            out.push(word.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str, text: &str, notation: Notation, status: Option<PageStatus>) -> StoredLine {
        StoredLine {
            line_id: id.into(),
            text: text.into(),
            section: None,
            notation,
            page_status: status,
            task_link_id: None,
            digital: false,
            tags: Vec::new(),
            source_url: None,
            added_at: None,
            corrected: None,
        }
    }

    #[test]
    fn a_correction_keeps_the_reading_and_one_back_to_it_drops_the_mark() {
        let mut l = line(
            "ln_1",
            "Call leurecly",
            Notation::Task,
            Some(PageStatus::Open),
        );
        assert!(apply(&mut l, Some("Call Kennedy"), Some(true)));
        assert_eq!(l.text, "Call Kennedy");
        assert_eq!(l.page_status, Some(PageStatus::Done));
        let reading = l.corrected.clone().unwrap();
        assert_eq!(reading.text, "Call leurecly");
        assert_eq!(reading.page_status, Some(PageStatus::Open));
        // A second correction keeps the first reading.
        assert!(apply(&mut l, Some("Call Kennedy today"), None));
        assert_eq!(l.corrected.as_ref().unwrap().text, "Call leurecly");
        assert!(!apply(&mut l, Some("Call Kennedy today"), Some(true)));
        assert!(apply(&mut l, Some("Call leurecly"), Some(false)));
        assert_eq!(l.corrected, None);
    }

    #[test]
    fn corrections_follow_the_line_id_or_its_place_when_read_again() {
        let mut a = line("ln_a", "Buy mlik", Notation::Bullet, None);
        apply(&mut a, Some("Buy milk"), None);
        let mut t = line("ln_t", "Email Ana", Notation::Task, Some(PageStatus::Open));
        apply(&mut t, None, Some(true));
        let plain = line("ln_p", "Notes", Notation::Heading, None);
        let old = vec![plain.clone(), a, t];

        // The same reading: by id.
        let mut new = vec![
            plain.clone(),
            line("ln_a", "Buy mlik", Notation::Bullet, None),
            line("ln_t", "Email Ana", Notation::Task, Some(PageStatus::Open)),
        ];
        carry_corrections(&old, &mut new);
        assert_eq!(new[1].text, "Buy milk");
        assert!(new[1].corrected.is_some());
        assert_eq!(new[2].page_status, Some(PageStatus::Done));
        assert!(new[0].corrected.is_none());

        // A different reading of that line, same shape: by place.
        let mut new = vec![
            plain.clone(),
            line("ln_b", "Buy milh", Notation::Bullet, None),
            line("ln_t", "Email Ana", Notation::Task, Some(PageStatus::Open)),
        ];
        carry_corrections(&old, &mut new);
        assert_eq!(new[1].text, "Buy milk");
        assert_eq!(new[1].corrected.as_ref().unwrap().text, "Buy milh");

        // Another page altogether: nothing carried but by id.
        let mut new = vec![line("ln_x", "Other", Notation::Text, None)];
        carry_corrections(&old, &mut new);
        assert_eq!(new[0].text, "Other");
        assert!(new[0].corrected.is_none());
    }

    #[test]
    fn words_are_distinct_runs_of_two_or_more() {
        assert_eq!(
            words_of("Call Kennedy re: O'Brien's e-mail, a call"),
            ["Call", "Kennedy", "re", "O'Brien's", "e-mail"]
        );
    }
}
