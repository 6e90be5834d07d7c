//! `nib import --watch`: a folder a tablet's sync app writes into. Pages are imported once
//! their files settle, a temporary name renamed at the end is imported at the rename, and a
//! restart imports what changed while it was stopped and nothing else.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use nib::domain::UserId;
use nib::services::{LocalOptions, Services};

use crate::helpers::{nib_exe, sample_dir, stop};

/// A running `nib import --watch` and the lines it prints.
struct Watcher {
    child: Child,
    lines: Receiver<String>,
}

impl Watcher {
    /// `nib import --watch` of `inbox` into `data`.
    fn start(data: &Path, inbox: &Path) -> Watcher {
        let mut cmd = Command::new(nib_exe());
        cmd.arg("--data-dir").arg(data);
        cmd.args(["import", "--ocr", "off", "--settle-ms", "100", "--watch"]);
        Watcher::spawn(cmd.arg(inbox))
    }

    /// `cmd` run with its lines read as they come.
    fn spawn(cmd: &mut Command) -> Watcher {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Watcher { child, lines }
    }

    /// The next line; a watcher that says nothing for a minute has failed.
    fn line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the watcher printed a line")
    }

    /// The next `n` lines, in any order (pages settle independently).
    fn lines(&self, n: usize) -> BTreeSet<String> {
        (0..n).map(|_| self.line()).collect()
    }

    fn stop(mut self) {
        stop(&mut self.child);
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Replaces `path`'s text and moves its modification time on, as a sync app's rewrite does.
fn rewrite(path: &Path, text: &str, seconds_later: u64) {
    std::fs::write(path, text).unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(seconds_later);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}

#[tokio::test]
async fn a_watched_folder_imports_each_settled_page_once_across_restarts() {
    let data = tempfile::tempdir().unwrap();
    let inbox = tempfile::tempdir().unwrap();
    let first = inbox.path().join("2026-03-01.md");
    std::fs::write(&first, "## Tasks\n- [ ] Call the printer\n").unwrap();

    let w = Watcher::start(data.path(), inbox.path());
    let hello = w.line();
    assert!(
        hello.starts_with("watching ") && hello.ends_with(": 0 files up to date, 1 to look at"),
        "{hello}"
    );
    let line = w.line();
    assert!(
        line.starts_with("2026-03-01.md: new page ") && line.ends_with("1 tasks)"),
        "{line}"
    );

    // A sync app's pattern: a hidden temporary name, renamed once written.
    let hidden = inbox.path().join(".2026-03-02.md.sync");
    std::fs::write(&hidden, "## Notes\n- budget review\n").unwrap();
    std::fs::rename(&hidden, inbox.path().join("2026-03-02.md")).unwrap();
    let line = w.line();
    assert!(line.starts_with("2026-03-02.md: new page "), "{line}");

    // Ink for the first page: the same page, updated, its text and task kept.
    std::fs::copy(
        sample_dir().join("2026-06-19.png"),
        inbox.path().join("2026-03-01.png"),
    )
    .unwrap();
    let line = w.line();
    assert!(
        line.starts_with("2026-03-01.png: page ") && line.contains(" updated ("),
        "{line}"
    );
    w.stop();

    // While it is stopped: one page rewritten with the same bytes, one changed, one new.
    rewrite(&first, "## Tasks\n- [ ] Call the printer\n", 5);
    rewrite(
        &inbox.path().join("2026-03-02.md"),
        "## Notes\n- budget review moved to Friday\n",
        5,
    );
    std::fs::write(
        inbox.path().join("2026-03-03.md"),
        "## Notes\n- a quiet day\n",
    )
    .unwrap();

    let w = Watcher::start(data.path(), inbox.path());
    let hello = w.line();
    assert!(
        hello.ends_with(": 1 files up to date, 3 to look at"),
        "{hello}"
    );
    let said = w.lines(3);
    let said: Vec<&String> = said.iter().collect();
    assert_eq!(said[0], "2026-03-01.md: unchanged", "{said:?}");
    assert!(
        said[1].starts_with("2026-03-02.md: page ") && said[1].contains(" updated ("),
        "{said:?}"
    );
    assert!(said[2].starts_with("2026-03-03.md: new page "), "{said:?}");
    w.stop();

    // Nothing changed since: a third start has nothing to look at.
    let w = Watcher::start(data.path(), inbox.path());
    assert!(w.line().ends_with(": 4 files up to date, 0 to look at"));
    w.stop();

    let app = Services::open_local(data.path(), LocalOptions::default()).unwrap();
    let user = UserId::parse("default").unwrap();
    let pages = app
        .notebook()
        .list_pages(&user, None, None, 10)
        .await
        .unwrap();
    let dates: Vec<String> = pages.iter().map(|p| p.date.to_string()).collect();
    assert_eq!(dates, ["2026-03-03", "2026-03-02", "2026-03-01"]);
    let second = app
        .notebook()
        .get_page(&user, &pages[1].page_id)
        .await
        .unwrap();
    assert!(
        second
            .lines
            .iter()
            .any(|l| l.text == "budget review moved to Friday")
    );
    let first = app
        .notebook()
        .get_page(&user, &pages[2].page_id)
        .await
        .unwrap();
    assert!(first.png_url.is_some());
    assert!(first.lines.iter().any(|l| l.text == "Call the printer"));
}

#[tokio::test]
async fn a_watched_file_that_fails_is_reported_and_taken_again_when_it_changes() {
    let data = tempfile::tempdir().unwrap();
    let inbox = tempfile::tempdir().unwrap();
    let w = Watcher::start(data.path(), inbox.path());
    assert!(w.line().ends_with(": 0 files up to date, 0 to look at"));

    let bad = inbox.path().join("2026-04-01.png");
    std::fs::write(&bad, b"not a png at all").unwrap();
    let line = w.line();
    assert!(
        line.starts_with("error: ")
            && line.contains("2026-04-01.png")
            && line.contains("bad signature"),
        "{line}"
    );
    std::fs::copy(sample_dir().join("2026-06-20.png"), &bad).unwrap();
    let line = w.line();
    assert!(line.starts_with("2026-04-01.png: new page "), "{line}");
    w.stop();
}

/// `nib serve --watch`: pages dropped into the folder are imported while the server runs, and
/// a client sees them over MCP.
#[tokio::test]
async fn serve_with_a_watched_folder_serves_the_pages_written_into_it() {
    let data = tempfile::tempdir().unwrap();
    let inbox = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(nib_exe());
    cmd.arg("--data-dir").arg(data.path());
    cmd.args([
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--no-oauth",
        "--ocr",
        "off",
    ]);
    cmd.args(["--settle-ms", "100", "--watch"])
        .arg(inbox.path());
    let w = Watcher::spawn(&mut cmd);
    let url = w.line().strip_prefix("nib: serving ").unwrap().to_owned();
    let token = w.line().split_once("(admin): ").unwrap().1.to_owned();
    assert!(w.line().ends_with(": 0 files up to date, 0 to look at"));

    std::fs::write(
        inbox.path().join("2026-05-04.md"),
        "## Tasks\n- [ ] Water the ferns\n",
    )
    .unwrap();
    let line = w.line();
    assert!(line.starts_with("2026-05-04.md: new page "), "{line}");

    let reply = crate::helpers::call_served(
        &url,
        &token,
        "list_tasks",
        serde_json::json!({"status": "open"}),
    )
    .await;
    let tasks = &reply["result"]["structuredContent"]["tasks"];
    assert_eq!(tasks[0]["text"], "Water the ferns", "{reply}");
    w.stop();
}
