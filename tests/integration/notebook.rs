//! The eight tools over HTTP against the sample notebook (tests/data/sample).
//!
//! Each test is a body taking a `TestApp`; `notebook_tests!` declares one `#[tokio::test]` per
//! body over a given back end: here (module `local`) over the embedded one, and in `aws.rs`
//! over DynamoDB, S3 and KMS on the emulator. The assertions are the same for both.

use nib::auth::Scope;
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
        (json!({ "limit": 201 }), "limit"),
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
    let r = app
        .call("search_pages", json!({ "query": "printer" }))
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
    let r = app.call("search_pages", json!({ "query": "specs" })).await;
    assert_eq!(r["results"].as_array().unwrap().len(), 4);
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
        app.call_error("search_pages", json!({ "query": "x".repeat(10_001) }))
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
    // A page with ink links to it.
    let id = app.page_of("2026-06-18").await;
    let page = app.call("fetch", json!({ "id": id })).await;
    assert!(app.is_asset_url(page["url"].as_str().unwrap()));
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
        json!({ "updated": true, "status": "done", "text": "Follow up on API spec", "notion_updated": false })
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
        (json!("task"), json!("todo"), json!("open"))
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
