//! Pages: the one write path that keeps a page, its task links and its index consistent, and
//! the page reads.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use super::import::NO_DATE;
use super::records::{
    self, EngineOcr, OcrKind, PageHead, PageListing, PageRecord, PageSources, StatsRecord,
    StemRecord, StoredLine, TaskKeyRecord, TaskRecord, TaskStatusRecord, decode, ocr_markdown,
    page_gsi_sk, page_sk, pages_partition, stem_sk, task_sk, taskkey_sk, user_pk,
};
use super::{MAX_ATTEMPTS, Notebook, NotebookError, backoff, is_retryable, page_plan, search};
use crate::crypto::UserKeys;
use crate::domain::tasks::{self, ChangedBy};
use crate::domain::{
    Date, Notation, PageId, PageStatus, StatusSource, TaskLinkId, TaskStatus, UserId, structure,
};
use crate::ports::{AssetKind, Item, MAX_TRANSACTION_ITEMS, Query, StoreError};

/// A page as imported from files.
#[derive(Debug, Clone)]
pub struct PageDraft {
    /// From the OCR file's front matter, else the stem. `None` only for ink whose stem carries
    /// no date: it may update the page of its stem, not start one.
    pub date: Option<Date>,
    /// The file stem the page was imported under (kept only as a blind hash).
    pub stem: String,
    pub ocr: Option<(OcrKind, String)>,
    pub pdf: Option<Vec<u8>>,
    pub png: Option<Vec<u8>>,
    /// When each of those files was written.
    pub sources: PageSources,
    /// The PNG was rendered from the PDF (`Notebook::import_draft`), not a file of its own: the
    /// page takes it only with the PDF, so an older PDF that the page does not take gives it no
    /// picture either.
    pub png_rendered: bool,
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedPage {
    pub page_id: PageId,
    /// False when the stem was imported before and this updated it.
    pub created: bool,
    pub lines: usize,
    pub tasks: usize,
    /// The page had taken every file of the draft from a newer one: nothing was written.
    pub superseded: bool,
}

/// Which files of a draft a page takes: each one the draft has, unless the page took that part
/// from a newer file ([`PageSources::newer_or_same`]). A draft without OCR takes no OCR: the
/// page keeps its text, its lines and so its tasks, and only its ink changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Take {
    ocr: bool,
    pdf: bool,
    png: bool,
}

impl Take {
    fn of(draft: &PageDraft, page: Option<&LoadedPage>) -> Take {
        let taken = page.map(|p| p.record.sources).unwrap_or_default();
        let newer = PageSources::newer_or_same;
        let pdf = draft.pdf.is_some() && newer(draft.sources.pdf, taken.pdf);
        Take {
            ocr: draft.ocr.is_some() && newer(draft.sources.ocr, taken.ocr),
            pdf,
            png: draft.png.is_some()
                && newer(draft.sources.png, taken.png)
                && (pdf || !draft.png_rendered),
        }
    }

    fn ink(self, kind: AssetKind) -> bool {
        match kind {
            AssetKind::Pdf => self.pdf,
            AssetKind::Png => self.png,
        }
    }

    fn nothing(self) -> bool {
        !(self.ocr || self.pdf || self.png)
    }
}

const INK: [AssetKind; 2] = [AssetKind::Pdf, AssetKind::Png];

fn has_ink(record: &PageRecord, kind: AssetKind) -> bool {
    match kind {
        AssetKind::Pdf => record.has_pdf,
        AssetKind::Png => record.has_png,
    }
}

fn ink_source(sources: &PageSources, kind: AssetKind) -> Option<i64> {
    match kind {
        AssetKind::Pdf => sources.pdf,
        AssetKind::Png => sources.png,
    }
}

impl PageDraft {
    fn ink(&self, kind: AssetKind) -> Option<&Vec<u8>> {
        match kind {
            AssetKind::Pdf => self.pdf.as_ref(),
            AssetKind::Png => self.png.as_ref(),
        }
    }
}

/// One row of `list_pages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PageSummary {
    pub page_id: PageId,
    pub date: Date,
    pub has_ink: bool,
    pub has_ocr: bool,
    /// The page's heading or first line, shortened ([`title_of`]); `None` without text.
    pub title: Option<String>,
}

/// The longest title [`title_of`] gives, in characters.
const TITLE_CHARS: usize = 80;

/// A page's title, as a person would name it: its first heading written on the page, else its
/// first line (a typed one when the page has nothing else), on one line and shortened to
/// [`TITLE_CHARS`]; `None` for a page without text.
pub fn title_of(lines: &[StoredLine]) -> Option<String> {
    let heading = lines
        .iter()
        .find(|l| !l.digital && l.notation == Notation::Heading && !l.text.trim().is_empty());
    let first = || {
        let mut written = lines.iter().filter(|l| !l.digital);
        written
            .find(|l| !l.text.trim().is_empty())
            .or_else(|| lines.iter().find(|l| !l.text.trim().is_empty()))
    };
    let line = heading.or_else(first)?;
    let text = line.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut title: String = text.chars().take(TITLE_CHARS).collect();
    if text.chars().count() > TITLE_CHARS {
        title.push('…');
    }
    Some(title)
}

// `get_page`'s output schema takes its descriptions from these doc comments: they are written
// for clients.
/// One line of the page: its text, section and notation, and for a task line its status and task.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LineView {
    pub line_id: String,
    pub text: String,
    pub section: Option<String>,
    pub notation: Notation,
    /// A task line's effective status, in the page's vocabulary like page_status (an open task is open).
    pub status: Option<PageStatus>,
    pub page_status: Option<PageStatus>,
    pub status_source: Option<StatusSource>,
    pub completed_date: Option<Date>,
    pub notion_url: Option<String>,
    /// A task line's task, for update_task_status; null for other lines.
    pub task_link_id: Option<TaskLinkId>,
    /// For a line read from the ink by OCR: how sure the engine was (0..1). Below 0.75 the line is unsure: say you could not read it well rather than trusting every word.
    pub ocr_confidence: Option<f32>,
    /// `typed`: added by add_note or create_task, not written on the page; `page`: from the page itself (its ink or its file).
    pub origin: LineOrigin,
    /// Where the line's text comes from: `ocr` (read from the ink), `page` (the page's own markdown or text file), `typed` (add_note, create_task), `corrected` (the owner corrected the reading: trust it as written).
    pub text_source: TextSource,
    /// A typed note's tags (lower case).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Where a typed note came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_url: Option<String>,
}

/// Where a line of a page comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum LineOrigin {
    /// Written on the page: its ink (read by OCR) or its markdown/text file.
    Page,
    /// Typed in by a tool (add_note, create_task); kept when the page's ink is imported again.
    Typed,
}

/// The lines written on a page (not typed ones) as nib's markdown: `## ` headings, `- [ ] `
/// tasks with their box as the page has it, `- ` bullets, text as it is.
fn page_markdown(lines: &[StoredLine]) -> String {
    let mut md = String::new();
    for l in lines.iter().filter(|l| !l.digital) {
        match l.notation {
            Notation::Heading => md.push_str("## "),
            Notation::Bullet => md.push_str("- "),
            Notation::Task => md.push_str(match l.page_status {
                Some(PageStatus::Done) => "- [x] ",
                Some(PageStatus::Cancelled) => "- [-] ",
                Some(PageStatus::Migrated) => "- [>] ",
                Some(PageStatus::Open) | None => "- [ ] ",
            }),
            Notation::Text => {}
        }
        md.push_str(&l.text);
        md.push('\n');
    }
    md
}

/// Where a line's text comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TextSource {
    /// Read from the page's ink by an OCR engine.
    Ocr,
    /// The page's own markdown or text file.
    Page,
    /// Typed in by a tool (add_note, create_task).
    Typed,
    /// Corrected by the owner (the web app's page view).
    Corrected,
}

/// A whole page as `get_page` returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct PageView {
    pub page_id: PageId,
    pub date: Date,
    pub has_ink: bool,
    pub has_ocr: bool,
    pub ocr_text: Option<String>,
    pub ocr_markdown: Option<String>,
    /// The OCR engine that read the page's text from its ink, if one did.
    pub ocr_engine: Option<String>,
    pub lines: Vec<LineView>,
    pub pdf_url: Option<String>,
    pub png_url: Option<String>,
    pub signed_url_ttl_seconds: u64,
}

/// The new content of a page for [`Notebook::commit_page`].
pub(super) struct PageContent {
    pub date: Date,
    pub has_pdf: bool,
    pub has_png: bool,
    pub ocr: Option<(OcrKind, String)>,
    /// The lines; `task_link_id` is filled in by the commit.
    pub lines: Vec<StoredLine>,
    /// The blind stem, when the page has one.
    pub stem: Option<String>,
    /// Set by `create_task`: the key of the task line it adds must get a new task.
    pub new_task: Option<NewTask>,
    /// A sealed-to-be source URL for the task created under `new_task`.
    pub source_url: Option<String>,
}

/// What `create_task` saw before writing: the new line's key must still have no task, or still
/// the same finished task (which the new one then replaces in the dedup index). Anything else
/// means another writer got there first, and the commit fails so that the caller looks again.
pub(super) struct NewTask {
    pub key: String,
    pub replaces: Option<TaskLinkId>,
    /// The user has a Notion connection: the new task's outbox item goes into the same
    /// transaction, leased to this call until this unix second (`notebook::notion`).
    pub notion_lease: Option<i64>,
}

/// The outcome of a commit.
pub(super) struct Committed {
    pub created: bool,
    /// For every task line: line id -> task link id.
    pub tasks: HashMap<String, TaskLinkId>,
}

/// A page item read back, with its record.
pub(super) struct LoadedPage {
    pub item: Item,
    pub record: PageRecord,
}

impl Notebook {
    /// Imports one page (or updates the page imported before under the same stem).
    ///
    /// A file never replaces what the page took from a newer one (`draft.sources` against the
    /// page's), and a draft without OCR leaves the page's OCR, lines and tasks as they are: a
    /// later upload of only the ink (the OCR upload expired), a redelivered event that read
    /// stale siblings, or `nib import` of a folder with only the ink update the ink alone.
    pub async fn import_page(
        &self,
        user: &UserId,
        draft: PageDraft,
    ) -> Result<SavedPage, NotebookError> {
        self.import_page_as(user, draft, None).await
    }

    /// [`Notebook::import_page`], onto the page `at` (its id and blind stem) instead of the page
    /// of the draft's stem: `nib ocr` writes what it read again from a page's stored ink.
    pub(super) async fn import_page_as(
        &self,
        user: &UserId,
        draft: PageDraft,
        at: Option<(PageId, Option<String>)>,
    ) -> Result<SavedPage, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let (stem, known) = match at {
            Some((page_id, stem)) => (stem, Some(page_id)),
            None => {
                let stem = keys.blind("stem", &draft.stem);
                let known = match self.store.get(&pk, &stem_sk(&stem)).await? {
                    Some(item) => Some(decode::<StemRecord>("stem", &item.body)?.page_id),
                    None => None,
                };
                (Some(stem), known)
            }
        };
        let page_id = known.clone().unwrap_or_default();
        let mut existing = match &known {
            Some(id) => self.load_page(user, &keys, id).await?,
            None => None,
        };
        // The files of a page in the trash: it stays there (restore_page brings it back).
        if existing.is_none()
            && known.is_some()
            && let Some(e) = self.page_in_trash(user, &page_id).await?
        {
            return Err(e);
        }
        if existing.is_none() && draft.date.is_none() {
            return Err(NotebookError::Invalid(NO_DATE.into()));
        }
        if let Some(page) = &existing
            && Take::of(&draft, Some(page)).nothing()
        {
            return self.superseded(user, &keys, page);
        }
        // Ink of a kind the page does not have yet goes first: an asset without its page is
        // invisible and is overwritten on retry, while a page without its asset would hand out
        // a broken link. Ink replacing ink goes after the commit (below).
        let take = Take::of(&draft, existing.as_ref());
        let mut put_first = Vec::new();
        for kind in INK {
            if let Some(bytes) = draft.ink(kind)
                && take.ink(kind)
                && !existing.as_ref().is_some_and(|p| has_ink(&p.record, kind))
            {
                self.assets.put(user, &page_id, kind, bytes.clone()).await?;
                put_first.push(kind);
            }
        }
        let parsed = match &draft.ocr {
            Some((kind, source)) => structure::parse(&ocr_markdown(*kind, source)),
            None => Vec::new(),
        };
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                existing = self.load_page(user, &keys, &page_id).await?;
            }
            let take = Take::of(&draft, existing.as_ref());
            if put_first.iter().any(|kind| !take.ink(*kind)) {
                // A newer file of that kind was committed since our put, which may have
                // replaced its bytes with ours: the caller must read its files again.
                return Err(NotebookError::Contention);
            }
            if let Some(page) = &existing
                && take.nothing()
            {
                return self.superseded(user, &keys, page);
            }
            let (date, ocr, lines) = match &existing {
                // The page keeps its OCR, its lines (with their tasks) and its date.
                Some(p) if !take.ocr => {
                    let ocr = self.open_ocr(user, &keys, &p.record)?;
                    let lines = self.open_lines(user, &keys, &p.record)?;
                    (p.record.date, p.record.ocr_kind.zip(ocr), lines)
                }
                _ => {
                    let mut lines: Vec<StoredLine> = parsed
                        .iter()
                        .map(|l| StoredLine {
                            line_id: l.line_id.clone(),
                            text: l.text.clone(),
                            section: l.section.clone(),
                            notation: l.notation,
                            page_status: l.page_status,
                            task_link_id: None,
                            digital: false,
                            tags: Vec::new(),
                            source_url: None,
                            added_at: None,
                            corrected: None,
                        })
                        .collect();
                    // Lines added by create_task are not in the files: keep them across
                    // re-imports; and so are the owner's corrections.
                    if let Some(p) = &existing {
                        let old = self.open_lines(user, &keys, &p.record)?;
                        super::corrections::carry_corrections(&old, &mut lines);
                        lines.extend(old.into_iter().filter(|l| l.digital));
                    }
                    let date = draft
                        .date
                        .or(existing.as_ref().map(|p| p.record.date))
                        .ok_or_else(|| NotebookError::Invalid(NO_DATE.into()))?;
                    (date, draft.ocr.clone(), lines)
                }
            };
            let taken = existing
                .as_ref()
                .map(|p| p.record.sources)
                .unwrap_or_default();
            let sources = PageSources {
                ocr: if take.ocr {
                    draft.sources.ocr
                } else {
                    taken.ocr
                },
                pdf: if take.pdf {
                    draft.sources.pdf
                } else {
                    taken.pdf
                },
                png: if take.png {
                    draft.sources.png
                } else {
                    taken.png
                },
            };
            let had = |kind| existing.as_ref().is_some_and(|p| has_ink(&p.record, kind));
            let put_after: Vec<AssetKind> = INK
                .into_iter()
                .filter(|k| take.ink(*k) && had(*k))
                .collect();
            let content = PageContent {
                date,
                has_pdf: had(AssetKind::Pdf) || take.pdf,
                has_png: had(AssetKind::Png) || take.png,
                ocr,
                lines,
                stem: stem.clone(),
                new_task: None,
                source_url: None,
            };
            let task_count = content
                .lines
                .iter()
                .filter(|l| l.notation == Notation::Task)
                .count();
            let line_count = content.lines.len();
            match self
                .commit_page_with(
                    user,
                    &keys,
                    &page_id,
                    existing.take(),
                    content,
                    Some(sources),
                )
                .await
            {
                Ok(c) => {
                    self.put_after_commit(user, &keys, &page_id, &draft, &put_after)
                        .await?;
                    return Ok(SavedPage {
                        page_id,
                        created: c.created,
                        lines: line_count,
                        tasks: task_count,
                        superseded: false,
                    });
                }
                Err(e) if is_retryable(&e) => backoff(attempt).await,
                Err(e) => return Err(e),
            }
        }
        Err(NotebookError::Contention)
    }

    /// Ink that replaces ink the page had, written once the page records its file's time. Two
    /// imports of one page may race (two events of one stem): whichever put comes last wins
    /// the bytes, so after putting, the page must still record this file as the newest of its
    /// kind, else a newer one was committed meanwhile and our put may have replaced its bytes
    /// (`Contention`: the caller reads its files again, and then puts the newest). The import
    /// that took the newest file always puts after its commit, so any put that lands after it
    /// belongs to an import that then sees the newer time and fails here.
    async fn put_after_commit(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page_id: &PageId,
        draft: &PageDraft,
        kinds: &[AssetKind],
    ) -> Result<(), NotebookError> {
        if kinds.is_empty() {
            return Ok(());
        }
        for kind in kinds {
            if let Some(bytes) = draft.ink(*kind) {
                self.assets.put(user, page_id, *kind, bytes.clone()).await?;
            }
        }
        let Some(page) = self.load_page(user, keys, page_id).await? else {
            return Ok(());
        };
        let overtaken = kinds.iter().any(|kind| {
            !PageSources::newer_or_same(
                ink_source(&draft.sources, *kind),
                ink_source(&page.record.sources, *kind),
            )
        });
        if overtaken {
            return Err(NotebookError::Contention);
        }
        Ok(())
    }

    /// What an import that changes nothing reports: the page as it is.
    fn superseded(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page: &LoadedPage,
    ) -> Result<SavedPage, NotebookError> {
        let lines = self.open_lines(user, keys, &page.record)?;
        Ok(SavedPage {
            page_id: page.record.page_id.clone(),
            created: false,
            lines: lines.len(),
            tasks: lines
                .iter()
                .filter(|l| l.notation == Notation::Task)
                .count(),
            superseded: true,
        })
    }

    /// The page a typed line of `date` goes on (`create_task`, `add_note`) and what it holds:
    /// the date's page (the first by id), else the page under the date's file stem (which a
    /// later import of a file named after the date updates), else a new page under that stem.
    /// When the stem's page is in the trash, a new page without the stem (it stays with the
    /// trashed page). The content has no `new_task` and no `source_url`; the caller adds its
    /// line.
    pub(super) async fn date_page(
        &self,
        user: &UserId,
        keys: &UserKeys,
        date: Date,
    ) -> Result<(PageId, Option<LoadedPage>, PageContent), NotebookError> {
        let pk = user_pk(user);
        let mut q = Query::gsi1(pages_partition(user), format!("{date}#"));
        q.limit = 1;
        let (mut page_id, from_stem) = match self.store.query(&q).await?.items.first() {
            Some(item) => (decode::<PageRecord>("page", &item.body)?.page_id, false),
            None => match self
                .store
                .get(&pk, &stem_sk(&keys.blind("stem", &date.to_string())))
                .await?
            {
                Some(item) => (
                    decode::<records::StemRecord>("stem", &item.body)?.page_id,
                    true,
                ),
                None => (PageId::new(), false),
            },
        };
        let mut existing = self.load_page(user, keys, &page_id).await?;
        let mut stem_free = true;
        if from_stem && existing.is_none() && self.page_in_trash(user, &page_id).await?.is_some() {
            page_id = PageId::new();
            existing = None;
            stem_free = false;
        }
        let content = match &existing {
            Some(p) => PageContent {
                date,
                has_pdf: p.record.has_pdf,
                has_png: p.record.has_png,
                ocr: p.record.ocr_kind.zip(self.open_ocr(user, keys, &p.record)?),
                lines: self.open_lines(user, keys, &p.record)?,
                stem: None,
                new_task: None,
                source_url: None,
            },
            None => PageContent {
                date,
                has_pdf: false,
                has_png: false,
                ocr: None,
                lines: Vec::new(),
                stem: stem_free.then(|| keys.blind("stem", &date.to_string())),
                new_task: None,
                source_url: None,
            },
        };
        Ok((page_id, existing, content))
    }

    pub(super) async fn load_page(
        &self,
        user: &UserId,
        _keys: &UserKeys,
        page: &PageId,
    ) -> Result<Option<LoadedPage>, NotebookError> {
        let Some(item) = self.store.get(&user_pk(user), &page_sk(page)).await? else {
            return Ok(None);
        };
        let record = decode::<PageRecord>("page", &item.body)?;
        Ok(Some(LoadedPage { item, record }))
    }

    pub(super) fn open_lines(
        &self,
        user: &UserId,
        keys: &UserKeys,
        record: &PageRecord,
    ) -> Result<Vec<StoredLine>, NotebookError> {
        open_page_lines(user, keys, &record.page_id, &record.lines)
    }

    pub(super) fn open_ocr(
        &self,
        user: &UserId,
        keys: &UserKeys,
        record: &PageRecord,
    ) -> Result<Option<String>, NotebookError> {
        open_page_ocr(user, keys, &record.page_id, record.ocr.as_deref())
    }

    /// A page item for reading: its body without the index terms (see [`PageHead`]).
    pub(super) async fn load_page_head(
        &self,
        user: &UserId,
        page: &PageId,
    ) -> Result<Option<PageHead>, NotebookError> {
        match self.store.get(&user_pk(user), &page_sk(page)).await? {
            Some(item) => Ok(Some(decode("page", &item.body)?)),
            None => Ok(None),
        }
    }

    /// Writes a page with everything that depends on it, in one transaction: the page, its
    /// stem mapping, the task links it shows (created, updated, or no longer shown), their dedup
    /// keys, and the index statistics. Postings go in the same transaction when they fit, else
    /// just before it (a posting counts only when its revision matches its page's).
    pub(super) async fn commit_page(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page_id: &PageId,
        existing: Option<LoadedPage>,
        content: PageContent,
    ) -> Result<Committed, NotebookError> {
        self.commit_page_with(user, keys, page_id, existing, content, None)
            .await
    }

    /// [`Notebook::commit_page`], recording `sources` as the times of the page's files
    /// (`None`: the page keeps those it had).
    async fn commit_page_with(
        &self,
        user: &UserId,
        keys: &UserKeys,
        page_id: &PageId,
        existing: Option<LoadedPage>,
        mut content: PageContent,
        sources: Option<PageSources>,
    ) -> Result<Committed, NotebookError> {
        let pk = user_pk(user);
        let old_lines = match &existing {
            Some(p) => self.open_lines(user, keys, &p.record)?,
            None => Vec::new(),
        };
        let (line_keys, key_text) = page_plan::line_keys(keys, &content.lines);

        // Read the dedup items and every task this page shows now or showed before.
        let dedup_keys: Vec<(String, String)> = key_text
            .keys()
            .map(|k| (pk.clone(), taskkey_sk(k)))
            .collect();
        let dedup_items = self.store.batch_get(&dedup_keys).await?;
        let mut dedup: page_plan::Dedup = HashMap::new();
        for (key, item) in key_text.keys().zip(dedup_items) {
            if let Some(item) = item {
                let rec: TaskKeyRecord = decode("task key", &item.body)?;
                dedup.insert(key.clone(), (item, rec.task_link_id));
            }
        }
        let mut wanted: BTreeSet<TaskLinkId> = dedup.values().map(|(_, id)| id.clone()).collect();
        wanted.extend(old_lines.iter().filter_map(|l| l.task_link_id.clone()));
        let wanted: Vec<TaskLinkId> = wanted.into_iter().collect();
        let task_keys: Vec<(String, String)> =
            wanted.iter().map(|id| (pk.clone(), task_sk(id))).collect();
        let mut tasks_by_id: page_plan::Tasks = BTreeMap::new();
        for (id, item) in wanted.iter().zip(self.store.batch_get(&task_keys).await?) {
            if let Some(item) = item {
                let rec: TaskRecord = decode("task", &item.body)?;
                tasks_by_id.insert(id.clone(), (Some(item), rec));
            }
        }

        // Texts whose task link was deleted on its own (`delete_task`): the lines stay on the
        // trashed link (shown without a status) instead of making a new task, unless this is
        // the create_task of that text.
        let missing: Vec<TaskLinkId> = dedup
            .iter()
            .filter(|(key, (_, id))| {
                !tasks_by_id.contains_key(id)
                    && content.new_task.as_ref().is_none_or(|n| &n.key != *key)
            })
            .map(|(_, (_, id))| id.clone())
            .collect();
        let trashed = self.trashed_task_ids(user, &missing).await?;

        if let Some(new) = &content.new_task
            && dedup.get(&new.key).map(|(_, id)| id) != new.replaces.as_ref()
        {
            return Err(StoreError::ConditionFailed { index: 0 }.into());
        }
        let legacy = match self.store.get(&pk, records::LEGACY_STATS_SK).await? {
            Some(item) => {
                let old: StatsRecord = decode("stats", &item.body)?;
                Some((item, old))
            }
            None => None,
        };

        // The plan: each derived item set in turn (page_plan), then one transaction.
        let scope = page_plan::Scope {
            user,
            keys,
            pk: &pk,
            page_id,
            now: self.clock.unix(),
        };
        let (mut writes, key_task) = page_plan::resolve_keys(
            &scope,
            &mut content,
            &key_text,
            &dedup,
            &mut tasks_by_id,
            &trashed,
        );
        let (appearances, line_tasks) =
            page_plan::link_lines(page_id, &mut content, &line_keys, &key_task);
        let by = ChangedBy::Page {
            page_id: page_id.clone(),
            date: content.date,
        };
        writes.extend(page_plan::task_writes(
            &scope,
            tasks_by_id,
            appearances,
            &dedup,
            &by,
        )?);
        let (tf, doc_len) = page_plan::index_terms(keys, &content.lines);
        let rev: u32 = rand::random();
        writes.extend(page_plan::counter_writes(
            &pk,
            existing.as_ref(),
            doc_len,
            legacy,
        ));
        writes.extend(page_plan::page_writes(
            &scope,
            &content,
            existing.as_ref(),
            sources,
            &tf,
            doc_len,
            rev,
        ));
        // Its vectors, in its block, rewritten in the same transaction (conditional on the
        // version read, so concurrent commits into one block retry like any other conflict),
        // or pending during a bulk import (`vector_writes`).
        writes.extend(
            self.vector_writes(user, keys, page_id, rev, content.date, &content.lines)
                .await?,
        );
        let postings = search::posting_writes(user, page_id, &tf, doc_len, rev);
        let before = page_plan::place_postings(&mut writes, postings)?;
        for chunk in before.chunks(MAX_TRANSACTION_ITEMS) {
            self.store.transact(chunk.to_vec()).await?;
        }
        self.store.transact(writes).await?;

        let old_terms = existing.as_ref().map_or(&[][..], |p| &p.record.terms[..]);
        let stale = page_plan::stale_postings(user, page_id, old_terms, &tf);
        for chunk in stale.chunks(MAX_TRANSACTION_ITEMS) {
            if let Err(e) = self.store.transact(chunk.to_vec()).await {
                // Stale postings are ignored by search (revision mismatch); they only skew df.
                tracing::warn!(error = %e, "could not remove stale postings");
            }
        }
        Ok(Committed {
            created: existing.is_none(),
            tasks: line_tasks,
        })
    }

    /// Pages newest first, `from`/`to` inclusive.
    pub async fn list_pages(
        &self,
        user: &UserId,
        from: Option<Date>,
        to: Option<Date>,
        limit: usize,
    ) -> Result<Vec<PageSummary>, NotebookError> {
        Ok(self.list_pages_after(user, from, to, None, limit).await?.0)
    }

    /// Pages newest first, `from`/`to` inclusive, after the page `after` (the last one of the
    /// previous call), and whether more follow.
    pub async fn list_pages_after(
        &self,
        user: &UserId,
        from: Option<Date>,
        to: Option<Date>,
        after: Option<(Date, &PageId)>,
        limit: usize,
    ) -> Result<(Vec<PageSummary>, bool), NotebookError> {
        let mut query = Query::gsi1(pages_partition(user), "");
        query.reverse = true;
        query.from = from.map(|d| d.to_string());
        // Sort keys are `{date}#{page_id}`; `~` sorts after every id character.
        query.to = to.map(|d| format!("{d}#~"));
        // Continuing: up to the last page shown (inclusive in the store, skipped here).
        if let Some((date, page)) = after {
            let last = page_gsi_sk(date, page);
            if query.to.as_ref().is_none_or(|to| &last < to) {
                query.to = Some(last);
            }
        }
        // One more than asked, to know whether more follow.
        let want = limit + 1;
        query.limit = want + usize::from(after.is_some());
        let mut out = Vec::with_capacity(want);
        // The lines are in the index item already (projection ALL): one small open per page
        // titles it, no further read. The keys are fetched at the first page: a user with no
        // page has no data key yet, and listing nothing must not create one.
        let mut keys: Option<std::sync::Arc<crate::crypto::UserKeys>> = None;
        loop {
            let page = self.store.query(&query).await?;
            for item in page.items {
                let r: PageListing = decode("page", &item.body)?;
                if after.is_some_and(|(d, p)| d == r.date && p == &r.page_id) {
                    continue;
                }
                let page_keys = if let Some(k) = &keys {
                    k.clone()
                } else {
                    let k = self.vault.user_keys(user).await?;
                    keys = Some(k.clone());
                    k
                };
                let lines = open_page_lines(user, &page_keys, &r.page_id, &r.lines)?;
                out.push(PageSummary {
                    title: title_of(&lines),
                    page_id: r.page_id,
                    date: r.date,
                    has_ink: r.has_pdf || r.has_png,
                    has_ocr: r.ocr_kind.is_some() && !r.ocr_blank,
                });
            }
            match page.next {
                Some(next) if out.len() < want => {
                    query.after = Some(next);
                    query.limit = want - out.len();
                }
                _ => break,
            }
        }
        let more = out.len() > limit;
        out.truncate(limit);
        Ok((out, more))
    }

    /// A whole page, with each task line's reconciled status and signed ink URLs.
    pub async fn get_page(
        &self,
        user: &UserId,
        page_id: &PageId,
    ) -> Result<PageView, NotebookError> {
        let Some(page) = self.load_page_head(user, page_id).await? else {
            return Err(self.page_missing(user, page_id).await);
        };
        self.open_page(user, page).await
    }

    /// The error of a read of a page that is not there: in the trash (and how to restore it),
    /// or not found.
    pub(super) async fn page_missing(&self, user: &UserId, page_id: &PageId) -> NotebookError {
        match self.page_in_trash(user, page_id).await {
            Ok(Some(e)) => e,
            Ok(None) => NotebookError::NotFound("page"),
            Err(e) => e,
        }
    }

    /// The whole page of an item read: opens the user's keys, the page's sealed fields and its
    /// tasks' statuses, and signs its ink URLs.
    pub(super) async fn open_page(
        &self,
        user: &UserId,
        page: PageHead,
    ) -> Result<PageView, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let page_id = page.page_id.clone();
        let lines = open_page_lines(user, &keys, &page.page_id, &page.lines)?;
        let ocr = open_page_ocr(user, &keys, &page.page_id, page.ocr.as_deref())?;
        let pk = user_pk(user);
        let ids: Vec<TaskLinkId> = lines
            .iter()
            .filter_map(|l| l.task_link_id.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut statuses: HashMap<TaskLinkId, (TaskStatus, Option<Date>, Option<String>)> =
            HashMap::new();
        if !ids.is_empty() {
            let task_keys: Vec<(String, String)> =
                ids.iter().map(|id| (pk.clone(), task_sk(id))).collect();
            for item in self
                .store
                .batch_get(&task_keys)
                .await?
                .into_iter()
                .flatten()
            {
                let t: TaskStatusRecord = decode("task", &item.body)?;
                let url = match &t.notion {
                    Some(n) => Some(super::notion::open_url(user, &keys, &t.task_link_id, n)?),
                    None => None,
                };
                statuses.insert(t.task_link_id, (t.status, t.completed_date, url));
            }
        }
        let page_text = || {
            let page_lines: Vec<_> = lines
                .iter()
                .filter(|l| !l.digital)
                .map(|l| l.text.as_str())
                .collect();
            page_lines.join("\n")
        };
        let mut engine = None;
        let mut confidence: Vec<f32> = Vec::new();
        let ocr_has_text = page
            .ocr_kind
            .zip(ocr.as_deref())
            .is_some_and(|(k, source)| records::ocr_has_text(k, source));
        let (ocr_text, ocr_markdown) = match (page.ocr_kind, ocr) {
            (Some(OcrKind::Markdown), Some(md)) => (Some(page_text()), Some(md)),
            (Some(OcrKind::Text), Some(text)) => (Some(text), None),
            (Some(OcrKind::Engine), Some(source)) => match EngineOcr::decode(&source) {
                Some(read) => {
                    engine = Some(read.engine);
                    confidence = read.confidence;
                    (Some(page_text()), Some(read.markdown))
                }
                None => (None, None),
            },
            _ => (None, None),
        };
        // Once the owner corrected a line, the page's markdown is its lines as they now read.
        let ocr_markdown = if lines.iter().any(|l| l.corrected.is_some()) {
            ocr_markdown.map(|_| page_markdown(&lines))
        } else {
            ocr_markdown
        };
        // The engine's confidence per line: its markdown lines and the page's lines (those
        // from the ink, not create_task's) are one to one.
        let page_lines = lines.iter().filter(|l| !l.digital).count();
        if confidence.len() != page_lines {
            confidence.clear();
        }
        let mut confidence = confidence.into_iter();
        let views = lines
            .into_iter()
            .map(|l| {
                let ocr_confidence = if l.digital {
                    None
                } else {
                    confidence.next().map(|c| (c * 1000.0).round() / 1000.0)
                };
                let task = l.task_link_id.as_ref().and_then(|id| statuses.get(id));
                let (status, status_source, completed_date) = match (task, l.page_status) {
                    (Some((status, done, _)), Some(ps)) => {
                        let (line, source) = tasks::line_status(ps, *status);
                        (Some(line), Some(source), *done)
                    }
                    _ => (None, None, None),
                };
                let notion_url = task.and_then(|t| t.2.clone());
                LineView {
                    line_id: l.line_id,
                    text: l.text,
                    section: l.section,
                    notation: l.notation,
                    status,
                    page_status: l.page_status,
                    status_source,
                    completed_date,
                    notion_url,
                    // A line whose task link is in the trash shows no link.
                    task_link_id: l.task_link_id.filter(|id| statuses.contains_key(id)),
                    ocr_confidence,
                    origin: if l.digital {
                        LineOrigin::Typed
                    } else {
                        LineOrigin::Page
                    },
                    text_source: if l.digital {
                        TextSource::Typed
                    } else if l.corrected.is_some() {
                        TextSource::Corrected
                    } else if page.ocr_kind == Some(OcrKind::Engine) {
                        TextSource::Ocr
                    } else {
                        TextSource::Page
                    },
                    tags: l.tags,
                    source_url: l.source_url,
                }
            })
            .collect();
        let ttl = self.config.asset_ttl_seconds;
        let pdf_url = if page.has_pdf {
            Some(
                self.assets
                    .signed_url(user, &page_id, AssetKind::Pdf, ttl)
                    .await?,
            )
        } else {
            None
        };
        let png_url = if page.has_png {
            Some(
                self.assets
                    .signed_url(user, &page_id, AssetKind::Png, ttl)
                    .await?,
            )
        } else {
            None
        };
        Ok(PageView {
            page_id: page.page_id,
            date: page.date,
            has_ink: page.has_pdf || page.has_png,
            has_ocr: ocr_text.is_some() && ocr_has_text,
            ocr_text,
            ocr_markdown,
            ocr_engine: engine,
            lines: views,
            pdf_url,
            png_url,
            signed_url_ttl_seconds: ttl,
        })
    }

    /// A signed URL for the page's ink (PNG preferred), if it has any.
    pub(super) async fn ink_url(
        &self,
        user: &UserId,
        page_id: &PageId,
        has_pdf: bool,
        has_png: bool,
    ) -> Result<Option<String>, NotebookError> {
        let ttl = self.config.asset_ttl_seconds;
        let kind = if has_png {
            AssetKind::Png
        } else if has_pdf {
            AssetKind::Pdf
        } else {
            return Ok(None);
        };
        Ok(Some(
            self.assets.signed_url(user, page_id, kind, ttl).await?,
        ))
    }
}

/// Opens a page's sealed `lines` field.
pub(super) fn open_page_lines(
    user: &UserId,
    keys: &UserKeys,
    page_id: &PageId,
    sealed: &[u8],
) -> Result<Vec<StoredLine>, NotebookError> {
    let plain = records::open(
        keys,
        user,
        &user_pk(user),
        &page_sk(page_id),
        "lines",
        sealed,
    )?;
    decode("lines", &plain)
}

/// Opens a page's sealed `ocr` field, when it has one.
fn open_page_ocr(
    user: &UserId,
    keys: &UserKeys,
    page_id: &PageId,
    sealed: Option<&[u8]>,
) -> Result<Option<String>, NotebookError> {
    sealed
        .map(|sealed| {
            records::open_string(keys, user, &user_pk(user), &page_sk(page_id), "ocr", sealed)
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use async_trait::async_trait;
    use futures::future::BoxFuture;

    use super::*;
    use crate::adapters::embedded::EmbeddedStore;
    use crate::adapters::local_keys::LocalKeys;
    use crate::crypto::Vault;
    use crate::notebook::{NotebookConfig, TaskFilter};
    use crate::ports::{Assets, AssetsError, Store, SystemClock};

    type Hook = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

    /// Page ink in memory: the last bytes put per page and kind. A `hook` runs once, inside
    /// the next put, before that put's bytes land (to stage a race).
    #[derive(Default)]
    struct Ink {
        files: Mutex<HashMap<(PageId, AssetKind), Vec<u8>>>,
        hook: Mutex<Option<Hook>>,
    }

    impl Ink {
        fn bytes(&self, page: &PageId, kind: AssetKind) -> Option<Vec<u8>> {
            self.files
                .lock()
                .unwrap()
                .get(&(page.clone(), kind))
                .cloned()
        }
    }

    #[async_trait]
    impl Assets for Ink {
        async fn put(
            &self,
            _user: &UserId,
            page: &PageId,
            kind: AssetKind,
            bytes: Vec<u8>,
        ) -> Result<(), AssetsError> {
            let hook = self.hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook().await;
            }
            self.files
                .lock()
                .unwrap()
                .insert((page.clone(), kind), bytes);
            Ok(())
        }

        async fn get(
            &self,
            _user: &UserId,
            page: &PageId,
            kind: AssetKind,
        ) -> Result<Option<Vec<u8>>, AssetsError> {
            Ok(self
                .files
                .lock()
                .unwrap()
                .get(&(page.clone(), kind))
                .cloned())
        }

        async fn signed_url(
            &self,
            _user: &UserId,
            page: &PageId,
            kind: AssetKind,
            _ttl_seconds: u64,
        ) -> Result<String, AssetsError> {
            Ok(format!("ink:{page}.{}", kind.ext()))
        }
    }

    struct Fixture {
        notebook: Arc<Notebook>,
        store: Arc<dyn Store>,
        ink: Arc<Ink>,
        user: UserId,
        _dir: tempfile::TempDir,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory());
        let keys = Arc::new(LocalKeys::open_or_create(&dir.path().join("master.key")).unwrap());
        let vault = Arc::new(Vault::new(
            store.clone(),
            keys,
            16,
            Duration::from_secs(3600),
        ));
        let ink = Arc::new(Ink::default());
        let notebook = Arc::new(Notebook::new(
            store.clone(),
            vault,
            ink.clone(),
            Arc::new(SystemClock),
            NotebookConfig::default(),
        ));
        Fixture {
            notebook,
            store,
            ink,
            user: UserId::parse("default").unwrap(),
            _dir: dir,
        }
    }

    const PAGE: &str = "## Tasks\n- [ ] Call the printer\n## Notes\n- Met with Dana\n";

    /// A draft of the stem `2026-06-19`: each file with the time it was written (ms).
    fn draft(
        md: Option<(&str, i64)>,
        pdf: Option<(&[u8], i64)>,
        png: Option<(&[u8], i64)>,
    ) -> PageDraft {
        PageDraft {
            date: Some(Date::parse("2026-06-19").unwrap()),
            stem: "2026-06-19".into(),
            ocr: md.map(|(m, _)| (OcrKind::Markdown, m.to_owned())),
            pdf: pdf.map(|(b, _)| b.to_vec()),
            png: png.map(|(b, _)| b.to_vec()),
            sources: PageSources {
                ocr: md.map(|(_, at)| at),
                pdf: pdf.map(|(_, at)| at),
                png: png.map(|(_, at)| at),
            },
            png_rendered: false,
        }
    }

    impl Fixture {
        async fn import(&self, draft: PageDraft) -> SavedPage {
            self.notebook.import_page(&self.user, draft).await.unwrap()
        }

        async fn page(&self, id: &PageId) -> PageView {
            self.notebook.get_page(&self.user, id).await.unwrap()
        }

        async fn sources(&self, id: &PageId) -> PageSources {
            let item = self
                .store
                .get(&user_pk(&self.user), &page_sk(id))
                .await
                .unwrap()
                .unwrap();
            decode::<PageRecord>("page", &item.body).unwrap().sources
        }

        fn ink(&self, id: &PageId, kind: AssetKind) -> Vec<u8> {
            self.ink.bytes(id, kind).unwrap_or_default()
        }
    }

    fn texts(page: &PageView) -> Vec<(String, Option<PageStatus>)> {
        page.lines
            .iter()
            .map(|l| (l.text.clone(), l.status))
            .collect()
    }

    /// Trigger (b) at the notebook: each part of a page is replaced only by a file at least as
    /// new as the one it was taken from.
    #[tokio::test]
    async fn an_older_file_never_replaces_what_the_page_took() {
        let f = fixture();
        let saved = f
            .import(draft(Some((PAGE, 2000)), Some((b"pdf-2", 2000)), None))
            .await;
        assert!(saved.created && !saved.superseded);
        let id = saved.page_id;

        // Every file older than what the page took: nothing is written.
        let stale = "## Notes\n- an older scan\n";
        let again = f
            .import(draft(Some((stale, 1000)), Some((b"pdf-1", 1000)), None))
            .await;
        assert!(again.superseded && !again.created, "{again:?}");
        assert_eq!((again.lines, again.tasks), (saved.lines, saved.tasks));
        assert_eq!(f.page(&id).await.ocr_markdown.as_deref(), Some(PAGE));
        assert_eq!(f.ink(&id, AssetKind::Pdf), b"pdf-2");

        // Stale siblings beside a new file (an event that read them before a newer upload was
        // imported): the new file is taken, the stale ones are not.
        let mixed = f
            .import(draft(
                Some((stale, 1000)),
                Some((b"pdf-1", 1000)),
                Some((b"png-3", 3000)),
            ))
            .await;
        assert!(!mixed.superseded);
        let page = f.page(&id).await;
        assert_eq!(page.ocr_markdown.as_deref(), Some(PAGE));
        assert!(page.png_url.is_some() && page.pdf_url.is_some());
        assert_eq!(f.ink(&id, AssetKind::Png), b"png-3");
        assert_eq!(f.ink(&id, AssetKind::Pdf), b"pdf-2");
        let taken = PageSources {
            ocr: Some(2000),
            pdf: Some(2000),
            png: Some(3000),
        };
        assert_eq!(f.sources(&id).await, taken);

        // The same file again (a redelivered event) is taken again; a newer one replaces.
        assert!(
            !f.import(draft(Some((PAGE, 2000)), None, None))
                .await
                .superseded
        );
        let newer = "## Tasks\n- [ ] Call the printer\n- [ ] Order toner\n";
        let saved = f.import(draft(Some((newer, 4000)), None, None)).await;
        assert_eq!(saved.tasks, 2);
        assert_eq!(f.page(&id).await.ocr_markdown.as_deref(), Some(newer));
        assert_eq!(f.sources(&id).await.ocr, Some(4000));
        // A create_task write keeps the times.
        f.notebook
            .create_task(
                &f.user,
                Date::parse("2026-06-19").unwrap(),
                "Book the venue",
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            f.sources(&id).await,
            PageSources {
                ocr: Some(4000),
                ..taken
            }
        );
    }

    /// Trigger (a)/(c) at the notebook: a draft with only ink changes only the ink.
    #[tokio::test]
    async fn ink_alone_keeps_the_pages_ocr_lines_and_tasks() {
        let f = fixture();
        let id = f
            .import(draft(Some((PAGE, 1000)), Some((b"pdf-1", 1000)), None))
            .await
            .page_id;
        let task_line = |page: &PageView| {
            page.lines
                .iter()
                .find(|l| l.notation == Notation::Task)
                .cloned()
                .unwrap()
        };
        assert_eq!(task_line(&f.page(&id).await).text, "Call the printer");
        let tasks = f
            .notebook
            .list_tasks(&f.user, TaskFilter::All, None, 10)
            .await
            .unwrap();
        let task_id = tasks[0].task_link_id.clone();
        f.notebook
            .update_task_status(&f.user, &task_id, TaskStatus::Done)
            .await
            .unwrap();
        let before = f.page(&id).await;

        let saved = f.import(draft(None, Some((b"pdf-2", 2000)), None)).await;
        assert!(!saved.created && !saved.superseded);
        assert_eq!((saved.lines, saved.tasks), (before.lines.len(), 1));
        let after = f.page(&id).await;
        assert_eq!(after.ocr_markdown, before.ocr_markdown);
        assert_eq!(texts(&after), texts(&before));
        assert_eq!(task_line(&after).status, Some(PageStatus::Done));
        assert_eq!(after.date, before.date);
        let tasks = f
            .notebook
            .list_tasks(&f.user, TaskFilter::All, None, 10)
            .await
            .unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(
            tasks[0].task_link_id, task_id,
            "the same task, with its history"
        );
        assert_eq!(tasks[0].status, TaskStatus::Done);
        assert_eq!(f.ink(&id, AssetKind::Pdf), b"pdf-2", "the ink did change");
        assert_eq!(f.sources(&id).await.ocr, Some(1000));
        assert_eq!(f.sources(&id).await.pdf, Some(2000));
    }

    /// Ink of a stem without a date may update the page of its stem (which keeps its date),
    /// and starts no page.
    #[tokio::test]
    async fn undated_ink_updates_its_page_and_starts_none() {
        let f = fixture();
        let undated = |pdf: &[u8], stem: &str| PageDraft {
            date: None,
            stem: stem.into(),
            ..draft(None, Some((pdf, 2000)), None)
        };
        let err = f
            .notebook
            .import_page(&f.user, undated(b"pdf", "scan"))
            .await
            .unwrap_err();
        assert!(matches!(err, NotebookError::Invalid(ref m) if m.starts_with("no page date")));
        assert!(
            f.notebook
                .list_pages(&f.user, None, None, 10)
                .await
                .unwrap()
                .is_empty()
        );

        let mut dated = draft(Some((PAGE, 1000)), None, None);
        dated.stem = "scan".into();
        dated.date = Some(Date::parse("2026-05-01").unwrap());
        let id = f.import(dated).await.page_id;
        let saved = f.import(undated(b"pdf-2", "scan")).await;
        assert_eq!(saved.page_id, id);
        let page = f.page(&id).await;
        assert_eq!(page.date.to_string(), "2026-05-01");
        assert!(page.pdf_url.is_some() && page.ocr_markdown.is_some());
        assert_eq!(f.ink(&id, AssetKind::Pdf), b"pdf-2");
    }

    /// Two imports of one page race: the older one's ink put lands after the newer one's
    /// whole import. The older one must not report success with its stale bytes in place: it
    /// fails with `Contention` (ingest then fails the invocation, Lambda retries it, and the
    /// retry reads the objects again), and the retry puts the newest bytes.
    #[tokio::test]
    async fn an_ink_put_overtaken_by_a_newer_import_fails_for_a_retry() {
        let f = fixture();
        let id = f
            .import(draft(Some((PAGE, 500)), Some((b"pdf-0", 500)), None))
            .await
            .page_id;
        let newest = draft(None, Some((b"pdf-2", 2000)), None);
        let (notebook, user, racer) = (f.notebook.clone(), f.user.clone(), newest.clone());
        let raced = Arc::new(Mutex::new(None));
        let outcome = raced.clone();
        *f.ink.hook.lock().unwrap() = Some(Box::new(move || {
            Box::pin(async move {
                let saved = notebook.import_page(&user, racer).await;
                *outcome.lock().unwrap() = Some(saved.map(|s| s.superseded));
            })
        }));

        let older = f
            .notebook
            .import_page(&f.user, draft(None, Some((b"pdf-1", 1000)), None))
            .await;
        assert_eq!(
            raced.lock().unwrap().take().map(|r| r.unwrap()),
            Some(false),
            "the newer import ran inside the older one's put, and won"
        );
        assert!(matches!(older, Err(NotebookError::Contention)), "{older:?}");
        assert_eq!(
            f.ink(&id, AssetKind::Pdf),
            b"pdf-1",
            "the stale put landed last"
        );
        // The retry reads the files again: the newest.
        assert!(!f.import(newest).await.superseded);
        assert_eq!(f.ink(&id, AssetKind::Pdf), b"pdf-2");
        assert_eq!(f.sources(&id).await.pdf, Some(2000));
    }

    /// Issue 46: the owner corrects a line and a task's box; the page reads so from then on,
    /// marked corrected, the task follows, and a newer file of the same page keeps the
    /// correction of a line it still has.
    #[tokio::test]
    async fn a_corrected_line_is_the_pages_text_and_survives_a_newer_file() {
        use crate::notebook::Correction;
        let f = fixture();
        let md = "## Tasks\n- [ ] Call leurecly\n- Met with Dana\n";
        let id = f.import(draft(Some((md, 1000)), None, None)).await.page_id;
        let page = f.page(&id).await;
        assert!(page.lines.iter().all(|l| l.text_source == TextSource::Page));
        let task_line = page.lines[1].line_id.clone();
        let done = f
            .notebook
            .correct_line(
                &f.user,
                &id,
                &task_line,
                Correction {
                    text: Some("  Call   Kennedy ".into()),
                    ticked: Some(true),
                },
            )
            .await
            .unwrap();
        assert!(done.changed && done.corrected);
        assert_eq!(done.text, "Call Kennedy");

        let page = f.page(&id).await;
        let line = &page.lines[1];
        assert_eq!(line.line_id, task_line, "the line keeps its reading's id");
        assert_eq!(line.text, "Call Kennedy");
        assert_eq!(line.text_source, TextSource::Corrected);
        assert_eq!(line.page_status, Some(PageStatus::Done));
        assert_eq!(line.status, Some(PageStatus::Done));
        assert_eq!(page.lines[2].text_source, TextSource::Page);
        assert_eq!(
            page.ocr_markdown.as_deref(),
            Some("## Tasks\n- [x] Call Kennedy\n- Met with Dana\n")
        );
        let tasks = f
            .notebook
            .list_tasks(&f.user, TaskFilter::All, None, 10)
            .await
            .unwrap();
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(tasks[0].text, "Call Kennedy");
        assert_eq!(tasks[0].status, TaskStatus::Done);
        assert_eq!(
            f.notebook.vocabulary(&f.user).await.unwrap(),
            ["Call", "Kennedy"]
        );

        // A typed line is not corrected here; a line that is not there is not found.
        let missing = f
            .notebook
            .correct_line(&f.user, &id, "ln_000000000000", Correction::default())
            .await;
        assert!(matches!(missing, Err(NotebookError::NotFound("line"))));

        // A newer file of the page with the same line: the correction stays.
        let newer = "## Tasks\n- [ ] Call leurecly\n- Met with Dana\n- and Ravi\n";
        f.import(draft(Some((newer, 2000)), None, None)).await;
        let page = f.page(&id).await;
        assert_eq!(
            texts(&page),
            [
                ("Tasks".to_owned(), None),
                ("Call Kennedy".to_owned(), Some(PageStatus::Done)),
                ("Met with Dana".to_owned(), None),
                ("and Ravi".to_owned(), None),
            ]
        );
        assert_eq!(page.lines[1].text_source, TextSource::Corrected);
        assert_eq!(
            page.ocr_text.as_deref().unwrap().lines().nth(1),
            Some("Call Kennedy")
        );
    }
}
