//! The records stored in item bodies, and the item keys (docs/design.md §5).
//!
//! Sealed fields hold ciphertext (base64 in the JSON body); everything else in a record is
//! metadata that carries no user-written text: ids, dates, flags, statuses, blind hashes.

use serde::{Deserialize, Serialize};

use super::NotebookError;
use crate::crypto::{Aad, UserKeys};
use crate::domain::tasks::{Appearance, ChangedBy, History, StatusChange, StatusLog};
use crate::domain::{Date, Notation, PageId, PageStatus, TaskLinkId, TaskStatus, UserId};

pub fn user_pk(user: &UserId) -> String {
    format!("U#{user}")
}
pub fn page_sk(page: &PageId) -> String {
    format!("PAGE#{page}")
}
pub fn task_sk(task: &TaskLinkId) -> String {
    format!("TASK#{task}")
}
pub fn taskkey_sk(blind: &str) -> String {
    format!("TASKKEY#{blind}")
}
pub fn stem_sk(blind: &str) -> String {
    format!("STEM#{blind}")
}
/// The user's Notion connection (`notebook::notion`).
pub const NOTION_CONN_SK: &str = "NOTION#CONN";
/// The last outcome of talking to Notion for the user (errors, Retry-After).
pub const NOTION_HEALTH_SK: &str = "NOTION#HEALTH";
/// The prefix of the Notion outbox: one item per task still to push or update.
pub const NOTION_OUT_PREFIX: &str = "NOTION#OUT#";
pub fn notion_out_sk(task: &TaskLinkId) -> String {
    format!("{NOTION_OUT_PREFIX}{task}")
}
/// The index partition (gsi1) of every user's outbox items, sort key `{user}#{task_link_id}`:
/// how the outbox timer finds the users with something to push. Upper case, so no user's
/// partition (`U#{user}`, user ids are lower case) can be it; under `U#`, so the tasks
/// function's role reaches it.
pub const NOTION_DUE_PARTITION: &str = "U#NOTION#DUE";
/// The BM25 statistics, as two counters that page commits add to (`Write::Add`), so that
/// commits of different pages do not contend on one item.
pub const STATS_PAGES_SK: &str = "STATS#PAGES";
pub const STATS_LEN_SK: &str = "STATS#LEN";
/// The statistics as one versioned record (`StatsRecord`), as stores written before the
/// counters hold them; the next page commit folds it into the counters and deletes it.
pub const LEGACY_STATS_SK: &str = "STATS";
/// The notebook's revision (`RevisionRecord`): a random value every write of the notebook
/// replaces inside its own transaction ([`revision_write`]), so `list_pages`/`list_tasks` can
/// answer "unchanged" from this one item, without reading or opening anything else.
pub const REVISION_SK: &str = "REVISION";

/// The body of the revision item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionRecord {
    pub rev: u64,
}

/// The write that gives the user's notebook a new revision. Every write that can change what a
/// tool shows (page commits, bundle imports, task status updates, Notion links, trash) pushes
/// this into its transaction: one line, `writes.push(records::revision_write(&pk))`.
/// Unconditional, so writers of different items never fail each other's conditions.
pub fn revision_write(pk: &str) -> crate::ports::Write {
    crate::ports::Write::put(
        crate::ports::Item {
            pk: pk.to_owned(),
            sk: REVISION_SK.to_owned(),
            gsi1: None,
            version: 1,
            expires_at: None,
            body: encode(&RevisionRecord {
                rev: rand::random(),
            }),
        },
        crate::ports::Cond::None,
    )
}

/// The notebook revision an item read at [`REVISION_SK`] holds; 0 when there is none yet (a
/// notebook never written) or it does not decode.
pub fn revision_of(item: Option<&crate::ports::Item>) -> u64 {
    item.and_then(|i| serde_json::from_slice::<RevisionRecord>(&i.body).ok())
        .map_or(0, |r| r.rev)
}

pub fn pages_partition(user: &UserId) -> String {
    format!("U#{user}#PAGES")
}
pub fn page_gsi_sk(date: Date, page: &PageId) -> String {
    format!("{date}#{page}")
}
pub fn tasks_partition(user: &UserId, status: TaskStatus) -> String {
    format!("U#{user}#TASKS#{}", status.as_str())
}
pub fn task_gsi_sk(first_seen: Date, task: &TaskLinkId) -> String {
    format!("{first_seen}#{task}")
}
pub fn term_partition(user: &UserId, blind: &str) -> String {
    format!("U#{user}#T#{blind}")
}
/// A page in the trash (`notebook::trash`): its record as it was, until it is purged.
pub fn trash_page_sk(page: &PageId) -> String {
    format!("TRASH#P#{page}")
}
/// A task link in the trash, deleted on its own or with the page it was only on.
pub fn trash_task_sk(task: &TaskLinkId) -> String {
    format!("TRASH#T#{task}")
}
/// The index partition of `list_trash`, newest deletion first.
pub fn trash_partition(user: &UserId) -> String {
    format!("U#{user}#TRASH")
}
/// A trash entry's sort key in [`trash_partition`]: `{deleted_at:012}#{p|t}#{id}`.
pub fn trash_gsi_sk(deleted_at: i64, kind: char, id: &str) -> String {
    format!("{deleted_at:012}#{kind}#{id}")
}

/// Base64 for sealed bytes inside JSON bodies.
pub(super) mod b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }

    pub mod opt {
        use super::*;
        pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
            match v {
                Some(v) => super::serialize(v, s),
                None => s.serialize_none(),
            }
        }
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
            match Option::<String>::deserialize(d)? {
                Some(s) => STANDARD
                    .decode(s)
                    .map(Some)
                    .map_err(serde::de::Error::custom),
                None => Ok(None),
            }
        }
    }
}

/// Where a page's OCR came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OcrKind {
    Markdown,
    Text,
    /// Read from the ink by an OCR engine: the sealed source is an [`EngineOcr`] (JSON).
    Engine,
}

/// What an OCR engine read from a page's ink, kept as the page's sealed OCR source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineOcr {
    /// The page as nib's markdown (`#`, `- [ ]`, `- [x]`, `-`): what the parser reads.
    pub markdown: String,
    /// The engine and its version (`pp-ocrv6-small rapidocr-3.10.0 ...`).
    pub engine: String,
    /// The engine's confidence in each markdown line, in order.
    #[serde(default)]
    pub confidence: Vec<f32>,
    /// A blind hash of the ink that was read, so unchanged ink is not read again.
    #[serde(default)]
    pub ink: Option<String>,
}

#[cfg_attr(not(feature = "ocr"), allow(dead_code))]
impl EngineOcr {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("an EngineOcr serializes")
    }

    pub fn decode(source: &str) -> Option<EngineOcr> {
        serde_json::from_str(source).ok()
    }
}

/// The markdown (or text) the structure parser reads from an OCR source of `kind`.
pub fn ocr_markdown(kind: OcrKind, source: &str) -> std::borrow::Cow<'_, str> {
    match kind {
        OcrKind::Engine => EngineOcr::decode(source)
            .map(|e| std::borrow::Cow::Owned(e.markdown))
            .unwrap_or_default(),
        OcrKind::Markdown | OcrKind::Text => std::borrow::Cow::Borrowed(source),
    }
}

/// A page item's body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageRecord {
    pub page_id: PageId,
    pub date: Date,
    pub has_pdf: bool,
    pub has_png: bool,
    pub ocr_kind: Option<OcrKind>,
    /// Sealed field `ocr`: the OCR source as imported (markdown or text, front matter removed).
    #[serde(with = "b64::opt", default)]
    pub ocr: Option<Vec<u8>>,
    /// Sealed field `lines`: JSON of `Vec<StoredLine>`.
    #[serde(with = "b64")]
    pub lines: Vec<u8>,
    /// The blind stem this page was imported under, if any.
    pub stem: Option<String>,
    /// Blind hashes of the page's index terms, to remove stale postings on the next write.
    pub terms: Vec<String>,
    /// Number of index terms (BM25 document length).
    pub doc_len: u32,
    /// A random revision written into this page's postings: a posting whose revision differs is
    /// stale (from an earlier or a failed write) and is ignored.
    pub rev: u32,
    pub created_at: i64,
    pub updated_at: i64,
    /// When the files the page's parts were last taken from were written, so that an older
    /// file never replaces what the page took from a newer one. Absent in records written
    /// before (then any file is taken).
    #[serde(default)]
    pub sources: PageSources,
    /// How many typed notes (`add_note`) the page holds, so that `list_notes` opens only the
    /// pages that have some. A count, not content: it says no more than `has_pdf` does.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub notes: u32,
    /// The OCR source holds no text ([`ocr_has_text`]): an engine read ink with no writing on
    /// it (a blank or 1x1 image). The source is still kept (its ink hash spares reading the same
    /// ink again), but the page has no OCR text, and `list_pages` says so without opening it.
    /// A flag like `has_pdf`, no content.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ocr_blank: bool,
}

/// Whether an OCR source of `kind` holds any text: an engine's empty reading is no text.
pub fn ocr_has_text(kind: OcrKind, source: &str) -> bool {
    !ocr_markdown(kind, source).trim().is_empty()
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Per part of a page (its OCR, each ink file), when the file it was taken from was written:
/// unix milliseconds of the object's `LastModified` (ingest) or the file's mtime (`nib
/// import`). `None`: not known (a page written before these were kept, or a part it never had).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageSources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ocr: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pdf: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub png: Option<i64>,
}

impl PageSources {
    /// Whether a file written at `file` may replace a part taken from one written at `taken`:
    /// unless both are known and the file is older. The same time is taken again (a redelivered
    /// upload, or two writes within the same second of S3's `LastModified`).
    pub fn newer_or_same(file: Option<i64>, taken: Option<i64>) -> bool {
        match (file, taken) {
            (Some(file), Some(taken)) => file >= taken,
            _ => true,
        }
    }
}

/// What reads of a page item need: its body without the index terms. Those (a blind hash per
/// distinct term, often more than a hundred) matter only to the page's next write, and serde
/// skips fields a struct does not name without allocating them, so `get_page` and search decode
/// this instead of [`PageRecord`].
#[derive(Debug, Clone, Deserialize)]
pub struct PageHead {
    pub page_id: PageId,
    pub date: Date,
    pub has_pdf: bool,
    pub has_png: bool,
    pub ocr_kind: Option<OcrKind>,
    #[serde(with = "b64::opt", default)]
    pub ocr: Option<Vec<u8>>,
    #[serde(with = "b64")]
    pub lines: Vec<u8>,
    pub rev: u32,
}

/// What a page's revision token needs of its item: no sealed field, not even base64-decoded
/// (`Notebook::page_revision`; the page is opened only for an answer not kept).
#[derive(Debug, Clone, Deserialize)]
pub struct PageRevisionHead {
    pub page_id: PageId,
    pub has_pdf: bool,
    pub has_png: bool,
    pub rev: u32,
}

/// What a search hit needs of a page item: [`PageHead`] without the OCR source (a hit shows
/// the page's lines), so that sealed field is skipped rather than base64-decoded for every
/// hit.
#[derive(Debug, Clone, Deserialize)]
pub struct PageHitHead {
    pub page_id: PageId,
    pub date: Date,
    pub has_pdf: bool,
    pub has_png: bool,
    #[serde(with = "b64")]
    pub lines: Vec<u8>,
    pub rev: u32,
}

/// What `list_pages` needs of a page item: no sealed field is even base64-decoded.
#[derive(Debug, Clone, Deserialize)]
pub struct PageListing {
    pub page_id: PageId,
    pub date: Date,
    pub has_pdf: bool,
    pub has_png: bool,
    pub ocr_kind: Option<OcrKind>,
    #[serde(default)]
    pub notes: u32,
    #[serde(default)]
    pub ocr_blank: bool,
    /// Sealed: opened for the page's title ([`super::pages::title_of`]).
    #[serde(with = "b64")]
    pub lines: Vec<u8>,
}

/// What a page read needs of a task link item: its reconciled status, without the sealed text,
/// the appearances and the update history.
#[derive(Debug, Clone, Deserialize)]
pub struct TaskStatusRecord {
    pub task_link_id: TaskLinkId,
    pub status: TaskStatus,
    pub completed_date: Option<Date>,
    #[serde(default)]
    pub notion: Option<NotionLink>,
}

/// The Notion page a task was pushed as: its id, and its URL sealed as field `notion_url`
/// of the task item (Notion's page URLs carry a slug of the title).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotionLink {
    pub page_id: String,
    #[serde(with = "b64")]
    pub url: Vec<u8>,
}

/// One line as stored inside the sealed `lines` field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredLine {
    pub line_id: String,
    pub text: String,
    pub section: Option<String>,
    pub notation: Notation,
    pub page_status: Option<PageStatus>,
    pub task_link_id: Option<TaskLinkId>,
    /// Added by `create_task` or `add_note` rather than written on the page; survives
    /// re-import (a newer ink file of the page never removes it).
    #[serde(default)]
    pub digital: bool,
    /// A typed note's tags, normalised (`notes::normalize_tag`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Where a typed note came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
    /// When a typed note was added (unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_at: Option<i64>,
    /// Set when the owner corrected the line (`Notebook::correct_line`): what the page's own
    /// reading said. The line keeps the id of that reading, so reading the same ink again finds
    /// the correction and keeps it (`pages::carry_corrections`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected: Option<Reading>,
}

/// A line as the page's reading (OCR or its file) gave it, before the owner corrected it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reading {
    pub text: String,
    pub page_status: Option<PageStatus>,
}

impl StoredLine {
    /// A typed note (`add_note`): typed, in the page's notes section.
    pub fn is_note(&self) -> bool {
        self.digital && self.section.as_deref() == Some(super::notes::NOTES_SECTION)
    }
}

/// A task link item's body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskRecord {
    pub task_link_id: TaskLinkId,
    pub status: TaskStatus,
    pub first_seen_date: Date,
    pub completed_date: Option<Date>,
    pub source_page_id: PageId,
    /// The blind dedup key (of the normalized text).
    pub key: String,
    /// Sealed field `text`.
    #[serde(with = "b64")]
    pub text: Vec<u8>,
    /// Sealed field `source_url`, when `create_task` was given one.
    #[serde(with = "b64::opt", default)]
    pub source_url: Option<Vec<u8>>,
    pub appearances: Vec<Appearance>,
    /// The explicit updates, bounded: `updates` (the newest), `checkpoint` and
    /// `dropped_updates` (what the older ones added up to), at the top level of the body.
    #[serde(flatten)]
    pub history: History,
    pub created_at: i64,
    /// The Notion page it was pushed as (`notebook::notion`); kept by every later commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notion: Option<NotionLink>,
    /// Sealed field `status_log`: the [`StatusLog`] (who changed the status, and when),
    /// bounded. Absent on tasks from before it existed, until their next change.
    #[serde(with = "b64::opt", default, skip_serializing_if = "Option::is_none")]
    pub status_log: Option<Vec<u8>>,
    /// Tasks `link_tasks` merged into this one, each as it was when linked (its sealed fields
    /// still bound to its own `TASK#` key, where `unlink_tasks` puts it back). Their dedup keys
    /// name this task, so their text on any page reconciles here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<TaskRecord>,
}

impl TaskRecord {
    /// The task's status changes, opened.
    pub fn open_status_log(
        &self,
        keys: &UserKeys,
        user: &UserId,
        pk: &str,
    ) -> Result<StatusLog, NotebookError> {
        let Some(sealed) = &self.status_log else {
            return Ok(StatusLog::default());
        };
        let plain = open(
            keys,
            user,
            pk,
            &task_sk(&self.task_link_id),
            "status_log",
            sealed,
        )?;
        serde_json::from_slice(&plain)
            .map_err(|e| NotebookError::Corrupt(format!("status_log: {e}")))
    }

    /// Appends a change with the record's current status to its sealed log (bounded).
    pub fn log_status(
        &mut self,
        keys: &UserKeys,
        user: &UserId,
        pk: &str,
        at: i64,
        by: ChangedBy,
    ) -> Result<(), NotebookError> {
        let mut log = self.open_status_log(keys, user, pk)?;
        log.push(StatusChange {
            at,
            status: self.status,
            by,
        });
        let plain = serde_json::to_vec(&log).expect("a status log serializes");
        self.status_log = Some(seal(
            keys,
            user,
            pk,
            &task_sk(&self.task_link_id),
            "status_log",
            &plain,
        ));
        Ok(())
    }

    /// Reconciles, and logs the change when the status moved (`by` says why).
    pub fn reconcile_logged(
        &mut self,
        keys: &UserKeys,
        user: &UserId,
        pk: &str,
        at: i64,
        by: ChangedBy,
    ) -> Result<(), NotebookError> {
        let before = self.status;
        self.reconcile();
        if self.status != before {
            self.log_status(keys, user, pk, at, by)?;
        }
        Ok(())
    }

    /// Recomputes `status` and `completed_date` from the appearances and the history.
    pub fn reconcile(&mut self) {
        let r = self.history.reconcile(&self.appearances);
        self.status = r.status;
        self.completed_date = r.completed_date;
    }

    /// Records an explicit status change made now, and reconciles.
    pub fn record_update(&mut self, today: Date, at: i64, status: TaskStatus) {
        self.history.record(&self.appearances, today, at, status);
        self.reconcile();
    }

    /// Whether `key` is this task's dedup key or that of a task linked into it.
    pub fn answers_to(&self, key: &str) -> bool {
        self.key == key || self.merged.iter().any(|m| m.key == key)
    }

    /// The newest explicit update's status, if any.
    pub fn last_update(&self) -> Option<TaskStatus> {
        self.history.updates.last().map(|u| u.status)
    }
}

/// A trashed page's item body (`TRASH#P#{page}`): the page record exactly as it was (its
/// sealed fields still bound to `PAGE#{page}`, where restore puts it back), and the task links
/// that were only on this page, trashed with it (`TRASH#T#{task}`, `with_page` set).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrashedPage {
    pub page: PageRecord,
    pub deleted_at: i64,
    pub purge_at: i64,
    pub tasks: Vec<TaskLinkId>,
}

/// A trashed task link's item body (`TRASH#T#{task}`): the task record exactly as it was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrashedTask {
    pub task: TaskRecord,
    pub deleted_at: i64,
    pub purge_at: i64,
    /// Trashed along with this page (it was on no other): restored with it, not on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub with_page: Option<PageId>,
}

/// A dedup item's body: which task link holds the normalized text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskKeyRecord {
    pub task_link_id: TaskLinkId,
}

/// A stem item's body: which page a file stem was imported as.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StemRecord {
    pub page_id: PageId,
}

/// The write that records `stem` (blinded) as imported into `page_id`: made once, with the
/// page, never overwritten.
pub fn stem_write(pk: &str, stem: &str, page_id: &PageId) -> crate::ports::Write {
    crate::ports::Write::put(
        crate::ports::Item {
            pk: pk.to_owned(),
            sk: stem_sk(stem),
            gsi1: None,
            version: 1,
            expires_at: None,
            body: encode(&StemRecord {
                page_id: page_id.clone(),
            }),
        },
        crate::ports::Cond::NotExists,
    )
}

/// The user's index statistics, for BM25.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StatsRecord {
    pub pages: u32,
    pub total_len: u64,
}

impl StatsRecord {
    /// The statistics from the items under `[LEGACY_STATS_SK, STATS_PAGES_SK, STATS_LEN_SK]`
    /// (any may be absent): the legacy record plus the counters.
    pub fn from_items(
        items: &[Option<crate::ports::Item>],
    ) -> Result<StatsRecord, super::NotebookError> {
        let mut stats = match items.first() {
            Some(Some(item)) => decode("stats", &item.body)?,
            _ => StatsRecord::default(),
        };
        let counter = |i: usize| -> Result<u64, super::NotebookError> {
            match items.get(i) {
                Some(Some(item)) => crate::ports::counter_value(item)
                    .ok_or_else(|| super::NotebookError::Corrupt("a stats counter".into())),
                _ => Ok(0),
            }
        };
        stats.pages = stats
            .pages
            .saturating_add(u32::try_from(counter(1)?).unwrap_or(u32::MAX));
        stats.total_len = stats.total_len.saturating_add(counter(2)?);
        Ok(stats)
    }

    /// The keys [`StatsRecord::from_items`] reads, in its order.
    pub fn keys(pk: &str) -> Vec<(String, String)> {
        [LEGACY_STATS_SK, STATS_PAGES_SK, STATS_LEN_SK]
            .into_iter()
            .map(|sk| (pk.to_owned(), sk.to_owned()))
            .collect()
    }
}

pub fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialize")
}

pub fn decode<T: for<'de> Deserialize<'de>>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, NotebookError> {
    serde_json::from_slice(bytes).map_err(|e| NotebookError::Corrupt(format!("{what}: {e}")))
}

/// Seals `plain` as field `field` of the item `pk`/`sk`.
pub fn seal(
    keys: &UserKeys,
    user: &UserId,
    pk: &str,
    sk: &str,
    field: &str,
    plain: &[u8],
) -> Vec<u8> {
    keys.seal(
        &Aad {
            user,
            pk,
            sk,
            field,
        },
        plain,
    )
}

pub fn open(
    keys: &UserKeys,
    user: &UserId,
    pk: &str,
    sk: &str,
    field: &str,
    sealed: &[u8],
) -> Result<Vec<u8>, NotebookError> {
    Ok(keys.open(
        &Aad {
            user,
            pk,
            sk,
            field,
        },
        sealed,
    )?)
}

/// [`open`] where the sealed bytes lie (no copy): the plaintext is a part of `sealed`.
pub fn open_in_place<'s>(
    keys: &UserKeys,
    user: &UserId,
    pk: &str,
    sk: &str,
    field: &str,
    sealed: &'s mut [u8],
) -> Result<&'s [u8], NotebookError> {
    Ok(keys.open_in_place(
        &Aad {
            user,
            pk,
            sk,
            field,
        },
        sealed,
    )?)
}

pub fn open_string(
    keys: &UserKeys,
    user: &UserId,
    pk: &str,
    sk: &str,
    field: &str,
    sealed: &[u8],
) -> Result<String, NotebookError> {
    String::from_utf8(open(keys, user, pk, sk, field, sealed)?)
        .map_err(|_| NotebookError::Corrupt(format!("{field}: not UTF-8")))
}
