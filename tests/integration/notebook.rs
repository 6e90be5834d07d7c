//! The eight tools over HTTP against the sample notebook (tests/data/sample).
//!
//! Each test is a body taking a `TestApp`; `notebook_tests!` declares one `#[tokio::test]` per
//! body over a given back end: here (module `local`) over the embedded one, and in `aws.rs`
//! over DynamoDB, S3 and KMS on the emulator. The assertions are the same for both.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nib::auth::{Principal, Scope};
use nib::domain::UserId;
use nib::notebook::{Notebook, NotebookConfig};
use nib::tools::{Dispatch, InProcess};
use serde_json::{Value, json};

use crate::helpers::TestApp;

/// Declares one `#[tokio::test]` per test body of this file, each on a fresh `TestApp`
/// spawned with `$options`.
macro_rules! notebook_tests {
    ($options:expr) => {
        $crate::notebook::notebook_tests!(@each $options;
            list_pages_is_newest_first_and_filters_by_date,
            get_page_returns_every_field,
            missing_and_foreign_pages_look_the_same,
            search_ranks_matches_with_snippets_and_phrases,
            search_and_fetch_follow_the_chatgpt_shapes,
            a_task_on_two_pages_is_one_task_reconciled_by_update,
            list_tasks_filters,
            create_task_adds_a_line_and_reuses_open_tasks,
            a_hundred_concurrent_creates_of_one_text_make_one_task,
            a_task_reopened_in_the_same_second_is_open,
            line_statuses_speak_the_page_vocabulary,
            a_page_read_again_shows_every_write_since,
            toggling_a_task_keeps_its_history_bounded,
            search_queries_are_bounded,
            limits_above_the_maximum_are_lowered,
            every_list_pages_through_cursors,
        );
    };
    (@each $options:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($options).await;
                $crate::notebook::$name(&app).await;
            }
        )*
    };
}
pub(crate) use notebook_tests;

mod local {
    super::notebook_tests!(crate::helpers::Options::default());
}

fn lines(page: &Value) -> &Vec<Value> {
    page["structure_json"]["lines"].as_array().unwrap()
}

fn line<'a>(page: &'a Value, text: &str) -> &'a Value {
    lines(page)
        .iter()
        .find(|l| l["text"] == text)
        .unwrap_or_else(|| panic!("no line {text:?} in {page}"))
}

pub async fn list_pages_is_newest_first_and_filters_by_date(app: &TestApp) {
    let all = app.call("list_pages", json!({})).await;
    let dates: Vec<&str> = all["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["date"].as_str().unwrap())
        .collect();
    assert_eq!(
        dates,
        [
            "2026-06-21",
            "2026-06-20",
            "2026-06-19",
            "2026-06-19",
            "2026-06-18",
            "2026-06-17",
            "2026-06-16"
        ]
    );
    let ink_only = &all["pages"][1];
    assert_eq!(
        (ink_only["has_ink"].clone(), ink_only["has_ocr"].clone()),
        (json!(true), json!(false))
    );
    let some = app
        .call(
            "list_pages",
            json!({ "from": "2026-06-17", "to": "2026-06-19", "limit": 3 }),
        )
        .await;
    let dates: Vec<&str> = some["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["date"].as_str().unwrap())
        .collect();
    assert_eq!(dates, ["2026-06-19", "2026-06-19", "2026-06-18"]);
    for (args, arg) in [
        (json!({ "from": "June 1" }), "from"),
        (json!({ "to": "2026-02-30" }), "to"),
        (json!({ "limit": 0 }), "limit"),
        (json!({ "limit": -1 }), "limit"),
        (json!({ "limit": 2.5 }), "limit"),
        (json!({ "limit": "10" }), "limit"),
        (json!({ "colour": "red" }), "colour"),
    ] {
        let message = app.call_error("list_pages", args.clone()).await;
        assert!(message.contains(&format!("'{arg}'")), "{args} -> {message}");
    }
}

pub async fn get_page_returns_every_field(app: &TestApp) {
    let id = app.page_of("2026-06-16").await;
    let page = app.call("get_page", json!({ "page_id": id })).await;
    assert_eq!(page["page_id"], id.as_str());
    assert_eq!(page["date"], "2026-06-16");
    assert_eq!(page["has_ink"], false);
    assert_eq!(
        (page["pdf_url"].clone(), page["png_url"].clone()),
        (Value::Null, Value::Null)
    );
    assert_eq!(page["signed_url_ttl_seconds"], 3600);
    assert!(
        page["ocr_markdown"]
            .as_str()
            .unwrap()
            .starts_with("# Tuesday\n\n## Tasks\n- [ ] Follow up on API spec")
    );
    assert!(
        page["ocr_text"]
            .as_str()
            .unwrap()
            .starts_with("Tuesday\nTasks\nFollow up on API spec\n")
    );
    let heading = line(&page, "Tasks");
    assert_eq!(
        (heading["notation"].clone(), heading["section"].clone()),
        (json!("heading"), json!("tasks"))
    );
    let bullet = line(&page, "Dana owns the onboarding emails");
    assert_eq!(
        (
            bullet["notation"].clone(),
            bullet["section"].clone(),
            bullet["status"].clone()
        ),
        (json!("bullet"), json!("notes"), Value::Null)
    );
    let prose = line(&page, "The quick brown fox sketch goes on the cover page.");
    assert_eq!(prose["notation"], "text");
    let task = line(&page, "Book dentist appointment");
    assert_eq!(task["notation"], "task");
    // Written open here, ticked on 2026-06-17: done, decided elsewhere.
    assert_eq!(task["page_status"], "open");
    assert_eq!(task["status"], "done");
    assert_eq!(task["status_source"], "reconciled");
    assert_eq!(task["completed_date"], "2026-06-17");
    assert_eq!(task["notion_url"], Value::Null);
    for l in lines(&page) {
        assert!(l["line_id"].as_str().unwrap().starts_with("ln_"));
        for key in [
            "line_id",
            "text",
            "section",
            "notation",
            "status",
            "page_status",
            "status_source",
            "completed_date",
            "notion_url",
        ] {
            assert!(l.get(key).is_some(), "line lacks {key}");
        }
    }

    // A text-only (.txt) page has OCR text but no markdown; its ink has signed URLs.
    let id = app.page_of("2026-06-18").await;
    let page = app.call("get_page", json!({ "page_id": id })).await;
    assert!(
        page["ocr_text"]
            .as_str()
            .unwrap()
            .starts_with("Met with Dana")
    );
    assert_eq!(page["ocr_markdown"], Value::Null);
    assert_eq!(page["has_ink"], true);
    assert_eq!(page["pdf_url"], Value::Null);
    let png = page["png_url"].as_str().unwrap();
    let r = app.client.get(png).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    if png.contains("/assets/") {
        // The local server's signed URL: never sniffed, shown inline under a plain name
        // (issue 48).
        assert_eq!(r.headers()["x-content-type-options"], "nosniff");
        assert_eq!(
            r.headers()["content-disposition"],
            format!("inline; filename=\"{id}.png\"").as_str()
        );
    }
    let bytes = r.bytes().await.unwrap();
    assert_eq!(
        bytes.as_ref(),
        std::fs::read(crate::helpers::sample_dir().join("2026-06-18.png")).unwrap()
    );
    // Tampering with the signed URL is refused.
    assert!(app.is_asset_url(png), "{png}");
    if app.asset_signatures_checked() {
        let tampered = png.replace("expires=", "expires=9");
        assert_eq!(
            app.client.get(&tampered).send().await.unwrap().status(),
            403
        );
        let other_page = png.replace(&id, &app.page_of("2026-06-19").await);
        assert_eq!(
            app.client.get(&other_page).send().await.unwrap().status(),
            403
        );
    }

    // An ink-only page.
    let id = app.page_of("2026-06-20").await;
    let page = app.call("get_page", json!({ "page_id": id })).await;
    assert_eq!(
        (page["ocr_text"].clone(), page["ocr_markdown"].clone()),
        (Value::Null, Value::Null)
    );
    assert_eq!(lines(&page).len(), 0);
    assert!(page["png_url"].is_string());
}

pub async fn missing_and_foreign_pages_look_the_same(app: &TestApp) {
    let id = app.page_of("2026-06-16").await;
    let missing = app
        .call_error(
            "get_page",
            json!({ "page_id": "01900000-0000-7000-8000-000000000000" }),
        )
        .await;
    let malformed = app
        .call_error("get_page", json!({ "page_id": "../etc/passwd" }))
        .await;
    let other = app.token_for("mallory", Scope::Admin).await;
    let foreign = app
        .call_raw(&other, "get_page", json!({ "page_id": id }))
        .await;
    assert_eq!(foreign["isError"], true);
    assert_eq!(foreign["content"][0]["text"], missing.as_str());
    assert_eq!(malformed, missing);
    let foreign_fetch = app.call_raw(&other, "fetch", json!({ "id": id })).await;
    assert_eq!(foreign_fetch["isError"], true);
    // And the other user's notebook is empty.
    let theirs = app.call_raw(&other, "list_pages", json!({})).await;
    assert_eq!(theirs["structuredContent"]["pages"], json!([]));
    let theirs = app
        .call_raw(&other, "search_pages", json!({ "query": "dentist" }))
        .await;
    assert_eq!(theirs["structuredContent"]["results"], json!([]));
}

pub async fn search_ranks_matches_with_snippets_and_phrases(app: &TestApp) {
    // Keywords alone: exactly the pages with the word (hybrid, the default, adds pages near
    // in meaning; tests/integration/search.rs).
    let r = app
        .call(
            "search_pages",
            json!({ "query": "printer", "mode": "keyword" }),
        )
        .await;
    assert_eq!(r["query"], "printer");
    let results = r["results"].as_array().unwrap();
    let dates: Vec<&str> = results
        .iter()
        .map(|h| h["date"].as_str().unwrap())
        .collect();
    assert_eq!(dates.len(), 3, "{r}");
    for d in ["2026-06-19", "2026-06-21"] {
        assert!(dates.contains(&d), "{dates:?}");
    }
    for hit in results {
        assert!(
            hit["snippet"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains("printer"),
            "{hit}"
        );
    }
    // Stemming: "specs" finds "spec".
    let r = app
        .call(
            "search_pages",
            json!({ "query": "specs", "mode": "keyword" }),
        )
        .await;
    assert_eq!(r["results"].as_array().unwrap().len(), 4);
    // Hybrid ranks the same pages first.
    let hybrid = app.call("search_pages", json!({ "query": "specs" })).await;
    let ids = |r: &Value| -> Vec<Value> {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["page_id"].clone())
            .collect()
    };
    let mut first: Vec<Value> = ids(&hybrid).into_iter().take(4).collect();
    let mut keyword = ids(&r);
    first.sort_by_key(|v| v.to_string());
    keyword.sort_by_key(|v| v.to_string());
    assert_eq!(first, keyword, "{hybrid}");
    // A phrase must appear as written.
    let r = app
        .call("search_pages", json!({ "query": "\"cover stock\"" }))
        .await;
    let mut dates: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["date"].as_str().unwrap())
        .collect();
    dates.sort();
    assert_eq!(dates, ["2026-06-19", "2026-06-21"]);
    let r = app
        .call("search_pages", json!({ "query": "\"stock cover\"" }))
        .await;
    assert_eq!(r["results"], json!([]));
    // Deterministic: the same order every time.
    let a = app
        .call("search_pages", json!({ "query": "api spec beta" }))
        .await;
    let b = app
        .call("search_pages", json!({ "query": "api spec beta" }))
        .await;
    assert_eq!(a, b);
    // Limit, and bad queries name the argument.
    let r = app
        .call("search_pages", json!({ "query": "spec", "limit": 1 }))
        .await;
    assert_eq!(r["results"].as_array().unwrap().len(), 1);
    assert!(
        app.call_error("search_pages", json!({ "query": "  " }))
            .await
            .contains("'query'")
    );
    assert!(
        app.call_error("search_pages", json!({ "query": "x".repeat(513) }))
            .await
            .contains("'query'")
    );
    assert!(
        app.call_error("search_pages", json!({}))
            .await
            .contains("'query'")
    );
}

pub async fn search_and_fetch_follow_the_chatgpt_shapes(app: &TestApp) {
    let r = app
        .call("search", json!({ "query": "quarterly budget" }))
        .await;
    let results = r["results"].as_array().unwrap();
    assert!(!results.is_empty());
    for hit in results {
        let keys: Vec<&String> = hit.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 3, "{hit}");
        assert!(
            hit["title"]
                .as_str()
                .unwrap()
                .starts_with("Page of 2026-06-")
        );
    }
    let id = results[0]["id"].as_str().unwrap();
    let page = app.call("fetch", json!({ "id": id })).await;
    assert_eq!(page["id"], id);
    assert!(page["text"].as_str().unwrap().contains("quarterly budget"));
    assert!(
        page["metadata"]["date"]
            .as_str()
            .unwrap()
            .starts_with("2026-06-1")
    );
    for key in ["id", "title", "text", "url", "metadata"] {
        assert!(page.get(key).is_some());
    }
    // Every page links to its own stable page (not to an image URL that expires).
    let id = app.page_of("2026-06-18").await;
    let page = app.call("fetch", json!({ "id": id })).await;
    assert_eq!(page["url"], json!(format!("{}/pages/{id}", app.base)));
    assert!(!app.is_asset_url(page["url"].as_str().unwrap()));
}

pub async fn a_task_on_two_pages_is_one_task_reconciled_by_update(app: &TestApp) {
    let open = app.call("list_tasks", json!({})).await;
    let texts: Vec<&str> = open["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.eq_ignore_ascii_case("follow up on api spec"))
            .count(),
        1,
        "{texts:?}"
    );
    assert!(
        !texts.contains(&"Book dentist appointment"),
        "done tasks are not open"
    );
    let spec = open["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["text"] == "Follow up on API spec")
        .unwrap()
        .clone();
    assert_eq!(spec["status"], "todo");
    assert_eq!(spec["first_seen_date"], "2026-06-16");
    assert_eq!(spec["completed_date"], Value::Null);
    assert_eq!(
        spec["source_page_id"],
        app.page_of("2026-06-16").await.as_str()
    );
    assert_eq!(spec["notion_url"], Value::Null);

    let id = spec["task_link_id"].as_str().unwrap();
    let r = app
        .call(
            "update_task_status",
            json!({ "task_link_id": id, "status": "done" }),
        )
        .await;
    assert_eq!(
        r,
        json!({ "task_link_id": id, "updated": true, "status": "done", "text": "Follow up on API spec", "notion_updated": false })
    );
    // Idempotent.
    assert_eq!(
        app.call(
            "update_task_status",
            json!({ "task_link_id": id, "status": "done" })
        )
        .await,
        r
    );

    let today = nib::ports::Clock::today(&nib::ports::SystemClock).to_string();
    for date in ["2026-06-16", "2026-06-17"] {
        let page = app
            .call("get_page", json!({ "page_id": app.page_of(date).await }))
            .await;
        let l = lines(&page)
            .iter()
            .find(|l| {
                l["text"]
                    .as_str()
                    .unwrap()
                    .starts_with("Follow up on API spec")
            })
            .unwrap();
        assert_eq!(
            (
                l["status"].clone(),
                l["page_status"].clone(),
                l["status_source"].clone()
            ),
            (json!("done"), json!("open"), json!("reconciled")),
            "{date}"
        );
        assert_eq!(l["completed_date"], today.as_str());
    }
    let done = app.call("list_tasks", json!({ "status": "done" })).await;
    assert!(
        done["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_link_id"] == id)
    );
    let open = app.call("list_tasks", json!({ "status": "open" })).await;
    assert!(
        !open["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_link_id"] == id)
    );

    // Where page and task agree, the source is the page.
    let page = app
        .call(
            "get_page",
            json!({ "page_id": app.page_of("2026-06-17").await }),
        )
        .await;
    let dentist = line(&page, "Book dentist appointment");
    assert_eq!(
        (dentist["status"].clone(), dentist["status_source"].clone()),
        (json!("done"), json!("page"))
    );
    let chair = line(&page, "Order a new desk chair");
    assert_eq!(
        (chair["status"].clone(), chair["page_status"].clone()),
        (json!("cancelled"), json!("cancelled"))
    );

    assert!(
        app.call_error(
            "update_task_status",
            json!({ "task_link_id": "01900000-0000-7000-8000-000000000000", "status": "done" })
        )
        .await
        .contains("not found")
    );
    assert!(
        app.call_error(
            "update_task_status",
            json!({ "task_link_id": id, "status": "finished" })
        )
        .await
        .contains("'status'")
    );
}

pub async fn list_tasks_filters(app: &TestApp) {
    let all = app.call("list_tasks", json!({ "status": "all" })).await;
    let all = all["tasks"].as_array().unwrap();
    assert_eq!(all.len(), 6);
    let firsts: Vec<&str> = all
        .iter()
        .map(|t| t["first_seen_date"].as_str().unwrap())
        .collect();
    let mut sorted = firsts.clone();
    sorted.sort();
    assert_eq!(firsts, sorted, "oldest first");
    let since = app
        .call(
            "list_tasks",
            json!({ "status": "all", "since": "2026-06-19" }),
        )
        .await;
    assert!(
        since["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["first_seen_date"].as_str().unwrap() >= "2026-06-19")
    );
    assert_eq!(since["tasks"].as_array().unwrap().len(), 2);
    let one = app
        .call("list_tasks", json!({ "status": "all", "limit": 1 }))
        .await;
    assert_eq!(one["tasks"].as_array().unwrap().len(), 1);
    let done = app.call("list_tasks", json!({ "status": "done" })).await;
    assert_eq!(done["tasks"][0]["completed_date"], "2026-06-17");
    assert!(
        app.call_error("list_tasks", json!({ "status": "later" }))
            .await
            .contains("'status'")
    );
    assert!(
        app.call_error("list_tasks", json!({ "since": "yesterday" }))
            .await
            .contains("'since'")
    );
}

pub async fn create_task_adds_a_line_and_reuses_open_tasks(app: &TestApp) {
    let created = app.call("create_task", json!({ "target_date": "2026-06-22", "text": "Draft the launch post", "source_url": "https://example.com/thread" })).await;
    assert_eq!(created["created"], true);
    assert_eq!(created["reused_existing_task"], false);
    assert_eq!(
        (
            created["notion_pushed"].clone(),
            created["notion_task_id"].clone(),
            created["notion_url"].clone()
        ),
        (json!(false), Value::Null, Value::Null)
    );
    let page = app
        .call("get_page", json!({ "page_id": created["page_id"] }))
        .await;
    assert_eq!(page["date"], "2026-06-22");
    let l = line(&page, "Draft the launch post");
    assert_eq!(l["line_id"], created["block_id"]);
    assert_eq!(
        (
            l["notation"].clone(),
            l["status"].clone(),
            l["page_status"].clone()
        ),
        (json!("task"), json!("open"), json!("open"))
    );
    // Searchable at once.
    let hits = app
        .call("search_pages", json!({ "query": "launch post" }))
        .await;
    assert_eq!(hits["results"][0]["page_id"], created["page_id"]);

    // Same text (case, spaces, punctuation aside) while open: reused.
    let again = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-23", "text": "  draft the LAUNCH post. " }),
        )
        .await;
    assert_eq!(
        (
            again["created"].clone(),
            again["reused_existing_task"].clone()
        ),
        (json!(false), json!(true))
    );
    assert_eq!(again["task_link_id"], created["task_link_id"]);
    // Also for a task written on a page.
    let written = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-22", "text": "Follow up on API spec" }),
        )
        .await;
    assert_eq!(written["created"], false);

    // On an existing date's page, the line joins that page.
    let on_existing = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-16", "text": "Water the plants" }),
        )
        .await;
    assert_eq!(
        on_existing["page_id"],
        app.page_of("2026-06-16").await.as_str()
    );

    // Once done, the same text makes a new task.
    app.call(
        "update_task_status",
        json!({ "task_link_id": created["task_link_id"], "status": "done" }),
    )
    .await;
    let fresh = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-24", "text": "Draft the launch post" }),
        )
        .await;
    assert_eq!(fresh["created"], true);
    assert_ne!(fresh["task_link_id"], created["task_link_id"]);

    for (args, arg) in [
        (
            json!({ "target_date": "2026-06-31", "text": "x" }),
            "target_date",
        ),
        (json!({ "text": "x" }), "target_date"),
        (json!({ "target_date": "2026-06-20", "text": "" }), "text"),
        (
            json!({ "target_date": "2026-06-20", "text": "x".repeat(10_001) }),
            "text",
        ),
        (json!({ "target_date": "2026-06-20", "text": 5 }), "text"),
    ] {
        let message = app.call_error("create_task", args.clone()).await;
        assert!(message.contains(&format!("'{arg}'")), "{args} -> {message}");
    }
}

pub async fn a_hundred_concurrent_creates_of_one_text_make_one_task(app: &TestApp) {
    let calls = (0..100).map(|i| {
        let app = &app;
        async move { app.call("create_task", json!({ "target_date": format!("2026-07-{:02}", 1 + i % 28), "text": "Renew the passport" })).await }
    });
    let results = futures::future::join_all(calls).await;
    let created = results.iter().filter(|r| r["created"] == true).count();
    assert_eq!(created, 1);
    let ids: std::collections::BTreeSet<String> = results
        .iter()
        .map(|r| r["task_link_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1);
    let open = app.call("list_tasks", json!({ "limit": 200 })).await;
    assert_eq!(
        open["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["text"] == "Renew the passport")
            .count(),
        1
    );
}

/// A clock pinned at one instant.
struct PinnedClock(SystemTime);

impl nib::ports::Clock for PinnedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

/// The tools in process over the app's store, keys and assets (any back end), with the
/// notebook's clock pinned at `unix` seconds, and the default user's admin principal.
fn tools_at(app: &TestApp, unix: u64) -> (InProcess, Principal) {
    let a = &app.app;
    let notebook = Notebook::new(
        a.store.clone(),
        a.vault().clone(),
        a.assets.clone(),
        Arc::new(PinnedClock(
            SystemTime::UNIX_EPOCH + Duration::from_secs(unix),
        )),
        NotebookConfig::default(),
    );
    let principal = Principal {
        user: UserId::parse("default").unwrap(),
        scope: Scope::Admin,
        credential_id: "test".into(),
        client: None,
    };
    (
        InProcess {
            notebook: Arc::new(notebook),
        },
        principal,
    )
}

async fn call_in(tools: &(InProcess, Principal), tool: &str, args: Value) -> Value {
    tools
        .0
        .call(&tools.1, tool, args.as_object().unwrap().clone())
        .await
        .map(|out| serde_json::from_str(out.get()).unwrap())
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// 2026-06-30 12:00:00 UTC, after every page of the sample.
const JUNE_30_NOON: u64 = 1_782_820_800;

async fn task_id(app: &TestApp, text: &str) -> String {
    let all = app.call("list_tasks", json!({ "status": "all" })).await;
    all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["text"] == text)
        .unwrap_or_else(|| panic!("no task {text:?} in {all}"))["task_link_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Every line showing `text` (trailing punctuation aside) on the pages of `date`.
async fn lines_of(app: &TestApp, date: &str, text: &str) -> Vec<Value> {
    let pages = app
        .call("list_pages", json!({ "from": date, "to": date }))
        .await;
    let mut found = Vec::new();
    for p in pages["pages"].as_array().unwrap() {
        let page = app
            .call("get_page", json!({ "page_id": p["page_id"] }))
            .await;
        found.extend(
            lines(&page)
                .iter()
                .filter(|l| l["text"].as_str().unwrap().trim_end_matches('.') == text)
                .cloned(),
        );
    }
    found
}

/// Issue 11, item 13: done and then todo within the same second reopens the task (it used to
/// answer `done` and stay done: same-second updates were ordered by status rank).
pub async fn a_task_reopened_in_the_same_second_is_open(app: &TestApp) {
    let id = task_id(app, "Follow up on API spec").await;
    let tools = tools_at(app, JUNE_30_NOON);
    let done = call_in(
        &tools,
        "update_task_status",
        json!({ "task_link_id": id, "status": "done" }),
    )
    .await;
    assert_eq!(done["status"], "done");
    let reopened = call_in(
        &tools,
        "update_task_status",
        json!({ "task_link_id": id, "status": "todo" }),
    )
    .await;
    assert_eq!(reopened["status"], "todo", "{reopened}");
    // And again, all in the same second: the last one made wins.
    for status in ["cancelled", "done", "todo"] {
        let r = call_in(
            &tools,
            "update_task_status",
            json!({ "task_link_id": id, "status": status }),
        )
        .await;
        assert_eq!(r["status"], status);
    }

    let open = app.call("list_tasks", json!({ "status": "open" })).await;
    let task = open["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_link_id"] == id.as_str())
        .unwrap_or_else(|| panic!("the reopened task is not open: {open}"));
    assert_eq!(
        (task["status"].clone(), task["completed_date"].clone()),
        (json!("todo"), Value::Null)
    );
    for date in ["2026-06-16", "2026-06-17"] {
        let lines = lines_of(app, date, "Follow up on API spec").await;
        assert_eq!(lines.len(), 1, "{date}");
        let l = &lines[0];
        assert_eq!(
            (
                l["status"].clone(),
                l["page_status"].clone(),
                l["status_source"].clone(),
                l["completed_date"].clone()
            ),
            (json!("open"), json!("open"), json!("page"), Value::Null),
            "{date}"
        );
    }
}

/// Issue 11, item 15: a line's `status` is in the page vocabulary like its `page_status`
/// (`open`, `done`, `cancelled`, `migrated`); `todo` is only for task objects.
/// A page read twice at one revision is answered the second time from the answer kept for it
/// (`notebook::answers`); any write in between, here or on another page, is a new revision and
/// shows.
pub async fn a_page_read_again_shows_every_write_since(app: &TestApp) {
    let page_id = app.page_of("2026-06-16").await;
    let read = || app.call("get_page", json!({ "page_id": page_id }));
    let first = read().await;
    assert_eq!(read().await, first, "the same revision, the same answer");
    // A status changed elsewhere (a task's update) shows on the page.
    let task = line(&first, "Follow up on API spec")["task_link_id"].clone();
    app.call(
        "update_task_status",
        json!({ "task_link_id": task, "status": "done" }),
    )
    .await;
    let after = read().await;
    assert_ne!(after["revision"], first["revision"]);
    assert_eq!(line(&after, "Follow up on API spec")["status"], "done");
    // A task added to the page's date shows as a new line.
    app.call(
        "create_task",
        json!({ "target_date": "2026-06-16", "text": "water the ferns" }),
    )
    .await;
    let added = read().await;
    assert_eq!(line(&added, "water the ferns")["notation"], "task");
    // Unchanged reads still say so, and their revision is the kept answer's.
    let same = app
        .call(
            "get_page",
            json!({ "page_id": page_id, "if_revision": added["revision"] }),
        )
        .await;
    assert_eq!(
        same,
        json!({ "unchanged": true, "revision": added["revision"] })
    );
}

pub async fn line_statuses_speak_the_page_vocabulary(app: &TestApp) {
    let vocabulary = [
        json!("open"),
        json!("done"),
        json!("cancelled"),
        json!("migrated"),
    ];
    let all = app.call("list_pages", json!({})).await;
    let mut task_lines = 0;
    for p in all["pages"].as_array().unwrap() {
        let page = app
            .call("get_page", json!({ "page_id": p["page_id"] }))
            .await;
        for l in lines(&page) {
            if l["notation"] != "task" {
                continue;
            }
            task_lines += 1;
            assert!(vocabulary.contains(&l["status"]), "{l}");
            assert!(vocabulary.contains(&l["page_status"]), "{l}");
        }
    }
    assert!(task_lines >= 10, "{task_lines} task lines");
    // An open line of an open task is open; a migrated one stays migrated, from the page.
    let open = &lines_of(app, "2026-06-16", "Follow up on API spec").await[0];
    assert_eq!(
        (open["status"].clone(), open["status_source"].clone()),
        (json!("open"), json!("page"))
    );
    let migrated = &lines_of(app, "2026-06-19", "Follow up on API spec").await[0];
    assert_eq!(
        (
            migrated["status"].clone(),
            migrated["page_status"].clone(),
            migrated["status_source"].clone()
        ),
        (json!("migrated"), json!("migrated"), json!("page"))
    );
    // Once done elsewhere, the lines say `done`, reconciled; the task object says `done` too.
    let id = task_id(app, "Follow up on API spec").await;
    let r = app
        .call(
            "update_task_status",
            json!({ "task_link_id": id, "status": "done" }),
        )
        .await;
    assert_eq!(r["status"], "done");
    let migrated = &lines_of(app, "2026-06-19", "Follow up on API spec").await[0];
    assert_eq!(
        (
            migrated["status"].clone(),
            migrated["status_source"].clone()
        ),
        (json!("done"), json!("reconciled"))
    );
    // The schema lists the same vocabulary.
    let (_, list) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .await;
    let get_page = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get_page")
        .unwrap();
    let line_schema =
        &get_page["outputSchema"]["properties"]["structure_json"]["properties"]["lines"]["items"];
    assert_eq!(
        line_schema["properties"]["status"]["enum"],
        line_schema["properties"]["page_status"]["enum"]
    );
}

/// The raw body of the default user's task item (its unsealed metadata is plain JSON).
async fn task_body(app: &TestApp, id: &str) -> (Value, usize) {
    let item = app
        .app
        .store
        .get("U#default", &format!("TASK#{id}"))
        .await
        .unwrap()
        .expect("the task item");
    (serde_json::from_slice(&item.body).unwrap(), item.body.len())
}

/// Issue 11, item 9: every status change was appended to the task item, so toggling grew it
/// towards DynamoDB's 400 KB item limit. The item keeps the newest 32 updates and counts the
/// rest, and the status stays the last update's.
pub async fn toggling_a_task_keeps_its_history_bounded(app: &TestApp) {
    const KEPT: usize = nib::domain::tasks::MAX_KEPT_UPDATES;
    let id = task_id(app, "Draft the quarterly budget").await;
    let (_, fresh_size) = task_body(app, &id).await;
    let toggles = KEPT + 8;
    for i in 0..toggles {
        let status = if i % 2 == 0 { "done" } else { "todo" };
        let r = app
            .call(
                "update_task_status",
                json!({ "task_link_id": id, "status": status }),
            )
            .await;
        assert_eq!(r["status"], status, "toggle {i}");
    }
    let (body, size) = task_body(app, &id).await;
    assert_eq!(body["updates"].as_array().unwrap().len(), KEPT, "{body}");
    assert_eq!(body["dropped_updates"], (toggles - KEPT) as u64);
    assert!(body["checkpoint"].is_object(), "{body}");
    let seqs: Vec<u64> = body["updates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["seq"].as_u64().unwrap())
        .collect();
    let newest: Vec<u64> = (toggles - KEPT + 1..=toggles).map(|n| n as u64).collect();
    assert_eq!(seqs, newest, "the newest updates, in order");
    // The update history adds at most 4 KiB; the status log (`get_task`'s history, one entry
    // per change, each well under 200 bytes sealed) is bounded by its own cap.
    let log_cap = nib::domain::tasks::MAX_STATUS_CHANGES * 200;
    assert!(size < fresh_size + 4096 + log_cap, "{size} bytes");
    let history = app.call("get_task", json!({ "task_link_id": id })).await;
    // The import that wrote the task, then every toggle.
    assert_eq!(
        history["history"].as_array().unwrap().len(),
        toggles + 1,
        "{history}"
    );
    // The last toggle (todo) decides, and the pages showing it can still be written.
    let open = app.call("list_tasks", json!({ "status": "open" })).await;
    assert!(
        open["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_link_id"] == id.as_str())
    );
    let created = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-17", "text": "Ship the budget deck" }),
        )
        .await;
    assert_eq!(created["created"], true);
    let lines = lines_of(app, "2026-06-17", "Draft the quarterly budget").await;
    assert_eq!(lines[0]["status"], "open");
}

/// Issue 11, item 9: a query's length and distinct words are capped (a 10,000-character query
/// used to fan out into a read per word), with an error that names the argument and the limit.
pub async fn search_queries_are_bounded(app: &TestApp) {
    let words = |n: usize| {
        (0..n)
            .map(|i| format!("word{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let too_many = app
        .call_error("search_pages", json!({ "query": words(33) }))
        .await;
    assert!(
        too_many.contains("'query'") && too_many.contains("32"),
        "{too_many}"
    );
    let too_long = app
        .call_error("search_pages", json!({ "query": "spec ".repeat(103) }))
        .await;
    assert!(
        too_long.contains("'query'") && too_long.contains("512"),
        "{too_long}"
    );
    // At the limits it searches.
    let r = app
        .call(
            "search_pages",
            json!({ "query": format!("spec {}", words(31)), "mode": "keyword" }),
        )
        .await;
    assert_eq!(r["results"].as_array().unwrap().len(), 4, "{r}");
    // The ChatGPT `search` tool runs the same checks (in the notebook).
    let r = app
        .call_raw(&app.token, "search", json!({ "query": words(33) }))
        .await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("32"),
        "{r}"
    );
    let r = app
        .call_raw(&app.token, "search", json!({ "query": "x".repeat(10_000) }))
        .await;
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("512"),
        "{r}"
    );
}

/// Issue 11, item 16: a limit above the maximum is lowered to it (it was an error), and the
/// result says which limit it used. Zero or negative stays an error.
pub async fn limits_above_the_maximum_are_lowered(app: &TestApp) {
    for (tool, args, max) in [
        ("list_pages", json!({ "limit": 500 }), 200),
        ("list_tasks", json!({ "limit": 500, "status": "all" }), 200),
        (
            "search_pages",
            json!({ "limit": 500, "query": "spec" }),
            100,
        ),
    ] {
        let r = app.call(tool, args).await;
        assert_eq!(r["limit_applied"], max, "{tool}: {r}");
        assert_eq!(r["next_cursor"], Value::Null, "{tool}: everything fits");
        for bad in [json!(0), json!(-5)] {
            let mut args = json!({ "limit": bad });
            if tool == "search_pages" {
                args["query"] = json!("spec");
            }
            let message = app.call_error(tool, args).await;
            assert!(message.contains("'limit'"), "{tool}: {message}");
        }
    }
    // Defaults are reported too.
    let r = app.call("list_tasks", json!({})).await;
    assert_eq!(r["limit_applied"], 50);
    // The input schemas let a large limit through, and declare the cursor.
    let (_, list) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .await;
    for tool in list["result"]["tools"].as_array().unwrap() {
        if ["list_pages", "list_tasks", "search_pages"].contains(&tool["name"].as_str().unwrap()) {
            let input = &tool["inputSchema"]["properties"];
            assert!(input["limit"].get("maximum").is_none(), "{tool}");
            assert_eq!(input["cursor"]["type"], "string", "{tool}");
            let output = &tool["outputSchema"];
            // list_pages and list_tasks may answer only {unchanged, revision}: the paging
            // fields are required of their whole answer (the first branch of anyOf).
            let required = match output.get("anyOf") {
                Some(branches) => &branches[0]["required"],
                None => &output["required"],
            };
            for key in ["next_cursor", "limit_applied"] {
                assert!(
                    output["properties"].get(key).is_some(),
                    "{tool} lacks {key}"
                );
                assert!(required.as_array().unwrap().contains(&json!(key)), "{tool}");
            }
        }
    }
}

/// Follows `next_cursor` from `args` to the end; returns every row of `field` and the number
/// of calls.
async fn walk(app: &TestApp, tool: &str, args: Value, field: &str) -> (Vec<Value>, usize) {
    let mut rows = Vec::new();
    let mut args = args;
    let mut calls = 0;
    loop {
        let r = app.call(tool, args.clone()).await;
        calls += 1;
        assert!(calls < 50, "{tool} does not end");
        rows.extend(r[field].as_array().unwrap().iter().cloned());
        match r["next_cursor"].as_str() {
            Some(c) => {
                assert!(
                    !r[field].as_array().unwrap().is_empty(),
                    "a cursor after nothing"
                );
                args["cursor"] = json!(c);
            }
            None => return (rows, calls),
        }
    }
}

/// Issue 11, item 16: every list returns `next_cursor` when more follows, so nothing is cut
/// silently: walking the cursors gives the whole list, in order, each row once. A cursor is
/// checked (another list's, an edited one), and gives another user nothing of this one's.
pub async fn every_list_pages_through_cursors(app: &TestApp) {
    for (tool, args, field, key) in [
        ("list_pages", json!({}), "pages", "page_id"),
        (
            "list_pages",
            json!({ "from": "2026-06-17", "to": "2026-06-19" }),
            "pages",
            "page_id",
        ),
        (
            "list_tasks",
            json!({ "status": "all" }),
            "tasks",
            "task_link_id",
        ),
        (
            "list_tasks",
            json!({ "status": "open" }),
            "tasks",
            "task_link_id",
        ),
        (
            "list_tasks",
            json!({ "status": "all", "since": "2026-06-17" }),
            "tasks",
            "task_link_id",
        ),
        (
            "search_pages",
            json!({ "query": "spec printer" }),
            "results",
            "page_id",
        ),
    ] {
        let whole = app.call(tool, args.clone()).await;
        assert_eq!(whole["next_cursor"], Value::Null, "{tool}");
        let whole = whole[field].as_array().unwrap().clone();
        assert!(whole.len() >= 2, "{tool} {args}: {whole:?}");
        for limit in [1, 2, whole.len()] {
            let mut paged = args.clone();
            paged["limit"] = json!(limit);
            let (rows, calls) = walk(app, tool, paged, field).await;
            let ids = |v: &[Value]| v.iter().map(|r| r[key].clone()).collect::<Vec<_>>();
            assert_eq!(ids(&rows), ids(&whole), "{tool} {args} by {limit}");
            assert_eq!(
                calls,
                whole.len().div_ceil(limit),
                "{tool} {args} by {limit}"
            );
        }
    }

    let first = app.call("list_pages", json!({ "limit": 2 })).await;
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    // Another list's cursor, or an edited one, is refused, naming the argument.
    for (tool, args) in [
        ("list_tasks", json!({ "cursor": cursor })),
        ("search_pages", json!({ "query": "spec", "cursor": cursor })),
        ("list_pages", json!({ "cursor": format!("{cursor}x") })),
        (
            "list_pages",
            json!({ "cursor": "djF8cHwyMDI2LTA2LTE5fC4uL1UjbWFsbG9yeQ" }),
        ),
    ] {
        let message = app.call_error(tool, args.clone()).await;
        assert!(message.contains("'cursor'"), "{tool} {args}: {message}");
    }
    let search = app
        .call("search_pages", json!({ "query": "spec", "limit": 1 }))
        .await;
    let other_query = app
        .call_error(
            "search_pages",
            json!({ "query": "printer", "cursor": search["next_cursor"] }),
        )
        .await;
    assert!(other_query.contains("'cursor'"), "{other_query}");
    // Another user with this user's cursors reads only their own (empty) notebook.
    let other = app.token_for("mallory", Scope::Admin).await;
    let tasks = app
        .call("list_tasks", json!({ "status": "all", "limit": 1 }))
        .await;
    for (tool, args, field) in [
        ("list_pages", json!({ "cursor": cursor }), "pages"),
        (
            "list_tasks",
            json!({ "status": "all", "cursor": tasks["next_cursor"] }),
            "tasks",
        ),
        (
            "search_pages",
            json!({ "query": "spec", "cursor": search["next_cursor"] }),
            "results",
        ),
    ] {
        let r = app.call_raw(&other, tool, args).await;
        assert_eq!(r["isError"], false, "{tool}: {r}");
        assert_eq!(r["structuredContent"][field], json!([]), "{tool}");
    }
}
