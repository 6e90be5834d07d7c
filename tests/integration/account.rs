//! Account deletion by key destruction (`nib::account`), over both back ends: nothing of the
//! user remains (the whole store and the asset folder / bucket scanned), a crash at any step
//! followed by a re-run finishes the job, and with the key destroyed but the items left, what
//! remains cannot be opened.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use nib::account::{AccountError, Accounts, Step};
use nib::adapters::aws::AwsClients;
use nib::adapters::embedded::EmbeddedStore;
use nib::auth::Scope;
use nib::config::AwsConfig;
use nib::crypto::Vault;
use nib::domain::UserId;
use nib::ports::{Index, Item, Query, QueryPage, Store, StoreError, Write};
use nib::services::{LocalOptions, Services};
use nib_testkit::emulator::Faults;

use crate::helpers::{emulator, sample_dir};

fn user(name: &str) -> UserId {
    UserId::parse(name).unwrap()
}

/// The app's accounts, sweeping again right away: these tests make no request meanwhile
/// (waiting `REQUEST_BOUND` would only slow them).
fn quick(app: &Services) -> Accounts {
    app.accounts().with_settle(std::time::Duration::ZERO)
}

/// A back end under test: the app, and what a test needs to scan it afterwards.
enum Under {
    Local { dir: tempfile::TempDir },
    Aws { config: Box<AwsConfig> },
}

fn open_local(dir: &std::path::Path) -> Services {
    Services::open_local(
        dir,
        LocalOptions {
            ocr: nib::config::OcrChoice::Off,
            ..LocalOptions::default()
        },
    )
    .unwrap()
}

/// Two users with notebooks, passwords and tokens: `default` (the sample) and `bob` (one page).
async fn populate(app: &Services) {
    let (pages, _) = nib::notebook::group_dir(&sample_dir()).unwrap();
    for (name, pages) in [("default", &pages[..]), ("bob", &pages[..1])] {
        let u = user(name);
        app.ensure_user(&u).await.unwrap();
        for page in pages {
            app.notebook().import_files(&u, page).await.unwrap();
        }
        app.users()
            .set_password(&u, "correct horse battery", true)
            .await
            .unwrap();
        app.tokens.create(&u, Scope::Read, None).await.unwrap();
        // An export kept for download (on AWS: under exports/{user}/; locally none is kept).
        app.notebook()
            .export_download(&u, nib::notebook::ExportFormat::Bundle, 60)
            .await
            .unwrap();
        // Kept outside the user's partition: a browser session and an approval of a client.
        app.web_sessions().create(&u).await.unwrap();
        app.oauth(nib::auth::oauth::OAuthConfig::new("http://127.0.0.1"))
            .clients
            .mark_approved("nib_client_account_test", &u)
            .await
            .unwrap();
    }
    let pages = app
        .notebook()
        .list_pages(&user("default"), None, None, 100)
        .await
        .unwrap();
    assert!(pages.iter().any(|p| p.has_ink), "the sample has ink");
}

async fn setup(aws: bool) -> (Services, Under) {
    if aws {
        let config = emulator().await.fresh().await.unwrap();
        version_bucket(&config).await;
        let app = Services::open_aws(config.clone()).await.unwrap();
        populate(&app).await;
        (
            app,
            Under::Aws {
                config: Box::new(config),
            },
        )
    } else {
        let dir = tempfile::tempdir().unwrap();
        let app = open_local(dir.path());
        populate(&app).await;
        (app, Under::Local { dir })
    }
}

/// Turns versioning on, as infra/ does: a deleted object stays as a noncurrent version.
pub(crate) async fn version_bucket(config: &AwsConfig) {
    use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
    AwsClients::connect(config)
        .await
        .s3
        .put_bucket_versioning()
        .bucket(&config.bucket)
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .unwrap();
}

/// Whether a key, attribute or path names the user `name`.
fn names(s: &str, name: &str) -> bool {
    s.contains(&format!("U#{name}"))
        || s.contains(&format!("USER#{name}"))
        || s.contains(&format!("\"{name}\""))
        || s.contains(&format!("/{name}/"))
}

/// Every key of the store and every asset, as text, that names `name`: an item's or index
/// entry's keys, a live DynamoDB item's attributes (bodies as lossy text), an asset's path.
async fn remains(app: Services, under: &Under, name: &str) -> Vec<String> {
    let needle = |s: &str| names(s, name);
    let mut found = Vec::new();
    match under {
        Under::Local { dir } => {
            drop(app);
            let store = EmbeddedStore::open(&dir.path().join("nib.redb")).unwrap();
            for key in store.all_keys().await.unwrap() {
                if is_tombstone(&key[0], &key[1], name) {
                    continue;
                }
                let text = key.join(" | ");
                if key.iter().any(|k| needle(k) || k == name) {
                    found.push(text);
                }
            }
            for entry in walk(&dir.path().join("assets")) {
                if needle(&entry) {
                    found.push(entry);
                }
            }
        }
        Under::Aws { config } => found = aws_remains(config, app.clock.unix(), name).await,
    }
    found
}

/// The deleted account's tombstone (`U#{user}` / `GONE`, its deletion time only): kept on
/// purpose (`nib::notebook::guard`), no data of the user.
fn is_tombstone(pk: &str, sk: &str, name: &str) -> bool {
    pk == format!("U#{name}") && sk == nib::notebook::guard::GONE_SK
}

/// [`remains`] on the emulator's table and bucket (items expired by `now` are gone to nib).
pub(crate) async fn aws_remains(config: &AwsConfig, now: i64, name: &str) -> Vec<String> {
    let needle = |s: &str| names(s, name);
    let mut found = Vec::new();
    let clients = AwsClients::connect(config).await;
    let mut start = None;
    loop {
        let out = clients
            .dynamodb
            .scan()
            .table_name(&config.table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for item in out.items.unwrap_or_default() {
            // By attribute name, so that two scans of the same item read the same.
            let item: std::collections::BTreeMap<_, _> = item.into_iter().collect();
            // moto does not run TTL deletion: an expired item is gone to nib.
            let expired = item
                .get("expires_at")
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse::<i64>().ok())
                .is_some_and(|at| at <= now);
            let key = |a: &str| item.get(a).and_then(|v| v.as_s().ok()).cloned();
            if let (Some(pk), Some(sk)) = (key("pk"), key("sk"))
                && is_tombstone(&pk, &sk, name)
            {
                continue;
            }
            let text: Vec<String> = item
                .values()
                .map(|v| match (v.as_s(), v.as_b()) {
                    (Ok(s), _) => s.clone(),
                    (_, Ok(b)) => String::from_utf8_lossy(b.as_ref()).into_owned(),
                    _ => String::new(),
                })
                .collect();
            if !expired && text.iter().any(|t| needle(t)) {
                found.push(text.join(" | "));
            }
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    // Every version and delete marker, not only the current objects.
    let listed = clients
        .s3
        .list_object_versions()
        .bucket(&config.bucket)
        .send()
        .await
        .unwrap();
    let keys = listed
        .versions()
        .iter()
        .map(|v| v.key())
        .chain(listed.delete_markers().iter().map(|m| m.key()));
    for key in keys {
        let key = key.unwrap_or_default();
        if needle(&format!("/{key}")) {
            found.push(key.to_owned());
        }
    }
    found.sort();
    found
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            out.push(format!("{}/", path.display()));
            if path.is_dir() {
                out.extend(walk(&path));
            }
        }
    }
    out
}

/// What a deletion must leave of the other user: all of it, readable.
async fn bob_is_intact(app: &Services) {
    let bob = user("bob");
    let pages = app
        .notebook()
        .list_pages(&bob, None, None, 10)
        .await
        .unwrap();
    assert_eq!(pages.len(), 1);
    app.notebook()
        .get_page(&bob, &pages[0].page_id)
        .await
        .unwrap();
    assert!(
        app.users()
            .check("bob", "correct horse battery")
            .await
            .unwrap()
            .is_some()
    );
}

async fn deletes_everything(aws: bool) {
    let (app, under) = setup(aws).await;
    let accounts = quick(&app);
    let listed = accounts.list().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|u| u.user.as_str()).collect();
    assert_eq!(names, ["bob", "default"]);
    let pages = app
        .notebook()
        .list_pages(&user("default"), None, None, 100)
        .await
        .unwrap();
    assert_eq!(listed[1].pages, pages.len() as u64);
    assert!(pages.len() >= 5);
    assert_eq!((listed[1].tokens, listed[1].has_password), (1, true));

    let mut steps = Vec::new();
    let done = accounts
        .delete(&user("default"), |s| steps.push(s))
        .await
        .unwrap();
    assert_eq!(
        steps,
        [
            Step::Marker,
            Step::Credentials,
            Step::Assets,
            Step::Key,
            Step::Items,
            Step::Done
        ]
    );
    assert!(
        done.assets >= 2 && done.keys == 1 && done.items > 10,
        "{done:?}"
    );
    let names: Vec<String> = accounts
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|u| u.user.to_string())
        .collect();
    assert_eq!(names, ["bob"]);
    // Deleting again: the user is unknown now.
    assert!(matches!(
        accounts.delete(&user("default"), |_| {}).await,
        Err(AccountError::Unknown(_))
    ));
    bob_is_intact(&app).await;
    drop(accounts);
    let left = remains(app, &under, "default").await;
    assert!(left.is_empty(), "left of the user: {left:#?}");
}

#[tokio::test]
async fn deleting_a_user_leaves_nothing_of_it_locally() {
    deletes_everything(false).await;
}

#[tokio::test]
async fn deleting_a_user_leaves_nothing_of_it_on_aws() {
    deletes_everything(true).await;
}

/// A store that fails its `fail_at`-th write (1-based; `put` goes through `transact`), as a
/// crash there would: nothing of that write happens, and nothing after it.
struct Crashing {
    inner: Arc<dyn Store>,
    writes: AtomicUsize,
    fail_at: usize,
}

#[async_trait]
impl Store for Crashing {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.inner.get(pk, sk).await
    }
    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError> {
        self.inner.batch_get(keys).await
    }
    async fn query(&self, query: &Query) -> Result<QueryPage, StoreError> {
        self.inner.query(query).await
    }
    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        if self.writes.fetch_add(1, Ordering::SeqCst) + 1 >= self.fail_at {
            return Err(StoreError::Unavailable("crashed here".into()));
        }
        self.inner.transact(writes).await
    }
    async fn increment(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
    ) -> Result<u64, StoreError> {
        self.inner.increment(pk, sk, by, expires_at).await
    }
}

fn crashing_accounts(app: &Services, fail_at: usize) -> (Accounts, Arc<Crashing>) {
    let store = Arc::new(Crashing {
        inner: app.store.clone(),
        writes: AtomicUsize::new(0),
        fail_at,
    });
    let accounts = Accounts::new(
        store.clone(),
        app.assets.clone(),
        app.vault().clone(),
        app.clock.clone(),
    )
    .with_settle(std::time::Duration::ZERO);
    (accounts, store)
}

/// A store fenced as the account function's role is (`infra/iam.tf`): items only in
/// `functions::ACCOUNT_PARTITIONS`, puts only in `functions::ACCOUNT_PUT_PARTITIONS`, the index only in its `INDEX_PARTITIONS` patterns (IAM's
/// `StringLike`, one `*` each); anything else fails as AccessDenied would, and is recorded.
struct Fenced {
    inner: Arc<dyn Store>,
    refused: std::sync::Mutex<Vec<String>>,
}

impl Fenced {
    fn check(&self, what: &str, pk: &str, index: Index) -> Result<(), StoreError> {
        let allowed = match index {
            Index::Table => nib::functions::ACCOUNT_PARTITIONS
                .iter()
                .any(|p| p.contains(pk)),
            Index::Gsi1 => nib::functions::INDEX_PARTITIONS
                .iter()
                .filter(|(f, _)| *f == "account")
                .flat_map(|(_, patterns)| patterns.iter())
                .any(|pattern| {
                    let (head, tail) = pattern.split_once('*').unwrap();
                    pk.len() >= head.len() + tail.len()
                        && pk.starts_with(head)
                        && pk.ends_with(tail)
                }),
        };
        if allowed {
            return Ok(());
        }
        let entry = format!("{what} {pk} ({index:?})");
        self.refused.lock().unwrap().push(entry.clone());
        Err(StoreError::Unavailable(
            format!("AccessDenied: {entry}").into(),
        ))
    }
}

#[async_trait]
impl Store for Fenced {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.check("GetItem", pk, Index::Table)?;
        self.inner.get(pk, sk).await
    }
    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError> {
        for (pk, _) in keys {
            self.check("BatchGetItem", pk, Index::Table)?;
        }
        self.inner.batch_get(keys).await
    }
    async fn query(&self, query: &Query) -> Result<QueryPage, StoreError> {
        self.check("Query", &query.partition, query.index)?;
        self.inner.query(query).await
    }
    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        for w in &writes {
            self.check("TransactWriteItems", w.key().0, Index::Table)?;
            // The role's PutItem statement is narrower: the marker and the tombstones.
            let pk = w.key().0;
            if matches!(w, Write::Put { .. })
                && !nib::functions::ACCOUNT_PUT_PARTITIONS
                    .iter()
                    .any(|p| p.contains(pk))
            {
                let entry = format!("PutItem {pk} (Table)");
                self.refused.lock().unwrap().push(entry.clone());
                return Err(StoreError::Unavailable(
                    format!("AccessDenied: {entry}").into(),
                ));
            }
        }
        self.inner.transact(writes).await
    }
    async fn increment(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
    ) -> Result<u64, StoreError> {
        self.check("UpdateItem", pk, Index::Table)?;
        self.inner.increment(pk, sk, by, expires_at).await
    }
}

/// A whole deletion stays within what the account function's role allows (the lists the Rust
/// and Python policy tests hold `infra/iam.tf` to): the emulator enforces no IAM, so a
/// partition missing from the role would otherwise first show as AccessDenied on AWS.
#[tokio::test]
async fn a_deletion_reaches_only_the_account_functions_partitions() {
    let (app, under) = setup(false).await;
    let store = Arc::new(Fenced {
        inner: app.store.clone(),
        refused: Default::default(),
    });
    let accounts = Accounts::new(
        store.clone(),
        app.assets.clone(),
        app.vault().clone(),
        app.clock.clone(),
    )
    .with_settle(std::time::Duration::ZERO);
    let done = accounts.delete(&user("default"), |_| {}).await;
    assert_eq!(*store.refused.lock().unwrap(), Vec::<String>::new());
    assert!(done.unwrap().items > 0);
    // The embedded store is opened again to scan it: nothing may hold it.
    drop((accounts, store));
    assert_eq!(remains(app, &under, "default").await, Vec::<String>::new());
}

/// Crashes the deletion at each of `points` (the n-th store write), then runs it again.
async fn crash_then_finish(aws: bool, fail_at: usize) {
    let (app, under) = setup(aws).await;
    let (accounts, _) = crashing_accounts(&app, fail_at);
    let mut steps = Vec::new();
    assert!(
        accounts
            .delete(&user("default"), |s| steps.push(s))
            .await
            .is_err(),
        "the crash at write {fail_at} happened"
    );
    assert!(!steps.contains(&Step::Done));
    if steps.contains(&Step::Marker) {
        let listed = quick(&app).list().await.unwrap();
        let default = listed
            .iter()
            .find(|u| u.user.as_str() == "default")
            .unwrap();
        assert!(default.deleting, "the list shows the deletion under way");
        // Nothing recreates the user meanwhile.
        assert!(matches!(
            quick(&app).ensure(&user("default")).await,
            Err(AccountError::Deleting(_))
        ));
    }
    drop(accounts);
    quick(&app).delete(&user("default"), |_| {}).await.unwrap();
    bob_is_intact(&app).await;
    let left = remains(app, &under, "default").await;
    assert!(
        left.is_empty(),
        "after a crash at write {fail_at}: {left:#?}"
    );
}

/// The writes of a deletion of the populated `default`, counted by a run that never fails.
async fn writes_of_a_deletion() -> usize {
    let (app, _under) = setup(false).await;
    let (accounts, store) = crashing_accounts(&app, usize::MAX);
    accounts.delete(&user("default"), |_| {}).await.unwrap();
    store.writes.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_deletion_cut_short_at_any_write_finishes_when_run_again_locally() {
    let total = writes_of_a_deletion().await;
    assert!(total > 8, "{total}");
    // The marker, the credentials, the key, the first postings partitions, one in the middle,
    // the last item chunk (the tombstones) and the marker's removal.
    for fail_at in [1, 2, 3, 4, 5, total / 2, total - 1, total] {
        crash_then_finish(false, fail_at).await;
    }
}

#[tokio::test]
async fn a_deletion_cut_short_finishes_when_run_again_on_aws() {
    // After the marker (the credentials), right after the key (the first postings), and the
    // last write (the marker's removal); every write is cut locally above.
    let total = writes_of_a_deletion().await;
    for fail_at in [2, 4, total] {
        crash_then_finish(true, fail_at).await;
    }
}

#[tokio::test]
async fn an_s3_failure_while_deleting_images_is_finished_by_a_re_run() {
    let config = emulator().await.fresh().await.unwrap();
    let faults = Faults::new();
    let clients = AwsClients::connect_with(&config, vec![faults.interceptor()]).await;
    let app = Services::open_aws_with(config.clone(), clients)
        .await
        .unwrap();
    version_bucket(&config).await;
    populate(&app).await;
    let deleted = Arc::new(AtomicUsize::new(0));
    let counter = deleted.clone();
    // The second image delete fails (one is gone, the other stays).
    faults.on("S3", "DeleteObject", move || {
        if counter.fetch_add(1, Ordering::SeqCst) == 1 {
            Err("injected fault".into())
        } else {
            Ok(())
        }
    });
    let mut steps = Vec::new();
    let err = app
        .accounts()
        .delete(&user("default"), |s| steps.push(s))
        .await
        .unwrap_err();
    assert!(matches!(err, AccountError::Assets(_)), "{err:?}");
    assert_eq!(steps, [Step::Marker, Step::Credentials]);
    // Signing in and the token are refused already; the key is still there.
    assert!(
        app.users()
            .check("default", "correct horse battery")
            .await
            .unwrap()
            .is_none()
    );
    faults.clear();
    quick(&app).delete(&user("default"), |_| {}).await.unwrap();
    let left = remains(
        app,
        &Under::Aws {
            config: Box::new(config),
        },
        "default",
    )
    .await;
    assert!(left.is_empty(), "{left:#?}");
}

/// The key destroyed, the items deliberately left (a crash right after): nothing of what
/// remains opens, with the same store and the same key-encryption key, and nobody gets in.
async fn what_remains_cannot_be_opened(aws: bool) {
    let (app, under) = setup(aws).await;
    let u = user("default");
    let count = app
        .notebook()
        .list_pages(&u, None, None, 100)
        .await
        .unwrap()
        .len();
    let page = app.notebook().list_pages(&u, None, None, 10).await.unwrap()[0]
        .page_id
        .clone();
    app.notebook().get_page(&u, &page).await.unwrap();
    let token = app
        .tokens
        .create(&u, Scope::Read, None)
        .await
        .unwrap()
        .token;
    // The fifth write is the first after the key's destruction (the marker, the tombstone,
    // the credentials, the key).
    let (accounts, _) = crashing_accounts(&app, 5);
    let mut steps = Vec::new();
    accounts.delete(&u, |s| steps.push(s)).await.unwrap_err();
    assert_eq!(steps.last(), Some(&Step::Key));

    // The items are there...
    let items = app
        .store
        .query(&Query::table("U#default", "PAGE#"))
        .await
        .unwrap();
    assert_eq!(items.items.len(), count, "the pages are left");
    // ...but no key: a fresh vault over the same store and key-encryption key finds none and
    // mints none, so the page does not open, nor through the notebook.
    let vault = Vault::new(
        app.store.clone(),
        app.keys.clone(),
        10,
        std::time::Duration::from_secs(60),
    );
    assert!(vault.user_keys(&u).await.is_err());
    drop(vault);
    let keys = app
        .store
        .query(&Query::table("U#default", "KEY#"))
        .await
        .unwrap();
    assert!(!keys.items.is_empty());
    for key in &keys.items {
        let body: serde_json::Value = serde_json::from_slice(&key.body).unwrap();
        assert!(body.get("wrapped").is_none(), "{body}");
    }
    assert!(app.notebook().get_page(&u, &page).await.is_err());
    // The images were deleted before the key (they are not sealed with it).
    for kind in [nib::ports::AssetKind::Pdf, nib::ports::AssetKind::Png] {
        assert_eq!(app.assets.get(&u, &page, kind).await.unwrap(), None);
    }
    // Nobody gets in.
    assert!(app.tokens.verify(&token).await.is_err());
    assert!(
        app.users()
            .check("default", "correct horse battery")
            .await
            .unwrap()
            .is_none()
    );
    // And the re-run finishes.
    drop(accounts);
    quick(&app).delete(&u, |_| {}).await.unwrap();
    let left = remains(app, &under, "default").await;
    assert!(left.is_empty(), "{left:#?}");
}

#[tokio::test]
async fn with_the_key_destroyed_what_remains_cannot_be_opened_locally() {
    what_remains_cannot_be_opened(false).await;
}

#[tokio::test]
async fn with_the_key_destroyed_what_remains_cannot_be_opened_on_aws() {
    what_remains_cannot_be_opened(true).await;
}

/// Issue 48 item 6: a call still in flight when the account is deleted lands nothing. While
/// the deletion runs (here stopped right after its marker and tombstone, the key still intact)
/// a notebook write is refused in its own transaction; after it, a write (which would mint a
/// new key and seal under it) is refused too; nothing of the user remains.
async fn a_write_after_the_deletion_is_refused(aws: bool) {
    let (app, under) = setup(aws).await;
    let u = user("default");
    let date = nib::domain::Date::parse("2026-06-20").unwrap();
    // The notebook a call that started before the deletion holds.
    let notebook = app.notebook().clone();
    // The deletion, stopped at its third write (after the marker and the tombstone).
    let (accounts, _) = crashing_accounts(&app, 3);
    let mut steps = Vec::new();
    assert!(accounts.delete(&u, |s| steps.push(s)).await.is_err());
    assert_eq!(steps, [Step::Marker]);
    let refused = notebook
        .create_task(&u, date, "Landed during the deletion", None)
        .await;
    assert!(
        matches!(
            refused,
            Err(nib::notebook::NotebookError::Store(StoreError::Deleted))
        ),
        "{refused:?}"
    );
    quick(&app).delete(&u, |_| {}).await.unwrap();
    let refused = notebook
        .create_task(&u, date, "Landed after the deletion", None)
        .await;
    assert!(refused.is_err(), "{refused:?}");
    let note = notebook
        .add_note(&u, date, "Written after the deletion", &[], None)
        .await;
    assert!(note.is_err(), "{note:?}");
    drop((accounts, notebook));
    let left = remains(app, &under, "default").await;
    assert!(left.is_empty(), "{left:#?}");
}

#[tokio::test]
async fn a_write_after_the_deletion_is_refused_locally() {
    a_write_after_the_deletion_is_refused(false).await;
}

#[tokio::test]
async fn a_write_after_the_deletion_is_refused_on_aws() {
    a_write_after_the_deletion_is_refused(true).await;
}

/// Issue 48 item 6: a user is never created over another's items. Over a partition holding
/// an item (a late write that escaped a sweep), `ensure` refuses; over a deleted account's
/// tombstone alone it creates the user, who then writes as anyone.
async fn a_user_is_not_created_over_a_partition_in_use(aws: bool) {
    let (app, _under) = setup(aws).await;
    let carol = user("carol");
    app.store
        .put(
            Item {
                pk: "U#carol".into(),
                sk: "TASK#left-over".into(),
                gsi1: None,
                version: 1,
                expires_at: None,
                body: b"{}".to_vec(),
            },
            nib::ports::Cond::None,
        )
        .await
        .unwrap();
    assert!(matches!(
        quick(&app).ensure(&carol).await,
        Err(AccountError::NotEmpty(_))
    ));
    assert!(
        app.store
            .get("U#carol", nib::account::PROFILE_SK)
            .await
            .unwrap()
            .is_none()
    );

    // The same name after a deletion: created over the tombstone, and it writes.
    let u = user("default");
    quick(&app).delete(&u, |_| {}).await.unwrap();
    assert!(quick(&app).ensure(&u).await.unwrap());
    let date = nib::domain::Date::parse("2026-06-20").unwrap();
    let created = app
        .notebook()
        .create_task(&u, date, "A new start", None)
        .await
        .unwrap();
    assert!(created.created);
    let tasks = app
        .notebook()
        .list_tasks(&u, nib::notebook::TaskFilter::All, None, 100)
        .await
        .unwrap();
    assert_eq!(
        tasks.len(),
        1,
        "nothing of the deleted account is inherited"
    );
}

#[tokio::test]
async fn a_user_is_not_created_over_a_partition_in_use_locally() {
    a_user_is_not_created_over_a_partition_in_use(false).await;
}

#[tokio::test]
async fn a_user_is_not_created_over_a_partition_in_use_on_aws() {
    a_user_is_not_created_over_a_partition_in_use(true).await;
}
