//! Notion push (issue 16) against `nib_testkit::notion_standin`, a local server that follows
//! Notion's documented request and response shapes (the real Notion is not reachable here):
//! connect and map, push on create over MCP, status updates, no double push (concurrent
//! creates, a sync outlasting a lease, a page created but not linked), the outbox after an
//! outage and under rate limiting, errors in `nib notion status`, and the token never in any
//! output, log line or the store file. The push tests run over both back ends.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use nib::adapters::notion::{Mapping, NotionApi, NotionError, NotionToken, StatusMapping};
use nib::domain::{Date, UserId};
use nib::notebook::{Notebook, NotebookError};
use nib::ports::Clock;
use nib::services::{LocalOptions, Services};
use nib_testkit::emulator::Faults;
use nib_testkit::notion_standin::{Mode, NotionStandin};
use serde_json::{Value, json};

use crate::helpers::{Backend, Options, TestApp, emulator, nib_exe};

/// The integration token the stand-in accepts. Searched for in every output.
const TOKEN: &str = "ntn_standin_4815162342_SECRET_token";

/// A clock that moves only when the test says (unix seconds), from the real time at its start.
struct TestClock(AtomicI64);

impl Default for TestClock {
    fn default() -> Self {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        TestClock(AtomicI64::new(now as i64))
    }
}

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

fn token() -> NotionToken {
    NotionToken::parse(TOKEN).unwrap()
}

fn user() -> UserId {
    UserId::parse("default").unwrap()
}

/// The app's notebook again, on `clock` and pushing to `api_url`.
fn rewire(app: &mut Services, clock: Arc<TestClock>, api_url: &str) {
    let notebook = Notebook::new(
        app.store.clone(),
        app.vault().clone(),
        app.assets.clone(),
        clock,
        app.notebook().config().clone(),
    )
    .with_notion(NotionApi::new(api_url));
    app.replace_notebook(notebook);
}

struct Env {
    app: TestApp,
    notion: NotionStandin,
    clock: Arc<TestClock>,
    db: String,
    _data: tempfile::TempDir,
}

impl Env {
    /// A server over `backend` whose default user connected the stand-in's task database.
    async fn new(backend: Backend) -> Env {
        Env::open(backend, None).await
    }

    /// [`Env::new`] over AWS, its clients carrying `faults`.
    async fn aws_with_faults(faults: &Faults) -> Env {
        Env::open(Backend::Aws, Some(faults)).await
    }

    async fn open(backend: Backend, faults: Option<&Faults>) -> Env {
        let notion = NotionStandin::start(TOKEN).await.unwrap();
        let db = notion.add_task_database();
        let data = tempfile::tempdir().unwrap();
        let mut app = match backend {
            Backend::Local => Services::open_local(data.path(), LocalOptions::default()).unwrap(),
            Backend::Aws => {
                let config = emulator().await.fresh().await.unwrap();
                match faults {
                    Some(faults) => {
                        let clients = nib::adapters::aws::AwsClients::connect_with(
                            &config,
                            vec![faults.interceptor()],
                        )
                        .await;
                        Services::open_aws_with(config, clients).await.unwrap()
                    }
                    None => Services::open_aws(config).await.unwrap(),
                }
            }
            Backend::Lambda => unreachable!("not over the functions"),
        };
        let clock = Arc::new(TestClock::default());
        rewire(&mut app, clock.clone(), &notion.url);
        app.ensure_user(&user()).await.unwrap();
        app.notebook()
            .notion_connect(&user(), &db, token())
            .await
            .unwrap();
        let app = TestApp::spawn_over(
            app,
            Options {
                import_sample: false,
                ..Options::default()
            },
        )
        .await;
        assert_eq!(app.backend, backend);
        Env {
            app,
            notion,
            clock,
            db,
            _data: data,
        }
    }

    /// A tool call over MCP that must succeed; its answer never holds the token.
    async fn call(&self, tool: &str, args: Value) -> Value {
        let out = self.app.call(tool, args).await;
        assert!(
            !out.to_string().contains(TOKEN),
            "{tool} answered the token"
        );
        out
    }

    async fn create(&self, date: &str, text: &str) -> Value {
        self.call("create_task", json!({ "target_date": date, "text": text }))
            .await
    }

    /// How many requests of `method` on pages (`/v1/pages...`) the stand-in received.
    fn requests(&self, method: &str) -> usize {
        self.notion
            .requests()
            .iter()
            .filter(|r| r.method == method && r.path.starts_with("/v1/pages"))
            .count()
    }

    /// The stand-in's page with this id.
    fn page(&self, id: &Value) -> Value {
        self.notion
            .page(id.as_str().expect("a page id"))
            .expect("the page exists in Notion")
    }

    async fn status(&self) -> nib::notebook::NotionStatus {
        self.app
            .app
            .notebook()
            .notion_status(&user())
            .await
            .unwrap()
            .expect("connected")
    }

    async fn task_urls(&self) -> Vec<Value> {
        let tasks = self.call("list_tasks", json!({ "status": "all" })).await;
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["notion_url"].clone())
            .collect()
    }
}

fn status_name(page: &Value) -> &str {
    page["properties"]["Status"]["status"]["name"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn connect_maps_the_database_and_refuses_one_it_cannot_map() {
    let notion = NotionStandin::start(TOKEN).await.unwrap();
    let db = notion.add_task_database();
    let data = tempfile::tempdir().unwrap();
    let mut app = Services::open_local(data.path(), LocalOptions::default()).unwrap();
    rewire(&mut app, Arc::new(TestClock::default()), &notion.url);
    app.ensure_user(&user()).await.unwrap();
    let nb = app.notebook();

    let mapping = nb.notion_connect(&user(), &db, token()).await.unwrap();
    assert_eq!(
        mapping,
        Mapping {
            title: "Name".into(),
            status: StatusMapping::Status {
                property: "Status".into(),
                todo: "Not started".into(),
                done: "Done".into(),
                cancelled: "Done".into(),
            },
            date: Some("Date".into()),
            url: Some("URL".into()),
            task_id: Some("nib id".into()),
        }
    );
    // The documented requests: GET /v1/databases/{id}, bearer token, API version; then,
    // the database having no `nib id` property, PATCH /v1/databases/{id} adds it.
    let requests = notion.requests();
    assert_eq!(requests.len(), 2);
    let req = &requests[0];
    assert_eq!(req.method, "GET");
    assert_eq!(req.path, format!("/v1/databases/{db}"));
    assert_eq!(
        req.authorization.as_deref(),
        Some(&*format!("Bearer {TOKEN}"))
    );
    assert_eq!(req.notion_version.as_deref(), Some("2022-06-28"));
    let req = &requests[1];
    assert_eq!(
        (req.method.as_str(), &*req.path),
        ("PATCH", &*format!("/v1/databases/{db}"))
    );
    assert_eq!(
        req.body,
        json!({ "properties": { "nib id": { "rich_text": {} } } })
    );
    // Connecting again finds the property: nothing more is added.
    let again = nb.notion_connect(&user(), &db, token()).await.unwrap();
    assert_eq!(again, mapping);
    assert_eq!(notion.requests().len(), 3);
    let status = nb.notion_status(&user()).await.unwrap().unwrap();
    assert_eq!(status.database_id, db);
    assert_eq!(status.pending, 0);
    assert!(status.last_error.is_none());

    // A database without a status or checkbox property is refused, naming what is missing.
    let notes = notion.add_database(json!({
        "Title": { "type": "title", "title": {} },
        "Notes": { "type": "rich_text", "rich_text": {} }
    }));
    let e = nb
        .notion_connect(&user(), &notes, token())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NotebookError::Notion(NotionError::Unmappable(m)) if m.contains("status") && m.contains("checkbox")),
        "{e}"
    );
    // A status property without a to-do option is refused by name.
    let stages = notion.add_database(json!({
        "Title": { "type": "title", "title": {} },
        "Stage": { "type": "status", "status": {
            "options": [{ "id": "a", "name": "Waiting" }],
            "groups": [{ "id": "g", "name": "In progress", "option_ids": ["a"] }] } }
    }));
    let e = nb
        .notion_connect(&user(), &stages, token())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("'Stage'"), "{e}");
    // Notion's errors come through by kind, with Notion's own message.
    let e = nb
        .notion_connect(&user(), &db, NotionToken::parse("ntn_wrong").unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NotebookError::Notion(NotionError::Unauthorized { code, message }) if code == "unauthorized" && message == "API token is invalid."),
        "{e:?}"
    );
    let unknown = "0123456789abcdef0123456789abcdef";
    let e = nb
        .notion_connect(&user(), unknown, token())
        .await
        .unwrap_err();
    assert!(
        matches!(&e, NotebookError::Notion(NotionError::NotFound { code, .. }) if code == "object_not_found"),
        "{e:?}"
    );
    // Something that is not an id never reaches Notion.
    let sent = notion.requests().len();
    let e = nb
        .notion_connect(&user(), "../../v1/users", token())
        .await
        .unwrap_err();
    assert!(
        matches!(e, NotebookError::Notion(NotionError::BadId(_))),
        "{e:?}"
    );
    assert_eq!(notion.requests().len(), sent);
    // The refusals left the first connection in place.
    let status = nb.notion_status(&user()).await.unwrap().unwrap();
    assert_eq!(status.database_id, db);
}

/// Create pushes a page with the mapped properties; get_page and list_tasks carry its URL; a
/// reused task is not pushed again; status changes reach the status property.
async fn push_on_create_and_update(backend: Backend) {
    let env = Env::new(backend).await;
    let created = env
        .call(
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "Draft the launch post", "source_url": "https://example.com/thread/1" }),
        )
        .await;
    assert_eq!(created["created"], true);
    assert_eq!(created["notion_pushed"], true, "{created}");
    let page = env.page(&created["notion_task_id"]);
    assert_eq!(created["notion_url"], page["url"]);
    assert!(
        page["url"]
            .as_str()
            .unwrap()
            .starts_with("https://www.notion.so/")
    );
    assert_eq!(page["parent"]["database_id"], json!(env.db));
    let props = &page["properties"];
    assert_eq!(
        props["Name"]["title"][0]["text"]["content"],
        "Draft the launch post"
    );
    assert_eq!(status_name(&page), "Not started");
    assert_eq!(props["Date"]["date"]["start"], "2026-06-20");
    assert_eq!(props["URL"]["url"], "https://example.com/thread/1");
    assert_eq!(
        props["nib id"]["rich_text"][0]["text"]["content"],
        created["task_link_id"]
    );

    // The line showing the task and the task itself carry the URL.
    let shown = env
        .call("get_page", json!({ "page_id": created["page_id"] }))
        .await;
    let line = shown["structure_json"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["line_id"] == created["block_id"])
        .unwrap()
        .clone();
    assert_eq!(line["notion_url"], page["url"]);
    assert_eq!(env.task_urls().await, vec![page["url"].clone()]);

    // The same text again: the task is reused, and not pushed twice.
    let again = env.create("2026-06-21", "draft the launch post").await;
    assert_eq!(again["reused_existing_task"], true);
    assert_eq!(again["task_link_id"], created["task_link_id"]);
    assert_eq!(again["notion_pushed"], true);
    assert_eq!(again["notion_task_id"], created["notion_task_id"]);
    assert_eq!(env.notion.pages().len(), 1);
    assert_eq!(env.requests("POST"), 1);

    // Status changes update the page's status property.
    let id = created["task_link_id"].clone();
    let done = env
        .call(
            "update_task_status",
            json!({ "task_link_id": id, "status": "done" }),
        )
        .await;
    assert_eq!(done["notion_updated"], true, "{done}");
    assert_eq!(status_name(&env.page(&created["notion_task_id"])), "Done");
    let patch = env.notion.requests().pop().unwrap();
    assert_eq!(patch.method, "PATCH");
    assert_eq!(
        patch.path,
        format!("/v1/pages/{}", created["notion_task_id"].as_str().unwrap())
    );
    assert_eq!(
        patch.body,
        json!({ "properties": { "Status": { "status": { "name": "Done" } } } })
    );
    // The status it has already: nothing sent.
    let same = env
        .call(
            "update_task_status",
            json!({ "task_link_id": id, "status": "done" }),
        )
        .await;
    assert_eq!(same["notion_updated"], false);
    assert_eq!(env.requests("PATCH"), 1);
    let reopened = env
        .call(
            "update_task_status",
            json!({ "task_link_id": id, "status": "todo" }),
        )
        .await;
    assert_eq!(reopened["notion_updated"], true);
    assert_eq!(
        status_name(&env.page(&created["notion_task_id"])),
        "Not started"
    );
    // Every request carried the token, and only in its header.
    for r in env.notion.requests() {
        assert_eq!(
            r.authorization.as_deref(),
            Some(&*format!("Bearer {TOKEN}"))
        );
        assert!(!r.body.to_string().contains(TOKEN));
    }
}

#[tokio::test]
async fn create_task_pushes_a_page_and_status_changes_update_it() {
    push_on_create_and_update(Backend::Local).await;
}

#[tokio::test]
async fn create_task_pushes_a_page_and_status_changes_update_it_over_aws() {
    push_on_create_and_update(Backend::Aws).await;
}

#[tokio::test]
async fn a_checkbox_database_is_ticked_when_the_task_is_done() {
    let env = Env::new(Backend::Local).await;
    let db = env.notion.add_database(json!({
        "Task": { "type": "title", "title": {} },
        "Done": { "type": "checkbox", "checkbox": {} }
    }));
    env.app
        .app
        .notebook()
        .notion_connect(&user(), &db, token())
        .await
        .unwrap();
    let created = env.create("2026-06-20", "Water the plants").await;
    let page = env.page(&created["notion_task_id"]);
    assert_eq!(page["properties"]["Done"]["checkbox"], false);
    assert_eq!(page["parent"]["database_id"], json!(db));
    let done = env
        .call(
            "update_task_status",
            json!({ "task_link_id": created["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(done["notion_updated"], true);
    let page = env.page(&created["notion_task_id"]);
    assert_eq!(page["properties"]["Done"]["checkbox"], true);
}

#[tokio::test]
async fn a_hundred_concurrent_identical_creates_push_one_page() {
    let env = Env::new(Backend::Local).await;
    let calls = (0..100).map(|_| env.create("2026-06-22", "Book the venue"));
    let answers = futures::future::join_all(calls).await;
    let created: Vec<_> = answers.iter().filter(|a| a["created"] == true).collect();
    assert_eq!(created.len(), 1);
    assert!(
        answers
            .iter()
            .all(|a| a["task_link_id"] == created[0]["task_link_id"])
    );
    assert_eq!(env.notion.pages().len(), 1);
    assert_eq!(env.requests("POST"), 1);
    assert_eq!(created[0]["notion_pushed"], true);
    // Any answer that names a page names that one.
    for a in &answers {
        if a["notion_pushed"] == true {
            assert_eq!(a["notion_task_id"], created[0]["notion_task_id"]);
        }
    }
    assert_eq!(env.status().await.pending, 0);
}

/// During an outage the task is created and waits in the outbox; once the backoff has passed,
/// the next call pushes it (and its own task); `nib notion sync` pushes at once.
async fn outbox_after_an_outage(env: &Env) {
    env.notion.set_mode(Mode::Outage);
    let a = env.create("2026-06-23", "Renew the lease").await;
    assert_eq!(a["created"], true);
    assert_eq!(a["notion_pushed"], false);
    assert_eq!(a["notion_task_id"], Value::Null);
    assert_eq!(a["notion_url"], Value::Null);
    let status = env.status().await;
    assert_eq!(status.pending, 1);
    let (_, kind, message) = status.last_error.clone().unwrap();
    assert_eq!(kind, "unavailable");
    assert!(message.contains("503"), "{message}");
    assert!(status.backoff_until.is_some());

    // Notion is back, but the backoff has not passed: no request.
    env.notion.set_mode(Mode::Normal);
    let sent = env.notion.requests().len();
    let b = env.create("2026-06-23", "Call the plumber").await;
    assert_eq!(b["notion_pushed"], false);
    assert_eq!(env.notion.requests().len(), sent);
    assert_eq!(env.status().await.pending, 2);

    // After it, the next call pushes its task and drains the outbox.
    env.clock.advance(10);
    let c = env.create("2026-06-23", "Pay the invoice").await;
    assert_eq!(c["notion_pushed"], true);
    assert_eq!(env.notion.pages().len(), 3);
    assert_eq!(env.status().await.pending, 0);
    assert!(env.task_urls().await.iter().all(Value::is_string));

    // sync pushes at once, backoff or not.
    env.notion.set_mode(Mode::Outage);
    let d = env.create("2026-06-24", "Send the contract").await;
    assert_eq!(d["notion_pushed"], false);
    env.notion.set_mode(Mode::Normal);
    let report = env.app.app.notebook().notion_sync(&user()).await.unwrap();
    assert_eq!((report.created, report.failed, report.pending), (1, 0, 0));
    assert_eq!(env.notion.pages().len(), 4);
    // Pushed once each: one page per task.
    let mut titles: Vec<String> = env
        .notion
        .pages()
        .iter()
        .map(|p| {
            p["properties"]["Name"]["title"][0]["text"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    titles.sort();
    assert_eq!(
        titles,
        [
            "Call the plumber",
            "Pay the invoice",
            "Renew the lease",
            "Send the contract"
        ]
    );
}

#[tokio::test]
async fn a_task_created_during_an_outage_is_pushed_later_from_the_outbox() {
    outbox_after_an_outage(&Env::new(Backend::Local).await).await;
}

#[tokio::test]
async fn a_task_created_during_an_outage_is_pushed_later_from_the_outbox_over_aws() {
    outbox_after_an_outage(&Env::new(Backend::Aws).await).await;
}

#[tokio::test]
async fn a_rate_limited_push_waits_for_retry_after() {
    let env = Env::new(Backend::Local).await;
    env.notion.set_mode(Mode::RateLimited(120));
    let a = env.create("2026-06-23", "Renew the lease").await;
    assert_eq!(a["notion_pushed"], false);
    let status = env.status().await;
    assert_eq!(status.last_error.unwrap().1, "rate_limited");
    let until = status.retry_after_until.unwrap();
    assert_eq!(until, env.clock.unix() + 120);

    // Not even sync calls Notion before Retry-After has passed.
    env.notion.set_mode(Mode::Normal);
    let sent = env.notion.requests().len();
    let report = env.app.app.notebook().notion_sync(&user()).await.unwrap();
    assert_eq!(report.retry_after_until, Some(until));
    assert_eq!((report.created, report.pending), (0, 1));
    env.clock.advance(60);
    let b = env.create("2026-06-23", "Call the plumber").await;
    assert_eq!(b["notion_pushed"], false);
    let d = env
        .call(
            "update_task_status",
            json!({ "task_link_id": a["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(d["notion_updated"], false);
    assert_eq!(env.notion.requests().len(), sent);

    // Once it has, the next call pushes everything, each task with its current status.
    env.clock.advance(61);
    let c = env.create("2026-06-23", "Pay the invoice").await;
    assert_eq!(c["notion_pushed"], true);
    assert_eq!(env.notion.pages().len(), 3);
    assert_eq!(env.status().await.pending, 0);
    let lease = env
        .notion
        .pages()
        .into_iter()
        .find(|p| p["properties"]["Name"]["title"][0]["text"]["content"] == "Renew the lease")
        .unwrap();
    assert_eq!(status_name(&lease), "Done");
}

/// The titles of the stand-in's pages, sorted: one per task pushed once.
fn page_titles(notion: &NotionStandin) -> Vec<String> {
    let mut titles: Vec<String> = notion
        .pages()
        .iter()
        .map(|p| {
            p["properties"]["Name"]["title"][0]["text"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    titles.sort();
    titles
}

/// `nib notion sync` has no time bound, so each item is claimed at the clock's time then:
/// with the clock moved 61 s while Notion creates the first of two pages, the second item's
/// lease still runs a full minute from its claim, and a `create_task` whose drain runs while
/// that page is being created leaves it alone instead of pushing it a second time.
async fn sync_outlasting_a_lease(backend: Backend) {
    let env = Env::new(backend).await;
    env.notion.set_mode(Mode::Outage);
    env.create("2026-06-23", "Renew the lease").await;
    env.create("2026-06-23", "Call the plumber").await;
    env.notion.set_mode(Mode::Normal);
    assert_eq!(env.status().await.pending, 2);
    let refused = env.requests("POST");

    let clock = env.clock.clone();
    let notebook = env.app.app.notebook().clone();
    env.notion.on_create_page(move |n| {
        let clock = clock.clone();
        let notebook = notebook.clone();
        async move {
            match n {
                // Notion takes its time over the first page.
                1 => clock.advance(61),
                // A tool call of the same user meanwhile: it pushes its own task and drains.
                2 => {
                    let (created, _) = notebook
                        .create_task_pushed(
                            &user(),
                            Date::parse("2026-06-24").unwrap(),
                            "Pay the invoice",
                            None,
                        )
                        .await
                        .unwrap();
                    assert!(created.created);
                }
                _ => {}
            }
        }
    });
    let report = env.app.app.notebook().notion_sync(&user()).await.unwrap();
    env.notion.clear_create_hook();
    assert_eq!((report.created, report.failed, report.pending), (2, 0, 0));
    assert_eq!(
        page_titles(&env.notion),
        ["Call the plumber", "Pay the invoice", "Renew the lease"]
    );
    assert_eq!(env.requests("POST") - refused, 3);
    // Each task links its own page.
    let mut urls: Vec<Value> = env
        .notion
        .pages()
        .iter()
        .map(|p| p["url"].clone())
        .collect();
    let mut linked = env.task_urls().await;
    urls.sort_by_key(Value::to_string);
    linked.sort_by_key(Value::to_string);
    assert_eq!(linked, urls);
}

#[tokio::test]
async fn a_sync_outlasting_a_lease_pushes_each_task_once() {
    sync_outlasting_a_lease(Backend::Local).await;
}

#[tokio::test]
async fn a_sync_outlasting_a_lease_pushes_each_task_once_over_aws() {
    sync_outlasting_a_lease(Backend::Aws).await;
}

/// Notion created the page but nib could not write the link (DynamoDB failing right then):
/// once the lease has run out, the retry finds that page by its `nib id`, links it and brings
/// it to the task's status, instead of creating a second page. Over AWS only: the store's
/// failure is injected into its client (redb has no such seam).
#[tokio::test]
async fn a_page_created_but_not_linked_is_found_again_not_pushed_twice_over_aws() {
    let faults = Faults::new();
    let env = Env::aws_with_faults(&faults).await;
    let hook_faults = faults.clone();
    env.notion.on_create_page(move |_| {
        let faults = hook_faults.clone();
        async move { faults.fail("DynamoDB", "TransactWriteItems") }
    });
    let a = env.create("2026-06-23", "Renew the lease").await;
    faults.clear();
    env.notion.clear_create_hook();
    assert_eq!(a["created"], true);
    assert_eq!(a["notion_pushed"], false, "{a}");
    assert_eq!(env.notion.pages().len(), 1);
    assert_eq!(env.task_urls().await, vec![Value::Null]);
    assert_eq!(env.status().await.pending, 1);

    // Done meanwhile: the task has no page linked, so the status goes with the push.
    let d = env
        .call(
            "update_task_status",
            json!({ "task_link_id": a["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(d["notion_updated"], false);
    // Within the lease of the call that created the page, nothing is retried.
    let report = env.app.app.notebook().notion_sync(&user()).await.unwrap();
    assert_eq!((report.created, report.pending), (0, 1));

    env.clock.advance(61);
    let report = env.app.app.notebook().notion_sync(&user()).await.unwrap();
    assert_eq!((report.created, report.failed, report.pending), (1, 0, 0));
    assert_eq!(env.notion.pages().len(), 1);
    assert_eq!(env.requests("POST"), 1);
    let page = env.notion.pages().pop().unwrap();
    assert_eq!(env.task_urls().await, vec![page["url"].clone()]);
    assert_eq!(status_name(&page), "Done");
    let query = env
        .notion
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/query"))
        .expect("a query for the task's page");
    assert_eq!(query.path, format!("/v1/databases/{}/query", env.db));
    assert_eq!(
        query.body["filter"],
        json!({ "property": "nib id", "rich_text": { "equals": a["task_link_id"] } })
    );
}

#[tokio::test]
async fn a_status_change_during_an_outage_reaches_notion_later() {
    let env = Env::new(Backend::Local).await;
    let a = env.create("2026-06-23", "Renew the lease").await;
    assert_eq!(a["notion_pushed"], true);
    env.notion.set_mode(Mode::Outage);
    let d = env
        .call(
            "update_task_status",
            json!({ "task_link_id": a["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(d["updated"], true);
    assert_eq!(d["notion_updated"], false);
    assert_eq!(env.status().await.pending, 1);
    env.notion.set_mode(Mode::Normal);
    // Once the backoff has passed, the next call (here the same update again, which changes
    // nothing in nib) brings the page up to date.
    env.clock.advance(10);
    let again = env
        .call(
            "update_task_status",
            json!({ "task_link_id": a["task_link_id"], "status": "done" }),
        )
        .await;
    // The page was brought up to date by this call: it says so (issue 48 item 14).
    assert_eq!(again["notion_updated"], true);
    assert_eq!(status_name(&env.page(&a["notion_task_id"])), "Done");
    assert_eq!(env.status().await.pending, 0);

    // And sync, at once.
    env.notion.set_mode(Mode::Outage);
    env.call(
        "update_task_status",
        json!({ "task_link_id": a["task_link_id"], "status": "todo" }),
    )
    .await;
    env.notion.set_mode(Mode::Normal);
    let report = env.app.app.notebook().notion_sync(&user()).await.unwrap();
    assert_eq!((report.updated, report.pending), (1, 0));
    assert_eq!(status_name(&env.page(&a["notion_task_id"])), "Not started");
    assert_eq!(env.notion.pages().len(), 1);
}

#[tokio::test]
async fn a_page_deleted_in_notion_fails_alone() {
    let env = Env::new(Backend::Local).await;
    let a = env.create("2026-06-23", "Renew the lease").await;
    env.notion
        .remove_page(a["notion_task_id"].as_str().unwrap());
    let d = env
        .call(
            "update_task_status",
            json!({ "task_link_id": a["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(d["notion_updated"], false);
    let status = env.status().await;
    let (_, kind, message) = status.last_error.unwrap();
    assert_eq!(kind, "not_found");
    assert!(message.contains("Could not find page"), "{message}");
    // That page's 404 does not hold back the others.
    assert_eq!(status.backoff_until, None);
    let b = env.create("2026-06-23", "Call the plumber").await;
    assert_eq!(b["notion_pushed"], true);
}

#[tokio::test]
async fn a_revoked_token_is_shown_and_holds_pushes_back() {
    let env = Env::new(Backend::Local).await;
    env.notion.set_token("ntn_a_new_one");
    let a = env.create("2026-06-23", "Renew the lease").await;
    assert_eq!(a["created"], true);
    assert_eq!(a["notion_pushed"], false);
    let status = env.status().await;
    let (_, kind, message) = status.last_error.unwrap();
    assert_eq!(kind, "unauthorized");
    assert!(message.contains("API token is invalid."), "{message}");
    assert_eq!(status.backoff_until, Some(env.clock.unix() + 3600));
    // Nothing more is sent with a token Notion refused until the hour has passed.
    let sent = env.notion.requests().len();
    env.create("2026-06-23", "Call the plumber").await;
    assert_eq!(env.notion.requests().len(), sent);
    assert_eq!(env.status().await.pending, 2);
}

/// As deployed: `create_task` and `update_task_status` reach the tasks function through the
/// mcp front, and the tasks function calls Notion.
#[tokio::test]
async fn through_the_lambda_functions_the_tasks_function_pushes() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.clone().unwrap();
    let db = stack.notion.add_task_database();
    // Connect as `nib notion connect --backend aws` does, over the same table.
    let connector = Notebook::new(
        app.app.store.clone(),
        app.app.vault().clone(),
        app.app.assets.clone(),
        app.app.clock.clone(),
        app.app.notebook().config().clone(),
    )
    .with_notion(NotionApi::new(&stack.notion.url));
    connector
        .notion_connect(
            &user(),
            &db,
            NotionToken::parse(crate::lambda::NOTION_TOKEN).unwrap(),
        )
        .await
        .unwrap();
    let created = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "Draft the launch post" }),
        )
        .await;
    assert_eq!(created["notion_pushed"], true, "{created}");
    let page = stack
        .notion
        .page(created["notion_task_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(created["notion_url"], page["url"]);
    let done = app
        .call(
            "update_task_status",
            json!({ "task_link_id": created["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(done["notion_updated"], true);
    let page = stack
        .notion
        .page(created["notion_task_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(status_name(&page), "Done");
    assert!(!created.to_string().contains(crate::lambda::NOTION_TOKEN));
}

fn nib(data: &std::path::Path, notion: &NotionStandin) -> Command {
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir")
        .arg(data)
        .env("NIB_NOTION_API_URL", &notion.url)
        .env("RUST_LOG", "trace")
        .env_remove("NIB_NOTION_TOKEN")
        .stdin(Stdio::null());
    c
}

/// Runs `nib` off the runtime's threads (the stand-in answers on them); returns exit success,
/// stdout and stderr, having checked neither holds the token.
async fn run(mut cmd: Command, stdin: Option<&str>) -> (bool, String, String) {
    let stdin = stdin.map(str::to_owned);
    let out = tokio::task::spawn_blocking(move || {
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(s) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stdout.contains(TOKEN), "the token in stdout: {stdout}");
    assert!(!stderr.contains(TOKEN), "the token in a log line: {stderr}");
    (out.status.success(), stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notion_commands_connect_show_errors_and_sync_without_showing_the_token() {
    let notion = NotionStandin::start(TOKEN).await.unwrap();
    let db = notion.add_task_database();
    let data = tempfile::tempdir().unwrap();

    // A wrong token: refused with Notion's message.
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "connect", "--database", &db])
        .env("NIB_NOTION_TOKEN", "ntn_wrong");
    let (ok, _, stderr) = run(cmd, None).await;
    assert!(!ok);
    assert!(stderr.contains("API token is invalid."), "{stderr}");
    // The token on stdin.
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "connect", "--database", &db]);
    let (ok, stdout, stderr) = run(cmd, Some(&format!("{TOKEN}\n"))).await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("status -> 'Status'"), "{stdout}");

    // Notion's schema changes under nib: the push fails validation.
    notion.rename_property(&db, "Status", "Stage");
    {
        let mut app = Services::open_local(data.path(), LocalOptions::default()).unwrap();
        let notebook = Notebook::new(
            app.store.clone(),
            app.vault().clone(),
            app.assets.clone(),
            app.clock.clone(),
            app.notebook().config().clone(),
        )
        .with_notion(NotionApi::new(&notion.url));
        app.replace_notebook(notebook);
        let (created, pushed) = app
            .notebook()
            .create_task_pushed(
                &user(),
                nib::domain::Date::parse("2026-06-20").unwrap(),
                "Draft the launch post",
                None,
            )
            .await
            .unwrap();
        assert!(created.created);
        assert!(!pushed.pushed);
    }
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "status"]);
    let (ok, stdout, _) = run(cmd, None).await;
    assert!(ok);
    assert!(stdout.contains(&format!("database:   {db}")), "{stdout}");
    assert!(
        stdout.contains("validation") && stdout.contains("Status is not a property that exists."),
        "{stdout}"
    );
    assert!(stdout.contains("pending:    1 task(s)"), "{stdout}");

    // Connecting again maps the renamed property; sync pushes what waited.
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "connect", "--database", &db])
        .env("NIB_NOTION_TOKEN", TOKEN);
    let (ok, stdout, _) = run(cmd, None).await;
    assert!(ok);
    assert!(stdout.contains("status -> 'Stage'"), "{stdout}");
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "sync"]);
    let (ok, stdout, stderr) = run(cmd, None).await;
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("created 1,"), "{stdout}");
    assert_eq!(notion.pages().len(), 1);
    assert_eq!(
        notion.pages()[0]["properties"]["Stage"]["status"]["name"],
        "Not started"
    );
    assert_token_not_stored(data.path());

    // `nib serve` pushes on create_task and update_task_status; its logs (at trace) never
    // hold the token.
    let (created, done, logs) = serve_and_push(data.path(), &notion).await;
    assert_eq!(created["notion_pushed"], true, "{created}");
    assert_eq!(done["notion_updated"], true, "{done}");
    assert!(!created.to_string().contains(TOKEN) && !done.to_string().contains(TOKEN));
    assert!(logs.contains("task pushed to notion"), "{logs}");
    assert!(
        !logs.contains(TOKEN),
        "the token in a log line of nib serve"
    );
    assert_eq!(notion.pages().len(), 2);

    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "disconnect"]);
    let (ok, stdout, _) = run(cmd, None).await;
    assert!(ok);
    assert!(stdout.contains("disconnected"), "{stdout}");
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "status"]);
    let (_, stdout, _) = run(cmd, None).await;
    assert!(stdout.contains("no Notion database connected"), "{stdout}");

    assert_token_not_stored(data.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notion_commands_work_on_the_aws_back_end() {
    let notion = NotionStandin::start(TOKEN).await.unwrap();
    let db = notion.add_task_database();
    let config = emulator().await.fresh().await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let aws = |args: &[&str]| {
        let mut cmd = nib(data.path(), &notion);
        cmd.args(args)
            .args(["--backend", "aws"])
            .env("NIB_TABLE", &config.table)
            .env("NIB_BUCKET", &config.bucket)
            .env("NIB_KMS_KEY_ID", &config.kms_key_id)
            .env("AWS_ENDPOINT_URL", config.endpoint_url.as_ref().unwrap())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env_remove("AWS_PROFILE");
        cmd
    };
    let (ok, stdout, stderr) =
        run(aws(&["notion", "connect", "--database", &db]), Some(TOKEN)).await;
    assert!(ok, "{stdout}{stderr}");
    // The connection is in the table, for the tasks function to use.
    let app = Services::open_aws(config.clone()).await.unwrap();
    let status = app
        .notebook()
        .notion_status(&user())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.database_id, db);
    let (ok, stdout, _) = run(aws(&["notion", "status"]), None).await;
    assert!(ok);
    assert!(stdout.contains(&format!("database:   {db}")), "{stdout}");
    assert!(stdout.contains("pending:    0 task(s)"), "{stdout}");
    // Nothing of the token in clear in the table either.
    let item = app
        .store
        .get("U#default", "NOTION#CONN")
        .await
        .unwrap()
        .unwrap();
    assert!(!String::from_utf8_lossy(&item.body).contains(TOKEN));
    let (ok, stdout, _) = run(aws(&["notion", "disconnect"]), None).await;
    assert!(ok && stdout.contains("disconnected"), "{stdout}");
}

/// Runs `nib serve` on the data directory, creates a task and completes it over MCP; returns
/// both answers and everything the server logged.
async fn serve_and_push(data: &std::path::Path, notion: &NotionStandin) -> (Value, Value, String) {
    use std::io::{BufRead, BufReader, Read};
    let mut cmd = nib(data, notion);
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, url, token, stdout) = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("nib: serving ")
            .unwrap()
            .to_owned();
        line.clear();
        out.read_line(&mut line).unwrap();
        let token = line.trim().split_once("(admin): ").unwrap().1.to_owned();
        (child, url, token, out)
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let call = |tool: &str, args: Value| {
        client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": tool, "arguments": args } }))
            .send()
    };
    let created: Value = call(
        "create_task",
        json!({ "target_date": "2026-06-21", "text": "Book the venue" }),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let created = created["result"]["structuredContent"].clone();
    let done: Value = call(
        "update_task_status",
        json!({ "task_link_id": created["task_link_id"], "status": "done" }),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let done = done["result"]["structuredContent"].clone();
    let logs = tokio::task::spawn_blocking(move || {
        crate::helpers::stop(&mut child);
        let mut logs = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut logs)
            .unwrap();
        let _ = child.wait();
        drop(stdout);
        logs
    })
    .await
    .unwrap();
    (created, done, logs)
}

/// The token is nowhere in the data directory in clear (it is sealed in the store).
fn assert_token_not_stored(data: &std::path::Path) {
    for entry in walk(data) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
            "the token in clear in {}",
            entry.display()
        );
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Polls `done` every 100 ms until it holds, for at most `limit` (a bound on a wait for
/// something that happens on its own, not a timing assertion); whether it held.
async fn poll_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 48 item 14: a call reports what happened in it. A task waiting in the outbox that
/// the call's own drain pushes is that call's push: `update_task_status` says
/// `notion_updated: true`, and `create_task` of a reused task says `notion_pushed: true`.
async fn a_call_reports_the_push_its_drain_made(backend: Backend) {
    let env = Env::new(backend).await;
    env.notion.set_mode(Mode::RateLimited(1));
    let a = env.create("2026-06-23", "Renew the lease").await;
    assert_eq!(a["notion_pushed"], false);
    env.notion.set_mode(Mode::Normal);
    env.clock.advance(2);

    // Not pushed yet: the call's drain creates its page, with the new status.
    let d = env
        .call(
            "update_task_status",
            json!({ "task_link_id": a["task_link_id"], "status": "done" }),
        )
        .await;
    assert_eq!(d["notion_updated"], true, "{d}");
    let lease = env
        .notion
        .pages()
        .into_iter()
        .find(|p| p["properties"]["Name"]["title"][0]["text"]["content"] == "Renew the lease")
        .expect("pushed by the status change");
    assert_eq!(status_name(&lease), "Done");

    // Another task meets the limit; the same open task again: reused, and pushed by this call.
    env.notion.set_mode(Mode::RateLimited(1));
    let b = env.create("2026-06-23", "Call the plumber").await;
    assert_eq!(b["notion_pushed"], false);
    env.notion.set_mode(Mode::Normal);
    env.clock.advance(2);
    let again = env.create("2026-06-23", "Call the plumber").await;
    assert_eq!(again["created"], false, "{again}");
    assert_eq!(again["task_link_id"], b["task_link_id"]);
    assert_eq!(again["notion_pushed"], true, "{again}");
    assert_eq!(
        env.page(&again["notion_task_id"])["url"],
        again["notion_url"]
    );
    assert_eq!(env.notion.pages().len(), 2);
    assert_eq!(env.status().await.pending, 0);
}

#[tokio::test]
async fn a_call_reports_the_push_its_drain_made_locally() {
    a_call_reports_the_push_its_drain_made(Backend::Local).await;
}

#[tokio::test]
async fn a_call_reports_the_push_its_drain_made_over_aws() {
    a_call_reports_the_push_its_drain_made(Backend::Aws).await;
}

/// The outbox timer's pass (`notion_drain_due`, which `nib serve` runs in the background and
/// the tasks function on a schedule) finds every user's due items through the index, leaves
/// Notion alone before `Retry-After`, and pushes once it has passed.
async fn the_outbox_timer_pushes_after_retry_after(backend: Backend) {
    let env = Env::new(backend).await;
    let notebook = env.app.app.notebook().clone();
    env.notion.set_mode(Mode::RateLimited(30));
    let a = env.create("2026-06-23", "Renew the lease").await;
    assert_eq!(a["notion_pushed"], false);
    env.notion.set_mode(Mode::Normal);
    let sent = env.notion.requests().len();
    let pass = notebook
        .notion_drain_due(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!((pass.users, pass.created), (0, 0), "{pass:?}");
    assert_eq!(pass.next_due, Some(env.clock.unix() + 30));
    assert_eq!(
        env.notion.requests().len(),
        sent,
        "Notion called before Retry-After"
    );

    env.clock.advance(31);
    let pass = notebook
        .notion_drain_due(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(
        (pass.users, pass.created, pass.next_due),
        (1, 1, None),
        "{pass:?}"
    );
    assert_eq!(env.notion.pages().len(), 1);
    assert_eq!(env.status().await.pending, 0);
    let urls = env.task_urls().await;
    assert!(urls[0].is_string(), "the task links its page: {urls:?}");
}

#[tokio::test]
async fn the_outbox_timer_pushes_after_retry_after_locally() {
    the_outbox_timer_pushes_after_retry_after(Backend::Local).await;
}

#[tokio::test]
async fn the_outbox_timer_pushes_after_retry_after_over_aws() {
    the_outbox_timer_pushes_after_retry_after(Backend::Aws).await;
}

/// Issue 48 item 14, as docs/user-guide.md, "Notion" ("When Notion fails") describes it: with
/// Notion answering every third write 429 (`Retry-After: 1`), the task that met it reaches
/// Notion from `nib serve`'s outbox timer, with no further call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nib_serve_pushes_a_rate_limited_task_without_another_call() {
    use std::io::{BufRead, BufReader, Read};
    let notion = NotionStandin::start(TOKEN).await.unwrap();
    let db = notion.add_task_database();
    let data = tempfile::tempdir().unwrap();
    let mut cmd = nib(data.path(), &notion);
    cmd.args(["notion", "connect", "--database", &db]);
    let (ok, _, stderr) = run(cmd, Some(&format!("{TOKEN}\n"))).await;
    assert!(ok, "{stderr}");
    notion.set_mode(Mode::RateLimitEvery {
        every: 3,
        retry_after: 1,
    });

    let mut cmd = nib(data.path(), &notion);
    cmd.env("RUST_LOG", "info")
        .args(["serve", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let (mut child, url, token, stdout) = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("nib: serving ")
            .unwrap()
            .to_owned();
        line.clear();
        out.read_line(&mut line).unwrap();
        let token = line.trim().split_once("(admin): ").unwrap().1.to_owned();
        (child, url, token, out)
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    for text in ["Book the venue", "Order the cake", "Send the invitations"] {
        let answer: Value = client
            .post(&url)
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "create_task",
                "arguments": { "target_date": "2026-06-21", "text": text } } }),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answers.push(answer["result"]["structuredContent"].clone());
    }
    let pushed: Vec<&Value> = answers.iter().map(|a| &a["notion_pushed"]).collect();
    assert_eq!(
        pushed,
        [&json!(true), &json!(true), &json!(false)],
        "{answers:?}"
    );
    assert_eq!(notion.rate_limited(), 1);
    assert_eq!(notion.pages().len(), 2);

    // No call from here on: the server's timer pushes the third task.
    let arrived = poll_until(Duration::from_secs(30), || notion.pages().len() == 3).await;
    let logs = tokio::task::spawn_blocking(move || {
        crate::helpers::stop(&mut child);
        let mut logs = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut logs)
            .unwrap();
        let _ = child.wait();
        drop(stdout);
        logs
    })
    .await
    .unwrap();
    assert!(
        arrived,
        "the rate-limited task never reached Notion: {logs}"
    );
    assert_eq!(
        page_titles(&notion),
        ["Book the venue", "Order the cake", "Send the invitations"]
    );
    assert!(!logs.contains(TOKEN));
}

/// On AWS the schedule (`infra/schedule.tf`) invokes the tasks function with
/// `{"notion_outbox": "drain"}`: a task whose push met a 429 reaches Notion from it.
#[tokio::test]
async fn through_the_lambda_functions_the_schedule_drains_the_outbox() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.clone().unwrap();
    let db = stack.notion.add_task_database();
    let connector = Notebook::new(
        app.app.store.clone(),
        app.app.vault().clone(),
        app.app.assets.clone(),
        app.app.clock.clone(),
        app.app.notebook().config().clone(),
    )
    .with_notion(NotionApi::new(&stack.notion.url));
    connector
        .notion_connect(
            &user(),
            &db,
            NotionToken::parse(crate::lambda::NOTION_TOKEN).unwrap(),
        )
        .await
        .unwrap();
    stack.notion.set_mode(Mode::RateLimited(1));
    let created = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "Draft the launch post" }),
        )
        .await;
    assert_eq!(created["notion_pushed"], false, "{created}");
    stack.notion.set_mode(Mode::Normal);

    // What EventBridge Scheduler sends once a minute; until Retry-After has passed a pass
    // leaves Notion alone, so the schedule is invoked until the page is there (bounded).
    let mut replies = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while stack.notion.pages().is_empty() && tokio::time::Instant::now() < deadline {
        let (status, reply) = stack
            .invoke("tasks", &json!({ "notion_outbox": "drain" }))
            .await;
        assert_eq!(status, 200, "{reply}");
        replies.push(reply);
        if stack.notion.pages().is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    assert_eq!(stack.notion.pages().len(), 1, "{replies:?}");
    assert_eq!(replies.last().unwrap()["created"], 1, "{replies:?}");
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    assert_eq!(
        tasks["tasks"][0]["notion_url"],
        stack.notion.pages()[0]["url"]
    );
}
