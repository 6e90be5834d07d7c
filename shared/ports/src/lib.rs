//! The ports: small traits the core talks to. Adapters implement them (the embedded store in
//! `nib-embedded`, the local and AWS adapters in `nib::adapters`); handlers take the narrowest
//! one they need as `Arc<dyn Trait>`.
//!
//! The `Store` is shaped after DynamoDB's model (docs/design.md §5) so both back ends can honour it
//! exactly: one table of items keyed by `pk`/`sk` strings, one secondary index (`gsi1pk`/`gsi1sk`),
//! conditional writes on existence or a `version` number, all-or-nothing transactions of up to
//! [`MAX_TRANSACTION_ITEMS`] writes, an atomic counter, and range queries returning pages with
//! an opaque cursor. There is no scan.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use async_trait::async_trait;

use nib_domain::{Date, PageId, TRASH_DAYS, UserId};

/// DynamoDB's limit on the writes in one `TransactWriteItems`.
pub const MAX_TRANSACTION_ITEMS: usize = 100;

/// DynamoDB's limit on one item's size (keys and body, approximately).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// One stored item. `body` is the record, serialized by the layer that owns it (sealed fields
/// inside are already ciphertext); the store never looks into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub pk: String,
    pub sk: String,
    /// The item's key in the secondary index, if it is in it.
    pub gsi1: Option<(String, String)>,
    /// Optimistic concurrency: writers read it and write `version + 1` under `Cond::Version`.
    pub version: u64,
    /// Unix seconds from which the item is expired (DynamoDB's TTL attribute): see
    /// [`is_live`], the one rule every store applies. TTL deletion is lazy, so stores treat an
    /// expired item as absent themselves.
    pub expires_at: Option<i64>,
    pub body: Vec<u8>,
}

impl Item {
    /// Whether the item is live at `now` (unix seconds), by [`is_live`].
    pub fn is_live(&self, now: i64) -> bool {
        is_live(self.expires_at, now)
    }
}

/// The expiry rule of every [`Store`]: an item with `expires_at` is live while `now <
/// expires_at`, and expired from the second `expires_at` on. An expired item is absent
/// everywhere: to `get`, `batch_get` and queries, to every [`Cond`] (`NotExists` holds,
/// `Exists` and `Version` do not) and to [`Store::increment`] (it starts over). `now` is the
/// store's [`Clock`], never the system time directly. It is
/// DynamoDB's reading of a TTL in conditions (`expires_at <= :now` is gone), so both back ends
/// draw the boundary at the same second.
pub fn is_live(expires_at: Option<i64>, now: i64) -> bool {
    expires_at.is_none_or(|at| now < at)
}

/// How often, in seconds of their clock, the local back end's adapters sweep away what has
/// expired (the embedded store its items, the asset folder its trashed files): DynamoDB's TTL
/// and S3's lifecycle rules do it on AWS.
pub const SWEEP_EVERY_SECONDS: i64 = 3600;

/// A condition on the item currently stored under a write's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// No condition.
    None,
    /// No item is stored under the key.
    NotExists,
    /// An item is stored under the key.
    Exists,
    /// An item is stored under the key with exactly this version.
    Version(u64),
}

/// One write of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Put {
        item: Item,
        cond: Cond,
    },
    Delete {
        pk: String,
        sk: String,
        cond: Cond,
    },
    /// Writes nothing; fails the transaction when `cond` does not hold.
    Check {
        pk: String,
        sk: String,
        cond: Cond,
    },
    /// Adds `by` (which may be negative) to the counter item under the key, created at 0 when
    /// absent; never version-conditioned, so writers that add to the same counter never fail
    /// each other's conditions (DynamoDB's `ADD` in an `Update`; DynamoDB may still cancel a
    /// transaction overlapping another in flight, as `Conflict`). For counters that never
    /// expire (not those of [`Store::increment`]). A count may not go below 0: the transaction
    /// then fails with `ConditionFailed` at this write's index. Read it back with
    /// [`counter_value`].
    Add {
        pk: String,
        sk: String,
        by: i64,
    },
}

impl Write {
    pub fn put(item: Item, cond: Cond) -> Self {
        Write::Put { item, cond }
    }

    pub fn delete(pk: impl Into<String>, sk: impl Into<String>, cond: Cond) -> Self {
        Write::Delete {
            pk: pk.into(),
            sk: sk.into(),
            cond,
        }
    }

    pub fn key(&self) -> (&str, &str) {
        match self {
            Write::Put { item, .. } => (&item.pk, &item.sk),
            Write::Delete { pk, sk, .. }
            | Write::Check { pk, sk, .. }
            | Write::Add { pk, sk, .. } => (pk, sk),
        }
    }

    pub fn add(pk: impl Into<String>, sk: impl Into<String>, by: i64) -> Self {
        Write::Add {
            pk: pk.into(),
            sk: sk.into(),
            by,
        }
    }
}

/// The value of a counter item (`Store::increment`, `Write::Add`): its body is the count as
/// 8 big-endian bytes on every adapter.
pub fn counter_value(item: &Item) -> Option<u64> {
    Some(u64::from_be_bytes(item.body.as_slice().try_into().ok()?))
}

/// Which key a query ranges over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Index {
    /// `pk` = partition, range over `sk`.
    Table,
    /// `gsi1pk` = partition, range over `gsi1sk`.
    Gsi1,
}

/// A range query within one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub index: Index,
    pub partition: String,
    /// Only sort keys that start with this prefix (`begins_with`).
    pub prefix: String,
    /// Inclusive lower bound on the sort key, if any.
    pub from: Option<String>,
    /// Inclusive upper bound on the sort key, if any.
    pub to: Option<String>,
    /// Descending sort-key order when true.
    pub reverse: bool,
    /// At most this many items in the page (the store may return fewer and a cursor).
    pub limit: usize,
    /// The cursor of the previous page.
    pub after: Option<String>,
}

impl Query {
    pub fn table(partition: impl Into<String>, prefix: impl Into<String>) -> Self {
        Query {
            index: Index::Table,
            partition: partition.into(),
            prefix: prefix.into(),
            from: None,
            to: None,
            reverse: false,
            limit: 1000,
            after: None,
        }
    }

    pub fn gsi1(partition: impl Into<String>, prefix: impl Into<String>) -> Self {
        Query {
            index: Index::Gsi1,
            ..Query::table(partition, prefix)
        }
    }
}

/// One page of a query's results, in sort-key order (or reverse order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryPage {
    pub items: Vec<Item>,
    /// Present when more items may follow; pass it as `Query::after`. Opaque to callers.
    pub next: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The condition on write number `index` of the transaction (0 for a single write) did not
    /// hold. Nothing was written.
    #[error("condition failed on write {index}")]
    ConditionFailed { index: usize },
    /// Another transaction touched the same items at the same time (DynamoDB's
    /// TransactionConflict); nothing was written and the caller may retry.
    #[error("transaction conflict")]
    Conflict,
    /// The request itself was invalid (too many writes, two writes on one key, a bad cursor).
    #[error("invalid store request: {0}")]
    Invalid(String),
    /// The back end failed or could not be reached.
    #[error("store unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The write was to the partitions of a user whose account is deleted or being deleted
    /// (`notebook::guard`); nothing was written.
    #[error("the account is deleted")]
    Deleted,
}

/// Refuses empty keys, which DynamoDB refuses too.
pub fn validate_key(pk: &str, sk: &str) -> Result<(), StoreError> {
    if pk.is_empty() || sk.is_empty() {
        return Err(StoreError::Invalid("pk and sk must not be empty".into()));
    }
    Ok(())
}

/// The checks every `Store` makes on a transaction before anything is written, so both back
/// ends refuse the same requests with `Invalid`: at most [`MAX_TRANSACTION_ITEMS`] writes, one
/// per key, no empty keys, items within [`MAX_ITEM_BYTES`].
pub fn validate_writes(writes: &[Write]) -> Result<(), StoreError> {
    if writes.len() > MAX_TRANSACTION_ITEMS {
        return Err(StoreError::Invalid(format!(
            "{} writes in one transaction; the limit is {MAX_TRANSACTION_ITEMS}",
            writes.len()
        )));
    }
    let mut keys = std::collections::HashSet::with_capacity(writes.len());
    for write in writes {
        let (pk, sk) = write.key();
        validate_key(pk, sk)?;
        if !keys.insert((pk, sk)) {
            return Err(StoreError::Invalid(format!(
                "two writes on one key ({pk}, {sk}) in one transaction"
            )));
        }
        if let Write::Put { item, .. } = write {
            if let Some((gpk, gsk)) = &item.gsi1
                && (gpk.is_empty() || gsk.is_empty())
            {
                return Err(StoreError::Invalid("gsi1 keys must not be empty".into()));
            }
            let size = item.pk.len()
                + item.sk.len()
                + item.gsi1.as_ref().map_or(0, |(p, s)| p.len() + s.len())
                + item.body.len();
            if size > MAX_ITEM_BYTES {
                return Err(StoreError::Invalid(format!(
                    "item ({pk}, {sk}) is {size} bytes; the limit is {MAX_ITEM_BYTES}"
                )));
            }
        }
    }
    Ok(())
}

/// The table (DynamoDB in production, redb locally). Expiry follows [`is_live`] against the
/// adapter's [`Clock`] (`with_clock`; the system clock by default), in reads and conditions
/// alike.
#[async_trait]
pub trait Store: Send + Sync {
    /// The item under the key; `None` when absent or expired.
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError>;

    /// The items under the keys, in the order of `keys`; `None` where absent or expired.
    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError>;

    /// The items of [`Store::batch_get`], each handed to `each` with its position in `keys`
    /// (absent and expired keys skipped), in order. For large items opened one at a time
    /// (search's vector blocks): the embedded store reads each only when the previous one has
    /// been handed over, so they are never all in memory at once; by default the batch is
    /// read first.
    async fn batch_get_each(
        &self,
        keys: &[(String, String)],
        each: &mut (dyn FnMut(usize, Item) + Send),
    ) -> Result<(), StoreError> {
        for (i, item) in self.batch_get(keys).await?.into_iter().enumerate() {
            if let Some(item) = item {
                each(i, item);
            }
        }
        Ok(())
    }

    /// One page of items in a partition of the table or of the index.
    async fn query(&self, query: &Query) -> Result<QueryPage, StoreError>;

    /// Every item of `query`, its pages read in turn. For sets read whole (a user's tokens,
    /// grants or keys, an outbox); where a set can be large and is used a page at a time, the
    /// caller walks [`Store::query`]'s cursors itself.
    async fn query_all(&self, query: Query) -> Result<Vec<Item>, StoreError> {
        let mut query = query;
        let mut items = Vec::new();
        loop {
            let page = self.query(&query).await?;
            items.extend(page.items);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(items),
            }
        }
    }

    /// Applies all the writes or none. At most [`MAX_TRANSACTION_ITEMS`], one per key.
    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError>;

    /// Atomically adds `by` to the counter item under the key (created at 0 when absent or
    /// expired, with `expires_at`), and returns the new value.
    async fn increment(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
    ) -> Result<u64, StoreError>;

    /// A single conditional put.
    async fn put(&self, item: Item, cond: Cond) -> Result<(), StoreError> {
        self.transact(vec![Write::put(item, cond)]).await
    }

    /// A counter the store adds one to after each committed write (a put, delete or add in a
    /// transaction, an increment) of an item whose `pk` starts with `prefix`, so that a process
    /// may keep such items in memory for as long as the counter stands still (`auth::tokens`).
    /// `None`, the default, where other processes write the same table (DynamoDB): no copy in
    /// memory could be trusted there.
    fn write_counter(&self, prefix: &'static str) -> Option<Arc<AtomicU64>> {
        let _ = prefix;
        None
    }
}

/// A per-user data key, wrapped by the key-encryption key of the `Keys` back end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedKey(pub Vec<u8>);

/// 32 bytes of key material, zeroed when dropped. Never logged, never serialized.
pub struct DataKey(pub zeroize::Zeroizing<[u8; 32]>);

impl std::fmt::Debug for DataKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataKey(..)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    /// The wrapped key does not open for this user (wrong user, tampered, wrong master key).
    #[error("data key does not unwrap for this user")]
    Unwrap,
    #[error("key service unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Envelope keys: KMS in production, a local key file in local mode.
#[async_trait]
pub trait Keys: Send + Sync {
    /// A fresh data key for the user, in plaintext and wrapped (bound to the user id).
    async fn generate(&self, user: &UserId) -> Result<(DataKey, WrappedKey), KeysError>;
    /// Unwraps a data key; fails unless it was wrapped for this same user.
    async fn unwrap(&self, user: &UserId, wrapped: &WrappedKey) -> Result<DataKey, KeysError>;
}

/// The kind of an ink file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AssetKind {
    Pdf,
    Png,
}

impl AssetKind {
    pub fn ext(self) -> &'static str {
        match self {
            AssetKind::Pdf => "pdf",
            AssetKind::Png => "png",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            AssetKind::Pdf => "application/pdf",
            AssetKind::Png => "image/png",
        }
    }

    pub fn from_ext(ext: &str) -> Option<Self> {
        match ext {
            "pdf" => Some(AssetKind::Pdf),
            "png" => Some(AssetKind::Png),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AssetsError {
    #[error("asset not found")]
    NotFound,
    #[error("asset storage unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An upload that may not be signed: the reason names the rule, never the file.
    #[error("invalid upload: {0}")]
    InvalidUpload(&'static str),
}

/// Trashed page files are deleted this many days after they were marked: a day after the
/// trashed page itself expires, so a restore in its last hour still finds them (and the mark,
/// set just before the delete's transaction, never runs out before the page does). S3: the
/// lifecycle rule `purge-trashed-images` of `infra/s3.tf` (asserted equal by tests/infra).
pub const ASSET_PURGE_DAYS: i64 = TRASH_DAYS + 1;

/// Page images: S3 in production, a directory in local mode. Never proxied through tool calls:
/// readers get short-lived signed URLs.
#[async_trait]
pub trait Assets: Send + Sync {
    async fn put(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
        bytes: Vec<u8>,
    ) -> Result<(), AssetsError>;
    /// The asset's bytes (`nib ocr` reads stored ink again); `None` when there is none.
    async fn get(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
    ) -> Result<Option<Vec<u8>>, AssetsError>;
    /// A URL that serves the asset until `ttl_seconds` from now and is refused after.
    async fn signed_url(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
        ttl_seconds: u64,
    ) -> Result<String, AssetsError>;
    /// Marks the page's files of `kinds` as trashed (`delete_page`): the asset store deletes
    /// them [`ASSET_PURGE_DAYS`] after the mark by itself (S3: a lifecycle rule on the tag
    /// `nib-trash=1`; locally: the trash folder's sweep), unless [`Assets::untrash`] comes
    /// first. A kind the page has no file of, or a file already marked, is no error.
    async fn trash(
        &self,
        user: &UserId,
        page: &PageId,
        kinds: &[AssetKind],
    ) -> Result<(), AssetsError> {
        let _ = (user, page, kinds);
        Err(AssetsError::Unavailable(
            "this asset store cannot trash a page's files".into(),
        ))
    }
    /// Takes the trash mark off the page's files of `kinds` (`restore_page`, and its retry):
    /// files not marked, or missing, are left as they are.
    async fn untrash(
        &self,
        user: &UserId,
        page: &PageId,
        kinds: &[AssetKind],
    ) -> Result<(), AssetsError> {
        let _ = (user, page, kinds);
        Err(AssetsError::Unavailable(
            "this asset store cannot restore a page's files".into(),
        ))
    }
    /// Whether this store keeps export archives for download ([`Assets::publish_export`]): S3
    /// does, because a Lambda response cannot carry a whole notebook; locally the web app
    /// streams the archive itself and `nib export` writes a file, so the local store does not.
    fn keeps_exports(&self) -> bool {
        false
    }
    /// Keeps the export archive at `path` for the user to download (S3: under
    /// `exports/{user}/`, expired by a lifecycle rule) and returns a URL that serves it as an
    /// attachment named `file_name` until `ttl_seconds` from now.
    async fn publish_export(
        &self,
        user: &UserId,
        path: &std::path::Path,
        file_name: &str,
        ttl_seconds: u64,
    ) -> Result<String, AssetsError> {
        let _ = (user, path, file_name, ttl_seconds);
        Err(AssetsError::Unavailable(
            "this asset store keeps no exports".into(),
        ))
    }
    /// Deletes every asset of the user, under all of the user's prefixes (page images, and
    /// uploads where the back end has them); the number deleted. Deleting nothing is not an
    /// error, so it can run again (account deletion, `nib::account`).
    async fn delete_user(&self, user: &UserId) -> Result<u64, AssetsError> {
        let _ = user;
        Err(AssetsError::Unavailable(
            "this asset store cannot delete a user's assets".into(),
        ))
    }
}

/// A signed upload form: POST `fields` in this order to `url` as `multipart/form-data`, then
/// the file as the last part (named `file`; S3 ignores any field after it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedPost {
    /// The bucket's URL (path-style on an emulator, virtual-hosted on AWS).
    pub url: String,
    /// The object key the upload will have (`uploads/{user}/{file}`; the form without script's
    /// is `uploads/{user}/${filename}`).
    pub key: String,
    /// The form fields, in the order the browser must send them.
    pub fields: Vec<(String, String)>,
}

/// Signs the web app's uploads straight to storage, where a deployment's ingest function
/// imports them (`nib::uploads` names the keys): S3's presigned POST
/// (`adapters::aws::S3Assets`). A server that imports uploads itself (`nib serve`) has none.
#[async_trait]
pub trait UploadSigner: Send + Sync {
    /// The origin the browser posts to, for the Content-Security-Policy; `None` when unknown.
    fn upload_origin(&self) -> Option<String>;
    /// A form for one page file, `uploads/{user}/{file_name}` with this `content_type`, of at
    /// most `max_bytes`, valid for `ttl_seconds`.
    async fn presigned_post(
        &self,
        user: &UserId,
        file_name: &str,
        content_type: &str,
        max_bytes: u64,
        ttl_seconds: u64,
    ) -> Result<PresignedPost, AssetsError>;
    /// The form without script: any page file name, then a redirect back to `redirect`.
    async fn presigned_form_post(
        &self,
        user: &UserId,
        redirect: &str,
        max_bytes: u64,
        ttl_seconds: u64,
    ) -> Result<PresignedPost, AssetsError>;
    /// A form for one export bundle, `uploads/{user}/bundles/{id}.zip`, then a redirect.
    async fn presigned_bundle_post(
        &self,
        user: &UserId,
        id: &str,
        redirect: &str,
        ttl_seconds: u64,
    ) -> Result<PresignedPost, AssetsError>;
}

/// One fixed window of a rate limit: at most `max` hits per `secs` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub secs: u64,
    pub max: u64,
}

/// What a rate limiter decided about one hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateDecision {
    Allowed,
    /// Over the limit of `window`; the window ends in `retry_after_secs` (at least 1).
    Limited {
        window: Window,
        retry_after_secs: u64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum RateLimitError {
    #[error("rate limit store unavailable")]
    Store(#[from] StoreError),
}

/// Fixed-window request counters (docs/design.md §5 "rate window"): in memory locally, an atomic
/// counter item per window on DynamoDB. Exact under concurrency: each hit is one atomic
/// increment, and the hit that takes a counter past `max` is refused.
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Counts one hit of `key` in each window, shortest first, and stops at the first window
    /// that is over its limit (so a refused hit still counts in the windows before it).
    async fn hit(&self, key: &str, windows: &[Window]) -> Result<RateDecision, RateLimitError> {
        self.hit_many(key, windows, 1).await
    }

    /// Counts `n` hits of `key` (a JSON-RPC batch counts each of its messages, a prompt what it
    /// dispatches) in one step per window (one atomic increment by `n`), and refuses them all
    /// unless all fit.
    async fn hit_many(
        &self,
        key: &str,
        windows: &[Window],
        n: u64,
    ) -> Result<RateDecision, RateLimitError>;
}

/// Time, so tests can pin it.
pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;

    fn unix(&self) -> i64 {
        self.now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }

    fn today(&self) -> Date {
        let t = time::OffsetDateTime::from_unix_timestamp(self.unix())
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        Date::from_time(t.date())
    }
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

// The OCR port lives with the pipeline that defines what an engine's answer means (the
// `nib-ocr` crate, which depends on nothing of nib's); it is named here with the others.
pub use nib_ocr::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};
