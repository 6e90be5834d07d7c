//! The notebook services: import, pages, tasks and search over the ports.
//!
//! Every operation takes the verified user first and touches only that user's items. User
//! content is sealed with the user's keys (`crypto`) before it reaches the store; search terms,
//! task dedup keys and page stems are stored only as blind HMACs.
//!
//! Writes that must not be lost go through one store transaction (see [`pages`]): a page, its
//! task links, their dedup keys, the stem mapping and the index statistics change together or
//! not at all, under optimistic concurrency (item versions), retried on conflict.

mod access;
pub mod answers;
mod bounded;
mod bundle;
mod corrections;
pub mod guard;
mod import;
mod links;
mod notes;
mod notion;
#[cfg(feature = "ocr")]
mod ocr;
mod page_plan;
mod pages;
mod rank;
mod records;
mod resources;
mod revision;
mod search;
mod search_index;
mod settings;
mod tasks;
mod trash;
mod uploads;
mod vectors;
mod work;

use std::sync::Arc;

pub use access::{ACCESS_TTL_SECS, AccessLog, AccessPosition, AccessRecord};
pub use bundle::{
    BUNDLE_FORMAT, BUNDLE_VERSION, BundleError, BundleImport, ExportDownload, ExportFormat,
    ExportReport, MAX_APP_BUNDLE_BYTES, MAX_BUNDLE_BYTES, MAX_BUNDLE_INFLATION,
    MAX_INK_ENTRY_BYTES, MAX_JSON_ENTRY_BYTES,
};
pub use corrections::{
    Corrected, Correction, MAX_LINE_CHARS, MAX_VOCABULARY_WORDS, VOCABULARY_SK, words_of,
};
#[cfg(feature = "ocr")]
pub use import::pdf_refusal;
pub use import::{
    ImportFailure, ImportReport, PAGE_EXTENSIONS, PageFiles, group_dir, is_page_extension,
    read_page, read_page_with,
};
pub use links::{LinkActor, Linked};
pub use notes::{AddedNote, MAX_TAGS, NOTES_SECTION, NoteView, normalize_tag};
pub use notion::{DueReport, NotionPushed, NotionRef, NotionStatus, SyncReport};
pub use pages::{LineOrigin, LineView, PageDraft, PageSummary, PageView, SavedPage, TextSource};
pub use rank::{
    Candidate, OpenBlock, Posting, PostingList, RankQuery, VectorIndex, merge, rank, rescored,
};
pub use resources::{PageImage, TaskResource};
pub use revision::{PageAtRevision, revision_token};
pub use search::{
    HYBRID_KEYWORD_WEIGHT, HYBRID_RELATIVE_FLOOR, MEANING_FLOOR, MEANING_SPREAD, Match, SearchHit,
    SearchMode, SearchOptions, hybrid_score,
};
pub use settings::{DEFAULT_TIME_ZONE, UserTimeZone};
pub use tasks::{CreatedTask, TaskDetail, TaskFilter, TaskLine, TaskView, UpdatedTask};
pub use trash::{Restored, TRASH_DAYS, TrashEntry, TrashKind, Trashed, trash_cursor_key};
pub use uploads::{UPLOAD_RESULT_TTL_SECS, UploadResult};
pub use vectors::ReindexReport;
pub use vectors::{Block, Entry, MAX_CHUNKS};
pub use work::WorkPool;

use crate::crypto::{CryptoError, Vault};
use crate::ports::{Assets, AssetsError, Clock, Store, StoreError};

/// Longest text accepted for a task or a query, in characters.
pub const MAX_TEXT_CHARS: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum NotebookError {
    /// The thing asked for does not exist for this user (another user's ids land here too).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The item asked for is in the trash: the message says since when, how to restore it
    /// and until when.
    #[error("{0}")]
    InTrash(String),
    /// Input that cannot be stored, naming what was wrong with it.
    #[error("{0}")]
    Invalid(String),
    /// Too many concurrent writers on the same items; the caller may retry.
    #[error("too much contention, try again")]
    Contention,
    #[error("store failure")]
    Store(#[from] StoreError),
    #[error("crypto failure")]
    Crypto(#[from] CryptoError),
    #[error("asset failure")]
    Assets(#[from] AssetsError),
    #[error("stored record is corrupt: {0}")]
    Corrupt(String),
    /// The search model cannot be used (a function whose model layer is missing).
    #[error("the search model is unavailable")]
    Model(#[from] crate::embed::ModelError),
    #[error("OCR failure")]
    Ocr(#[source] crate::ports::OcrError),
    /// Notion refused or failed a call the caller asked for (connect); pushes never fail a
    /// tool call with it.
    #[error(transparent)]
    Notion(#[from] crate::adapters::notion::NotionError),
}

/// Settings of the notebook services.
#[derive(Debug, Clone)]
pub struct NotebookConfig {
    /// Lifetime of signed asset URLs, returned as `signed_url_ttl_seconds`.
    pub asset_ttl_seconds: u64,
    /// The server's public base URL, without a trailing slash: page links are built on it.
    pub public_url: String,
}

impl Default for NotebookConfig {
    fn default() -> Self {
        NotebookConfig {
            asset_ttl_seconds: 3600,
            public_url: "http://127.0.0.1".into(),
        }
    }
}

/// The notebook services over the ports. Cheap to share behind an `Arc`.
pub struct Notebook {
    /// Refuses writes to a deleted user's partitions (`guard`).
    store: Arc<dyn Store>,
    /// The same store unguarded: account deletion writes the tombstone and sweeps through it.
    unguarded: Arc<dyn Store>,
    vault: Arc<Vault>,
    assets: Arc<dyn Assets>,
    clock: Arc<dyn Clock>,
    config: NotebookConfig,
    /// Reads ink-only pages on import (`with_ocr`); `None`: they are stored without text.
    ocr: Option<Arc<dyn crate::ports::Ocr>>,
    /// Pushes tasks to the users' connected Notion databases (`with_notion`); `None`: never.
    notion: Option<Arc<crate::adapters::notion::NotionApi>>,
    /// Who opened what (`access`): buffered records of tool calls.
    access: Arc<AccessLog>,
    /// The users' open search indexes at their notebook's revision (`search_index`).
    search_cache: Arc<search_index::SearchCache>,
    /// Page writes leave their vectors pending instead of rewriting their block
    /// (`defer_vectors`, for a bulk import; `fold_vectors` folds them).
    vectors_deferred: std::sync::atomic::AtomicBool,
    /// Answers of reads kept by their revision (`answers`).
    answers: Arc<answers::AnswerCache>,
    /// Where PDF checks and rendering, OCR and bundle inflation run (`work`).
    work: WorkPool,
    /// Woken when a Notion outbox item is put or rescheduled: the outbox timer
    /// (`notion_outbox_changed`) then looks again at when the next item is due.
    outbox_changed: Arc<tokio::sync::Notify>,
}

impl Notebook {
    pub fn new(
        store: Arc<dyn Store>,
        vault: Arc<Vault>,
        assets: Arc<dyn Assets>,
        clock: Arc<dyn Clock>,
        config: NotebookConfig,
    ) -> Self {
        // Every write to a user's partitions is refused once the account is being deleted.
        let unguarded = store.clone();
        let store: Arc<dyn Store> = Arc::new(guard::GuardedStore::new(store));
        Notebook {
            unguarded,
            access: Arc::new(AccessLog::new(store.clone(), clock.clone())),
            store,
            vault,
            assets,
            clock,
            config,
            ocr: None,
            notion: None,
            search_cache: Arc::default(),
            answers: Arc::default(),
            vectors_deferred: std::sync::atomic::AtomicBool::new(false),
            work: WorkPool::per_core(),
            outbox_changed: Arc::default(),
        }
    }

    /// The pool the heavy work of imports and uploads runs in, one job per core (`work`).
    pub fn work(&self) -> &WorkPool {
        &self.work
    }

    /// Whether page writes leave their vectors pending (`vectors::PENDING_PREFIX`) instead of
    /// rewriting their block: a bulk import's choice, since a block rewrite per page made its
    /// commits cost more as the notebook grew. The importer folds them at the end
    /// (`fold_vectors`); search reads them meanwhile.
    pub fn defer_vectors(&self, defer: bool) {
        self.vectors_deferred
            .store(defer, std::sync::atomic::Ordering::Relaxed);
    }

    fn vectors_deferred(&self) -> bool {
        self.vectors_deferred
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Today in UTC (a bundle's file name); a user's writing takes today in their time zone,
    /// [`Notebook::today_for`].
    pub fn today(&self) -> crate::domain::Date {
        self.clock.today()
    }

    /// Answers of reads kept by their revision token.
    pub fn answers(&self) -> &answers::AnswerCache {
        &self.answers
    }

    /// Drops what this process's caches filled under load: the open search indexes' posting
    /// lists and opened pages (their statistics and vectors stay) and the kept answers. An
    /// idle `nib serve` calls it so its memory goes back to what it was after its first
    /// minute; the next query reads its terms' postings again. Returns the bytes dropped
    /// (estimated).
    pub fn release_caches(&self) -> usize {
        self.answers.clear() + self.search_cache.shed()
    }

    /// The access record's writer.
    pub fn access_log(&self) -> &Arc<AccessLog> {
        &self.access
    }

    pub fn config(&self) -> &NotebookConfig {
        &self.config
    }

    /// Account deletion over this notebook's store, assets and keys (the web app's
    /// `delete_account`, which runs wherever the notebook does).
    pub fn accounts(&self) -> crate::account::Accounts {
        crate::account::Accounts::new(
            self.unguarded.clone(),
            self.assets.clone(),
            self.vault.clone(),
            self.clock.clone(),
        )
    }

    /// The OCR engine ink-only pages are read with on import (`import_draft`).
    pub fn with_ocr(mut self, ocr: Arc<dyn crate::ports::Ocr>) -> Self {
        self.ocr = Some(ocr);
        self
    }

    /// The engine, when the notebook has one.
    pub fn ocr(&self) -> Option<&Arc<dyn crate::ports::Ocr>> {
        self.ocr.as_ref()
    }

    /// The page's stable link (`{public_url}/pages/{id}`): it shows the page to its owner after
    /// sign-in, long after signed image URLs have expired (`http::pages`).
    pub fn page_url(&self, page_id: &crate::domain::PageId) -> String {
        format!("{}/pages/{page_id}", self.config.public_url)
    }
}

/// How many times an optimistic write is retried before giving up with `Contention`.
const MAX_ATTEMPTS: usize = 64;

/// A short random pause before retrying an optimistic write, so that racing writers spread out.
async fn backoff(attempt: usize) {
    let cap_ms = (1u64 << attempt.min(6)).min(50);
    let ms = rand::random::<u64>() % (cap_ms + 1);
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}

fn is_retryable(e: &NotebookError) -> bool {
    matches!(
        e,
        NotebookError::Store(StoreError::ConditionFailed { .. } | StoreError::Conflict)
    )
}
