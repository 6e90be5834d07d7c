//! The `nib` binary: serve's first start, its request log, import's messages and exit codes,
//! and the token commands.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::helpers::nib_exe;

fn nib(data: &std::path::Path) -> Command {
    let mut c = Command::new(nib_exe());
    c.arg("--data-dir").arg(data);
    c
}

/// A `nib serve` process; killed on drop.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    /// Kept open: the server prints more lines than the two read here, and a closed pipe would
    /// make its next `println!` fail.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nib serve` on `data`, started as the README starts it (on a port of its own).
pub(crate) fn serve(data: &std::path::Path, json_logs: bool) -> Server {
    serve_with(data, json_logs, &[])
}

/// [`serve`] with more of serve's flags.
pub(crate) fn serve_with(data: &std::path::Path, json_logs: bool, flags: &[&str]) -> Server {
    let mut cmd = nib(data);
    cmd.args(["serve", "--bind", "127.0.0.1:0"])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if json_logs {
        cmd.env("NIB_LOG_FORMAT", "json");
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let url = first
        .trim()
        .strip_prefix("nib: serving ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    let mut second = String::new();
    out.read_line(&mut second).unwrap();
    let token = second
        .trim()
        .split_once("(admin): ")
        .map(|(_, t)| t.to_owned());
    Server {
        child,
        url,
        token,
        _stdout: out,
    }
}

#[tokio::test]
async fn serve_prints_url_and_a_token_once_and_logs_requests_without_secrets() {
    let data = tempfile::tempdir().unwrap();
    let mut server = serve(data.path(), true);
    let token = server.token.clone().expect("first start prints a token");
    assert!(token.starts_with("nib_live_") && nib::auth::tokens::well_formed(&token));
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"));

    let client = reqwest::Client::new();
    let r = client
        .post(&server.url)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "create_task", "arguments": { "target_date": "2026-06-20", "text": "secret plans for the surprise party" } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let ok_cid = r.headers()["x-correlation-id"].to_str().unwrap().to_owned();
    let r = client
        .post(&server.url)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    let bad_cid = r.headers()["x-correlation-id"].to_str().unwrap().to_owned();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["data"]["correlationId"], bad_cid.as_str());

    // Stop the server and read everything it logged.
    crate::helpers::stop(&mut server.child);
    let mut logs = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    let lines: Vec<Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let request = |cid: &str| {
        lines
            .iter()
            .find(|l| l["correlation_id"] == cid)
            .unwrap_or_else(|| panic!("no log line for {cid} in {logs}"))
            .clone()
    };
    let ok = request(&ok_cid);
    assert_eq!(
        (
            ok["method"].clone(),
            ok["tool"].clone(),
            ok["status"].clone()
        ),
        (json!("tools/call"), json!("create_task"), json!(200))
    );
    assert!(ok["latency_ms"].is_number());
    assert_eq!(request(&bad_cid)["status"], 400);
    assert!(!logs.contains(&token), "the token never reaches the log");
    assert!(
        !logs.contains("surprise party"),
        "user content never reaches the log"
    );

    // A second start on the same data directory makes no new token.
    let again = serve(data.path(), false);
    assert_eq!(again.token, None);
}

#[test]
fn import_reports_bad_files_by_name_and_goes_on() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("2026-01-02.md"), "## Tasks\n- [ ] fine\n").unwrap();
    std::fs::write(dir.path().join("undated-thoughts.md"), "no date anywhere\n").unwrap();
    std::fs::write(dir.path().join("2026-01-03.png"), b"this is not a png").unwrap();
    std::fs::write(dir.path().join("2026-01-04.txt"), [0xff, 0xfe, 0x00]).unwrap();
    std::fs::write(
        dir.path().join("bad-front-matter.md"),
        "---\ndate: 2026-13-40\n---\nhi\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("2026-01-05.pdf"),
        nib_testkit::pdf::one_page("a scan"),
    )
    .unwrap();
    // A PDF's header with nothing after it that parses: refused, as the web app and the
    // ingest function refuse it.
    std::fs::write(dir.path().join("2026-01-06.pdf"), b"%PDF-1.4\n").unwrap();
    std::fs::write(dir.path().join("notes.docx"), b"whatever").unwrap();
    let out = nib(data.path())
        .arg("import")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "something failed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for (file, reason) in [
        ("undated-thoughts.md", "no page date"),
        ("2026-01-03.png", "not a PNG"),
        ("2026-01-04.txt", "not UTF-8"),
        ("bad-front-matter.md", "2026-13-40"),
        ("2026-01-06.pdf", "PDF cannot be read"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(file) && l.contains(reason)),
            "{file}: {stderr}"
        );
    }
    assert!(stderr.contains("skipped:") && stderr.contains("notes.docx"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("imported 2 pages (2 new, 0 updated)") && stdout.contains("5 failed"),
        "{stdout}"
    );

    // Fixed files import on the next run; the good ones update in place.
    std::fs::remove_file(dir.path().join("undated-thoughts.md")).unwrap();
    std::fs::remove_file(dir.path().join("2026-01-03.png")).unwrap();
    std::fs::remove_file(dir.path().join("2026-01-04.txt")).unwrap();
    std::fs::remove_file(dir.path().join("bad-front-matter.md")).unwrap();
    std::fs::remove_file(dir.path().join("2026-01-06.pdf")).unwrap();
    let out = nib(data.path())
        .arg("import")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("imported 2 pages (0 new, 2 updated)"));
}

/// `nib import` of a folder that holds only a page's ink (trigger c: its OCR file is gone)
/// updates the ink and keeps the page's OCR, lines and task; an OCR file older (mtime) than the
/// one the page took (trigger b) replaces nothing. Before, both wiped the page's text and
/// deleted its task.
#[tokio::test]
async fn import_of_ink_alone_or_an_older_file_keeps_the_pages_text_and_tasks() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("2026-01-02.md");
    let pdf = dir.path().join("2026-01-02.pdf");
    std::fs::write(&md, "## Tasks\n- [ ] Call the printer\n").unwrap();
    std::fs::write(&pdf, nib_testkit::pdf::one_page("first")).unwrap();
    let import = || {
        let out = nib(data.path())
            .arg("import")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(import().contains("(1 new, 0 updated)"));

    std::fs::remove_file(&md).unwrap();
    std::fs::write(&pdf, nib_testkit::pdf::one_page("second")).unwrap();
    assert!(import().contains("(0 new, 1 updated)"));

    std::fs::write(&md, "## Notes\n- an older draft\n").unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&md)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();
    import();

    let app =
        nib::services::Services::open_local(data.path(), nib::services::LocalOptions::default())
            .unwrap();
    let user = nib::domain::UserId::parse("default").unwrap();
    let pages = app
        .notebook()
        .list_pages(&user, None, None, 10)
        .await
        .unwrap();
    assert_eq!(pages.len(), 1);
    let page = app
        .notebook()
        .get_page(&user, &pages[0].page_id)
        .await
        .unwrap();
    assert_eq!(
        page.ocr_markdown.as_deref(),
        Some("## Tasks\n- [ ] Call the printer\n")
    );
    assert!(page.pdf_url.is_some());
    assert!(page.lines.iter().any(|l| l.text == "Call the printer"));
    let tasks = app
        .notebook()
        .list_tasks(&user, nib::notebook::TaskFilter::All, None, 10)
        .await
        .unwrap();
    assert_eq!(tasks.len(), 1);
}

#[tokio::test]
async fn token_commands_create_list_and_revoke() {
    let data = tempfile::tempdir().unwrap();
    let out = nib(data.path())
        .args(["token", "create", "--scope", "read", "--label", "laptop"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(nib::auth::tokens::well_formed(&token));
    let out = nib(data.path()).args(["token", "list"]).output().unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        listing.contains("laptop") && listing.contains("read") && listing.contains("active"),
        "{listing}"
    );
    assert!(!listing.contains(&token), "secrets are never listed");
    let id = listing
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();

    // The read token works against the server; once revoked it does not.
    let server = serve(data.path(), false);
    let ping = |token: String, url: String| async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(ping(token.clone(), server.url.clone()).await, 200);
    // The store is one process's at a time: the CLI says so while the server runs.
    let out = nib(data.path())
        .args(["token", "revoke", &id])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("in use"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);
    let out = nib(data.path())
        .args(["token", "revoke", &id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = serve(data.path(), false);
    assert_eq!(ping(token, server.url.clone()).await, 401);
    drop(server);
    let out = nib(data.path())
        .args(["token", "revoke", "tok_nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tok_nope"));
}

/// `nib task show` prints a task's pages and history; `nib task link` / `unlink` make two
/// tasks one and two again.
#[tokio::test]
async fn task_show_prints_pages_and_history_and_task_link_merges() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("2026-07-01.md"),
        "## Tasks\n- [ ] call dentist\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("2026-07-03.md"),
        "## Tasks\n- [x] Call the dentist re: filling\n",
    )
    .unwrap();
    let out = nib(data.path())
        .arg("import")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The ids, read from the store (closed again before the next command opens it).
    let ids: Vec<(String, String)> = {
        let app = nib::services::Services::open_local(
            data.path(),
            nib::services::LocalOptions::default(),
        )
        .unwrap();
        let user = nib::domain::UserId::parse("default").unwrap();
        app.notebook()
            .list_tasks(&user, nib::notebook::TaskFilter::All, None, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|t| (t.text, t.task_link_id.to_string()))
            .collect()
    };
    let id = |text: &str| ids.iter().find(|(t, _)| t == text).unwrap().1.clone();
    let (a, b) = (id("call dentist"), id("Call the dentist re: filling"));

    let run = |args: &[&str]| {
        let out = nib(data.path()).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let linked = run(&["task", "link", &a, &b]);
    assert!(linked.contains("linked"), "{linked}");
    let shown = run(&["task", "show", &a]);
    for want in [
        "text:       call dentist",
        "status:     done",
        "2026-07-01",
        "call dentist",
        "Call the dentist re: filling",
        "nib task link with task",
    ] {
        assert!(shown.contains(want), "{want}: {shown}");
    }
    let json: Value = serde_json::from_str(&run(&["task", "show", &a, "--json"])).unwrap();
    assert_eq!(json["pages"].as_array().unwrap().len(), 2, "{json}");
    assert_eq!(json["status"], "done");

    run(&["task", "unlink", &a, &b]);
    let json: Value = serde_json::from_str(&run(&["task", "show", &a, "--json"])).unwrap();
    assert_eq!(json["status"], "todo", "{json}");
    assert_eq!(json["pages"].as_array().unwrap().len(), 1);
    let missing = nib(data.path())
        .args(["task", "show", "01890000-0000-7000-8000-000000000000"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("not found"),
        "{missing:?}"
    );
}
