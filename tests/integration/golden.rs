//! Golden files for the wire (issue 47, item 4): what a client sees, checked in under
//! `tests/golden/`, so that a change to `tools/list` or to a tool's answer shows up as a diff
//! to review rather than only where some test happens to assert it.
//!
//! - `tools-list-<scope>.json`: the `tools/list` result for a token of each scope at the
//!   current revision (2026-07-28), and `tools-list-admin-2025-03-26.json` at the oldest (the
//!   eras with a handshake share that shape: the test checks 2025-06-18 and 2025-11-25 give the
//!   same list).
//! - `tool-<name>.json`: for each tool of the catalog, one representative `tools/call` on the
//!   sample notebook (`tests/data/sample`) at 2026-07-28 with the admin token, from a client
//!   that declares elicitation: the params sent and the JSON-RPC `result`. A destructive tool
//!   asks first, so its file holds both round trips: the question (`input_required`) and the
//!   call again, accepted.
//!
//! One server, one notebook, one test: the calls run in a fixed order and change the notebook
//! as they go (the task `create_task` makes is the one `delete_task` trashes).
//!
//! **Redaction.** What differs between runs is replaced before comparing, in every string
//! (the text block of a result too, which is the structured content as a JSON string) and in
//! the object keys' values where noted; everything else is compared as it is:
//!
//! - page ids and task link ids (UUIDv7): `<page-N>` / `<task-N>`, numbered per file in order
//!   of first appearance (a file read top to bottom, keys sorted); any other UUID `<id-N>`;
//! - the random line ids of typed lines (`create_task`, `add_note`): `<line-N>` (the ids of
//!   written lines are a digest of the line and stay);
//! - RFC 3339 times: `<time>`; `added_at` (unix seconds): `<unix-time>`; today's date (UTC):
//!   `<today>` and the purge date (today + 30 days): `<purge-date>`;
//! - the server's `http://127.0.0.1:PORT`: `<base>`; a signed link's `expires=` and `sig=`:
//!   `<time>` and `<sig>`;
//! - revision tokens (`r1.…`): `<revision>`; API token ids (`tok_…`): `<token-id>`; a
//!   confirmation's `requestState` (`nib-confirm-1.…`, a digest of caller and arguments):
//!   `<state>`.
//!
//! A renamed, added or removed field, a changed description or schema, or a changed text fails.
//!
//! **Updating.** `NIB_UPDATE_GOLDEN=1` rewrites the files (and removes those no longer made)
//! instead of comparing; review the diff with `git diff tests/golden/`:
//!
//! ```sh
//! NIB_UPDATE_GOLDEN=1 cargo nextest run -p nib-tests -E 'test(/^golden::/)'
//! ```

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use nib::auth::Scope;
use nib::domain::UserId;
use nib::notebook::TaskFilter;
use serde_json::{Map, Value, json};

use crate::helpers::{TestApp, initialize};

/// The revision the tools are called at, and the one `tools-list-<scope>.json` is of.
const CURRENT: &str = "2026-07-28";
/// The oldest revision nib speaks.
const OLDEST: &str = "2025-03-26";
/// The other revisions with a handshake, whose `tools/list` must equal the oldest's.
const LEGACY: [&str; 2] = ["2025-06-18", "2025-11-25"];

const UPDATE_COMMAND: &str =
    "NIB_UPDATE_GOLDEN=1 cargo nextest run -p nib-tests -E 'test(/^golden::/)'";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden")
}

#[tokio::test]
async fn the_wire_matches_the_golden_files() {
    let app = TestApp::spawn().await;
    let mut goldens = Goldens::default();

    // tools/list: every scope at the current revision, the admin's at the legacy ones.
    for scope in Scope::ALL {
        let token = app.token_for("default", scope).await;
        let listed = stateless(&app, &token, "tools/list", None, json!({})).await;
        let redactor = Redactor::new(&app, &Known::default());
        goldens.add(
            &format!("tools-list-{scope}.json"),
            redactor.redact(result_of(listed)),
        );
    }
    let oldest = legacy_tools_list(&app, OLDEST).await;
    for version in LEGACY {
        let listed = legacy_tools_list(&app, version).await;
        assert!(
            listed == oldest,
            "tools/list at {version} differs from {OLDEST}'s: give it a golden of its own"
        );
    }
    let redactor = Redactor::new(&app, &Known::default());
    goldens.add(
        &format!("tools-list-admin-{OLDEST}.json"),
        redactor.redact(oldest),
    );

    // Each tool once, in an order that tells a story on the sample notebook.
    let mut calls = Calls {
        app: &app,
        known: Known::default(),
        raw: Vec::new(),
    };
    // The sample's pages and tasks, read from the notebook (no tool call: nothing recorded).
    let user = UserId::parse("default").unwrap();
    let notebook = app.app.notebook();
    let pages = notebook.list_pages(&user, None, None, 50).await.unwrap();
    let tasks = notebook
        .list_tasks(&user, TaskFilter::All, None, 50)
        .await
        .unwrap();
    for page in &pages {
        calls.known.page(page.page_id.as_str());
    }
    for task in &tasks {
        calls.known.task(task.task_link_id.as_str());
    }
    let page_of = |date: &str| -> String {
        let mut on = pages.iter().filter(|p| p.date.to_string() == date);
        let page = on.next().unwrap_or_else(|| panic!("no page on {date}"));
        assert!(
            on.next().is_none(),
            "two pages on {date}: their order varies"
        );
        page.page_id.as_str().to_owned()
    };
    let task_of = |text: &str| -> String {
        tasks
            .iter()
            .find(|t| t.text == text)
            .unwrap_or_else(|| panic!("no task {text:?}"))
            .task_link_id
            .as_str()
            .to_owned()
    };

    // Lists are ordered by day, then id (random): the calls ask for days with one item each.
    calls
        .call("list_pages", json!({ "to": "2026-06-18" }))
        .await;
    // The one call recorded so far (tools/list opens nothing): a stable record.
    notebook.access_log().flush().await.unwrap();
    calls.call("list_access", json!({})).await;
    calls
        .call("get_page", json!({ "page_id": page_of("2026-06-18") }))
        .await;
    calls
        .call(
            "search_pages",
            json!({ "query": "printer", "mode": "keyword" }),
        )
        .await;
    calls.call("search", json!({ "query": "API spec" })).await;
    calls
        .call("fetch", json!({ "id": page_of("2026-06-16") }))
        .await;
    calls
        .call(
            "list_tasks",
            json!({ "status": "all", "since": "2026-06-17" }),
        )
        .await;
    calls
        .call(
            "get_task",
            json!({ "task_link_id": task_of("Follow up on API spec") }),
        )
        .await;
    let created = calls
        .call(
            "create_task",
            json!({ "target_date": "2026-06-22", "text": "Draft the launch post" }),
        )
        .await;
    let created = &created["structuredContent"];
    let new_task = created["task_link_id"].as_str().unwrap().to_owned();
    calls.known.task(&new_task);
    calls
        .known
        .page(created["page_id"].as_str().unwrap())
        .line(created["block_id"].as_str().unwrap());
    calls
        .call(
            "update_task_status",
            json!({ "task_link_id": new_task, "status": "done" }),
        )
        .await;
    let added = calls
        .call(
            "add_note",
            json!({
                "text": "Ask the printer for a proof copy",
                "tags": ["Print Run"],
                "date": "2026-06-22",
                "source_url": "https://claude.ai/chat/golden"
            }),
        )
        .await;
    calls
        .known
        .line(added["structuredContent"]["line_id"].as_str().unwrap());
    calls.call("list_notes", json!({})).await;
    calls.call("list_tags", json!({})).await;

    let link = json!({
        "task_link_id": task_of("Book dentist appointment"),
        "same_as": task_of("Order a new desk chair"),
    });
    calls.call_confirmed("link_tasks", link.clone()).await;
    calls.call("unlink_tasks", link).await;
    calls
        .call_confirmed("delete_task", json!({ "task_link_id": new_task }))
        .await;
    calls
        .call("restore_task", json!({ "task_link_id": new_task }))
        .await;
    let page = page_of("2026-06-17");
    calls
        .call_confirmed("delete_page", json!({ "page_id": page }))
        .await;
    calls.call("list_trash", json!({})).await;
    calls.call("restore_page", json!({ "page_id": page })).await;

    let redactor = Redactor::new(&app, &calls.known);
    for (file, doc) in calls.raw {
        goldens.add(&file, redactor.redact(doc));
    }

    // Every tool has its file.
    for tool in nib::tools::catalog() {
        assert!(
            goldens
                .files
                .contains_key(&format!("tool-{}.json", tool.name)),
            "no golden call of {}: add one to golden.rs",
            tool.name
        );
    }
    goldens.finish();
}

/// The calls of the tools, each written as its golden.
struct Calls<'a> {
    app: &'a TestApp,
    known: Known,
    raw: Vec<(String, Value)>,
}

impl Calls<'_> {
    /// A call that runs at once: its golden, and its result.
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let params = json!({ "name": tool, "arguments": arguments });
        let result = self.tools_call(tool, params.clone()).await;
        assert_eq!(result["isError"], false, "{tool}: {result}");
        self.write(
            tool,
            vec![json!({ "params": params, "result": result.clone() })],
        );
        result
    }

    /// A destructive call: asked, then called again with the answer "accept".
    async fn call_confirmed(&mut self, tool: &str, arguments: Value) -> Value {
        let params = json!({ "name": tool, "arguments": arguments });
        let asked = self.tools_call(tool, params.clone()).await;
        assert_eq!(asked["resultType"], "input_required", "{tool}: {asked}");
        let mut again = params.clone();
        again["inputResponses"] = json!({ "confirm": { "action": "accept" } });
        again["requestState"] = asked["requestState"].clone();
        let done = self.tools_call(tool, again.clone()).await;
        assert_eq!(done["isError"], false, "{tool}: {done}");
        self.write(
            tool,
            vec![
                json!({ "params": params, "result": asked }),
                json!({ "params": again, "result": done.clone() }),
            ],
        );
        done
    }

    /// `tools/call` of `tool` with `params`, as the admin: the JSON-RPC result.
    async fn tools_call(&self, tool: &str, params: Value) -> Value {
        let reply = stateless(self.app, &self.app.token, "tools/call", Some(tool), params);
        result_of(reply.await)
    }

    /// Kept as it came: redacted at the end, when every id of the run is known.
    fn write(&mut self, tool: &str, calls: Vec<Value>) {
        let doc = json!({ "protocolVersion": CURRENT, "calls": calls });
        self.raw.push((format!("tool-{tool}.json"), doc));
    }
}

/// A request at 2026-07-28 (no handshake: the version and the client's capabilities, with
/// elicitation, in `_meta`): the JSON-RPC reply.
async fn stateless(
    app: &TestApp,
    token: &str,
    method: &str,
    name: Option<&str>,
    mut params: Value,
) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": CURRENT,
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
        "io.modelcontextprotocol/clientInfo": { "name": "nib-tests", "version": "1" },
    });
    let mut request = app
        .post_anon()
        .bearer_auth(token)
        .header("mcp-protocol-version", CURRENT)
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let r = request
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{method} {name:?}: {body}");
    body
}

/// The admin's `tools/list` result at a revision with a handshake.
async fn legacy_tools_list(app: &TestApp, version: &str) -> Value {
    let r = app
        .post()
        .header("mcp-protocol-version", version)
        .json(&initialize(version))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "initialize at {version}");
    let r = app
        .post()
        .header("mcp-protocol-version", version)
        .json(&json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "tools/list at {version}");
    result_of(r.json().await.unwrap())
}

fn result_of(reply: Value) -> Value {
    match reply.get("result") {
        Some(result) => result.clone(),
        None => panic!("no result in {reply}"),
    }
}

/// The run's varying values the test knows of, by kind.
struct Known {
    kinds: HashMap<String, &'static str>,
    /// The UTC day the run started on (it may end on the next).
    start_day: jiff::civil::Date,
}

impl Default for Known {
    fn default() -> Self {
        Known {
            kinds: HashMap::new(),
            start_day: utc_today(),
        }
    }
}

impl Known {
    fn page(&mut self, id: &str) -> &mut Self {
        self.kinds.insert(id.to_owned(), "page");
        self
    }

    fn task(&mut self, id: &str) -> &mut Self {
        self.kinds.insert(id.to_owned(), "task");
        self
    }

    fn line(&mut self, id: &str) -> &mut Self {
        self.kinds.insert(id.to_owned(), "line");
        self
    }
}

fn utc_today() -> jiff::civil::Date {
    jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
}

/// Replaces what varies between runs (the module comment lists it).
struct Redactor {
    base: String,
    kinds: HashMap<String, &'static str>,
    /// Dates written as `<today>` and `<purge-date>`: the run's first and last UTC day.
    days: Vec<(String, &'static str)>,
}

/// One file's placeholders, numbered in order of first appearance.
#[derive(Default)]
struct Numbering {
    assigned: HashMap<String, String>,
    counts: HashMap<&'static str, usize>,
}

impl Numbering {
    fn placeholder(&mut self, kind: &'static str, value: &str) -> String {
        if let Some(p) = self.assigned.get(value) {
            return p.clone();
        }
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        let p = format!("<{kind}-{n}>");
        self.assigned.insert(value.to_owned(), p.clone());
        p
    }
}

impl Redactor {
    fn new(app: &TestApp, known: &Known) -> Redactor {
        let purge = |d: jiff::civil::Date| {
            d.checked_add(jiff::Span::new().days(nib::notebook::TRASH_DAYS))
                .unwrap()
                .to_string()
        };
        let mut days = Vec::new();
        for day in [known.start_day, utc_today()] {
            days.push((day.to_string(), "<today>"));
            days.push((purge(day), "<purge-date>"));
        }
        Redactor {
            base: app.base.clone(),
            kinds: known.kinds.clone(),
            days,
        }
    }

    /// `value` redacted, its objects' keys sorted.
    fn redact(&self, value: Value) -> Value {
        self.walk(value, &mut Numbering::default())
    }

    fn walk(&self, value: Value, numbering: &mut Numbering) -> Value {
        match value {
            Value::String(s) => Value::String(self.redact_str(&s, numbering)),
            Value::Array(items) => items.into_iter().map(|v| self.walk(v, numbering)).collect(),
            Value::Object(map) => {
                let sorted: BTreeMap<String, Value> = map.into_iter().collect();
                let mut out = Map::new();
                for (key, v) in sorted {
                    let v = match (key.as_str(), v) {
                        ("added_at", Value::Number(_)) => json!("<unix-time>"),
                        (_, v) => self.walk(v, numbering),
                    };
                    out.insert(key, v);
                }
                Value::Object(out)
            }
            other => other,
        }
    }

    fn redact_str(&self, s: &str, numbering: &mut Numbering) -> String {
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            let rest = &s[i..];
            let before = s[..i].chars().next_back();
            if let Some((len, replacement)) = self.token_at(rest, before, numbering) {
                out.push_str(&replacement);
                i += len;
            } else {
                let c = rest.chars().next().unwrap();
                out.push(c);
                i += c.len_utf8();
            }
        }
        out
    }

    /// A varying token at the start of `rest`: its length and its replacement.
    fn token_at(
        &self,
        rest: &str,
        before: Option<char>,
        numbering: &mut Numbering,
    ) -> Option<(usize, String)> {
        let b = rest.as_bytes();
        let word_start = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if rest.starts_with(&self.base) {
            return Some((self.base.len(), "<base>".into()));
        }
        for (prefix, replacement) in [("expires=", "expires=<time>"), ("sig=", "sig=<sig>")] {
            if rest.starts_with(prefix) {
                let n = run(&b[prefix.len()..], |c| {
                    c.is_ascii_alphanumeric() || c == b'%'
                });
                if n > 0 {
                    return Some((prefix.len() + n, replacement.into()));
                }
            }
        }
        let url_safe = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
        if rest.starts_with("nib-confirm-1.") {
            let n = run(&b[14..], url_safe);
            return Some((14 + n, "<state>".into()));
        }
        if !word_start {
            return None;
        }
        if rest.starts_with("r1.") && run(&b[3..], url_safe) == 22 {
            return Some((25, "<revision>".into()));
        }
        if rest.starts_with("tok_") && run(&b[4..], |c| c.is_ascii_hexdigit()) == 12 {
            return Some((16, "<token-id>".into()));
        }
        if shape(b, "HHHHHHHH-HHHH-HHHH-HHHH-HHHHHHHHHHHH") {
            let id = &rest[..36];
            let kind = self.kinds.get(id).copied().unwrap_or("id");
            return Some((36, numbering.placeholder(kind, id)));
        }
        if shape(b, "ln_HHHHHHHHHHHH")
            && let Some(&kind) = self.kinds.get(&rest[..15])
        {
            return Some((15, numbering.placeholder(kind, &rest[..15])));
        }
        if shape(b, "DDDD-DD-DDTDD:DD:DD") {
            let mut n = 19;
            if b.get(n) == Some(&b'.') {
                n += 1 + run(&b[n + 1..], |c| c.is_ascii_digit());
            }
            if b.get(n) == Some(&b'Z') {
                n += 1;
            } else if shape(&b[n..], "+DD:DD") || shape(&b[n..], "-DD:DD") {
                n += 6;
            }
            return Some((n, "<time>".into()));
        }
        if shape(b, "DDDD-DD-DD") && !b.get(10).is_some_and(u8::is_ascii_digit) {
            let date = &rest[..10];
            if let Some((_, p)) = self.days.iter().find(|(d, _)| d == date) {
                return Some((10, (*p).into()));
            }
        }
        if rest.starts_with("\"added_at\":") {
            let n = run(&b[11..], |c| c.is_ascii_digit());
            if n > 0 {
                return Some((11 + n, "\"added_at\":<unix-time>".into()));
            }
        }
        None
    }
}

/// How many bytes at the start of `b` satisfy `pred`.
fn run(b: &[u8], pred: impl Fn(u8) -> bool) -> usize {
    b.iter().take_while(|&&c| pred(c)).count()
}

/// Whether `b` starts with `pattern`: `D` a digit, `H` a lower-case hex digit, else itself.
fn shape(b: &[u8], pattern: &str) -> bool {
    b.len() >= pattern.len()
        && pattern.bytes().zip(b).all(|(p, &c)| match p {
            b'D' => c.is_ascii_digit(),
            b'H' => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
            p => p == c,
        })
}

/// The files this run makes, compared (or written) at the end.
#[derive(Default)]
struct Goldens {
    files: BTreeMap<String, String>,
}

impl Goldens {
    fn add(&mut self, name: &str, value: Value) {
        let mut text = serde_json::to_string_pretty(&value).unwrap();
        text.push('\n');
        assert!(
            self.files.insert(name.to_owned(), text).is_none(),
            "{name} twice"
        );
    }

    /// Writes the files under `NIB_UPDATE_GOLDEN=1`, else fails on any difference.
    fn finish(self) {
        let dir = golden_dir();
        let on_disk: Vec<String> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|name| name.ends_with(".json"))
                    .collect()
            })
            .unwrap_or_default();
        let stale = on_disk
            .iter()
            .filter(|name| !self.files.contains_key(*name));
        if std::env::var_os("NIB_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(&dir).unwrap();
            for name in stale {
                std::fs::remove_file(dir.join(name)).unwrap();
            }
            for (name, text) in &self.files {
                let path = dir.join(name);
                if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
                    std::fs::write(&path, text).unwrap();
                }
            }
            return;
        }
        let mut failures: Vec<String> = stale
            .map(|name| format!("{name}: no longer made by the test"))
            .collect();
        for (name, actual) in &self.files {
            match std::fs::read_to_string(dir.join(name)) {
                Err(_) => failures.push(format!("{name}: missing")),
                Ok(expected) if &expected != actual => {
                    failures.push(format!("{name}:\n{}", diff(&expected, actual)));
                }
                Ok(_) => {}
            }
        }
        assert!(
            failures.is_empty(),
            "{} golden file(s) in tests/golden/ differ from what the server answers \
             (- golden, + now):\n\n{}\n\nIf the change is intended, rewrite them and review \
             `git diff tests/golden/`:\n    {UPDATE_COMMAND}",
            failures.len(),
            failures.join("\n\n")
        );
    }
}

/// Where two texts differ: the lines between their common start and common end (the first
/// few of each side), with two lines of context before.
fn diff(expected: &str, actual: &str) -> String {
    const SHOWN: usize = 8;
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let first = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let common_end = old[first..]
        .iter()
        .rev()
        .zip(new[first..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut out = format!("  first difference at line {}", first + 1);
    for (i, line) in old
        .iter()
        .enumerate()
        .take(first)
        .skip(first.saturating_sub(2))
    {
        out.push_str(&format!("\n  {:>5}   {line}", i + 1));
    }
    for (sign, lines) in [('-', &old), ('+', &new)] {
        let changed = &lines[first..lines.len() - common_end];
        for (i, line) in changed.iter().enumerate().take(SHOWN) {
            out.push_str(&format!("\n  {:>5} {sign} {line}", first + i + 1));
        }
        if changed.len() > SHOWN {
            out.push_str(&format!(
                "\n        {sign} ... {} more",
                changed.len() - SHOWN
            ));
        }
    }
    out
}
