//! The trash (`delete_page`, `restore_page`, `delete_task`, `restore_task`, `list_trash`) over
//! the sample notebook: what disappears, that restore gives back exactly what was there, what
//! a re-import of a trashed page does, and the purge after 30 days on a test clock.
//!
//! `trash_tests!` declares the tool-level tests over a back end: here over the embedded one, in
//! `aws.rs` over DynamoDB/S3/KMS on the emulator. The purge test runs over both here.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use nib::adapters::embedded::EmbeddedStore;
use nib::auth::{Principal, Scope};
use nib::domain::UserId;
use nib::notebook::Notebook;
use nib::ports::{Assets, Clock, Store};
use nib::tools::{Dispatch, InProcess};
use serde_json::{Map, Value, json};

use crate::helpers::{Backend, TestApp, emulator, sample_dir};

macro_rules! trash_tests {
    ($options:expr) => {
        $crate::trash::trash_tests!(@each $options;
            deleting_a_page_hides_it_everywhere_and_restore_gives_back_exactly_what_was_there,
            deleting_a_task_hides_it_on_every_page_and_restore_gives_it_back,
            a_reimport_of_a_trashed_pages_files_leaves_it_in_the_trash,
            list_trash_pages_through_a_cursor,
            a_deleted_pages_images_are_marked_and_restore_unmarks_them,
        );
    };
    (@each $options:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($options).await;
                $crate::trash::$name(&app).await;
            }
        )*
    };
}
pub(crate) use trash_tests;

mod local {
    super::trash_tests!(crate::helpers::Options::default());
}

/// `value` with every signed URL replaced by a marker (their expiry moves with the clock) and
/// without `revision`s (every write, a delete and a restore included, gives a new one).
fn unsigned(value: &Value) -> Value {
    match value {
        Value::String(s) if s.contains("expires=") || s.contains("X-Amz-") => {
            Value::String("<signed url>".into())
        }
        Value::Array(a) => Value::Array(a.iter().map(unsigned).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| k.as_str() != "revision")
                .map(|(k, v)| (k.clone(), unsigned(v)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

const QUERIES: [&str; 7] = [
    "API spec",
    "dentist",
    "budget",
    "notebook answers",
    "\"launch plan\"",
    "gsm matte",
    "printer",
];

/// Everything the read tools answer about the notebook (signed URLs aside).
async fn snapshot(app: &TestApp) -> Value {
    let mut out = Map::new();
    let pages = app.call("list_pages", json!({})).await;
    for p in pages["pages"].as_array().unwrap() {
        let id = p["page_id"].as_str().unwrap();
        out.insert(
            format!("get_page {id}"),
            app.call("get_page", json!({ "page_id": id })).await,
        );
        out.insert(
            format!("fetch {id}"),
            app.call("fetch", json!({ "id": id })).await,
        );
    }
    out.insert("list_pages".into(), pages);
    for status in ["open", "done", "all"] {
        out.insert(
            format!("list_tasks {status}"),
            app.call("list_tasks", json!({ "status": status })).await,
        );
    }
    for q in QUERIES {
        out.insert(
            format!("search_pages {q}"),
            app.call("search_pages", json!({ "query": q })).await,
        );
        out.insert(
            format!("search {q}"),
            app.call("search", json!({ "query": q })).await,
        );
    }
    let (_, list) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/list" }))
        .await;
    out.insert("resources/list".into(), list["result"].clone());
    unsigned(&Value::Object(out))
}

fn task_id(tasks: &Value, text: &str) -> String {
    tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["text"] == text)
        .unwrap_or_else(|| panic!("no task {text:?} in {tasks}"))["task_link_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn has_task(tasks: &Value, text: &str) -> bool {
    tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["text"] == text)
}

fn page_ids(list: &Value, key: &str, id: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[id].as_str().unwrap().to_owned())
        .collect()
}

async fn resource_read(app: &TestApp, uri: &str) -> Value {
    let (_, body) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": uri } }))
        .await;
    body
}

/// The page of 2026-06-17 shares all its tasks with other pages (it ticks "Book dentist
/// appointment", which 2026-06-16 has open); the printer meeting of 2026-06-21 alone has "Send
/// the final cover file to the printer". Deleting them hides them from every list, search and
/// read, trashes the cover-file task with its page and reconciles the shared ones without the
/// tick; restoring them gives back every answer as it was.
pub async fn deleting_a_page_hides_it_everywhere_and_restore_gives_back_exactly_what_was_there(
    app: &TestApp,
) {
    let before = snapshot(app).await;
    let page = app.page_of("2026-06-17").await;
    let meeting = app.page_of("2026-06-21").await;
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    let cover = task_id(&tasks, "Send the final cover file to the printer");
    let dentist = task_id(&tasks, "Book dentist appointment");

    let deleted = app.call("delete_page", json!({ "page_id": page })).await;
    assert_eq!(deleted["deleted"], true, "{deleted}");
    assert_eq!(
        deleted["tasks_deleted"],
        json!([]),
        "every task is on another page too"
    );
    let message = deleted["message"].as_str().unwrap();
    assert!(
        message.contains("30 days") && message.contains("restore_page"),
        "{message}"
    );
    let deleted = app.call("delete_page", json!({ "page_id": meeting })).await;
    assert_eq!(deleted["tasks_deleted"], json!([cover]));

    // Gone from lists, searches, reads and resources.
    let pages = app.call("list_pages", json!({})).await;
    let listed = page_ids(&pages, "pages", "page_id");
    assert!(
        !listed.contains(&page) && !listed.contains(&meeting),
        "{pages}"
    );
    for q in ["notebook answers", "\"three tiers\"", "gsm matte"] {
        // Keywords find nothing; by meaning other pages may come up, never these two.
        let hits = app
            .call("search_pages", json!({ "query": q, "mode": "keyword" }))
            .await;
        assert_eq!(hits["results"], json!([]), "{q}: {hits}");
        for tool in ["search_pages", "search"] {
            let hits = app.call(tool, json!({ "query": q })).await.to_string();
            assert!(
                !hits.contains(&page) && !hits.contains(&meeting),
                "{tool} {q}: {hits}"
            );
        }
    }
    for (tool, args) in [
        ("get_page", json!({ "page_id": page })),
        ("fetch", json!({ "id": page })),
    ] {
        let error = app.call_error(tool, args).await;
        assert!(
            error.contains("is in the trash") && error.contains("restore_page"),
            "{tool}: {error}"
        );
    }
    let read = resource_read(app, &format!("nib://pages/{page}")).await;
    assert!(read.get("error").is_some(), "{read}");
    let (_, list) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/list" }))
        .await;
    assert!(!list.to_string().contains(&page), "{list}");

    // The cover-file task went with its page; the dentist task is open again without the tick.
    let all = app.call("list_tasks", json!({ "status": "all" })).await;
    assert!(
        !has_task(&all, "Send the final cover file to the printer"),
        "{all}"
    );
    let dentist_now = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_link_id"] == dentist)
        .unwrap();
    assert_eq!(dentist_now["status"], "todo", "reconciled without the page");
    let error = app
        .call_error(
            "update_task_status",
            json!({ "task_link_id": cover, "status": "done" }),
        )
        .await;
    assert!(
        error.contains("deleted with page") && error.contains(&meeting),
        "{error}"
    );
    let error = app
        .call_error("restore_task", json!({ "task_link_id": cover }))
        .await;
    assert!(error.contains("restore_page"), "{error}");

    let trash = app.call("list_trash", json!({})).await;
    let items = trash["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{trash}");
    let entry = items.iter().find(|i| i["id"] == json!(meeting)).unwrap();
    assert_eq!(entry["kind"], "page");
    assert_eq!(entry["date"], "2026-06-21");
    assert_eq!(entry["tasks"], 1);

    // Deleting again changes nothing.
    let again = app.call("delete_page", json!({ "page_id": page })).await;
    assert_eq!(again["deleted"], false);

    let restored = app
        .call("restore_page", json!({ "page_id": meeting }))
        .await;
    assert_eq!(restored["restored"], true, "{restored}");
    assert_eq!(restored["tasks_restored"], json!([cover]));
    let restored = app.call("restore_page", json!({ "page_id": page })).await;
    assert_eq!(restored["restored"], true, "{restored}");
    assert_eq!(
        snapshot(app).await,
        before,
        "restore gives back every answer"
    );
    assert!(
        app.call("list_trash", json!({})).await["items"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let again = app.call("restore_page", json!({ "page_id": page })).await;
    assert_eq!(again["restored"], false);
}

/// Where a page image is: live (served), marked trashed (kept for the purge), or not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    Live,
    Trashed,
    Missing,
}

/// The state of the default user's page images of `page` (PDF, PNG), as the asset store has
/// them: locally the files under `pages/` and `trash/`, on AWS the object and its tags.
pub(crate) async fn image_marks(app: &TestApp, page: &str) -> [Mark; 2] {
    marks_in(
        &app.dir.path().join("assets"),
        app.aws_config.as_ref(),
        page,
    )
    .await
}

/// [`image_marks`] in the asset folder `assets` (local), or in the bucket of `aws`.
async fn marks_in(
    assets: &std::path::Path,
    aws: Option<&nib::config::AwsConfig>,
    page: &str,
) -> [Mark; 2] {
    let mut out = [Mark::Missing; 2];
    for (i, ext) in ["pdf", "png"].into_iter().enumerate() {
        out[i] = match aws {
            None => {
                let user = assets.join("u/default");
                let name = format!("{page}.{ext}");
                let live = user.join("pages").join(&name).exists();
                let trashed = std::fs::read_dir(user.join("trash"))
                    .map(|d| {
                        d.flatten().any(|e| {
                            e.file_name()
                                .to_str()
                                .is_some_and(|f| f.starts_with(&format!("{name}.")))
                        })
                    })
                    .unwrap_or(false);
                match (live, trashed) {
                    (true, false) => Mark::Live,
                    (false, true) => Mark::Trashed,
                    (false, false) => Mark::Missing,
                    (true, true) => panic!("{name} both live and trashed"),
                }
            }
            Some(config) => {
                let clients = nib::adapters::aws::AwsClients::connect(config).await;
                let key = format!("u/default/pages/{page}.{ext}");
                match clients
                    .s3
                    .get_object_tagging()
                    .bucket(&config.bucket)
                    .key(&key)
                    .send()
                    .await
                {
                    Ok(tags) => {
                        let tags: Vec<(String, String)> = tags
                            .tag_set()
                            .iter()
                            .map(|t| (t.key().to_owned(), t.value().to_owned()))
                            .collect();
                        if tags == [("nib-trash".to_owned(), "1".to_owned())] {
                            Mark::Trashed
                        } else {
                            assert!(tags.is_empty(), "{key}: {tags:?}");
                            Mark::Live
                        }
                    }
                    Err(e) => {
                        assert!(
                            e.as_service_error()
                                .and_then(aws_sdk_s3::error::ProvideErrorMetadata::code)
                                == Some("NoSuchKey"),
                            "{key}: {e:?}"
                        );
                        Mark::Missing
                    }
                }
            }
        };
    }
    out
}

/// GETs a signed URL: its status and bytes.
async fn download(app: &TestApp, url: &Value) -> (u16, Vec<u8>) {
    let r = app
        .client
        .get(url.as_str().unwrap_or_else(|| panic!("no URL: {url}")))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// The page of 2026-06-19 has a PDF and a PNG. Deleting it marks both trashed (locally moved
/// to the trash folder, where its URLs no longer reach them; on S3 tagged `nib-trash=1`), and
/// keeps them; restoring it unmarks them, and the URLs of `get_page` serve the same bytes.
pub async fn a_deleted_pages_images_are_marked_and_restore_unmarks_them(app: &TestApp) {
    let page = app.page_of("2026-06-19").await;
    assert_eq!(image_marks(app, &page).await, [Mark::Live, Mark::Live]);
    let before = app.call("get_page", json!({ "page_id": page })).await;
    let (status, pdf) = download(app, &before["pdf_url"]).await;
    assert_eq!(status, 200);
    let (status, png) = download(app, &before["png_url"]).await;
    assert_eq!(status, 200);

    app.call("delete_page", json!({ "page_id": page })).await;
    assert_eq!(
        image_marks(app, &page).await,
        [Mark::Trashed, Mark::Trashed]
    );
    if app.aws_config.is_none() {
        let (status, _) = download(app, &before["png_url"]).await;
        assert_eq!(status, 404, "a trashed page's image is not served");
    }
    // A page without ink is deleted and restored without touching the asset store.
    let plain = app.page_of("2026-06-16").await;
    app.call("delete_page", json!({ "page_id": plain })).await;
    assert_eq!(
        image_marks(app, &plain).await,
        [Mark::Missing, Mark::Missing]
    );

    let restored = app.call("restore_page", json!({ "page_id": page })).await;
    assert_eq!(restored["restored"], true, "{restored}");
    app.call("restore_page", json!({ "page_id": plain })).await;
    assert_eq!(image_marks(app, &page).await, [Mark::Live, Mark::Live]);
    let after = app.call("get_page", json!({ "page_id": page })).await;
    assert_eq!(download(app, &after["pdf_url"]).await, (200, pdf));
    assert_eq!(download(app, &after["png_url"]).await, (200, png.clone()));
    // Restoring again changes nothing.
    let again = app.call("restore_page", json!({ "page_id": page })).await;
    assert_eq!(again["restored"], false);
    assert_eq!(image_marks(app, &page).await, [Mark::Live, Mark::Live]);
    assert_eq!(download(app, &after["png_url"]).await, (200, png));
}

/// "Follow up on API spec" is on two pages: deleting it hides it from list_tasks and leaves both
/// pages' lines without a status or a link; a re-import of the pages does not bring it back as
/// a new task; restore gives back every answer as it was.
pub async fn deleting_a_task_hides_it_on_every_page_and_restore_gives_it_back(app: &TestApp) {
    let before = snapshot(app).await;
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    let spec = task_id(&tasks, "Follow up on API spec");

    let deleted = app
        .call("delete_task", json!({ "task_link_id": spec }))
        .await;
    assert_eq!(deleted["deleted"], true);
    let message = deleted["message"].as_str().unwrap();
    assert!(
        message.contains("30 days") && message.contains("restore_task"),
        "{message}"
    );
    let all = app.call("list_tasks", json!({ "status": "all" })).await;
    assert!(!has_task(&all, "Follow up on API spec"), "{all}");
    for date in ["2026-06-16", "2026-06-17"] {
        let page = app
            .call("get_page", json!({ "page_id": app.page_of(date).await }))
            .await;
        let line = page["structure_json"]["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| {
                l["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("Follow up on API spec")
            })
            .unwrap()
            .clone();
        assert_eq!(line["task_link_id"], Value::Null, "{date}: {line}");
        assert_eq!(line["status"], Value::Null, "{date}: {line}");
    }
    let error = app
        .call_error(
            "update_task_status",
            json!({ "task_link_id": spec, "status": "done" }),
        )
        .await;
    assert!(
        error.contains("is in the trash") && error.contains("restore_task"),
        "{error}"
    );
    let read = resource_read(app, &format!("nib://tasks/{spec}")).await;
    assert!(read.get("error").is_some(), "{read}");
    let trash = app.call("list_trash", json!({})).await;
    assert_eq!(trash["items"][0]["kind"], "task", "{trash}");
    assert_eq!(trash["items"][0]["title"], "Follow up on API spec");

    // Importing the sample again keeps the task in the trash, rather than making a new one.
    let user = UserId::parse("default").unwrap();
    let (pages, _) = nib::notebook::group_dir(&sample_dir()).unwrap();
    for page in &pages {
        app.app.notebook().import_files(&user, page).await.unwrap();
    }
    let all = app.call("list_tasks", json!({ "status": "all" })).await;
    assert!(!has_task(&all, "Follow up on API spec"), "{all}");

    let restored = app
        .call("restore_task", json!({ "task_link_id": spec }))
        .await;
    assert_eq!(restored["restored"], true);
    assert_eq!(
        snapshot(app).await,
        before,
        "restore gives back every answer"
    );
}

/// `nib import` (and ingest) of the files of a page in the trash: the page stays in the trash
/// and the import reports it, with how to restore it; the other pages import as usual.
pub async fn a_reimport_of_a_trashed_pages_files_leaves_it_in_the_trash(app: &TestApp) {
    let page = app.page_of("2026-06-16").await;
    app.call("delete_page", json!({ "page_id": page })).await;
    let before = snapshot(app).await;
    let user = UserId::parse("default").unwrap();
    let (pages, _) = nib::notebook::group_dir(&sample_dir()).unwrap();
    let mut refused = Vec::new();
    for files in &pages {
        if let Err(e) = app.app.notebook().import_files(&user, files).await {
            refused.push(e);
        }
    }
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].path.ends_with("2026-06-16.md")
            && refused[0].reason.contains("is in the trash")
            && refused[0].reason.contains("restore_page"),
        "{}",
        refused[0]
    );
    assert_eq!(snapshot(app).await, before, "nothing came back");
    // create_task on the date of the trashed page puts the task on a new page of that date.
    let created = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-16", "text": "Water the plants" }),
        )
        .await;
    assert_ne!(created["page_id"], json!(page));
    let restored = app.call("restore_page", json!({ "page_id": page })).await;
    assert_eq!(restored["restored"], true);
    let pages = app
        .call(
            "list_pages",
            json!({ "from": "2026-06-16", "to": "2026-06-16" }),
        )
        .await;
    assert_eq!(pages["pages"].as_array().unwrap().len(), 2, "{pages}");
}

pub async fn list_trash_pages_through_a_cursor(app: &TestApp) {
    let pages = app.call("list_pages", json!({})).await;
    let ids = page_ids(&pages, "pages", "page_id");
    for id in &ids[..3] {
        app.call("delete_page", json!({ "page_id": id })).await;
    }
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut args = json!({ "limit": 1 });
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        let page = app.call("list_trash", args).await;
        assert_eq!(page["limit_applied"], 1);
        seen.extend(page_ids(&page, "items", "id"));
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    let mut expected = ids[..3].to_vec();
    let mut got = seen.clone();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "each once: {seen:?}");
    let error = app
        .call_error("list_trash", json!({ "cursor": "djF8cHwyMDI2LTA2LTE5fHg" }))
        .await;
    assert!(error.contains("cursor"), "{error}");
}

// ---- Purge after 30 days, on a test clock ---------------------------------------------------

/// A clock that moves only when the test says.
struct TestClock(AtomicI64);

impl TestClock {
    fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
    }
}

const DAY: i64 = 86_400;

/// Imports `md` as the page file `{date}.md` (in a folder of its own), as `nib import` does.
async fn import(notebook: &Notebook, date: &str, md: &str) -> nib::notebook::SavedPage {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{date}.md")), md).unwrap();
    let (pages, _) = nib::notebook::group_dir(dir.path()).unwrap();
    let user = UserId::parse("default").unwrap();
    notebook.import_files(&user, &pages[0]).await.unwrap()
}

struct Purge {
    notebook: Arc<Notebook>,
    clock: Arc<TestClock>,
    store: Arc<dyn Store>,
    /// The same embedded database with the clock of the deletion: it still sees expired items
    /// until they are swept.
    early: Option<EmbeddedStore>,
    /// The asset folder (local back end), on the test clock.
    local_assets: Option<Arc<nib::adapters::local_assets::LocalAssets>>,
    /// The emulator's table and bucket (AWS back end).
    aws_config: Option<nib::config::AwsConfig>,
    _dir: tempfile::TempDir,
    _app: Option<nib::services::Services>,
}

impl Purge {
    async fn new(backend: Backend) -> Purge {
        Purge::with_assets(backend, |assets| assets).await
    }

    /// A notebook whose asset store is the back end's, as `wrap` returns it.
    async fn with_assets(
        backend: Backend,
        wrap: impl FnOnce(Arc<dyn Assets>) -> Arc<dyn Assets>,
    ) -> Purge {
        let start = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let clock = Arc::new(TestClock(AtomicI64::new(start)));
        let dir = tempfile::tempdir().unwrap();
        let mut local_assets = None;
        let mut aws_config = None;
        let (store, vault, assets, early, app): (Arc<dyn Store>, _, _, _, _) = match backend {
            Backend::Local => {
                let embedded = EmbeddedStore::open(&dir.path().join("nib.redb")).unwrap();
                let early = embedded
                    .clone()
                    .with_clock(Arc::new(TestClock(AtomicI64::new(start))));
                let store: Arc<dyn Store> = Arc::new(embedded.with_clock(clock.clone()));
                let keys = Arc::new(
                    nib::adapters::local_keys::LocalKeys::open_or_create(
                        &dir.path().join("master.key"),
                    )
                    .unwrap(),
                );
                let vault = Arc::new(nib::crypto::Vault::new(
                    store.clone(),
                    keys,
                    16,
                    Duration::from_secs(3600),
                ));
                let local = Arc::new(
                    nib::adapters::local_assets::LocalAssets::new(
                        dir.path().join("assets"),
                        "http://127.0.0.1".into(),
                        [1; 32],
                        [2; 32],
                    )
                    .with_clock(clock.clone()),
                );
                local_assets = Some(local.clone());
                let assets: Arc<dyn nib::ports::Assets> = local;
                (store, vault, assets, Some(early), None)
            }
            Backend::Aws | Backend::Lambda => {
                let config = emulator().await.fresh().await.unwrap();
                let app = nib::services::Services::open_aws(config.clone())
                    .await
                    .unwrap();
                let clients = nib::adapters::aws::AwsClients::connect(&config).await;
                let store: Arc<dyn Store> =
                    Arc::new(clients.store(&config).with_clock(clock.clone()));
                aws_config = Some(config);
                (
                    store,
                    app.vault().clone(),
                    app.assets.clone(),
                    None,
                    Some(app),
                )
            }
        };
        let notebook = Arc::new(Notebook::new(
            store.clone(),
            vault,
            wrap(assets),
            clock.clone(),
            Default::default(),
        ));
        Purge {
            notebook,
            clock,
            store,
            early,
            local_assets,
            aws_config,
            _dir: dir,
            _app: app,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> Result<Value, String> {
        let principal = Principal {
            user: UserId::parse("default").unwrap(),
            scope: Scope::Admin,
            credential_id: "test".into(),
            client: None,
        };
        InProcess {
            notebook: self.notebook.clone(),
        }
        .call(
            &principal,
            tool,
            args.as_object().cloned().unwrap_or_default(),
        )
        .await
        .map(|out| serde_json::from_str(out.get()).unwrap())
        .map_err(|e| e.to_string())
    }
}

/// Every item under the user's partition and the page's derived keys that `store` still sees.
async fn derived(store: &dyn Store, page: &str, task: &str, stem_terms: &[String]) -> Vec<String> {
    let pk = "U#default";
    let mut out = Vec::new();
    for sk in [
        format!("PAGE#{page}"),
        format!("TRASH#P#{page}"),
        format!("TASK#{task}"),
        format!("TRASH#T#{task}"),
    ] {
        if store.get(pk, &sk).await.unwrap().is_some() {
            out.push(sk);
        }
    }
    for prefix in ["STEM#", "TASKKEY#"] {
        let q = nib::ports::Query::table(pk, prefix);
        for item in store.query(&q).await.unwrap().items {
            out.push(item.sk);
        }
    }
    let trash = nib::ports::Query::gsi1("U#default#TRASH", "");
    for item in store.query(&trash).await.unwrap().items {
        out.push(format!("listed {}", item.sk));
    }
    // The page's postings.
    for term in stem_terms {
        if store.get(term, page).await.unwrap().is_some() {
            out.push(format!("{term} / {page}"));
        }
    }
    out
}

async fn purge_after_thirty_days(backend: Backend) {
    let p = Purge::new(backend).await;
    let page = import(
        &p.notebook,
        "2026-05-04",
        "## Tasks\n- [ ] Renew the passport\n",
    )
    .await
    .page_id
    .to_string();
    let other = import(
        &p.notebook,
        "2026-05-05",
        "## Tasks\n- [ ] Call the plumber\n",
    )
    .await
    .page_id
    .to_string();
    let tasks = p.call("list_tasks", json!({})).await.unwrap();
    let plumber = task_id(&tasks, "Call the plumber");
    // The index partitions the page's terms are in (found while the page is live).
    let mut terms = Vec::new();
    let all = p
        .store
        .query(&nib::ports::Query::table("U#default", "PAGE#"))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2);
    for item in &all.items {
        let body: Value = serde_json::from_slice(&item.body).unwrap();
        if body["page_id"] == json!(page) {
            for t in body["terms"].as_array().unwrap() {
                terms.push(format!("U#default#T#{}", t.as_str().unwrap()));
            }
        }
    }
    assert!(!terms.is_empty());

    let deleted = p
        .call("delete_page", json!({ "page_id": page }))
        .await
        .unwrap();
    assert_eq!(deleted["tasks_deleted"].as_array().unwrap().len(), 1);
    p.call("delete_task", json!({ "task_link_id": plumber }))
        .await
        .unwrap();
    let left = derived(&*p.store, &page, &plumber, &terms).await;
    assert!(
        left.contains(&format!("TRASH#P#{page}")) && left.iter().any(|s| s.starts_with("STEM#")),
        "{left:?}"
    );

    // 29 days on: still in the trash, restorable.
    p.clock.advance(29 * DAY);
    let trash = p.call("list_trash", json!({})).await.unwrap();
    assert_eq!(trash["items"].as_array().unwrap().len(), 2, "{trash}");

    // 30 days after the deletion: purged, with everything derived from the page and the task.
    p.clock.advance(DAY + 1);
    let trash = p.call("list_trash", json!({})).await.unwrap();
    assert_eq!(trash["items"], json!([]), "{trash}");
    let left = derived(&*p.store, &page, &plumber, &terms).await;
    // The other page's stem stays: it is live.
    assert_eq!(
        left,
        vec!["STEM#".to_owned() + &stem_of(&*p.store, &other).await],
        "{left:?}"
    );
    for (tool, args, what) in [
        ("restore_page", json!({ "page_id": page }), "page"),
        ("restore_task", json!({ "task_link_id": plumber }), "task"),
    ] {
        let error = p.call(tool, args).await.unwrap_err();
        assert!(
            error.contains(&format!("{what} "))
                && error.contains("not in the trash")
                && error.contains("purged"),
            "{tool}: {error}"
        );
    }
    let error = p
        .call("get_page", json!({ "page_id": page }))
        .await
        .unwrap_err();
    assert!(error.contains("not found"), "{error}");
    // Locally the sweep deletes the expired items for good: a handle on the same database
    // whose clock still reads the deletion day sees them until the next write sweeps.
    if let Some(early) = &p.early {
        let seen = derived(early, &page, &plumber, &terms).await;
        assert!(
            seen.contains(&format!("TRASH#P#{page}"))
                && seen.contains(&format!("TRASH#T#{plumber}")),
            "{seen:?}"
        );
    }
    // The file of the purged page imports as a new page (the first write after 30 days: it
    // sweeps).
    let again = import(
        &p.notebook,
        "2026-05-04",
        "## Tasks\n- [ ] Renew the passport\n",
    )
    .await;
    assert!(again.created && again.page_id.to_string() != page);
    if let Some(early) = &p.early {
        let seen = derived(early, &page, &plumber, &terms).await;
        assert!(
            !seen
                .iter()
                .any(|s| s.contains(&page) || s.contains(&plumber)),
            "swept: {seen:?}"
        );
        assert_eq!(
            early.sweep_expired().await.unwrap(),
            0,
            "nothing left to sweep"
        );
    }
}

/// The blind stem of `page` (its stem item's sort key suffix).
async fn stem_of(store: &dyn Store, page: &str) -> String {
    let q = nib::ports::Query::table("U#default", "STEM#");
    for item in store.query(&q).await.unwrap().items {
        let body: Value = serde_json::from_slice(&item.body).unwrap();
        if body["page_id"] == json!(page) {
            return item.sk.trim_start_matches("STEM#").to_owned();
        }
    }
    panic!("no stem for {page}");
}

#[tokio::test]
async fn items_purge_after_thirty_days_with_everything_derived_local() {
    purge_after_thirty_days(Backend::Local).await;
}

#[tokio::test]
async fn items_purge_after_thirty_days_with_everything_derived_aws() {
    purge_after_thirty_days(Backend::Aws).await;
}

/// Imports `md` with a PNG of the page (`{date}.md`, `{date}.png`), as `nib import` does.
async fn import_with_ink(notebook: &Notebook, date: &str, md: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{date}.md")), md).unwrap();
    std::fs::copy(
        sample_dir().join("2026-06-20.png"),
        dir.path().join(format!("{date}.png")),
    )
    .unwrap();
    let (pages, _) = nib::notebook::group_dir(dir.path()).unwrap();
    let user = UserId::parse("default").unwrap();
    let saved = notebook.import_files(&user, &pages[0]).await.unwrap();
    saved.page_id.to_string()
}

/// Locally a trashed page's image stays in the trash folder through the 30 days and the
/// page's purge, and the asset folder's own sweep deletes it a day after (ASSET_PURGE_DAYS):
/// by itself, with the first asset call an hour after the last sweep (here `get_page` of
/// another page with ink signing its URL).
#[tokio::test]
async fn a_purged_pages_images_are_swept_from_the_asset_folder_a_day_later_local() {
    let p = Purge::new(Backend::Local).await;
    let assets = p.local_assets.clone().unwrap();
    let page = import_with_ink(&p.notebook, "2026-05-04", "- Passport photos\n").await;
    let other = import_with_ink(&p.notebook, "2026-05-05", "- Plumber notes\n").await;
    let folder = p._dir.path().join("assets/u/default");
    let files = |sub: &str| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(folder.join(sub))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let mut both = vec![format!("{page}.png"), format!("{other}.png")];
    both.sort();
    assert_eq!(files("pages"), both);

    p.call("delete_page", json!({ "page_id": page }))
        .await
        .unwrap();
    let deleted_at = p.clock.unix();
    assert_eq!(files("pages"), vec![format!("{other}.png")]);
    assert_eq!(files("trash"), vec![format!("{page}.png.{deleted_at}")]);

    // The page purges after 30 days; its image stays a day longer.
    p.clock.advance(30 * DAY + 1);
    assert_eq!(
        p.call("list_trash", json!({})).await.unwrap()["items"],
        json!([])
    );
    assert_eq!(assets.sweep_trash().await.unwrap(), 0);
    assert_eq!(files("trash").len(), 1);

    // A day after the page: the first asset call sweeps it away, the live image stays.
    p.clock.advance(DAY);
    let shown = p
        .call("get_page", json!({ "page_id": other }))
        .await
        .unwrap();
    assert!(shown["png_url"].is_string(), "{shown}");
    assert_eq!(files("trash"), Vec::<String>::new());
    assert_eq!(files("pages"), vec![format!("{other}.png")]);
    assert_eq!(assets.sweep_trash().await.unwrap(), 0, "nothing left");
}

// ---- A restore inside a delete (both back ends) -------------------------------------------

/// The back end's asset store, whose first `trash` call stops once the real store has marked
/// the files, until the test lets it go: a restore then runs between a delete's mark and the
/// rest of that delete. No real failure opens that window on demand, hence the fake.
struct PausedAssets {
    inner: Arc<dyn Assets>,
    /// Taken by the first `trash` call, which waits on it twice: to say the files are marked,
    /// then to be let go.
    pause: std::sync::Mutex<Option<Arc<tokio::sync::Barrier>>>,
}

#[async_trait::async_trait]
impl Assets for PausedAssets {
    async fn put(
        &self,
        user: &UserId,
        page: &nib::domain::PageId,
        kind: nib::ports::AssetKind,
        bytes: Vec<u8>,
    ) -> Result<(), nib::ports::AssetsError> {
        self.inner.put(user, page, kind, bytes).await
    }

    async fn get(
        &self,
        user: &UserId,
        page: &nib::domain::PageId,
        kind: nib::ports::AssetKind,
    ) -> Result<Option<Vec<u8>>, nib::ports::AssetsError> {
        self.inner.get(user, page, kind).await
    }

    async fn signed_url(
        &self,
        user: &UserId,
        page: &nib::domain::PageId,
        kind: nib::ports::AssetKind,
        ttl_seconds: u64,
    ) -> Result<String, nib::ports::AssetsError> {
        self.inner.signed_url(user, page, kind, ttl_seconds).await
    }

    async fn trash(
        &self,
        user: &UserId,
        page: &nib::domain::PageId,
        kinds: &[nib::ports::AssetKind],
    ) -> Result<(), nib::ports::AssetsError> {
        self.inner.trash(user, page, kinds).await?;
        let pause = self.pause.lock().unwrap().take();
        if let Some(barrier) = pause {
            barrier.wait().await;
            barrier.wait().await;
        }
        Ok(())
    }

    async fn untrash(
        &self,
        user: &UserId,
        page: &nib::domain::PageId,
        kinds: &[nib::ports::AssetKind],
    ) -> Result<(), nib::ports::AssetsError> {
        self.inner.untrash(user, page, kinds).await
    }

    async fn delete_user(&self, user: &UserId) -> Result<u64, nib::ports::AssetsError> {
        self.inner.delete_user(user).await
    }
}

/// A `restore_page` that runs while a `delete_page` of the same page has marked its image but
/// not finished: whatever order the two end in, the image is as the page's record says
/// (marked while the page is in the trash, unmarked while it is live), never unmarked in the
/// trash (kept for good) nor marked on a live page (purged a day after 30).
async fn a_restore_inside_a_delete_leaves_the_images_as_the_record_says(backend: Backend) {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let pause = std::sync::Mutex::new(Some(barrier.clone()));
    let p = Purge::with_assets(backend, |inner| Arc::new(PausedAssets { inner, pause })).await;
    let page = import_with_ink(&p.notebook, "2026-05-04", "- Passport photos\n").await;
    let assets = p._dir.path().join("assets");
    assert_eq!(
        marks_in(&assets, p.aws_config.as_ref(), &page).await,
        [Mark::Missing, Mark::Live]
    );

    let deleting = tokio::spawn({
        let notebook = p.notebook.clone();
        let user = UserId::parse("default").unwrap();
        let id = nib::domain::PageId::parse(&page).unwrap();
        async move { notebook.trash_page(&user, &id).await }
    });
    barrier.wait().await; // the delete has marked the image and waits
    let restored = p
        .call("restore_page", json!({ "page_id": page }))
        .await
        .unwrap();
    barrier.wait().await; // the delete goes on
    let deleted = deleting.await.unwrap().unwrap();

    let record = p.call("get_page", json!({ "page_id": page })).await;
    let expected = match &record {
        Ok(_) => Mark::Live,
        Err(e) => {
            assert!(e.contains("is in the trash"), "{e}");
            Mark::Trashed
        }
    };
    assert_eq!(
        marks_in(&assets, p.aws_config.as_ref(), &page).await,
        [Mark::Missing, expected],
        "restore answered {restored}, delete {deleted:?}, the page: {record:?}"
    );
}

#[tokio::test]
async fn a_restore_inside_a_delete_leaves_the_images_as_the_record_says_local() {
    a_restore_inside_a_delete_leaves_the_images_as_the_record_says(Backend::Local).await;
}

#[tokio::test]
async fn a_restore_inside_a_delete_leaves_the_images_as_the_record_says_aws() {
    a_restore_inside_a_delete_leaves_the_images_as_the_record_says(Backend::Aws).await;
}

// ---- A crash between the steps of a delete and of a restore (AWS) ---------------------------

/// A page with more index terms than one transaction holds: its postings go in transactions of
/// their own, before a restore's transaction and after a delete's. DynamoDB failing right after
/// those posting transactions (the process gone, as far as the store can tell) leaves nothing
/// half done: the delete is done (leftover postings name a page that is not there), the restore
/// is not (the page is still in the trash, its rewritten postings not counted), and the next
/// restore brings back exactly what was there.
#[tokio::test]
async fn a_crash_between_the_steps_of_a_restore_leaves_nothing_half_done_on_aws() {
    use nib::adapters::aws::AwsClients;
    use nib_testkit::emulator::Faults;

    let config = emulator().await.fresh().await.unwrap();
    let faults = Faults::new();
    let clients = AwsClients::connect_with(&config, vec![faults.interceptor()]).await;
    let app = nib::services::Services::open_aws_with(config.clone(), clients)
        .await
        .unwrap();
    let app = TestApp::spawn_over(app, crate::helpers::Options::aws()).await;
    let words: Vec<String> = (0..150).map(|i| format!("- note{i:03} filed")).collect();
    let big = import(app.app.notebook(), "2026-07-01", &words.join("\n"))
        .await
        .page_id
        .to_string();
    let query = json!({ "query": "note042", "mode": "keyword" });
    let hits = app.call("search_pages", query.clone()).await;
    assert_eq!(page_ids(&hits, "results", "page_id"), vec![big.clone()]);
    let before = snapshot(&app).await;

    // Every transaction after the delete's own fails: its posting deletes are left over.
    let seen = Arc::new(AtomicI64::new(0));
    let after = |n: i64| {
        let seen = seen.clone();
        seen.store(0, Ordering::SeqCst);
        move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            if seen.fetch_add(1, Ordering::SeqCst) >= n {
                return Err("injected: the process is gone".into());
            }
            Ok(())
        }
    };
    // The access records of the calls so far go out now: a background flush of two of them
    // is a TransactWriteItems too, and would take the place the faults count on.
    app.app.notebook().access_log().flush().await.unwrap();
    faults.on("DynamoDB", "TransactWriteItems", after(1));
    let deleted = app.call("delete_page", json!({ "page_id": big })).await;
    assert_eq!(deleted["deleted"], true);
    faults.clear();
    let hits = app.call("search_pages", query.clone()).await;
    assert_eq!(
        hits["results"],
        json!([]),
        "leftover postings are skipped: {hits}"
    );
    let trashed = snapshot(&app).await;

    // The restore writes its postings (two transactions), then fails on its own transaction.
    app.app.notebook().access_log().flush().await.unwrap();
    faults.on("DynamoDB", "TransactWriteItems", after(2));
    let (status, body) = app
        .rpc(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "restore_page", "arguments": { "page_id": big } } }),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32603)),
        "{body}"
    );
    assert_eq!(
        seen.load(Ordering::SeqCst),
        3,
        "two posting transactions, then the failure"
    );
    faults.clear();
    assert_eq!(
        snapshot(&app).await,
        trashed,
        "nothing of the restore shows"
    );
    let error = app.call_error("get_page", json!({ "page_id": big })).await;
    assert!(error.contains("is in the trash"), "{error}");
    let trash = app.call("list_trash", json!({})).await;
    assert_eq!(page_ids(&trash, "items", "id"), vec![big.clone()]);

    // The next restore completes it.
    let restored = app.call("restore_page", json!({ "page_id": big })).await;
    assert_eq!(restored["restored"], true);
    assert_eq!(snapshot(&app).await, before);
    let hits = app.call("search_pages", query).await;
    assert_eq!(page_ids(&hits, "results", "page_id"), vec![big]);
}

/// The asset step of a delete and of a restore failing on S3 never leaves a live page's image
/// marked (it would be purged): a delete whose second image copy fails after its transaction
/// answers an error with the page in the trash, its first image marked and the second not (kept,
/// not lost), and `delete_page` again marks the second; a restore whose second unmark fails before its
/// transaction answers an error with the page still in the trash and both images marked again,
/// and the next `restore_page` brings back exactly what was there.
#[tokio::test]
async fn a_failed_image_step_of_a_delete_or_restore_never_leaves_a_live_pages_image_marked_on_aws()
{
    use nib::adapters::aws::AwsClients;
    use nib_testkit::emulator::Faults;

    let mut config = emulator().await.fresh().await.unwrap();
    let faults = Faults::new();
    let clients = AwsClients::connect_with(&config, vec![faults.interceptor()]).await;
    let app = nib::services::Services::open_aws_with(config.clone(), clients)
        .await
        .unwrap();
    let mut app = TestApp::spawn_over(app, crate::helpers::Options::aws()).await;
    config.public_url = Some(app.base.clone());
    app.aws_config = Some(config);
    let page = app.page_of("2026-06-19").await;
    let before = snapshot(&app).await;

    let nth_fails = |n: i64| {
        let seen = Arc::new(AtomicI64::new(0));
        move || -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == n {
                return Err("injected: S3 is unavailable".into());
            }
            Ok(())
        }
    };
    let internal_error = |tool: &str| {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": { "page_id": page } } })
    };
    faults.on("S3", "CopyObject", nth_fails(2));
    let (status, body) = app.rpc(internal_error("delete_page")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32603)),
        "{body}"
    );
    faults.clear();
    let error = app.call_error("get_page", json!({ "page_id": page })).await;
    assert!(error.contains("is in the trash"), "{error}");
    assert_eq!(image_marks(&app, &page).await, [Mark::Trashed, Mark::Live]);
    let again = app.call("delete_page", json!({ "page_id": page })).await;
    assert_eq!(again["deleted"], false, "the page was in the trash already");
    assert_eq!(
        image_marks(&app, &page).await,
        [Mark::Trashed, Mark::Trashed]
    );

    faults.on("S3", "CopyObject", nth_fails(2));
    let (status, body) = app.rpc(internal_error("restore_page")).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (200, &json!(-32603)),
        "{body}"
    );
    faults.clear();
    let error = app.call_error("get_page", json!({ "page_id": page })).await;
    assert!(error.contains("is in the trash"), "{error}");
    assert_eq!(
        image_marks(&app, &page).await,
        [Mark::Trashed, Mark::Trashed]
    );
    let again = app.call("restore_page", json!({ "page_id": page })).await;
    assert_eq!(again["restored"], true, "{again}");
    assert_eq!(image_marks(&app, &page).await, [Mark::Live, Mark::Live]);
    assert_eq!(snapshot(&app).await, before);
}

/// An upload of a trashed page's file on AWS: ingest leaves the page in the trash and rejects
/// the upload (not an error, so Lambda does not retry it), naming restore_page.
#[tokio::test]
async fn an_upload_of_a_trashed_pages_file_is_rejected_by_ingest() {
    use nib::adapters::aws::AwsClients;
    use nib::functions::ingest::{Ingest, IngestOutcome};

    let app = TestApp::spawn_with(crate::helpers::Options::aws()).await;
    let config = app.aws_config.clone().unwrap();
    let page = app.page_of("2026-06-16").await;
    app.call("delete_page", json!({ "page_id": page })).await;
    let clients = AwsClients::connect(&config).await;
    let key = "uploads/default/2026-06-16.md";
    let md = std::fs::read(sample_dir().join("2026-06-16.md")).unwrap();
    clients
        .s3
        .put_object()
        .bucket(&config.bucket)
        .key(key)
        .body(md.into())
        .send()
        .await
        .unwrap();
    let ingest = Ingest::new(
        app.app.notebook().clone(),
        clients.s3.clone(),
        &config.bucket,
    );
    match ingest.object(&config.bucket, key).await.unwrap() {
        IngestOutcome::Rejected(failure) => assert!(
            failure.reason.contains("is in the trash") && failure.reason.contains("restore_page"),
            "{failure}"
        ),
        other => panic!("{other:?}"),
    }
    let error = app.call_error("get_page", json!({ "page_id": page })).await;
    assert!(error.contains("is in the trash"), "{error}");
}
