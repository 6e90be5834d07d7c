//! The AWS back end end to end, on the emulator (moto; `make tools-python` installs it):
//!
//! - every tool-level test of `notebook.rs` again, over DynamoDB, S3 and KMS;
//! - the AWS requests each tool call sends, counted by the SDK interceptor and asserted exactly;
//! - failures of KMS or DynamoDB in the middle of a request: a clean error for the client and
//!   no partial write;
//! - `nib serve --backend aws`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use nib::adapters::aws::{AwsClients, CallCounts};
use nib::auth::{Principal, Scope};
use nib::config::AwsConfig;
use nib::domain::UserId;
use nib::services::Services;
use nib::tools::{Dispatch, InProcess};
use nib_testkit::emulator::{Emulator, Faults};
use serde_json::{Map, Value, json};

use crate::helpers::{Options, TestApp, emulator, nib_exe};

mod notebook {
    crate::notebook::notebook_tests!(crate::helpers::Options::aws());
}

mod task_detail {
    crate::task_detail::task_detail_tests!(crate::helpers::Options::aws());
}

mod resources {
    crate::resources::resource_tests!(crate::helpers::Options::aws());
}

mod trash {
    crate::trash::trash_tests!(crate::helpers::Options::aws());
}

// ---- Requests per tool call -----------------------------------------------------------------

/// Calls a tool the way a Lambda class function runs it (verified principal, tool name,
/// arguments; no HTTP, no token lookup; the access record written before the reply) and
/// returns its result and the AWS requests it sent.
async fn tool(app: &TestApp, name: &str, args: Value) -> (Value, CallCounts) {
    let calls = app.app.aws_calls().cloned().expect("an AWS back end");
    let dispatch = InProcess {
        notebook: app.app.notebook().clone(),
    };
    let principal = Principal {
        user: UserId::parse("default").unwrap(),
        scope: Scope::Admin,
        // The web app's operations (export_notebook) are called by its credential only.
        credential_id: if nib::tools::app_operations().iter().any(|t| t.name == name) {
            nib::tools::APP_CREDENTIAL.into()
        } else {
            "test".into()
        },
        client: None,
    };
    let args: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
    // What earlier calls (over HTTP) left in the access buffer is not this call's.
    dispatch.settle().await.unwrap();
    let before = calls.snapshot();
    let result = dispatch
        .call(&principal, name, args)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    dispatch.settle().await.unwrap();
    (
        serde_json::from_str(result.get()).unwrap(),
        calls.since(&before),
    )
}

/// Writes the access records waiting in memory (the local flusher's job, done now so that
/// what a test counts or scans next is only its own).
async fn flush_access(app: &TestApp) {
    app.app.notebook().access_log().flush().await.unwrap();
}

fn counts(expected: &[(&str, &str, u64)]) -> CallCounts {
    expected
        .iter()
        .map(|(s, o, n)| (((*s).to_owned(), (*o).to_owned()), *n))
        .collect()
}

const WRITES: [&str; 5] = [
    "PutItem",
    "DeleteItem",
    "UpdateItem",
    "TransactWriteItems",
    "BatchWriteItem",
];

fn writes(calls: &CallCounts) -> u64 {
    calls
        .iter()
        .filter(|((s, o), _)| s == "DynamoDB" && WRITES.contains(&o.as_str()))
        .map(|(_, n)| n)
        .sum()
}

/// The design's targets, asserted as exact request counts (`ARCHITECTURE.md` has the table).
#[tokio::test]
async fn each_tool_call_sends_the_expected_aws_requests() {
    let app = TestApp::spawn_with(Options::aws()).await;
    // The import left the default user's keyring in the vault's cache.

    // Every call that opens the notebook ends with its access record: one PutItem.
    let (pages, calls) = tool(&app, "list_pages", json!({})).await;
    assert_eq!(pages["pages"].as_array().unwrap().len(), 7);
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 1), // the notebook's revision
            ("DynamoDB", "Query", 1),
            ("DynamoDB", "PutItem", 1) // the access record
        ]),
        "list_pages"
    );
    // The same call with its revision: the revision item alone, and no record.
    let (same, calls) = tool(
        &app,
        "list_pages",
        json!({ "if_revision": pages["revision"] }),
    )
    .await;
    assert_eq!(same["unchanged"], true, "{same}");
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "GetItem", 1)]),
        "list_pages, unchanged"
    );

    // A page without task lines: the page and the notebook's revision in one BatchGetItem;
    // the key is cached, so no KMS; the ink URL is presigned locally, so no S3.
    let ink_only = app.page_of("2026-06-20").await;
    let (page, calls) = tool(&app, "get_page", json!({ "page_id": ink_only })).await;
    assert!(page["png_url"].is_string());
    let page_read = counts(&[("DynamoDB", "BatchGetItem", 1), ("DynamoDB", "PutItem", 1)]);
    assert_eq!(calls, page_read, "get_page");
    let text_only = app.page_of("2026-06-18").await;
    let (page, calls) = tool(&app, "get_page", json!({ "page_id": text_only })).await;
    assert!(page["ocr_text"].is_string());
    assert_eq!(calls, page_read, "get_page");
    let (same, calls) = tool(
        &app,
        "get_page",
        json!({ "page_id": text_only, "if_revision": page["revision"] }),
    )
    .await;
    assert_eq!(same["unchanged"], true, "{same}");
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "BatchGetItem", 1)]),
        "get_page, unchanged"
    );

    // A page with task lines also reads its tasks' statuses, in a second BatchGetItem.
    let with_tasks = app.page_of("2026-06-16").await;
    let (first, calls) = tool(&app, "get_page", json!({ "page_id": with_tasks })).await;
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "BatchGetItem", 2), ("DynamoDB", "PutItem", 1)]),
        "get_page with task lines"
    );
    // Read again at the same revision, in the same process: the answer kept by its revision,
    // so the page and revision items alone (no task statuses opened again).
    let (again, calls) = tool(&app, "get_page", json!({ "page_id": with_tasks })).await;
    assert_eq!(again, first);
    assert_eq!(calls, page_read, "get_page again, its answer kept");

    // With the key not cached (a cold process, no answer kept either): the key items and one
    // Decrypt after the page; an unchanged answer opens nothing, so it needs neither.
    app.app.vault().forget(&UserId::parse("default").unwrap());
    app.app.notebook().answers().clear();
    let (same, calls) = tool(
        &app,
        "get_page",
        json!({ "page_id": text_only, "if_revision": page["revision"] }),
    )
    .await;
    assert_eq!(same["unchanged"], true, "{same}");
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "BatchGetItem", 1)]),
        "get_page, unchanged, cold key cache"
    );
    let (_, calls) = tool(&app, "get_page", json!({ "page_id": ink_only })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "Query", 1),
            ("KMS", "Decrypt", 1),
            ("DynamoDB", "BatchGetItem", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "get_page, cold key cache"
    );

    let (open, calls) = tool(&app, "list_tasks", json!({})).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 1),
            ("DynamoDB", "Query", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "list_tasks"
    );
    let task = open["tasks"][0]["task_link_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // update_task_status: the task and the Notion connection (none here), one transaction
    // (the task, conditional on its version, and the notebook's new revision), the record.
    let (_, calls) = tool(
        &app,
        "update_task_status",
        json!({ "task_link_id": task, "status": "done" }),
    )
    .await;
    assert!(writes(&calls) <= 2, "{calls:?}");
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 2),
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "update_task_status"
    );
    // Setting the status it has writes nothing (the connection is still read: a call drains
    // the Notion outbox of a connected user).
    let (_, calls) = tool(
        &app,
        "update_task_status",
        json!({ "task_link_id": task, "status": "done" }),
    )
    .await;
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "GetItem", 2), ("DynamoDB", "PutItem", 1)]),
        "a no-op update (recorded: it showed the task)"
    );

    // create_task on a new date, happy path: one TransactWriteItems (page, stem, task, dedup
    // key, statistics and postings together), after the reads it decides from.
    let (created, calls) = tool(
        &app,
        "create_task",
        json!({ "target_date": "2026-07-01", "text": "Call the framer about the prints" }),
    )
    .await;
    assert_eq!(created["created"], true);
    assert_eq!(writes(&calls), 2, "{calls:?}");
    assert_eq!(
        calls,
        counts(&[
            // the Notion connection (none), dedup key, stem of the date, the page, the index
            // statistics, the page's vector block
            ("DynamoDB", "GetItem", 6),
            // the page of the date
            ("DynamoDB", "Query", 1),
            // the dedup items of the page's task lines
            ("DynamoDB", "BatchGetItem", 1),
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1),
        ]),
        "create_task"
    );
    // The same text again while open: reads only (the connection, the dedup key, the task).
    let (again, calls) = tool(
        &app,
        "create_task",
        json!({ "target_date": "2026-07-02", "text": "call the framer about the prints" }),
    )
    .await;
    assert_eq!(again["reused_existing_task"], true);
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "GetItem", 3), ("DynamoDB", "PutItem", 1)]),
        "create_task, reused"
    );

    // search_pages (hybrid): the notebook's revision, then (this process has not opened the
    // index at it) the statistics and the vector blocks in one batch, one Query per term, the
    // matching pages in one batch: 3 + terms reads whatever the notebook's size.
    let (hits, calls) = tool(&app, "search_pages", json!({ "query": "printer" })).await;
    assert!(!hits["results"].as_array().unwrap().is_empty());
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 1),
            ("DynamoDB", "Query", 1),
            ("DynamoDB", "BatchGetItem", 2),
            ("DynamoDB", "PutItem", 1)
        ]),
        "search_pages"
    );
    // Again, nothing written since: the revision only (the index is open and keeps the pages
    // its queries returned, opened, at that revision).
    let (again, calls) = tool(&app, "search_pages", json!({ "query": "printer" })).await;
    assert_eq!(again["results"], hits["results"]);
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "GetItem", 1), ("DynamoDB", "PutItem", 1)]),
        "search_pages, index open at the revision"
    );

    // list_access reads the record (one Query) and is itself not recorded.
    let (access, calls) = tool(&app, "list_access", json!({})).await;
    assert!(!access["records"].as_array().unwrap().is_empty());
    assert_eq!(calls, counts(&[("DynamoDB", "Query", 1)]), "list_access");
}

/// The trash tools' requests (`ARCHITECTURE.md`, the table under "The AWS back end"): the page
/// of 2026-06-17, whose tasks are all on other pages too and which has no ink, the page of
/// 2026-06-19 with its PDF and PNG, and one task.
#[tokio::test]
async fn each_trash_tool_sends_the_expected_aws_requests() {
    let app = TestApp::spawn_with(Options::aws()).await;
    let page = app.page_of("2026-06-17").await;
    let (_, calls) = tool(&app, "delete_page", json!({ "page_id": page })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 4), // + its vector block
            ("DynamoDB", "BatchGetItem", 1),
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "delete_page"
    );
    let (_, calls) = tool(&app, "list_trash", json!({})).await;
    assert_eq!(
        calls,
        counts(&[("DynamoDB", "Query", 1), ("DynamoDB", "PutItem", 1)]),
        "list_trash"
    );
    let (_, calls) = tool(&app, "restore_page", json!({ "page_id": page })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 5), // + its vector block
            ("DynamoDB", "BatchGetItem", 1),
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "restore_page"
    );
    // A page with ink (a PDF and a PNG): its images are marked after the transaction (a
    // GetObjectTagging and a CopyObject each) and the trash item read again; a restore unmarks
    // them before its transaction (GetObjectTagging, CopyObject each), reads their tags again
    // after it and the page once more.
    let ink = app.page_of("2026-06-19").await;
    let (_, calls) = tool(&app, "delete_page", json!({ "page_id": ink })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 5), // + its vector block, + the trash item again
            ("DynamoDB", "BatchGetItem", 2), // + the dedup key of its task, on no other page
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1),
            ("S3", "GetObjectTagging", 2),
            ("S3", "CopyObject", 2)
        ]),
        "delete_page with ink"
    );
    let (_, calls) = tool(&app, "restore_page", json!({ "page_id": ink })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 6),      // + its vector block, + the page again
            ("DynamoDB", "BatchGetItem", 3), // + that task and its dedup key
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1),
            ("S3", "GetObjectTagging", 4),
            ("S3", "CopyObject", 2)
        ]),
        "restore_page with ink"
    );
    let (open, _) = tool(&app, "list_tasks", json!({})).await;
    let task = open["tasks"][0]["task_link_id"].clone();
    let (_, calls) = tool(&app, "delete_task", json!({ "task_link_id": task })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 1),
            ("DynamoDB", "BatchGetItem", 1),
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "delete_task"
    );
    let (_, calls) = tool(&app, "restore_task", json!({ "task_link_id": task })).await;
    assert_eq!(
        calls,
        counts(&[
            ("DynamoDB", "GetItem", 2),
            ("DynamoDB", "BatchGetItem", 1),
            ("DynamoDB", "TransactWriteItems", 1),
            ("DynamoDB", "PutItem", 1)
        ]),
        "restore_task"
    );
}

/// Over HTTP the front's own requests come on top of the tool's: the token lookup, and the
/// rate-limit windows when limits are configured (a counter `UpdateItem` each).
#[tokio::test]
async fn over_http_the_front_adds_its_token_lookup() {
    let app = TestApp::spawn_with(Options::aws()).await;
    let calls = app.app.aws_calls().cloned().unwrap();
    app.call("list_pages", json!({})).await; // `last_used_at` is written once an hour at most
    flush_access(&app).await;
    let before = calls.snapshot();
    app.call("list_pages", json!({})).await;
    flush_access(&app).await;
    let mut sent = calls.since(&before);
    sent.remove(&("DynamoDB".to_owned(), "UpdateItem".to_owned()));
    assert_eq!(
        sent,
        counts(&[
            ("DynamoDB", "GetItem", 2), // the token, the notebook's revision
            ("DynamoDB", "Query", 1),
            ("DynamoDB", "PutItem", 1) // the access record
        ])
    );
}

// ---- Failures mid-request -------------------------------------------------------------------

/// Every item of the table (tests only: nothing on a request path scans), each attribute as
/// text (binary values decoded lossily, so plaintext in them would show).
async fn scan(config: &AwsConfig) -> Vec<BTreeMap<String, String>> {
    let clients = AwsClients::connect(config).await;
    let mut items = Vec::new();
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
            items.push(
                item.into_iter()
                    .map(|(k, v)| {
                        let text = match (v.as_s(), v.as_n(), v.as_b()) {
                            (Ok(s), _, _) | (_, Ok(s), _) => s.clone(),
                            (_, _, Ok(b)) => String::from_utf8_lossy(b.as_ref()).into_owned(),
                            _ => format!("{v:?}"),
                        };
                        (k, text)
                    })
                    .collect::<BTreeMap<_, _>>(),
            );
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    items.sort();
    items
}

/// The keys of the items that differ between two scans, each with what happened to it.
fn changes(before: &[BTreeMap<String, String>], after: &[BTreeMap<String, String>]) -> Vec<String> {
    let key = |i: &BTreeMap<String, String>| format!("{} / {}", i["pk"], i["sk"]);
    let index = |items: &[BTreeMap<String, String>]| -> BTreeMap<String, BTreeMap<String, String>> {
        items.iter().map(|i| (key(i), i.clone())).collect()
    };
    let (b, a) = (index(before), index(after));
    let mut out = Vec::new();
    for (k, item) in &a {
        match b.get(k) {
            None => out.push(format!("added {k}")),
            Some(old) if old != item => out.push(format!("changed {k}")),
            _ => {}
        }
    }
    out.extend(
        b.keys()
            .filter(|k| !a.contains_key(*k))
            .map(|k| format!("removed {k}")),
    );
    out
}

/// A system over a fresh table whose clients carry `faults`.
async fn with_faults(config: &AwsConfig, faults: &Faults) -> TestApp {
    let clients = AwsClients::connect_with(config, vec![faults.interceptor()]).await;
    let app = Services::open_aws_with(config.clone(), clients)
        .await
        .unwrap();
    TestApp::spawn_over(app, Options::aws()).await
}

/// A JSON-RPC internal error that says nothing but a correlation id.
#[track_caller]
fn assert_clean_internal_error(status: u16, body: &Value) {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert_eq!(body["error"]["message"], "internal error", "{body}");
    assert!(body["error"]["data"]["correlationId"].is_string(), "{body}");
    let text = body.to_string().to_lowercase();
    for leak in [
        "kms",
        "dynamodb",
        "injected",
        "transact",
        "dispatch",
        "127.0.0.1",
        "generatedatakey",
    ] {
        assert!(!text.contains(leak), "{leak} leaks in {body}");
    }
}

fn create_task(text: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "create_task", "arguments": { "target_date": "2026-07-01", "text": text } } })
}

#[tokio::test]
async fn a_kms_failure_mid_request_is_a_clean_error_and_writes_nothing() {
    let config = emulator().await.fresh().await.unwrap();
    let faults = Faults::new();
    let app = with_faults(&config, &faults).await;
    // A user with a token but no data key yet: their first call must create one.
    let mallory = UserId::parse("mallory").unwrap();
    let token = app
        .app
        .tokens
        .create(&mallory, Scope::Admin, None)
        .await
        .unwrap()
        .token;
    // A first request records the token's use (once an hour): not part of what is checked.
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "list_pages", "arguments": {} } });
    assert_eq!(app.rpc_with(&token, list).await.0, 200);
    flush_access(&app).await;
    faults.fail("KMS", "GenerateDataKey");
    let before = scan(&config).await;
    let (status, body) = app.rpc_with(&token, create_task("Renew the lease")).await;
    assert_clean_internal_error(status, &body);
    assert_eq!(changes(&before, &scan(&config).await), Vec::<String>::new());

    // The default user's cached key is unaffected; once KMS is back, mallory's call works.
    faults.clear();
    let (status, body) = app.rpc_with(&token, create_task("Renew the lease")).await;
    assert_eq!(status, 200);
    assert_eq!(
        body["result"]["structuredContent"]["created"], true,
        "{body}"
    );

    // A cold key cache with KMS failing on Decrypt: the same clean error, nothing written.
    flush_access(&app).await;
    app.app.vault().forget(&mallory);
    faults.fail("KMS", "Decrypt");
    let before = scan(&config).await;
    let (status, body) = app.rpc_with(&token, create_task("Water the plants")).await;
    assert_clean_internal_error(status, &body);
    assert_eq!(changes(&before, &scan(&config).await), Vec::<String>::new());
}

#[tokio::test]
async fn a_dynamodb_failure_mid_request_is_a_clean_error_and_writes_nothing() {
    let config = emulator().await.fresh().await.unwrap();
    let faults = Faults::new();
    let app = with_faults(&config, &faults).await;
    // A first request records the token's use (once an hour): not part of what is checked.
    app.call("list_pages", json!({})).await;
    flush_access(&app).await;
    // Every read of create_task succeeds; its one transaction fails.
    faults.fail("DynamoDB", "TransactWriteItems");
    let before = scan(&config).await;
    let (status, body) = app.rpc(create_task("Book the venue")).await;
    assert_clean_internal_error(status, &body);
    assert_eq!(changes(&before, &scan(&config).await), Vec::<String>::new());

    // The same for a task status update.
    let open = app.call("list_tasks", json!({})).await;
    let task = open["tasks"][0]["task_link_id"].clone();
    flush_access(&app).await;
    // The task's write (with the notebook's revision) is one transaction.
    faults.fail("DynamoDB", "TransactWriteItems");
    let before = scan(&config).await;
    let (status, body) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "update_task_status", "arguments": { "task_link_id": task, "status": "done" } } }))
        .await;
    assert_clean_internal_error(status, &body);
    assert_eq!(changes(&before, &scan(&config).await), Vec::<String>::new());

    // Once DynamoDB is back the same calls succeed: nothing was left half done.
    faults.clear();
    let created = app
        .call(
            "create_task",
            json!({ "target_date": "2026-07-01", "text": "Book the venue" }),
        )
        .await;
    assert_eq!(created["created"], true);
}

#[tokio::test]
async fn stopping_the_emulator_during_a_write_is_a_clean_error() {
    // A server of its own, since this test kills it.
    let emulator = Arc::new(Emulator::start().await.unwrap_or_else(|e| panic!("{e}")));
    let config = emulator.fresh().await.unwrap();
    let faults = Faults::new();
    let app = with_faults(&config, &faults).await;
    let calls = app.app.aws_calls().cloned().unwrap();
    // The server dies just as create_task's transaction is about to be sent.
    let dying = emulator.clone();
    faults.on("DynamoDB", "TransactWriteItems", move || {
        dying.stop();
        Ok(())
    });
    let before = calls.snapshot();
    let (status, body) = app.rpc(create_task("Ship the parcel")).await;
    assert_clean_internal_error(status, &body);
    // The SDK retried the transaction (standard mode: 3 attempts) before giving up.
    assert_eq!(
        calls.since(&before)[&("DynamoDB".to_owned(), "TransactWriteItems".to_owned())],
        3
    );
    // The server itself is still up and answers, with a clean error, while AWS is down.
    let (status, body) = app
        .rpc(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "list_pages", "arguments": {} } }),
        )
        .await;
    assert!(
        status >= 400 || body["error"]["code"] == -32603,
        "{status} {body}"
    );
    let text = body.to_string().to_lowercase();
    assert!(
        !text.contains("dynamodb") && !text.contains("127.0.0.1"),
        "{body}"
    );
}

// ---- nib serve --backend aws ----------------------------------------------------------------

/// `nib serve --backend aws` with the emulator's settings in its environment; killed on drop.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nib_aws(config: Option<&AwsConfig>) -> Command {
    let mut cmd = Command::new(nib_exe());
    cmd.args(["serve", "--backend", "aws", "--bind", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in [
        "NIB_TABLE",
        "NIB_BUCKET",
        "NIB_KMS_KEY_ID",
        "AWS_ENDPOINT_URL",
        "AWS_PROFILE",
    ] {
        cmd.env_remove(var);
    }
    if let Some(config) = config {
        cmd.env("NIB_TABLE", &config.table)
            .env("NIB_BUCKET", &config.bucket)
            .env("NIB_KMS_KEY_ID", &config.kms_key_id)
            .env("AWS_ENDPOINT_URL", config.endpoint_url.as_ref().unwrap())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing");
    }
    cmd
}

#[tokio::test]
async fn nib_serve_backend_aws_serves_the_same_tools_from_dynamodb() {
    let config = emulator().await.fresh().await.unwrap();
    let mut child = nib_aws(Some(&config)).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let served = Served(child);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("nib: serving ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    line.clear();
    out.read_line(&mut line).unwrap();
    let token = line
        .trim()
        .split_once("(admin): ")
        .map(|(_, t)| t.to_owned())
        .unwrap_or_else(|| panic!("no token in {line:?}"));

    let r = reqwest::Client::new()
        .post(&url)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .json(&create_task("Post the invitations"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["result"]["structuredContent"]["created"], true,
        "{body}"
    );
    // The page is in the table, sealed: its text appears nowhere in clear.
    let items = scan(&config).await;
    assert!(
        items
            .iter()
            .any(|i| i["sk"].contains("PAGE#") && i["pk"].contains("U#default"))
    );
    let all = format!("{items:?}").to_lowercase();
    assert!(!all.contains("invitations"), "plaintext in the table");
    drop(served);
}

#[test]
fn nib_serve_backend_aws_names_a_missing_variable() {
    let out = nib_aws(None).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("NIB_TABLE"), "{stderr}");
}

/// `export_notebook` (`ARCHITECTURE.md`, the table): the archive goes to S3 in one PutObject,
/// each ink file is read once, and the only write to the table is the access record.
#[tokio::test]
async fn export_notebook_puts_one_object_and_reads_each_ink_file_once() {
    let app = TestApp::spawn_with(Options::aws()).await;
    for format in ["bundle", "markdown"] {
        let (out, calls) = tool(&app, "export_notebook", json!({ "format": format })).await;
        let ink = out["ink_files"].as_u64().unwrap();
        assert!(ink > 0, "{out}");
        assert_eq!(
            calls.get(&("S3".into(), "PutObject".into())),
            Some(&1),
            "{format}"
        );
        assert_eq!(
            calls.get(&("S3".into(), "GetObject".into())),
            Some(&ink),
            "{format}"
        );
        assert_eq!(
            calls.keys().filter(|(s, _)| s == "S3").count(),
            2,
            "{format}: {calls:?}"
        );
        assert_eq!(writes(&calls), 1, "{format}: the access record only");
        assert!(
            !calls.keys().any(|(s, _)| s == "KMS"),
            "{format}: {calls:?}"
        );
        if format == "bundle" {
            // 7 pages in one query page; per task status one query page and its dedup keys.
            assert_eq!(
                calls,
                counts(&[
                    ("DynamoDB", "Query", 4),
                    ("DynamoDB", "BatchGetItem", 3),
                    ("DynamoDB", "PutItem", 1),
                    ("S3", "GetObject", ink),
                    ("S3", "PutObject", 1),
                ]),
                "export_notebook"
            );
        }
    }
}
