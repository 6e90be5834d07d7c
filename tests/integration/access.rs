//! The access record and unchanged reads (issue 14, items 4 and 5), over both back ends:
//!
//! - every call that opens the notebook leaves a record (when, credential and its name, tool,
//!   page and task ids; never content), which `list_access` and `nib access list` show, and
//!   which expires after 90 days;
//! - `get_page`, `list_pages` and `list_tasks` answer `{unchanged, revision}` to the current
//!   `if_revision` without opening the user's keys and without a record, and the whole answer
//!   after every kind of write or to a stale or made-up revision.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use nib::auth::{Principal, Scope};
use nib::crypto::Vault;
use nib::domain::UserId;
use nib::notebook::{ACCESS_TTL_SECS, Notebook, NotebookConfig};
use nib::ports::{DataKey, Keys, KeysError, Query, WrappedKey};
use nib::tools::{Dispatch, InProcess};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, nib_exe};

macro_rules! access_tests {
    ($options:expr) => {
        $crate::access::access_tests!(@each $options;
            calls_leave_records_of_ids_with_the_clients_name,
            records_expire_after_90_days,
            unchanged_reads_open_nothing_and_record_nothing,
            every_kind_of_write_gives_the_whole_answer_again,
            a_stale_or_made_up_revision_gets_the_whole_answer,
            nib_access_list_shows_the_record,
        );
    };
    (@each $options:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($options).await;
                $crate::access::$name(app).await;
            }
        )*
    };
}
pub(crate) use access_tests;

mod local {
    super::access_tests!(crate::helpers::Options::default());
}

mod aws {
    super::access_tests!(crate::helpers::Options::aws());
}

fn default_user() -> UserId {
    UserId::parse("default").unwrap()
}

/// Writes what waits in the access buffer (the local flusher does it every 0.5 s).
async fn flush(app: &TestApp) {
    app.app.notebook().access_log().flush().await.unwrap();
}

/// A read token of the default user labelled `label`, and its id.
async fn labelled_token(app: &TestApp, label: &str) -> (String, String) {
    let t = app
        .app
        .tokens
        .create(&default_user(), Scope::Read, Some(label.into()))
        .await
        .unwrap();
    (t.token, t.record.token_id)
}

/// A tool call with `token` that must succeed: its structured content.
async fn call_with(app: &TestApp, token: &str, tool: &str, args: Value) -> Value {
    let result = app.call_raw(token, tool, args).await;
    assert_eq!(result["isError"], json!(false), "{tool}: {result}");
    result["structuredContent"].clone()
}

async fn records(app: &TestApp) -> Vec<Value> {
    flush(app).await;
    app.call("list_access", json!({ "limit": 200 })).await["records"]
        .as_array()
        .unwrap()
        .clone()
}

pub async fn calls_leave_records_of_ids_with_the_clients_name(app: TestApp) {
    let (token, token_id) = labelled_token(&app, "kitchen tablet").await;
    let page = app.page_of("2026-06-16").await;
    let got = call_with(&app, &token, "get_page", json!({ "page_id": page })).await;
    let task = got["structure_json"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|l| l["task_link_id"].as_str())
        .expect("the page has a task line")
        .to_owned();
    call_with(&app, &token, "search_pages", json!({ "query": "printer" })).await;
    call_with(&app, &token, "list_tasks", json!({ "status": "all" })).await;
    let (status, read) = app
        .rpc_with(
            &token,
            json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": format!("nib://pages/{page}") } }),
        )
        .await;
    assert_eq!(status, 200, "{read}");
    // A failed call opened nothing: no record.
    let missing = app
        .call_raw(
            &token,
            "get_page",
            json!({ "page_id": "0f9e8d7c-1234-4abc-8def-0123456789ab" }),
        )
        .await;
    assert_eq!(missing["isError"], true);

    let all = records(&app).await;
    let mine: Vec<&Value> = all
        .iter()
        .filter(|r| r["credential_id"] == token_id.as_str())
        .collect();
    let tools: Vec<&str> = mine.iter().map(|r| r["tool"].as_str().unwrap()).collect();
    // Newest first.
    assert_eq!(
        tools,
        ["resources/read", "list_tasks", "search_pages", "get_page"],
        "{all:#?}"
    );
    for r in &mine {
        assert_eq!(r["client"], "kitchen tablet", "{r}");
        let mut keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "at",
                "client",
                "credential_id",
                "page_ids",
                "task_ids",
                "tool"
            ]
        );
        assert!(r["at"].as_str().unwrap().ends_with('Z'), "{r}");
    }
    let get = mine[3];
    assert_eq!(get["page_ids"], json!([page]));
    assert!(
        get["task_ids"].as_array().unwrap().contains(&json!(task)),
        "get_page records the tasks it showed: {get}"
    );
    assert_eq!(mine[0]["page_ids"], json!([page]), "resources/read");
    let listed = mine[1]["task_ids"].as_array().unwrap();
    assert!(listed.contains(&json!(task)), "list_tasks: {listed:?}");
    assert!(
        !mine[2]["page_ids"].as_array().unwrap().is_empty(),
        "search_pages"
    );

    // Ids only: no content of the page, no token secret, in the records.
    let text = serde_json::to_string(&all).unwrap();
    let line = got["structure_json"]["lines"][0]["text"].as_str().unwrap();
    assert!(!text.contains(line), "content in the record: {line}");
    assert!(!text.contains("printer"), "a query in the record");
    assert!(!text.contains(&token), "the token in the record");
    // list_access records nothing of itself.
    let again = records(&app).await;
    assert_eq!(again.len(), all.len());
    assert!(again.iter().all(|r| r["tool"] != "list_access"));

    // `since` keeps records from that day on; tomorrow has none.
    let tomorrow = time::OffsetDateTime::now_utc().date().next_day().unwrap();
    let later = app
        .call("list_access", json!({ "since": tomorrow.to_string() }))
        .await;
    assert_eq!(later["records"], json!([]));
    // Paging: one at a time, every record once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = json!({ "limit": 1 });
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = app.call("list_access", args).await;
        seen.extend(page["records"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, again);
}

pub async fn records_expire_after_90_days(app: TestApp) {
    let page = app.page_of("2026-06-18").await;
    app.call("get_page", json!({ "page_id": page })).await;
    flush(&app).await;
    let user = default_user();
    let items = app
        .app
        .store
        .query(&Query::table(format!("U#{user}"), "ACCESS#"))
        .await
        .unwrap()
        .items;
    assert!(!items.is_empty());
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    for item in &items {
        let expires = item.expires_at.expect("records carry the TTL attribute");
        let at_ms: i64 = item.sk.split('#').nth(1).unwrap().parse().unwrap();
        assert_eq!(expires, at_ms / 1000 + ACCESS_TTL_SECS, "{}", item.sk);
        assert!(expires > now + ACCESS_TTL_SECS - 3600 && expires <= now + ACCESS_TTL_SECS);
        assert!(nib::ports::is_live(item.expires_at, expires - 1));
        assert!(!nib::ports::is_live(item.expires_at, expires));
    }
    assert_eq!(ACCESS_TTL_SECS, 90 * 86_400);
}

/// A `Keys` that counts unwraps (a vault opening a user's keyring: a KMS `Decrypt` on AWS).
struct CountingKeys {
    inner: Arc<dyn Keys>,
    unwraps: AtomicUsize,
}

#[async_trait]
impl Keys for CountingKeys {
    async fn generate(&self, user: &UserId) -> Result<(DataKey, WrappedKey), KeysError> {
        self.inner.generate(user).await
    }
    async fn unwrap(&self, user: &UserId, wrapped: &WrappedKey) -> Result<DataKey, KeysError> {
        self.unwraps.fetch_add(1, Ordering::SeqCst);
        self.inner.unwrap(user, wrapped).await
    }
}

/// The tools over the app's store and assets with a cold vault of counting keys.
fn counted_tools(app: &TestApp) -> (InProcess, Arc<CountingKeys>) {
    let a = &app.app;
    let keys = Arc::new(CountingKeys {
        inner: a.keys.clone(),
        unwraps: AtomicUsize::new(0),
    });
    let vault = Arc::new(Vault::new(
        a.store.clone(),
        keys.clone(),
        16,
        std::time::Duration::from_secs(3600),
    ));
    let notebook = Notebook::new(
        a.store.clone(),
        vault,
        a.assets.clone(),
        a.clock.clone(),
        NotebookConfig::default(),
    );
    notebook.access_log().flush_per_call();
    (
        InProcess {
            notebook: Arc::new(notebook),
        },
        keys,
    )
}

fn principal() -> Principal {
    Principal {
        user: default_user(),
        scope: Scope::Admin,
        credential_id: "test".into(),
        client: None,
    }
}

async fn call_in(tools: &InProcess, tool: &str, args: Value) -> Value {
    let out = tools
        .call(&principal(), tool, args.as_object().unwrap().clone())
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    tools.settle().await.unwrap();
    serde_json::from_str(out.get()).unwrap()
}

/// The three reads and their arguments.
async fn reads(app: &TestApp) -> Vec<(&'static str, Value)> {
    let page = app.page_of("2026-06-16").await;
    vec![
        ("get_page", json!({ "page_id": page })),
        ("list_pages", json!({})),
        ("list_pages", json!({ "from": "2026-06-16", "limit": 2 })),
        ("list_tasks", json!({ "status": "all" })),
    ]
}

fn with(args: &Value, revision: &Value) -> Value {
    let mut args = args.clone();
    args["if_revision"] = revision.clone();
    args
}

pub async fn unchanged_reads_open_nothing_and_record_nothing(app: TestApp) {
    let reads = reads(&app).await;
    let (tools, keys) = counted_tools(&app);
    let mut revisions = Vec::new();
    for (tool, args) in &reads {
        let full = call_in(&tools, tool, args.clone()).await;
        assert_eq!(full["unchanged"], false, "{tool}: {full}");
        assert!(full["revision"].is_string(), "{tool}: {full}");
        revisions.push(full["revision"].clone());
    }
    assert!(
        keys.unwraps.load(Ordering::SeqCst) > 0,
        "the full answers open the keys"
    );
    let (tools, keys) = counted_tools(&app); // a cold vault again
    flush(&app).await;
    let recorded = tools
        .notebook
        .access_log()
        .list(&default_user(), None, None, 500)
        .await
        .unwrap()
        .0
        .len();
    for ((tool, args), revision) in reads.iter().zip(&revisions) {
        let same = call_in(&tools, tool, with(args, revision)).await;
        assert_eq!(
            same,
            json!({ "unchanged": true, "revision": revision }),
            "{tool}"
        );
    }
    assert_eq!(keys.unwraps.load(Ordering::SeqCst), 0, "nothing was opened");
    let after = tools
        .notebook
        .access_log()
        .list(&default_user(), None, None, 500)
        .await
        .unwrap()
        .0
        .len();
    assert_eq!(after, recorded, "unchanged answers add no record");
    // Over HTTP too (the schema allows the short answer; no resource links).
    let (tool, args) = &reads[0];
    let result = app
        .call_raw(&app.token, tool, with(args, &revisions[0]))
        .await;
    assert_eq!(result["structuredContent"]["unchanged"], true, "{result}");
    assert_eq!(result["content"].as_array().unwrap().len(), 1, "{result}");
    // Another call's revision is not this one's.
    let other = call_in(
        &tools,
        "list_pages",
        with(&json!({ "limit": 3 }), &revisions[1]),
    )
    .await;
    assert_eq!(other["unchanged"], false);
}

async fn assert_all_full(
    tools: &InProcess,
    reads: &[(&str, Value)],
    revisions: &[Value],
    after: &str,
) {
    for ((tool, args), revision) in reads.iter().zip(revisions) {
        let answer = call_in(tools, tool, with(args, revision)).await;
        assert_eq!(answer["unchanged"], false, "{tool} after {after}: {answer}");
        assert_ne!(&answer["revision"], revision, "{tool} after {after}");
    }
}

async fn current(tools: &InProcess, reads: &[(&str, Value)]) -> Vec<Value> {
    let mut out = Vec::new();
    for (tool, args) in reads {
        out.push(call_in(tools, tool, args.clone()).await["revision"].clone());
    }
    out
}

pub async fn every_kind_of_write_gives_the_whole_answer_again(app: TestApp) {
    let reads = reads(&app).await;
    let (tools, _) = counted_tools(&app);
    let user = default_user();

    // create_task (on a page of its own date).
    let revisions = current(&tools, &reads).await;
    let created = call_in(
        &tools,
        "create_task",
        json!({ "target_date": "2026-07-01", "text": "Call the framer" }),
    )
    .await;
    assert_all_full(&tools, &reads, &revisions, "create_task").await;

    // update_task_status of a task on another page than get_page's.
    let revisions = current(&tools, &reads).await;
    call_in(
        &tools,
        "update_task_status",
        json!({ "task_link_id": created["task_link_id"], "status": "done" }),
    )
    .await;
    assert_all_full(&tools, &reads, &revisions, "update_task_status").await;

    // A page import (nib import, ingest and OCR all commit a page this way).
    let revisions = current(&tools, &reads).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("2026-07-03.md"),
        "# Errands\n- [ ] Post the letter\n",
    )
    .unwrap();
    let (pages, _) = nib::notebook::group_dir(dir.path()).unwrap();
    app.app
        .notebook()
        .import_files(&user, &pages[0])
        .await
        .unwrap();
    assert_all_full(&tools, &reads, &revisions, "a page import").await;

    // Nothing written since: unchanged again.
    let revisions = current(&tools, &reads).await;
    for ((tool, args), revision) in reads.iter().zip(&revisions) {
        assert_eq!(
            call_in(&tools, tool, with(args, revision)).await["unchanged"],
            true,
            "{tool}"
        );
    }
}

pub async fn a_stale_or_made_up_revision_gets_the_whole_answer(app: TestApp) {
    let reads = reads(&app).await;
    let (tools, _) = counted_tools(&app);
    let stale = current(&tools, &reads).await;
    call_in(
        &tools,
        "create_task",
        json!({ "target_date": "2026-07-01", "text": "Water the plants" }),
    )
    .await;
    let made_up = [
        json!("garbage"),
        json!(""),
        json!("r1.AAAAAAAAAAAAAAAAAAAAAA"),
        json!("x".repeat(5000)),
    ];
    for ((tool, args), old) in reads.iter().zip(&stale) {
        for revision in made_up.iter().chain([old]) {
            let answer = call_in(&tools, tool, with(args, revision)).await;
            assert_eq!(answer["unchanged"], false, "{tool} {revision}");
            assert!(
                answer
                    .get("pages")
                    .or(answer.get("tasks"))
                    .or(answer.get("page_id"))
                    .is_some(),
                "{tool}: {answer}"
            );
        }
    }
    // Not a string: the argument's type is refused, like any other.
    let err = app
        .call_error("list_pages", json!({ "if_revision": 3 }))
        .await;
    assert!(err.contains("if_revision"), "{err}");
}

pub async fn nib_access_list_shows_the_record(app: TestApp) {
    let (token, token_id) = labelled_token(&app, "phone").await;
    let page = app.page_of("2026-06-18").await;
    call_with(&app, &token, "get_page", json!({ "page_id": page })).await;
    flush(&app).await;
    let mut cmd = std::process::Command::new(nib_exe());
    let data = tempfile::tempdir().unwrap();
    match app.backend {
        Backend::Local => {
            // The store is one process's: read a copy of it.
            let copy = data.path();
            for entry in std::fs::read_dir(app.dir.path()).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_file() {
                    std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
                }
            }
            cmd.arg("--data-dir").arg(copy);
        }
        _ => {
            let config = app.aws_config.as_ref().unwrap();
            cmd = crate::operate::nib_aws(config, data.path());
        }
    }
    let today = time::OffsetDateTime::now_utc().date().to_string();
    let args = ["access", "list", "--user", "default", "--since", &today];
    let table = run(&mut cmd, &args).await;
    let row = table
        .lines()
        .find(|l| l.contains(&token_id))
        .unwrap_or_else(|| panic!("no row of the token in:\n{table}"));
    assert!(
        row.contains("get_page") && row.contains("phone") && row.contains(&format!("page:{page}")),
        "{row}"
    );
    let json_lines = run(&mut cmd, &[&args[..], &["--json"]].concat()).await;
    let records: Vec<Value> = json_lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tool_view = app.call("list_access", json!({ "limit": 200 })).await;
    assert_eq!(
        json!(records),
        tool_view["records"],
        "the CLI and the tool agree"
    );
    // A bad date is named.
    let mut bad = cmd;
    bad.args(["access", "list", "--since", "last week"]);
    let out = bad.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since"));
}

async fn run(cmd: &mut std::process::Command, args: &[&str]) -> String {
    let mut c = std::process::Command::new(cmd.get_program());
    c.args(cmd.get_args()).args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let out = tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `nib serve` killed (SIGKILL) while sixteen clients read pages: every call that was answered
/// is in the record that `nib access list` shows afterwards (what waited in memory is taken
/// back from the data directory's journal).
#[tokio::test]
async fn every_answered_call_is_recorded_when_nib_serve_is_killed_under_load() {
    let data = tempfile::tempdir().unwrap();
    let ok = std::process::Command::new(nib_exe())
        .arg("--data-dir")
        .arg(data.path())
        .args([
            "import",
            concat!(env!("CARGO_MANIFEST_DIR"), "/data/sample"),
            "--ocr",
            "off",
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    // Without the per-token limits (60 calls a minute by default): this is load.
    let mut server = crate::cli::serve_with(
        data.path(),
        false,
        &["--rate-per-minute", "0", "--rate-per-hour", "0"],
    );
    let token = server.token.clone().expect("a first start prints a token");
    let client = reqwest::Client::new();
    let call = {
        let (client, url, token) = (client.clone(), server.url.clone(), token.clone());
        move |name: &'static str, arguments: Value| {
            let (client, url, token) = (client.clone(), url.clone(), token.clone());
            async move {
                let r = client
                    .post(&url)
                    .bearer_auth(&token)
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                   "params": { "name": name, "arguments": arguments } }))
                    .send()
                    .await
                    .ok()?;
                let body: Value = r.json().await.ok()?;
                (body["result"]["isError"] != true).then_some(body)
            }
        }
    };
    let listed =
        crate::helpers::call_served(&server.url, &token, "list_pages", json!({ "limit": 50 }))
            .await;
    let pages: Vec<String> = listed["result"]["structuredContent"]["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["page_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(pages.len() >= 5, "{listed}");

    // Sixteen readers; the server is killed once 400 calls have been answered, with calls in
    // flight.
    let answered = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let enough = Arc::new(tokio::sync::Notify::new());
    let readers: Vec<_> = (0..16)
        .map(|r| {
            let (call, pages, answered, enough) = (
                call.clone(),
                pages.clone(),
                answered.clone(),
                enough.clone(),
            );
            tokio::spawn(async move {
                for i in 0.. {
                    let page = &pages[(r + i) % pages.len()];
                    let Some(_) = call("get_page", json!({ "page_id": page })).await else {
                        return;
                    };
                    let mut done = answered.lock().unwrap();
                    done.push(page.clone());
                    if done.len() == 400 {
                        enough.notify_one();
                    }
                }
            })
        })
        .collect();
    enough.notified().await;
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let answered = answered.lock().unwrap().clone();
    assert!(answered.len() >= 400);

    let out = std::process::Command::new(nib_exe())
        .arg("--data-dir")
        .arg(data.path())
        .args(["access", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut recorded: std::collections::HashMap<String, usize> = Default::default();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        if r["tool"] == "get_page" {
            for id in r["page_ids"].as_array().unwrap() {
                *recorded.entry(id.as_str().unwrap().to_owned()).or_default() += 1;
            }
        }
    }
    let mut want: std::collections::HashMap<String, usize> = Default::default();
    for page in &answered {
        *want.entry(page.clone()).or_default() += 1;
    }
    for (page, n) in &want {
        let got = recorded.get(page).copied().unwrap_or(0);
        assert!(got >= *n, "page {page}: {n} answered, {got} recorded");
    }
}
