//! Export and import of a user's whole notebook (issue 14): the re-importable bundle
//! (`nib-bundle` version 1, documented in docs/user-guide.md, "The bundle") and the Markdown
//! ZIP.
//!
//! Both go through the `Store`/`Assets` ports, so they work on either back end, and both
//! stream: pages and tasks are read a query page at a time and written to the ZIP one entry at
//! a time; only the ids seen (for the checks) are kept.
//!
//! A bundle holds plaintext (it is the user's own data leaving nib), but no secret: no token,
//! no Notion connection, no password hash, no key. Import seals everything again under the
//! target user's keys and recomputes every blind value (task dedup keys, index terms, stems),
//! so the bundle opens in any notebook; ids, statuses, histories and page revisions are kept.
//!
//! Tested from `nib-testkit` (`testkit/tests/library/bundle.rs`), through the public API and
//! the documented format: one round-trip check serves both back ends, and the AWS one needs the
//! emulator, which nib-shared does not hold.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, Write as IoWrite};

use serde::{Deserialize, Serialize};

use super::records::{
    self, OcrKind, PageRecord, PageSources, StoredLine, TaskKeyRecord, TaskRecord, decode, encode,
    page_gsi_sk, page_sk, pages_partition, task_gsi_sk, task_sk, taskkey_sk, tasks_partition,
    user_pk,
};
use super::trash::{page_trash_error, task_trash_error};
use super::{Notebook, NotebookError, search};
use crate::crypto::UserKeys;
use crate::domain::tasks::{self, Appearance, History, StatusLog};
use crate::domain::{Date, Notation, PageId, PageStatus, TaskLinkId, TaskStatus, UserId};
use crate::ports::{AssetKind, Cond, Item, MAX_TRANSACTION_ITEMS, Query, StoreError, Write};

/// The `format` of a bundle's `manifest.json`.
pub const BUNDLE_FORMAT: &str = "nib-bundle";
/// The bundle version this build writes and reads.
pub const BUNDLE_VERSION: u32 = 1;

const MANIFEST: &str = "manifest.json";
/// Items per store query while exporting.
const QUERY_PAGE: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The file is not a nib bundle at all (no manifest, another format or version).
    #[error("not a nib bundle: {0}")]
    Foreign(String),
    /// A nib bundle that does not read back whole (truncated, altered, inconsistent).
    #[error("the bundle is damaged: {0}")]
    Damaged(String),
    /// The target notebook holds pages the bundle does not: import goes into an empty notebook
    /// (or one that already holds this bundle).
    #[error("the notebook is not empty: {0}")]
    NotEmpty(String),
    /// A page or task of the bundle is in the notebook's trash (deleted after the export):
    /// importing it would put it back live beside its trash item, so it is restored or purged
    /// first.
    #[error(
        "{0}; restore it and import again (the import then skips it), or import after it is purged"
    )]
    InTrash(String),
    #[error("cannot write the archive")]
    Io(#[from] std::io::Error),
    #[error("cannot write the archive")]
    Zip(#[source] zip::result::ZipError),
    #[error(transparent)]
    Notebook(#[from] NotebookError),
}

impl BundleError {
    /// What kind of refusal or failure this is, for a log line: the message itself may quote
    /// the bundle (a parser's error names the value it met), which is notebook content.
    pub fn kind(&self) -> &'static str {
        match self {
            BundleError::Foreign(_) => "foreign",
            BundleError::Damaged(_) => "damaged",
            BundleError::NotEmpty(_) => "not_empty",
            BundleError::InTrash(_) => "in_trash",
            BundleError::Io(_) | BundleError::Zip(_) => "io",
            BundleError::Notebook(_) => "notebook",
        }
    }

    /// The bundle entry a refusal names first (`manifest.json`, `pages/{id}.json`, ...), for a
    /// log line beside [`Self::kind`]: only a name of the bundle's own shape (a known folder or
    /// the manifest, ASCII letters, digits, `.`, `-`, `/`), never the rest of the message.
    pub fn entry(&self) -> Option<&str> {
        let message = match self {
            BundleError::Foreign(m)
            | BundleError::Damaged(m)
            | BundleError::NotEmpty(m)
            | BundleError::InTrash(m) => m,
            _ => return None,
        };
        let name = message.split([':', ' ']).next()?;
        let ours = name == MANIFEST || name.starts_with("pages/") || name.starts_with("tasks/");
        let plain = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '/'));
        (ours && plain && name.len() <= 80).then_some(name)
    }
}

impl From<StoreError> for BundleError {
    fn from(e: StoreError) -> Self {
        BundleError::Notebook(e.into())
    }
}

impl From<crate::ports::AssetsError> for BundleError {
    fn from(e: crate::ports::AssetsError) -> Self {
        BundleError::Notebook(e.into())
    }
}

impl From<crate::crypto::CryptoError> for BundleError {
    fn from(e: crate::crypto::CryptoError) -> Self {
        BundleError::Notebook(e.into())
    }
}

/// `manifest.json`: written last, so a bundle cut short has none.
#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    version: u32,
    /// Unix seconds.
    exported_at: i64,
    pages: u64,
    tasks: u64,
    ink_files: u64,
}

/// `pages/{page_id}.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BundlePage {
    page_id: PageId,
    date: Date,
    /// The file stem the page was imported under, when nib can tell it (a stem is kept only as
    /// a blind hash; the date stems `nib import`, ingest and `create_task` use are recognised).
    stem: Option<String>,
    ocr_kind: Option<OcrKind>,
    /// The OCR source as stored: markdown, text, or (kind `engine`) the engine's JSON.
    ocr: Option<String>,
    lines: Vec<StoredLine>,
    has_pdf: bool,
    has_png: bool,
    rev: u32,
    created_at: i64,
    updated_at: i64,
    #[serde(default)]
    sources: PageSources,
}

/// `tasks/{task_link_id}.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BundleTask {
    task_link_id: TaskLinkId,
    status: TaskStatus,
    first_seen_date: Date,
    completed_date: Option<Date>,
    source_page_id: PageId,
    text: String,
    source_url: Option<String>,
    /// Every page line the task appears on.
    appearances: Vec<Appearance>,
    history: History,
    created_at: i64,
    /// Whether this task holds its text's dedup key (a finished task replaced by a newer one
    /// with the same text does not).
    owns_key: bool,
    /// The Notion page it was pushed as (id and URL); the connection itself is not exported.
    notion: Option<BundleNotion>,
    /// Who changed the status and when (`get_task`'s history), opened. Absent in bundles
    /// written before it was exported, and on tasks that never logged a change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status_log: Option<StatusLog>,
    /// The tasks `link_tasks` merged into this one, each as it was when linked (its own id,
    /// text, history and log; its appearances are this task's). For a merged task `owns_key`
    /// says whether its text's dedup key names this task. Absent in older bundles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    merged: Vec<BundleTask>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct BundleNotion {
    page_id: String,
    url: String,
}

/// What an export wrote: the counts, and the ids for the access record (ids only, like the
/// ZIP's central directory: what grows with the notebook).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportReport {
    pub pages: u64,
    pub tasks: u64,
    pub ink_files: u64,
    pub page_ids: Vec<PageId>,
    pub task_ids: Vec<TaskLinkId>,
}

/// What an import did: pages and tasks written now, and those already there (a second import).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BundleImport {
    pub pages: u64,
    pub tasks: u64,
    pub pages_present: u64,
    pub tasks_present: u64,
}

/// What an export writes: the re-importable bundle or the Markdown ZIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    Bundle,
    Markdown,
}

impl ExportFormat {
    /// The names `export_notebook` and the web app take.
    pub const NAMES: [&'static str; 2] = ["bundle", "markdown"];

    pub fn parse(name: &str) -> Option<ExportFormat> {
        match name {
            "bundle" => Some(ExportFormat::Bundle),
            "markdown" => Some(ExportFormat::Markdown),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExportFormat::Bundle => "bundle",
            ExportFormat::Markdown => "markdown",
        }
    }

    /// The download's file name: `nib-{user}-{date}.nib.zip` for a bundle (what
    /// `nib import --bundle` reads), `nib-{user}-{date}-markdown.zip` for Markdown. Only ASCII
    /// letters, digits, `-`, `_` and `.`, so it goes into a `Content-Disposition` as it is.
    pub fn file_name(self, user: &UserId, date: Date) -> String {
        match self {
            ExportFormat::Bundle => format!("nib-{user}-{date}.nib.zip"),
            ExportFormat::Markdown => format!("nib-{user}-{date}-markdown.zip"),
        }
    }
}

/// An export kept by the asset store for download ([`Notebook::export_download`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportDownload {
    /// Serves the archive as an attachment until the TTL runs out.
    pub url: String,
    pub file_name: String,
    pub report: ExportReport,
}

fn zip_err(e: zip::result::ZipError) -> BundleError {
    match e {
        zip::result::ZipError::Io(e) => BundleError::Io(e),
        e => BundleError::Zip(e),
    }
}

fn options() -> zip::write::SimpleFileOptions {
    zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(false)
}

fn ink_kinds(has_pdf: bool, has_png: bool) -> impl Iterator<Item = AssetKind> {
    [(AssetKind::Pdf, has_pdf), (AssetKind::Png, has_png)]
        .into_iter()
        .filter_map(|(k, has)| has.then_some(k))
}

/// What an entry's name says it is.
enum Entry {
    Manifest,
    Page(PageId),
    Ink(PageId, AssetKind),
    Task(TaskLinkId),
}

fn classify(name: &str) -> Option<Entry> {
    if name == MANIFEST {
        return Some(Entry::Manifest);
    }
    if let Some(rest) = name.strip_prefix("pages/") {
        let (id, ext) = rest.rsplit_once('.')?;
        let id = PageId::parse(id).ok()?;
        return match ext {
            "json" => Some(Entry::Page(id)),
            "pdf" => Some(Entry::Ink(id, AssetKind::Pdf)),
            "png" => Some(Entry::Ink(id, AssetKind::Png)),
            _ => None,
        };
    }
    let id = name.strip_prefix("tasks/")?.strip_suffix(".json")?;
    TaskLinkId::parse(id).ok().map(Entry::Task)
}

/// The most one JSON entry (the manifest, a page, a task) holds uncompressed: a page or a task
/// must fit in one store item (400 KiB) once sealed, so ten times that is no bundle nib wrote.
pub const MAX_JSON_ENTRY_BYTES: u64 = 4 << 20;
/// The most one ink file (a page's PDF or PNG, stored as uploaded) holds.
pub const MAX_INK_ENTRY_BYTES: u64 = 128 << 20;
/// The most all the entries of a bundle hold together, uncompressed: about 20,000 pages with a
/// PDF and a PNG of 1.5 MiB each. Each entry is read whole, one at a time, so memory is
/// bounded by the entry caps; this bounds the work of a bundle that inflates without end.
pub const MAX_BUNDLE_BYTES: u64 = 64 << 30;

/// The most the entries of a bundle imported from a browser hold together, uncompressed (the
/// web app's import form; on AWS the form's upload, which ingest imports): the request is at
/// most 2 GiB (256 MiB on AWS), and a notebook of that size is far below this.
pub const MAX_APP_BUNDLE_BYTES: u64 = 4 << 30;
/// How many times the archive's own size its entries may hold together (and at least
/// [`MIN_INFLATION_ROOM`]): nib's bundles keep ink as it came (already compressed) and deflate
/// only the JSON, a few times over; a bundle of zeros inflates a thousand times.
pub const MAX_BUNDLE_INFLATION: u64 = 64;
const MIN_INFLATION_ROOM: u64 = 1 << 20;

/// The most the entry `name` may hold.
fn entry_cap(name: &str) -> u64 {
    match classify(name) {
        Some(Entry::Ink(..)) => MAX_INK_ENTRY_BYTES,
        _ => MAX_JSON_ENTRY_BYTES,
    }
}

/// Refuses a bundle from its central directory alone, before any entry but the manifest is
/// inflated: an entry that says it holds more than its kind's cap; entries that say they hold
/// more than `max_total` together, or more than [`MAX_BUNDLE_INFLATION`] times the archive's
/// `archive_len` bytes; an entry that is no bundle's; counts of pages, tasks and ink files that
/// are not the manifest's. (What an entry says it holds is all that is ever read of it.)
fn check_directory<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
    manifest: &Manifest,
    max_total: u64,
    archive_len: u64,
) -> Result<(), BundleError> {
    let max_total = max_total.min(
        archive_len
            .saturating_mul(MAX_BUNDLE_INFLATION)
            .max(MIN_INFLATION_ROOM),
    );
    let mut total = 0u64;
    let (mut pages, mut tasks, mut ink) = (0u64, 0u64, 0u64);
    for index in 0..archive.len() {
        let file = archive
            .by_index_raw(index)
            .map_err(|e| BundleError::Damaged(format!("entry {index}: {e}")))?;
        let name = file
            .name()
            .map_err(|e| BundleError::Damaged(format!("entry {index}: {e}")))?;
        let (size, cap) = (file.size(), entry_cap(&name));
        if size > cap {
            return Err(BundleError::Damaged(format!(
                "{name} says it holds {size} bytes; an entry of its kind holds at most {cap}"
            )));
        }
        match classify(&name) {
            Some(Entry::Manifest) => {}
            Some(Entry::Page(_)) => pages += 1,
            Some(Entry::Task(_)) => tasks += 1,
            Some(Entry::Ink(..)) => ink += 1,
            None => return Err(BundleError::Damaged(format!("unexpected entry {name:?}"))),
        }
        total = total.saturating_add(size);
        if total > max_total {
            return Err(BundleError::Damaged(format!(
                "its entries say they hold more than {} MiB together (at most {} MiB here, \
                 and {MAX_BUNDLE_INFLATION} times the archive's size)",
                max_total >> 20,
                max_total >> 20
            )));
        }
    }
    if (pages, tasks, ink) != (manifest.pages, manifest.tasks, manifest.ink_files) {
        return Err(BundleError::Damaged(format!(
            "the manifest lists {} pages, {} tasks and {} ink files; the bundle holds {pages}, \
             {tasks} and {ink}",
            manifest.pages, manifest.tasks, manifest.ink_files
        )));
    }
    Ok(())
}

/// Reads an entry that says it holds `size` bytes: never more than that is read, whatever
/// it inflates to, and an entry that holds another size is damaged.
fn read_sized(file: &mut impl Read, name: &str, size: u64) -> Result<Vec<u8>, BundleError> {
    let cap = entry_cap(name);
    if size > cap {
        return Err(BundleError::Damaged(format!(
            "{name} says it holds {size} bytes; an entry of its kind holds at most {cap}"
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // Reading to the end checks the entry's CRC-32; one byte past the size tells a longer one.
    file.take(size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| BundleError::Damaged(format!("{name}: {e}")))?;
    if bytes.len() as u64 != size {
        return Err(BundleError::Damaged(format!(
            "{name} holds another size than it says ({size} bytes)"
        )));
    }
    Ok(bytes)
}

fn read_entry<R: Read + Seek>(
    archive: &mut zip::ZipArchive<R>,
    index: usize,
) -> Result<(String, Vec<u8>), BundleError> {
    let mut file = archive
        .by_index(index)
        .map_err(|e| BundleError::Damaged(format!("entry {index}: {e}")))?;
    let name = file
        .name()
        .map_err(|e| BundleError::Damaged(format!("entry {index}: {e}")))?
        .into_owned();
    let size = file.size();
    let bytes = read_sized(&mut file, &name, size)?;
    Ok((name, bytes))
}

/// Where [`Notebook::next_page_items`] is in the user's pages: the next query, `None` when done.
struct PageItems {
    q: Option<Query>,
}

impl PageItems {
    fn new(user: &UserId) -> PageItems {
        let mut q = Query::gsi1(pages_partition(user), "");
        q.limit = QUERY_PAGE;
        PageItems { q: Some(q) }
    }
}

/// A task record as a bundle holds it: its sealed fields opened (each bound to its own
/// `TASK#` key, the merged tasks' too). `merged_owns` says, per merged task, whether its dedup
/// key names this task.
fn bundle_task(
    user: &UserId,
    keys: &UserKeys,
    pk: &str,
    t: TaskRecord,
    owns_key: bool,
    merged_owns: &[bool],
) -> Result<BundleTask, NotebookError> {
    let sk = task_sk(&t.task_link_id);
    let status_log = match t.status_log {
        Some(_) => Some(t.open_status_log(keys, user, pk)?),
        None => None,
    };
    let merged = t
        .merged
        .into_iter()
        .enumerate()
        .map(|(i, m)| {
            let owns = merged_owns.get(i).copied().unwrap_or(false);
            bundle_task(user, keys, pk, m, owns, &[])
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BundleTask {
        text: records::open_string(keys, user, pk, &sk, "text", &t.text)?,
        source_url: t
            .source_url
            .as_ref()
            .map(|u| records::open_string(keys, user, pk, &sk, "source_url", u))
            .transpose()?,
        notion: t
            .notion
            .as_ref()
            .map(|n| {
                Ok::<_, NotebookError>(BundleNotion {
                    page_id: n.page_id.clone(),
                    url: super::notion::open_url(user, keys, &t.task_link_id, n)?,
                })
            })
            .transpose()?,
        owns_key,
        task_link_id: t.task_link_id,
        status: t.status,
        first_seen_date: t.first_seen_date,
        completed_date: t.completed_date,
        source_page_id: t.source_page_id,
        appearances: t.appearances,
        history: t.history,
        created_at: t.created_at,
        status_log,
        merged,
    })
}

/// A bundle's task sealed again under `keys`, with its dedup key recomputed; the tasks linked
/// into it too, each bound to its own `TASK#` key as `links` keeps them.
fn task_record(
    user: &UserId,
    keys: &UserKeys,
    pk: &str,
    t: BundleTask,
) -> Result<TaskRecord, NotebookError> {
    let sk = task_sk(&t.task_link_id);
    let key = keys.blind("task", &tasks::normalize(&t.text));
    let mut record = TaskRecord {
        task_link_id: t.task_link_id.clone(),
        status: t.status,
        first_seen_date: t.first_seen_date,
        completed_date: t.completed_date,
        source_page_id: t.source_page_id,
        key,
        text: records::seal(keys, user, pk, &sk, "text", t.text.as_bytes()),
        source_url: t
            .source_url
            .map(|u| records::seal(keys, user, pk, &sk, "source_url", u.as_bytes())),
        appearances: t.appearances,
        history: t.history,
        created_at: t.created_at,
        notion: t.notion.map(|n| records::NotionLink {
            page_id: n.page_id,
            url: records::seal(keys, user, pk, &sk, "notion_url", n.url.as_bytes()),
        }),
        status_log: None,
        merged: t
            .merged
            .into_iter()
            .map(|m| task_record(user, keys, pk, m))
            .collect::<Result<_, _>>()?,
    };
    if let Some(log) = t.status_log {
        let plain = serde_json::to_vec(&log).expect("a status log serializes");
        record.status_log = Some(records::seal(keys, user, pk, &sk, "status_log", &plain));
    }
    Ok(record)
}

fn parse<T: for<'de> Deserialize<'de>>(name: &str, bytes: &[u8]) -> Result<T, BundleError> {
    serde_json::from_slice(bytes).map_err(|e| BundleError::Damaged(format!("{name}: {e}")))
}

impl Notebook {
    /// How many pages the user has (the index statistics): the length of a progress bar.
    pub async fn page_count(&self, user: &UserId) -> Result<u64, NotebookError> {
        let items = self
            .store
            .batch_get(&records::StatsRecord::keys(&user_pk(user)))
            .await?;
        Ok(u64::from(records::StatsRecord::from_items(&items)?.pages))
    }

    /// The next query page of the user's page items, oldest date first: `None` after the
    /// last. A loop over these rather than a callback taking an async closure, whose future
    /// the compiler cannot show to be `Send` (the tool and the web app run exports on a
    /// multi-threaded runtime).
    async fn next_page_items(
        &self,
        pager: &mut PageItems,
    ) -> Result<Option<Vec<Item>>, BundleError> {
        let Some(q) = pager.q.as_mut() else {
            return Ok(None);
        };
        let page = self.store.query(q).await?;
        match page.next {
            Some(next) => q.after = Some(next),
            None => pager.q = None,
        }
        Ok(Some(page.items))
    }

    /// Writes the user's notebook in `format` to `out` ([`Notebook::export_bundle`],
    /// [`Notebook::export_markdown`]).
    pub async fn export<W: IoWrite + Seek>(
        &self,
        user: &UserId,
        format: ExportFormat,
        out: W,
        progress: &(dyn Fn() + Sync),
    ) -> Result<ExportReport, BundleError> {
        match format {
            ExportFormat::Bundle => self.export_bundle(user, out, progress).await,
            ExportFormat::Markdown => self.export_markdown(user, out, progress).await,
        }
    }

    /// The user's notebook in `format`, written to a new temporary file (deleted when it is
    /// dropped), and the download's file name: what the web app streams and what
    /// [`Notebook::export_download`] hands to the asset store.
    pub async fn export_to_temp(
        &self,
        user: &UserId,
        format: ExportFormat,
    ) -> Result<(tempfile::NamedTempFile, String, ExportReport), BundleError> {
        let file = tempfile::Builder::new()
            .prefix("nib-export-")
            .suffix(".zip")
            .tempfile()?;
        let mut out = std::io::BufWriter::new(file);
        let report = self.export(user, format, &mut out, &|| {}).await?;
        // Flushed here, so a failed write is an error rather than a short archive.
        let file = out
            .into_inner()
            .map_err(|e| BundleError::Io(e.into_error()))?;
        let name = format.file_name(user, self.clock.today());
        Ok((file, name, report))
    }

    /// The user's notebook in `format`, kept by the asset store for download, and a URL that
    /// serves it for `ttl_seconds` (`export_notebook` on AWS). `None`, exporting nothing, when
    /// the asset store keeps no exports (locally: `nib export`, or the web app's download).
    pub async fn export_download(
        &self,
        user: &UserId,
        format: ExportFormat,
        ttl_seconds: u64,
    ) -> Result<Option<ExportDownload>, BundleError> {
        if !self.assets.keeps_exports() {
            return Ok(None);
        }
        let (file, file_name, report) = self.export_to_temp(user, format).await?;
        let url = self
            .assets
            .publish_export(user, file.path(), &file_name, ttl_seconds)
            .await?;
        Ok(Some(ExportDownload {
            url,
            file_name,
            report,
        }))
    }

    /// Writes the user's notebook as a `nib-bundle` (version 1) to `out`; `progress` is told
    /// after each page.
    pub async fn export_bundle<W: IoWrite + Seek>(
        &self,
        user: &UserId,
        out: W,
        progress: &(dyn Fn() + Sync),
    ) -> Result<ExportReport, BundleError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let mut zip = zip::ZipWriter::new(out);
        let mut report = ExportReport::default();
        let mut pager = PageItems::new(user);
        while let Some(items) = self.next_page_items(&mut pager).await? {
            for item in items {
                let record: PageRecord = decode("page", &item.body)?;
                let date_stem = keys.blind("stem", &record.date.to_string());
                let page = BundlePage {
                    stem: (record.stem.as_deref() == Some(date_stem.as_str()))
                        .then(|| record.date.to_string()),
                    ocr: self.open_ocr(user, &keys, &record)?,
                    lines: self.open_lines(user, &keys, &record)?,
                    page_id: record.page_id.clone(),
                    date: record.date,
                    ocr_kind: record.ocr_kind,
                    has_pdf: record.has_pdf,
                    has_png: record.has_png,
                    rev: record.rev,
                    created_at: record.created_at,
                    updated_at: record.updated_at,
                    sources: record.sources,
                };
                zip.start_file(format!("pages/{}.json", page.page_id), options())
                    .map_err(zip_err)?;
                zip.write_all(&serde_json::to_vec_pretty(&page).expect("pages serialize"))?;
                for kind in ink_kinds(page.has_pdf, page.has_png) {
                    let bytes = self
                        .assets
                        .get(user, &page.page_id, kind)
                        .await?
                        .ok_or_else(|| {
                            NotebookError::Corrupt(format!(
                                "page {} has no {} file",
                                page.page_id,
                                kind.ext()
                            ))
                        })?;
                    zip.start_file(
                        format!("pages/{}.{}", page.page_id, kind.ext()),
                        options().compression_method(zip::CompressionMethod::Stored),
                    )
                    .map_err(zip_err)?;
                    zip.write_all(&bytes)?;
                    report.ink_files += 1;
                }
                report.pages += 1;
                report.page_ids.push(page.page_id);
                progress();
            }
        }
        for status in [TaskStatus::Todo, TaskStatus::Done, TaskStatus::Cancelled] {
            let mut q = Query::gsi1(tasks_partition(user, status), "");
            q.limit = QUERY_PAGE;
            loop {
                let page = self.store.query(&q).await?;
                let records: Vec<TaskRecord> = page
                    .items
                    .iter()
                    .map(|item| decode("task", &item.body))
                    .collect::<Result<_, _>>()?;
                let key_items = self
                    .store
                    .batch_get(
                        &records
                            .iter()
                            .map(|t| (pk.clone(), taskkey_sk(&t.key)))
                            .collect::<Vec<_>>(),
                    )
                    .await?;
                for (t, key_item) in records.into_iter().zip(key_items) {
                    let owns_key = match key_item {
                        Some(item) => {
                            decode::<TaskKeyRecord>("task key", &item.body)?.task_link_id
                                == t.task_link_id
                        }
                        None => false,
                    };
                    let mut merged_owns = Vec::with_capacity(t.merged.len());
                    for m in &t.merged {
                        // A merged task's dedup key names the kept task while its text is one
                        // of the kept task's (see `links`).
                        let owns = match self.store.get(&pk, &taskkey_sk(&m.key)).await? {
                            Some(item) => {
                                decode::<TaskKeyRecord>("task key", &item.body)?.task_link_id
                                    == t.task_link_id
                            }
                            None => false,
                        };
                        merged_owns.push(owns);
                    }
                    let task = bundle_task(user, &keys, &pk, t, owns_key, &merged_owns)?;
                    zip.start_file(format!("tasks/{}.json", task.task_link_id), options())
                        .map_err(zip_err)?;
                    zip.write_all(&serde_json::to_vec_pretty(&task).expect("tasks serialize"))?;
                    report.tasks += 1;
                    report.task_ids.push(task.task_link_id);
                }
                match page.next {
                    Some(next) => q.after = Some(next),
                    None => break,
                }
            }
        }
        let manifest = Manifest {
            format: BUNDLE_FORMAT.into(),
            version: BUNDLE_VERSION,
            exported_at: self.clock.unix(),
            pages: report.pages,
            tasks: report.tasks,
            ink_files: report.ink_files,
        };
        zip.start_file(MANIFEST, options()).map_err(zip_err)?;
        zip.write_all(&serde_json::to_vec_pretty(&manifest).expect("manifest serializes"))?;
        zip.finish().map_err(zip_err)?;
        Ok(report)
    }

    /// Writes the notebook as Markdown: `pages/{date}_{page_id}.md` per page (front matter with
    /// the date and page id; tasks as checkboxes with their reconciled status) and its ink
    /// beside it under the same name.
    pub async fn export_markdown<W: IoWrite + Seek>(
        &self,
        user: &UserId,
        out: W,
        progress: &(dyn Fn() + Sync),
    ) -> Result<ExportReport, BundleError> {
        let mut zip = zip::ZipWriter::new(out);
        let mut report = ExportReport::default();
        let mut tasks_seen = BTreeSet::new();
        let mut pager = PageItems::new(user);
        while let Some(items) = self.next_page_items(&mut pager).await? {
            for item in items {
                let listing: records::PageListing = decode("page", &item.body)?;
                let page = self.get_page(user, &listing.page_id).await?;
                let base = format!("pages/{}_{}", page.date, page.page_id);
                let mut md = format!(
                    "---\ndate: {}\npage_id: {}\n---\n\n",
                    page.date, page.page_id
                );
                for kind in ink_kinds(page.pdf_url.is_some(), page.png_url.is_some()) {
                    let name = format!("{}_{}.{}", page.date, page.page_id, kind.ext());
                    md.push_str(&match kind {
                        AssetKind::Png => format!("![page {}]({name})\n\n", page.date),
                        AssetKind::Pdf => format!("[page {} (PDF)]({name})\n\n", page.date),
                    });
                }
                for line in &page.lines {
                    match line.notation {
                        Notation::Heading => md.push_str(&format!("## {}\n", line.text)),
                        Notation::Bullet => md.push_str(&format!("- {}\n", line.text)),
                        Notation::Text => md.push_str(&format!("{}\n", line.text)),
                        Notation::Task => {
                            let mark = match line.status.or(line.page_status) {
                                Some(PageStatus::Done) => "x",
                                Some(PageStatus::Cancelled) => "-",
                                Some(PageStatus::Migrated) => ">",
                                Some(PageStatus::Open) | None => " ",
                            };
                            md.push_str(&format!("- [{mark}] {}\n", line.text));
                        }
                    }
                }
                zip.start_file(format!("{base}.md"), options())
                    .map_err(zip_err)?;
                zip.write_all(md.as_bytes())?;
                for kind in ink_kinds(page.pdf_url.is_some(), page.png_url.is_some()) {
                    if let Some(bytes) = self.assets.get(user, &page.page_id, kind).await? {
                        zip.start_file(
                            format!("{base}.{}", kind.ext()),
                            options().compression_method(zip::CompressionMethod::Stored),
                        )
                        .map_err(zip_err)?;
                        zip.write_all(&bytes)?;
                        report.ink_files += 1;
                    }
                }
                let record: PageRecord = decode("page", &item.body)?;
                let keys = self.vault.user_keys(user).await?;
                for line in self.open_lines(user, &keys, &record)? {
                    if let Some(id) = line.task_link_id {
                        tasks_seen.insert(id);
                    }
                }
                report.pages += 1;
                report.page_ids.push(page.page_id);
                progress();
            }
        }
        report.tasks = tasks_seen.len() as u64;
        report.task_ids = tasks_seen.into_iter().collect();
        zip.finish().map_err(zip_err)?;
        Ok(report)
    }

    /// Imports a `nib-bundle` into the user's notebook, which must be empty or hold this same
    /// bundle already (then nothing changes). The whole bundle is checked first (manifest,
    /// every entry's CRC and shape, the counts, each page's ink): a foreign or damaged bundle
    /// is refused before anything is written. An interrupted import is finished by running it
    /// again. `progress` is told after each page.
    pub async fn import_bundle<R: Read + Seek>(
        &self,
        user: &UserId,
        input: R,
        progress: &(dyn Fn() + Sync),
    ) -> Result<BundleImport, BundleError> {
        self.import_bundle_within(user, input, progress, MAX_BUNDLE_BYTES)
            .await
    }

    /// [`Notebook::import_bundle_within`] of the bundle in `file`, in the work pool: the archive
    /// is read and inflated on a blocking thread, which drives the import's store writes too,
    /// so a server's request workers never inflate it (the web app's import, ingest's).
    pub async fn import_bundle_file(
        self: &std::sync::Arc<Self>,
        user: &UserId,
        file: std::fs::File,
        max_bytes: u64,
    ) -> Result<BundleImport, BundleError> {
        let (notebook, user) = (self.clone(), user.clone());
        let handle = tokio::runtime::Handle::current();
        self.work()
            .run(move || {
                handle.block_on(notebook.import_bundle_within(
                    &user,
                    std::io::BufReader::new(file),
                    &|| {},
                    max_bytes,
                ))
            })
            .await
    }

    /// [`Notebook::import_bundle`] of a bundle whose entries may hold at most `max_bytes`
    /// together ([`MAX_APP_BUNDLE_BYTES`] for one from a browser).
    pub async fn import_bundle_within<R: Read + Seek>(
        &self,
        user: &UserId,
        mut input: R,
        progress: &(dyn Fn() + Sync),
        max_bytes: u64,
    ) -> Result<BundleImport, BundleError> {
        let archive_len = input.seek(std::io::SeekFrom::End(0))?;
        input.rewind()?;
        // A ZIP that does not open is damaged when it starts as one (cut short), else foreign.
        let mut magic = [0u8; 4];
        let zip_like = input.read_exact(&mut magic).is_ok() && &magic == b"PK\x03\x04";
        input.rewind()?;
        let mut archive = zip::ZipArchive::new(input).map_err(|e| {
            if zip_like {
                BundleError::Damaged(format!("the ZIP archive is cut short or broken ({e})"))
            } else {
                BundleError::Foreign(format!("not a ZIP archive ({e})"))
            }
        })?;
        let manifest: Manifest = {
            let mut file = archive
                .by_name(MANIFEST)
                .map_err(|_| BundleError::Foreign(format!("it has no {MANIFEST}")))?;
            let size = file.size();
            let bytes = read_sized(&mut file, MANIFEST, size)?;
            serde_json::from_slice(&bytes)
                .map_err(|e| BundleError::Foreign(format!("{MANIFEST}: {e}")))?
        };
        if manifest.format != BUNDLE_FORMAT {
            return Err(BundleError::Foreign(format!(
                "its format is {:?}, not {BUNDLE_FORMAT:?}",
                manifest.format
            )));
        }
        if manifest.version != BUNDLE_VERSION {
            return Err(BundleError::Foreign(format!(
                "version {} (this nib reads version {BUNDLE_VERSION})",
                manifest.version
            )));
        }

        check_directory(&mut archive, &manifest, max_bytes, archive_len)?;

        // Pass 1: every entry read and checked; nothing written.
        let mut pages: BTreeMap<PageId, (bool, bool)> = BTreeMap::new();
        let mut ink: BTreeSet<(PageId, &'static str)> = BTreeSet::new();
        let mut task_ids: BTreeSet<TaskLinkId> = BTreeSet::new();
        for index in 0..archive.len() {
            let (name, bytes) = read_entry(&mut archive, index)?;
            match classify(&name) {
                Some(Entry::Manifest) => {}
                Some(Entry::Page(id)) => {
                    let page: BundlePage = parse(&name, &bytes)?;
                    if page.page_id != id {
                        return Err(BundleError::Damaged(format!("{name} holds another page")));
                    }
                    pages.insert(id, (page.has_pdf, page.has_png));
                }
                Some(Entry::Ink(id, kind)) => {
                    ink.insert((id, kind.ext()));
                }
                Some(Entry::Task(id)) => {
                    let task: BundleTask = parse(&name, &bytes)?;
                    if task.task_link_id != id {
                        return Err(BundleError::Damaged(format!("{name} holds another task")));
                    }
                    if tasks::normalize(&task.text).is_empty() {
                        return Err(BundleError::Damaged(format!(
                            "{name}: the task has no text"
                        )));
                    }
                    task_ids.insert(id);
                }
                None => {
                    return Err(BundleError::Damaged(format!("unexpected entry {name:?}")));
                }
            }
        }
        if pages.len() as u64 != manifest.pages
            || task_ids.len() as u64 != manifest.tasks
            || ink.len() as u64 != manifest.ink_files
        {
            return Err(BundleError::Damaged(format!(
                "the manifest lists {} pages, {} tasks and {} ink files; the bundle holds {}, {} and {}",
                manifest.pages,
                manifest.tasks,
                manifest.ink_files,
                pages.len(),
                task_ids.len(),
                ink.len()
            )));
        }
        for (id, (pdf, png)) in &pages {
            for kind in ink_kinds(*pdf, *png) {
                if !ink.contains(&(id.clone(), kind.ext())) {
                    return Err(BundleError::Damaged(format!(
                        "page {id} has no {} file",
                        kind.ext()
                    )));
                }
            }
        }
        if let Some((id, ext)) = ink.iter().find(|(id, _)| !pages.contains_key(id)) {
            return Err(BundleError::Damaged(format!(
                "an ink file pages/{id}.{ext} without its page"
            )));
        }
        // The notebook: empty, or only pages of this bundle.
        let mut stranger = None;
        let mut pager = PageItems::new(user);
        while let Some(items) = self.next_page_items(&mut pager).await? {
            for item in items {
                let listing: records::PageListing = decode("page", &item.body)?;
                if !pages.contains_key(&listing.page_id) {
                    stranger = Some(listing.page_id);
                }
            }
        }
        if let Some(id) = stranger {
            return Err(BundleError::NotEmpty(format!(
                "it has page {id}, which the bundle does not; import into an empty notebook"
            )));
        }
        self.refuse_trashed(user, &pages, &task_ids).await?;
        drop(ink);

        // Pass 2: tasks, then pages with their ink (an asset before its page, as import does).
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let mut done = BundleImport::default();
        for index in 0..archive.len() {
            let (name, bytes) = read_entry(&mut archive, index)?;
            let Some(Entry::Task(_)) = classify(&name) else {
                continue;
            };
            let t: BundleTask = parse(&name, &bytes)?;
            let sk = task_sk(&t.task_link_id);
            let owns_key = t.owns_key;
            // The dedup keys of the tasks linked into it that name it.
            let merged_keys: Vec<String> = t
                .merged
                .iter()
                .filter(|m| m.owns_key)
                .map(|m| keys.blind("task", &tasks::normalize(&m.text)))
                .collect();
            let record = task_record(user, &keys, &pk, t)?;
            let key = record.key.clone();
            let mut writes = vec![Write::put(
                Item {
                    pk: pk.clone(),
                    sk: sk.clone(),
                    gsi1: Some((
                        tasks_partition(user, record.status),
                        task_gsi_sk(record.first_seen_date, &record.task_link_id),
                    )),
                    version: 1,
                    expires_at: None,
                    body: encode(&record),
                },
                Cond::NotExists,
            )];
            let owned = owns_key.then_some(&key).into_iter().chain(&merged_keys);
            for k in owned {
                writes.push(Write::put(
                    Item {
                        pk: pk.clone(),
                        sk: taskkey_sk(k),
                        gsi1: None,
                        version: 1,
                        expires_at: None,
                        body: encode(&TaskKeyRecord {
                            task_link_id: record.task_link_id.clone(),
                        }),
                    },
                    Cond::NotExists,
                ));
            }
            writes.push(records::revision_write(&pk));
            match self.store.transact(writes).await {
                Ok(()) => done.tasks += 1,
                Err(StoreError::ConditionFailed { .. })
                    if self.store.get(&pk, &sk).await?.is_some() =>
                {
                    done.tasks_present += 1
                }
                Err(StoreError::ConditionFailed { .. }) => {
                    return Err(BundleError::NotEmpty(format!(
                        "another task already has the text of task {}",
                        record.task_link_id
                    )));
                }
                Err(e) => return Err(e.into()),
            }
        }
        for index in 0..archive.len() {
            let (name, bytes) = read_entry(&mut archive, index)?;
            let Some(Entry::Page(_)) = classify(&name) else {
                continue;
            };
            let page: BundlePage = parse(&name, &bytes)?;
            drop(bytes);
            let psk = page_sk(&page.page_id);
            if self.store.get(&pk, &psk).await?.is_some() {
                done.pages_present += 1;
                progress();
                continue;
            }
            for kind in ink_kinds(page.has_pdf, page.has_png) {
                let ink_name = format!("pages/{}.{}", page.page_id, kind.ext());
                let mut file = archive
                    .by_name(&ink_name)
                    .map_err(|e| BundleError::Damaged(format!("{ink_name}: {e}")))?;
                let size = file.size();
                let bytes = read_sized(&mut file, &ink_name, size)?;
                drop(file);
                self.assets.put(user, &page.page_id, kind, bytes).await?;
            }
            if self.commit_imported_page(user, &keys, page).await? {
                done.pages += 1;
            } else {
                done.pages_present += 1;
            }
            progress();
        }
        Ok(done)
    }

    /// Refuses the import when a page or task of the bundle is in the trash, naming it and how
    /// to restore it (one query of the trash index, a page at a time).
    async fn refuse_trashed(
        &self,
        user: &UserId,
        pages: &BTreeMap<PageId, (bool, bool)>,
        tasks: &BTreeSet<TaskLinkId>,
    ) -> Result<(), BundleError> {
        let mut q = Query::gsi1(records::trash_partition(user), "");
        q.limit = QUERY_PAGE;
        loop {
            let page = self.store.query(&q).await?;
            for item in &page.items {
                // The index item is the trash item itself (projection ALL): no second read.
                let trashed = if let Some(id) = item.sk.strip_prefix("TRASH#P#") {
                    match PageId::parse(id) {
                        Ok(id) if pages.contains_key(&id) => Some(page_trash_error(&id, item)),
                        _ => None,
                    }
                } else if let Some(id) = item.sk.strip_prefix("TRASH#T#") {
                    match TaskLinkId::parse(id) {
                        Ok(id) if tasks.contains(&id) => Some(task_trash_error(&id, item)),
                        _ => None,
                    }
                } else {
                    None
                };
                match trashed {
                    Some(Ok(NotebookError::InTrash(message))) => {
                        return Err(BundleError::InTrash(message));
                    }
                    Some(Ok(other) | Err(other)) => return Err(other.into()),
                    None => {}
                }
            }
            match page.next {
                Some(next) => q.after = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Writes one page of a bundle with its stem, postings and statistics; `false` when the
    /// page was there already (nothing written then).
    async fn commit_imported_page(
        &self,
        user: &UserId,
        keys: &crate::crypto::UserKeys,
        page: BundlePage,
    ) -> Result<bool, BundleError> {
        let pk = user_pk(user);
        let psk = page_sk(&page.page_id);
        let mut tf: BTreeMap<String, u32> = BTreeMap::new();
        let mut doc_len = 0u32;
        for line in &page.lines {
            for term in crate::domain::text::terms(&line.text) {
                *tf.entry(keys.blind("term", &term)).or_default() += 1;
                doc_len += 1;
            }
        }
        let stem = page.stem.as_deref().map(|s| keys.blind("stem", s));
        let record = PageRecord {
            page_id: page.page_id.clone(),
            date: page.date,
            has_pdf: page.has_pdf,
            has_png: page.has_png,
            ocr_kind: page.ocr_kind,
            ocr_blank: page
                .ocr_kind
                .zip(page.ocr.as_deref())
                .is_some_and(|(k, text)| !records::ocr_has_text(k, text)),
            ocr: page
                .ocr
                .as_ref()
                .map(|s| records::seal(keys, user, &pk, &psk, "ocr", s.as_bytes())),
            lines: records::seal(keys, user, &pk, &psk, "lines", &encode(&page.lines)),
            stem: stem.clone(),
            terms: tf.keys().cloned().collect(),
            doc_len,
            rev: page.rev,
            created_at: page.created_at,
            updated_at: page.updated_at,
            sources: page.sources,
            notes: super::notes::count(&page.lines),
        };
        let mut writes = vec![Write::put(
            Item {
                pk: pk.clone(),
                sk: psk.clone(),
                gsi1: Some((pages_partition(user), page_gsi_sk(page.date, &page.page_id))),
                version: 1,
                expires_at: None,
                body: encode(&record),
            },
            Cond::NotExists,
        )];
        // Index 1: the page's vectors in their block (a conflict there is retried below).
        writes.push(
            self.vector_block_write(user, keys, &page.page_id, page.rev, page.date, &page.lines)
                .await?,
        );
        if let Some(stem) = &stem {
            writes.push(records::stem_write(&pk, stem, &page.page_id));
        }
        writes.push(Write::add(pk.clone(), records::STATS_PAGES_SK, 1));
        if doc_len > 0 {
            writes.push(Write::add(
                pk.clone(),
                records::STATS_LEN_SK,
                i64::from(doc_len),
            ));
        }
        writes.push(records::revision_write(&pk));
        let postings = search::posting_writes(user, &page.page_id, &tf, doc_len, page.rev);
        if writes.len() + postings.len() <= MAX_TRANSACTION_ITEMS {
            writes.extend(postings);
        } else {
            // Postings first: they count only once their page (with this revision) exists.
            for chunk in postings.chunks(MAX_TRANSACTION_ITEMS) {
                self.store.transact(chunk.to_vec()).await?;
            }
        }
        let mut attempt = 0;
        let outcome = loop {
            match self.store.transact(writes.clone()).await {
                Err(StoreError::ConditionFailed { index: 1 } | StoreError::Conflict)
                    if attempt + 1 < super::MAX_ATTEMPTS =>
                {
                    // Another writer changed the vector block: read it again.
                    super::backoff(attempt).await;
                    attempt += 1;
                    writes[1] = self
                        .vector_block_write(
                            user,
                            keys,
                            &page.page_id,
                            page.rev,
                            page.date,
                            &page.lines,
                        )
                        .await?;
                }
                other => break self.imported_page_outcome(other, &page.page_id),
            }
        };
        // The owner's corrections come with their lines; their words join the vocabulary
        // again (`notebook::corrections`).
        if matches!(outcome, Ok(true)) {
            for line in page.lines.iter().filter(|l| l.corrected.is_some()) {
                self.add_vocabulary(user, keys, &line.text).await?;
            }
        }
        outcome
    }

    fn imported_page_outcome(
        &self,
        result: Result<(), StoreError>,
        page_id: &crate::domain::PageId,
    ) -> Result<bool, BundleError> {
        let page = page_id;
        match result {
            Ok(()) => Ok(true),
            Err(StoreError::ConditionFailed { index: 0 }) => Ok(false),
            Err(StoreError::ConditionFailed { .. }) => Err(BundleError::NotEmpty(format!(
                "another page already has the stem of page {page}"
            ))),
            Err(e) => Err(e.into()),
        }
    }
}
