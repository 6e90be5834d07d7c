//! At rest: no plaintext in the data directory, a killed import leaves no half page, and an
//! import never loses a page's OCR, lines or tasks to ink alone or to older files (both back
//! ends).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use nib::domain::UserId;
use nib::services::{LocalOptions, Services};
use nib_testkit::pdf::one_page;
use serde_json::{Value, json};

use crate::helpers::{Options, TestApp, nib_exe};

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test]
async fn no_plaintext_of_a_page_is_anywhere_in_the_data_directory() {
    let app = TestApp::spawn().await;
    // Content from every kind of field: markdown, OCR text, a task, a created task, a stem.
    app.call(
        "create_task",
        json!({ "target_date": "2026-06-25", "text": "Pick up the zebra costume" }),
    )
    .await;
    let phrases = [
        "quarterly budget",
        "Dentist",
        "Met with Dana",
        "zebra costume",
        "onboarding",
        "meeting-with-printer",
        "300 gsm",
    ];
    let files = files_under(app.dir.path());
    assert!(files.iter().any(|f| f.ends_with("nib.redb")));
    assert!(
        files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "png")),
        "assets are in the data dir too"
    );
    for file in files {
        let bytes = std::fs::read(&file).unwrap().to_ascii_lowercase();
        for phrase in phrases {
            let needle = phrase.to_ascii_lowercase().into_bytes();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_slice()),
                "{phrase:?} in clear in {}",
                file.display()
            );
        }
    }
}

/// Writes `n` markdown pages whose tasks recur across pages.
fn write_pages(dir: &Path, n: usize) {
    for i in 0..n {
        let day = 1 + i % 28;
        let month = 1 + (i / 28) % 12;
        let year = 2020 + i / (28 * 12);
        let body = format!(
            "## Tasks\n- [ ] Recurring task {a}\n- [{mark}] Recurring task {b}\n- [ ] One-off task {i}\n## Notes\n- Page {i} mentions the harbour and the lighthouse\n",
            a = i % 7,
            b = (i + 3) % 11,
            mark = if i % 3 == 0 { "x" } else { " " },
        );
        std::fs::write(
            dir.join(format!("{year:04}-{month:02}-{day:02}-{i}.md")),
            body,
        )
        .unwrap();
    }
}

#[tokio::test]
async fn a_killed_import_leaves_only_whole_pages_and_a_rerun_completes_it() {
    let pages = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    // Three list pages' worth (list_pages answers 200 at a time), most of it left after the
    // kill at 200.
    let total = 600;
    write_pages(pages.path(), total);

    // Kill the import (SIGKILL, no chance to clean up) once it has reported some progress.
    let mut child = Command::new(nib_exe())
        .args([
            "--data-dir",
            data.path().to_str().unwrap(),
            "import",
            pages.path().to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        if line.unwrap().starts_with("progress: 200/") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();

    // Every page that is there is whole: its lines open, its tasks exist and point back to it.
    let user = UserId::parse("default").unwrap();
    let check = |expect_all: bool| {
        let data = data.path().to_owned();
        let user = user.clone();
        async move {
            let app = Services::open_local(&data, LocalOptions::default()).unwrap();
            let listed = app
                .notebook()
                .list_pages(&user, None, None, 200)
                .await
                .unwrap();
            // After the kill there may be none: `nib import` syncs once a second, and a kill
            // within the first one leaves the notebook as it was before the import.
            assert!(
                !expect_all || !listed.is_empty(),
                "the rerun imported the pages"
            );
            let mut count = 0;
            let mut from = None;
            // Page through every date (list_pages caps at 200 per call).
            loop {
                let batch = app
                    .notebook()
                    .list_pages(&user, None, from, 200)
                    .await
                    .unwrap();
                let last = batch.last().map(|p| p.date);
                for summary in &batch {
                    let page = app
                        .notebook()
                        .get_page(&user, &summary.page_id)
                        .await
                        .unwrap();
                    assert_eq!(page.lines.len(), 6, "a whole page");
                    for l in page.lines.iter().filter(|l| l.page_status.is_some()) {
                        assert!(l.status.is_some(), "task line linked to an existing task");
                    }
                }
                count += batch.len();
                match last {
                    Some(d) if batch.len() == 200 => {
                        from = Some(nib::domain::Date::from_time(
                            d.inner().previous_day().unwrap(),
                        ))
                    }
                    _ => break,
                }
                if from.is_some() && count >= total {
                    break;
                }
            }
            let tasks = app
                .notebook()
                .list_tasks(&user, nib::notebook::TaskFilter::All, None, 200)
                .await
                .unwrap();
            assert!(tasks.len() >= 7.min(count));
            if expect_all {
                let pages = app
                    .store
                    .get("U#default", "STATS#PAGES")
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    nib::ports::counter_value(&pages),
                    Some(total as u64),
                    "index statistics count each page once"
                );
            }
        }
    };
    check(false).await;

    // Re-running the import finishes the job without duplicating a page.
    let out = Command::new(nib_exe())
        .args([
            "--data-dir",
            data.path().to_str().unwrap(),
            "import",
            pages.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("imported {total} pages")),
        "{stdout}"
    );
    check(true).await;
}

/// A store written before the statistics became counters holds one `STATS` record: search
/// reads it, and the next page commit folds it into the counters and deletes it.
#[tokio::test]
async fn a_legacy_statistics_record_is_read_and_then_folded_into_the_counters() {
    use nib::ports::{Cond, Item, Write, counter_value};
    let app = TestApp::spawn().await;
    let store = app.app.store.clone();
    let pk = "U#default";
    let count = |item: Option<Item>| item.as_ref().and_then(counter_value).unwrap_or(0);
    let pages = count(store.get(pk, "STATS#PAGES").await.unwrap());
    let len = count(store.get(pk, "STATS#LEN").await.unwrap());
    assert!(pages > 0 && len > 0);
    let before = app
        .call("search_pages", json!({ "query": "printer" }))
        .await;

    // Rewind to the old layout: the same numbers as one versioned record.
    store
        .transact(vec![
            Write::delete(pk, "STATS#PAGES", Cond::Exists),
            Write::delete(pk, "STATS#LEN", Cond::Exists),
            Write::put(
                Item {
                    pk: pk.into(),
                    sk: "STATS".into(),
                    gsi1: None,
                    version: 3,
                    expires_at: None,
                    body: serde_json::to_vec(&json!({ "pages": pages, "total_len": len })).unwrap(),
                },
                Cond::NotExists,
            ),
        ])
        .await
        .unwrap();
    assert_eq!(
        app.call("search_pages", json!({ "query": "printer" }))
            .await,
        before,
        "the same ranking from the legacy record"
    );

    app.call(
        "create_task",
        json!({ "text": "Order printer toner", "target_date": "2026-07-02" }),
    )
    .await;
    assert_eq!(
        store.get(pk, "STATS").await.unwrap(),
        None,
        "folded and deleted"
    );
    assert_eq!(
        count(store.get(pk, "STATS#PAGES").await.unwrap()),
        pages + 1
    );
    assert!(count(store.get(pk, "STATS#LEN").await.unwrap()) > len);
}

// ---- A page's OCR, lines and tasks survive ink alone and older files ------------------------

const PAGE_MD: &str =
    "## Tasks\n- [ ] Call the printer about the proofs\n## Notes\n- Met with Dana\n";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n a photo";

/// Writes `name` in `dir`, last modified at `modified`.
fn write_at(dir: &Path, name: &str, bytes: &[u8], modified: std::time::SystemTime) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
}

/// What `nib import` does with a folder (`Notebook::import_files` per page), for the default
/// user of `app`.
async fn import_dir(app: &TestApp, dir: &Path) -> Vec<nib::notebook::SavedPage> {
    let user = UserId::parse("default").unwrap();
    let (pages, _) = nib::notebook::group_dir(dir).unwrap();
    let mut saved = Vec::new();
    for page in &pages {
        saved.push(app.app.notebook().import_files(&user, page).await.unwrap());
    }
    saved
}

/// The bytes behind a signed ink URL (the local server's `/assets`, or S3 on the emulator).
async fn ink(app: &TestApp, url: &Value) -> Vec<u8> {
    let r = app.client.get(url.as_str().unwrap()).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    r.bytes().await.unwrap().to_vec()
}

/// The page of 2026-06-19 as `get_page` shows it.
async fn the_page(app: &TestApp) -> Value {
    app.call(
        "get_page",
        json!({ "page_id": app.page_of("2026-06-19").await }),
    )
    .await
}

/// Trigger (c), and (a) for `nib import`: importing a folder that holds only the ink of a page
/// that exists changes its ink and nothing else. The page keeps its OCR, its lines and its task,
/// with the task's history (a status set by hand); before, the page write replaced the OCR and
/// lines with nothing and deleted the task.
async fn ink_alone_changes_only_the_ink(app: TestApp) {
    let now = std::time::SystemTime::now();
    let first = tempfile::tempdir().unwrap();
    write_at(first.path(), "2026-06-19.md", PAGE_MD.as_bytes(), now);
    write_at(
        first.path(),
        "2026-06-19.pdf",
        &one_page("the first scan"),
        now,
    );
    import_dir(&app, first.path()).await;
    let tasks = app.call("list_tasks", json!({ "status": "open" })).await;
    let task = tasks["tasks"][0]["task_link_id"].clone();
    app.call(
        "update_task_status",
        json!({ "task_link_id": task, "status": "done" }),
    )
    .await;
    let before = the_page(&app).await;
    assert_eq!(
        ink(&app, &before["pdf_url"]).await,
        one_page("the first scan")
    );

    let later = tempfile::tempdir().unwrap();
    write_at(
        later.path(),
        "2026-06-19.pdf",
        &one_page("the second scan"),
        now,
    );
    let saved = import_dir(&app, later.path()).await;
    assert!(!saved[0].created && !saved[0].superseded, "{saved:?}");

    let after = the_page(&app).await;
    for field in [
        "ocr_markdown",
        "ocr_text",
        "has_ocr",
        "structure_json",
        "date",
    ] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert_eq!(after["structure_json"]["lines"][1]["status"], "done");
    let done = app.call("list_tasks", json!({ "status": "done" })).await;
    assert_eq!(done["tasks"].as_array().unwrap().len(), 1, "{done}");
    assert_eq!(done["tasks"][0]["task_link_id"], task, "the same task");
    assert_eq!(
        ink(&app, &after["pdf_url"]).await,
        one_page("the second scan"),
        "the ink changed"
    );
}

/// Trigger (b) for `nib import`: a file older (by its mtime) than the one a page part was taken
/// from does not replace that part; a new part beside it is still taken; a folder of only
/// older files writes nothing.
async fn an_older_file_does_not_replace_a_newer_one(app: TestApp) {
    let now = std::time::SystemTime::now();
    let hour_ago = now - std::time::Duration::from_secs(3600);
    let newer = tempfile::tempdir().unwrap();
    write_at(newer.path(), "2026-06-19.md", PAGE_MD.as_bytes(), now);
    write_at(
        newer.path(),
        "2026-06-19.pdf",
        &one_page("the second scan"),
        now,
    );
    import_dir(&app, newer.path()).await;
    let before = the_page(&app).await;

    let older = tempfile::tempdir().unwrap();
    write_at(
        older.path(),
        "2026-06-19.md",
        b"## Notes\n- an older draft\n",
        hour_ago,
    );
    write_at(
        older.path(),
        "2026-06-19.pdf",
        &one_page("the first scan"),
        hour_ago,
    );
    let saved = import_dir(&app, older.path()).await;
    assert!(saved[0].superseded, "{saved:?}");
    write_at(older.path(), "2026-06-19.png", PNG, hour_ago);
    let saved = import_dir(&app, older.path()).await;
    assert!(!saved[0].superseded, "the photo is new to the page");

    let after = the_page(&app).await;
    assert_eq!(after["ocr_markdown"], before["ocr_markdown"]);
    assert_eq!(after["structure_json"], before["structure_json"]);
    assert_eq!(
        ink(&app, &after["pdf_url"]).await,
        one_page("the second scan")
    );
    assert_eq!(ink(&app, &after["png_url"]).await, PNG);
    assert_eq!(
        app.call("list_tasks", json!({ "status": "open" })).await["tasks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

fn empty(backend: Options) -> Options {
    Options {
        import_sample: false,
        ..backend
    }
}

#[tokio::test]
async fn ink_alone_changes_only_the_ink_local() {
    ink_alone_changes_only_the_ink(TestApp::spawn_with(empty(Options::default())).await).await;
}

#[tokio::test]
async fn ink_alone_changes_only_the_ink_aws() {
    ink_alone_changes_only_the_ink(TestApp::spawn_with(empty(Options::aws())).await).await;
}

#[tokio::test]
async fn an_older_file_does_not_replace_a_newer_one_local() {
    an_older_file_does_not_replace_a_newer_one(
        TestApp::spawn_with(empty(Options::default())).await,
    )
    .await;
}

#[tokio::test]
async fn an_older_file_does_not_replace_a_newer_one_aws() {
    an_older_file_does_not_replace_a_newer_one(TestApp::spawn_with(empty(Options::aws())).await)
        .await;
}
