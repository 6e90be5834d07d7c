//! Corrections the owner makes (issue 46), end to end: in the web app's page view the owner
//! corrects a task line's text and box and another line's text, with plain forms (no
//! JavaScript) and the app's CSRF protection; from then on `get_page` shows the corrected text
//! marked `text_source: "corrected"`, search finds the corrected word and not the old one, and
//! the task follows. Locally, and through the Lambda functions over the AWS emulator. Reading
//! the same ink again with the real local engine (`nib ocr --force`, `nib import
//! --force-ocr`, a re-import of the same ink) keeps the correction, through the `nib` binary.
//! (Bundle export and import keep it: `testkit/tests/library/bundle.rs`, both back ends.)

use nib::domain::UserId;
use nib::services::{LocalOptions, Services};
use serde_json::{Value, json};

use crate::app::{Browser, token_before, with_password};
use crate::helpers::{Options, TestApp, nib_exe};

/// The lines of a page as `get_page` gives them.
async fn lines(app: &TestApp, page_id: &str) -> Vec<Value> {
    let page = app.call("get_page", json!({ "page_id": page_id })).await;
    page["structure_json"]["lines"].as_array().unwrap().clone()
}

/// Whether `search_pages` for `query` finds the page `page_id`.
async fn finds(app: &TestApp, query: &str, page_id: &str) -> bool {
    let found = app
        .call(
            "search_pages",
            json!({ "query": query, "mode": "keyword", "limit": 50 }),
        )
        .await;
    found["results"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h["page_id"] == page_id)
}

async fn the_owner_corrects_a_line_and_a_box(app: TestApp) {
    with_password(&app, "default").await;
    let owner = Browser::sign_in(&app.base, "default").await;
    // A page of the sample with an open task line and another line written on it.
    let listed = app.call("list_pages", json!({ "limit": 100 })).await;
    let mut found = None;
    for p in listed["pages"].as_array().unwrap() {
        let id = p["page_id"].as_str().unwrap().to_owned();
        let ls = lines(&app, &id).await;
        let task = ls
            .iter()
            .find(|l| l["notation"] == "task" && l["page_status"] == "open");
        let other = ls
            .iter()
            .find(|l| l["notation"] != "task" && l["notation"] != "heading");
        if let (Some(task), Some(other)) = (task, other) {
            found = Some((id, task.clone(), other.clone()));
            break;
        }
    }
    let (page_id, task, other) = found.expect("the sample has a page with an open task");
    assert_eq!(task["text_source"], "page");
    let old_text = task["text"].as_str().unwrap().to_owned();
    let task_line = task["line_id"].as_str().unwrap().to_owned();
    let other_line = other["line_id"].as_str().unwrap().to_owned();

    let here = format!("/app/pages/{page_id}");
    let html = owner.screen(&here).await;
    let action = format!("/app/pages/{page_id}/lines/{task_line}");
    assert!(
        html.contains(&format!("action=\"{action}\"")),
        "each line written on the page has its correction form"
    );
    let token = token_before(&html, "back").unwrap();
    let fields = [
        ("back", here.as_str()),
        ("text", "Ring Zebulon about the quixotic invoice"),
        ("has_box", "1"),
        ("box", "ticked"),
    ];

    // Refused, changing nothing: a forged token, no strict cookie, another site's origin.
    let before = lines(&app, &page_id).await;
    for (token, strict, origin) in [
        (Some("forged"), true, Some(app.base.as_str())),
        (None, true, Some(app.base.as_str())),
        (Some(token.as_str()), false, Some(app.base.as_str())),
        (Some(token.as_str()), true, Some("https://evil.example")),
    ] {
        let r = owner.post_as(&action, &fields, token, strict, origin).await;
        assert_eq!(r.status(), 403, "{token:?} {strict} {origin:?}");
    }
    assert_eq!(lines(&app, &page_id).await, before, "nothing changed");

    // The correction: the task's text and its box.
    let r = owner.post(&action, &html, &fields).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], here.as_str());
    let after = lines(&app, &page_id).await;
    let line = after.iter().find(|l| l["line_id"] == task_line).unwrap();
    assert_eq!(line["text"], "Ring Zebulon about the quixotic invoice");
    assert_eq!(line["text_source"], "corrected");
    assert_eq!(line["page_status"], "done");
    assert_eq!(line["status"], "done");
    assert_eq!(line["origin"], "page");

    // Search finds the corrected words, no longer the old reading's own.
    assert!(finds(&app, "Zebulon", &page_id).await);
    let old_word = old_text
        .split_whitespace()
        .filter(|w| w.len() >= 4 && w.chars().all(char::is_alphabetic))
        .find(|w| {
            !after
                .iter()
                .any(|l| l["text"].as_str().unwrap().contains(*w))
        });
    if let Some(word) = old_word {
        assert!(!finds(&app, word, &page_id).await, "{word}");
    }

    // The task follows: its text and its status.
    let tasks = app
        .call("list_tasks", json!({ "status": "all", "limit": 200 }))
        .await;
    let tasks = tasks["tasks"].as_array().unwrap();
    let t = tasks
        .iter()
        .find(|t| t["task_link_id"] == line["task_link_id"])
        .expect("the corrected line's task is listed");
    assert_eq!(t["text"], "Ring Zebulon about the quixotic invoice");
    assert_eq!(t["status"], "done");
    assert!(
        !tasks
            .iter()
            .any(|t| t["text"] == old_text.as_str() && t["source_page_id"] == page_id.as_str()),
        "no task of this page keeps the old reading"
    );

    // Another line's text; the page view marks both lines corrected.
    let html = owner.screen(&here).await;
    let r = owner
        .post(
            &format!("/app/pages/{page_id}/lines/{other_line}"),
            &html,
            &[("back", here.as_str()), ("text", "Notes on the zeppelin")],
        )
        .await;
    assert_eq!(r.status(), 303);
    let after = lines(&app, &page_id).await;
    let line = after.iter().find(|l| l["line_id"] == other_line).unwrap();
    assert_eq!(line["text"], "Notes on the zeppelin");
    assert_eq!(line["text_source"], "corrected");
    assert!(finds(&app, "zeppelin", &page_id).await);
    let html = owner.screen(&here).await;
    assert_eq!(html.matches("class=\"corrected-mark\"").count(), 2);
    assert!(html.contains("Notes on the zeppelin"));

    // The page's resource reads as corrected too.
    let page = app.call("get_page", json!({ "page_id": page_id })).await;
    assert!(
        page["ocr_text"]
            .as_str()
            .unwrap()
            .contains("Notes on the zeppelin")
    );

    // A line that is not on the page is not found; an empty text is refused.
    let r = owner
        .post(
            &format!("/app/pages/{page_id}/lines/ln_000000000000"),
            &html,
            &[("back", here.as_str()), ("text", "x")],
        )
        .await;
    assert_eq!(r.status(), 404);
    let r = owner
        .post(&action, &html, &[("back", here.as_str()), ("text", "  ")])
        .await;
    assert_eq!(r.status(), 400);
}

#[tokio::test]
async fn the_owner_corrects_a_line_and_a_box_locally() {
    the_owner_corrects_a_line_and_a_box(TestApp::spawn().await).await;
}

#[tokio::test]
async fn the_owner_corrects_a_line_and_a_box_through_the_functions() {
    the_owner_corrects_a_line_and_a_box(TestApp::spawn_with(Options::lambda()).await).await;
}

/// The real local engine reads a handwritten page; the owner corrects its first task; the
/// same ink read again (`nib ocr --all --force`, `nib import --force-ocr`, and a plain
/// re-import, which does not read it) keeps the correction, and the corrected words are the
/// user's vocabulary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correction_survives_reading_the_same_ink_again() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/data/ocr/2025-03-17.png"),
        dir.path().join("2025-03-17.png"),
    )
    .unwrap();
    let nib = |args: &[&str]| {
        let out = std::process::Command::new(nib_exe())
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .env("NIB_OCR", "local")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let folder = dir.path().to_str().unwrap();
    nib(&["import", folder]);
    let user = UserId::parse("default").unwrap();
    let open = || Services::open_local(data.path(), LocalOptions::default()).unwrap();
    let app = open();
    let page_id = app
        .notebook()
        .list_pages(&user, None, None, 1)
        .await
        .unwrap()[0]
        .page_id
        .clone();
    let page = app.notebook().get_page(&user, &page_id).await.unwrap();
    assert!(page.ocr_engine.is_some(), "read by the engine");
    let task = page
        .lines
        .iter()
        .find(|l| l.notation == nib::domain::Notation::Task)
        .expect("the page has a task")
        .clone();
    let ticked = task.page_status != Some(nib::domain::PageStatus::Done);
    app.notebook()
        .correct_line(
            &user,
            &page_id,
            &task.line_id,
            nib::notebook::Correction {
                text: Some("Phone Quennell about the lease".into()),
                ticked: Some(ticked),
            },
        )
        .await
        .unwrap();
    let words = app.notebook().vocabulary(&user).await.unwrap();
    assert!(words.iter().any(|w| w == "Quennell"), "{words:?}");
    drop(app);

    let check = |when: &'static str| {
        let app = open();
        let user = user.clone();
        let page_id = page_id.clone();
        async move {
            let page = app.notebook().get_page(&user, &page_id).await.unwrap();
            let line = page
                .lines
                .iter()
                .find(|l| l.text == "Phone Quennell about the lease")
                .unwrap_or_else(|| panic!("{when}: the correction is gone: {:?}", page.lines));
            assert_eq!(
                line.text_source,
                nib::notebook::TextSource::Corrected,
                "{when}"
            );
            assert_eq!(
                line.page_status == Some(nib::domain::PageStatus::Done),
                ticked,
                "{when}"
            );
        }
    };
    let out = nib(&["ocr", "--all", "--force"]);
    assert!(out.contains("read 1 pages again; 0 skipped"), "{out}");
    check("nib ocr --force").await;
    nib(&["import", "--force-ocr", folder]);
    check("nib import --force-ocr").await;
    nib(&["import", folder]);
    check("a re-import of the same ink").await;
}
