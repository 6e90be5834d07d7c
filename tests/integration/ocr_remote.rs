//! The remote OCR providers through the `nib` binary: `nib serve --ocr openai` /
//! `--ocr google-vision` (an upload in the web app, read over MCP), `nib import --ocr openai`
//! and `nib ocr`, against the stand-ins (`nib_testkit::openai_standin`,
//! `nib_testkit::vision_standin`): the model's markdown and Vision's words become text and
//! tasks with their statuses, and a page the provider failed on is stored unread, logged with
//! its id and the provider's status (never its body or the key), and read by `nib ocr`.

use std::path::{Path, PathBuf};

use nib::domain::{TaskStatus, UserId};
use nib::services::{LocalOptions, Services};
use nib_testkit::openai_standin::{FAULT_BODY_MARKER, OpenAiStandin};
use nib_testkit::textract_standin::TruthPage;
use nib_testkit::vision_standin::VisionStandin;
use serde_json::{Value, json};

use crate::helpers::{call_served, nib_exe};
use crate::ocr::Served;

const MODEL: &str = "llava:13b";
const KEY: &str = "sk-integration-key";

fn ink(stem: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/data/ocr")).join(format!("{stem}.png"))
}

/// Runs `nib --data-dir DATA ARGS` with the provider's settings; (stdout, stderr).
fn nib(data: &Path, standin: &OpenAiStandin, args: &[&str]) -> (String, String) {
    let out = std::process::Command::new(nib_exe())
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("NIB_OCR_OPENAI_BASE_URL", standin.base_url())
        .env("NIB_OCR_OPENAI_MODEL", MODEL)
        .env("NIB_OCR_OPENAI_API_KEY", KEY)
        .env("NIB_OCR_ATTEMPTS", "2")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{args:?}: {stderr}");
    (stdout, stderr)
}

async fn tasks_of(data: &Path) -> Vec<(String, TaskStatus)> {
    let app = Services::open_local(data, LocalOptions::default()).unwrap();
    let user = UserId::parse("default").unwrap();
    let mut tasks: Vec<_> = app
        .notebook()
        .list_tasks(&user, nib::notebook::TaskFilter::All, None, 200)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.text, t.status))
        .collect();
    tasks.sort_by(|a, b| a.0.cmp(&b.0));
    tasks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nib_import_with_a_vision_model_gives_tasks_and_a_failed_page_is_read_later() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin.reply("# Friday\n- [ ] call the bank\n- [x] buy milk\n- a note\nplain words");
    let data = tempfile::tempdir().unwrap();
    let first = tempfile::tempdir().unwrap();
    std::fs::copy(ink("2025-03-17"), first.path().join("2025-03-17.png")).unwrap();
    let (out, _) = nib(
        data.path(),
        &standin,
        &["import", "--ocr", "openai", first.path().to_str().unwrap()],
    );
    assert!(out.contains("imported 1 pages (1 new"), "{out}");
    assert_eq!(
        tasks_of(data.path()).await,
        [
            ("buy milk".to_owned(), TaskStatus::Done),
            ("call the bank".to_owned(), TaskStatus::Todo),
        ]
    );
    let seen = standin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].model, MODEL);
    assert!(seen[0].image_size.is_some());

    // The provider fails both tries on the next page: it is imported all the same, unread.
    standin.fail_next(&[500, 503]);
    standin.reply("- [ ] pay rent");
    let second = tempfile::tempdir().unwrap();
    std::fs::copy(ink("2025-03-15"), second.path().join("2025-03-15.png")).unwrap();
    let (out, err) = nib(
        data.path(),
        &standin,
        &["import", "--ocr", "openai", second.path().to_str().unwrap()],
    );
    assert!(out.contains("imported 1 pages (1 new"), "{out}");
    assert!(
        err.contains("stored unread") && err.contains("HTTP 503"),
        "{err}"
    );
    assert!(
        !err.contains(FAULT_BODY_MARKER) && !err.contains(KEY),
        "{err}"
    );
    assert_eq!(tasks_of(data.path()).await.len(), 2);

    // `nib ocr` reads the unread page; the page read before is skipped.
    let (out, _) = nib(data.path(), &standin, &["ocr", "--all", "--ocr", "openai"]);
    assert!(out.contains("read 1 pages again; 1 skipped"), "{out}");
    assert_eq!(
        tasks_of(data.path()).await,
        [
            ("buy milk".to_owned(), TaskStatus::Done),
            ("call the bank".to_owned(), TaskStatus::Todo),
            ("pay rent".to_owned(), TaskStatus::Todo),
        ]
    );
}

/// An ink page uploaded in the web app of a `nib serve` started with `args` and `env`: the
/// upload's one-line outcome ("new page (N lines, M tasks)") and the page's id.
async fn upload(served: &Served, password: &str, file: &str) -> (String, String) {
    use crate::app::Browser;
    let base = served.base();
    let owner = Browser::sign_in_with(&base, "default", password).await;
    let ink = std::fs::read(ink(file)).unwrap();
    let file = &owner.upload_file(&format!("{file}.png"), &ink).await;
    assert_eq!(file["outcome"], "new", "{file}");
    (
        file["message"].as_str().unwrap().to_owned(),
        file["page_id"].as_str().unwrap().to_owned(),
    )
}

/// What a first start of `nib serve` printed: (the MCP URL, the token, the password).
fn credentials(served: &Served) -> (String, String, String) {
    let url = served.after("nib: serving ").unwrap().to_owned();
    let token = served
        .lines
        .iter()
        .find_map(|l| l.strip_prefix("nib: token for user ")?.split_once("): "))
        .map(|(_, t)| t.to_owned())
        .expect("a first start prints a token");
    let password = served
        .after("nib: password for user default (OAuth sign-in page): ")
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a first start prints the password")
        .to_owned();
    (url, token, password)
}

/// `nib serve --ocr openai` as in docs/ocr.md, "Choosing an OCR provider", the provider's
/// settings in the environment: an ink page uploaded in the web app comes out with the model's text and its tasks over MCP; a
/// page the provider fails on (5xx past the retries) is stored all the same, unread, logged
/// with its id and the status but never the key or the provider's body, and nothing an MCP
/// client sees holds the key; `nib ocr --all` reads it later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nib_serve_with_openai_reads_uploaded_ink_and_a_failed_page_is_read_later() {
    let standin = OpenAiStandin::start(MODEL, Some(KEY)).await.unwrap();
    standin.reply("# Friday\n- [ ] call the bank\n- [x] buy milk\n- a note\nplain words");
    let data = tempfile::tempdir().unwrap();
    let log_path = data.path().join("serve.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let served = Served::start_with(
        data.path(),
        &["--ocr", "openai"],
        &[
            ("NIB_OCR_OPENAI_BASE_URL", standin.base_url()),
            ("NIB_OCR_OPENAI_MODEL", MODEL),
            ("NIB_OCR_OPENAI_API_KEY", KEY),
            ("NIB_OCR_ATTEMPTS", "2"),
        ],
        log.into(),
    );
    assert!(
        served.lines.iter().all(|l| !l.contains(KEY)),
        "{:?}",
        served.lines
    );
    let (url, token, password) = credentials(&served);
    let (message, page_id) = upload(&served, &password, "2025-03-17").await;
    assert_eq!(message, "new page (5 lines, 2 tasks)");
    let page = call_served(&url, &token, "get_page", json!({ "page_id": page_id })).await;
    let page = &page["result"]["structuredContent"];
    assert_eq!(
        page["ocr_engine"],
        format!("openai-compatible {MODEL}"),
        "{page}"
    );
    assert_eq!(
        page["ocr_text"], "Friday\ncall the bank\nbuy milk\na note\nplain words",
        "{page}"
    );
    let tasks = call_served(&url, &token, "list_tasks", json!({ "status": "all" })).await;
    let mut got: Vec<(String, String)> = tasks["result"]["structuredContent"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["text"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("buy milk".to_owned(), "done".to_owned()),
            ("call the bank".to_owned(), "todo".to_owned()),
        ],
        "{tasks}"
    );
    let seen = standin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer sk-integration-key")
    );

    // Both tries fail: the page is stored, unread.
    standin.fail_next(&[502, 503]);
    standin.reply("- [ ] pay rent");
    let (message, failed_id) = upload(&served, &password, "2025-03-15").await;
    assert_eq!(message, "new page (0 lines, 0 tasks)");
    assert_eq!(standin.requests().len(), 3);
    let unread = call_served(&url, &token, "get_page", json!({ "page_id": failed_id })).await;
    assert!(!unread.to_string().contains(KEY), "{unread}");
    assert!(
        unread["result"]["structuredContent"]["ocr_text"].is_null(),
        "{unread}"
    );
    drop(served);
    let log = std::fs::read_to_string(&log_path).unwrap();
    let said = log
        .lines()
        .find(|l| l.contains("stored unread"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        said.contains(&failed_id) && said.contains("HTTP 503"),
        "{said}"
    );
    assert!(
        !log.contains(KEY) && !log.contains(FAULT_BODY_MARKER),
        "{log}"
    );

    // Read later, with the server stopped (the store is the server's while it runs).
    let (out, _) = nib(data.path(), &standin, &["ocr", "--all", "--ocr", "openai"]);
    assert!(out.contains("read 1 pages again; 1 skipped"), "{out}");
    let open: Vec<_> = tasks_of(data.path()).await;
    assert!(
        open.contains(&("pay rent".to_owned(), TaskStatus::Todo)),
        "{open:?}"
    );
}

/// `nib serve --ocr google-vision`: Vision's words are joined into lines, laid out with the
/// page's pixels, and the ticked and empty boxes come out as tasks with their statuses; the
/// key goes in a header, never the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nib_serve_with_google_vision_reads_uploaded_ink_into_tasks() {
    const VISION_KEY: &str = "AIza-integration-key";
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/data/ocr");
    let png = std::fs::read(ink("2025-03-15")).unwrap();
    let image = nib::ocr::raster::decode(&png).unwrap().remove(0);
    let truth_json = std::fs::read_to_string(format!("{dir}/2025-03-15.truth.json")).unwrap();
    let truth = TruthPage::parse(&truth_json).unwrap().remove(0);
    let expected: Value = serde_json::from_str(&truth_json).unwrap();
    let standin = VisionStandin::start(VISION_KEY).await.unwrap();
    standin.reply(
        truth
            .lines_for(&image)
            .into_iter()
            .map(|mut l| {
                l.confidence = 0.95;
                l
            })
            .collect(),
    );
    let data = tempfile::tempdir().unwrap();
    let key_file = data.path().join("vision.key");
    std::fs::write(&key_file, format!("{VISION_KEY}\n")).unwrap();
    let served = Served::start_with(
        data.path(),
        &["--ocr", "google-vision"],
        &[
            ("NIB_OCR_GOOGLE_VISION_URL", standin.base_url()),
            ("NIB_OCR_GOOGLE_API_KEY_FILE", key_file.to_str().unwrap()),
        ],
        std::process::Stdio::null(),
    );
    let (url, token, password) = credentials(&served);
    let (message, page_id) = upload(&served, &password, "2025-03-15").await;
    let truth_tasks: Vec<&Value> = expected["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] == "task")
        .collect();
    // Every line Vision read is a line of the page (the task count is the layout's, which
    // the OCR tests measure; each true task is checked below).
    assert!(
        message.starts_with(&format!(
            "new page ({} lines, ",
            expected["lines"].as_array().unwrap().len()
        )),
        "{message}"
    );
    let page = call_served(&url, &token, "get_page", json!({ "page_id": page_id })).await;
    assert_eq!(
        page["result"]["structuredContent"]["ocr_engine"],
        "google-cloud-vision DOCUMENT_TEXT_DETECTION",
        "{page}"
    );
    let tasks = call_served(&url, &token, "list_tasks", json!({ "status": "all" })).await;
    let tasks = tasks["result"]["structuredContent"]["tasks"]
        .as_array()
        .unwrap()
        .clone();
    for t in &truth_tasks {
        let text = t["text"].as_str().unwrap();
        let got = tasks
            .iter()
            .find(|g| g["text"] == text)
            .unwrap_or_else(|| panic!("{text:?} in {tasks:?}"));
        let done = got["status"] == "done";
        assert_eq!(done, t["status"] == "done", "{text:?}: {got}");
    }
    let seen = standin.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].key_header.as_deref(), Some(VISION_KEY));
    assert_eq!(seen[0].key_query, None);
    assert_eq!(seen[0].feature, "DOCUMENT_TEXT_DETECTION");
}
