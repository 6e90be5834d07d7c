//! `nib import --ocr openai` and `nib ocr --ocr openai` through the `nib` binary, against the
//! OpenAI-compatible stand-in (`nib_testkit::openai_standin`): the model's markdown becomes
//! tasks with their statuses, and a page the provider failed on is imported unread, logged
//! with its id and the provider's status (never its body or the key), and read by `nib ocr`.

use std::path::{Path, PathBuf};

use nib::domain::{TaskStatus, UserId};
use nib::services::{LocalOptions, Services};
use nib_testkit::openai_standin::{FAULT_BODY_MARKER, OpenAiStandin};

use crate::helpers::nib_exe;

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

async fn tasks(data: &Path) -> Vec<(String, TaskStatus)> {
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
        tasks(data.path()).await,
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
    assert_eq!(tasks(data.path()).await.len(), 2);

    // `nib ocr` reads the unread page; the page read before is skipped.
    let (out, _) = nib(data.path(), &standin, &["ocr", "--all", "--ocr", "openai"]);
    assert!(out.contains("read 1 pages again; 1 skipped"), "{out}");
    assert_eq!(
        tasks(data.path()).await,
        [
            ("buy milk".to_owned(), TaskStatus::Done),
            ("call the bank".to_owned(), TaskStatus::Todo),
            ("pay rent".to_owned(), TaskStatus::Todo),
        ]
    );
}
