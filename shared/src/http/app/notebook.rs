//! The notebook's screens: pages by day, a page, tasks, search; and the task checkbox.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    Chrome, args, back_to, call, changer, message, not_found, render, tool_failure, visitor,
};
use crate::domain::{Date, PageId};
use crate::http::HttpState;

/// A line read by OCR below this confidence is marked unsure (as `get_page` tells assistants).
const UNSURE_BELOW: f64 = 0.75;
/// Pages per screen of the pages list.
const PAGES_PER_SCREEN: u64 = 30;
/// Tasks per screen.
const TASKS_PER_SCREEN: u64 = 100;

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// A cursor or date from a query string, kept only when well formed (it goes back into a link
/// and a tool argument).
fn date_arg(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .map(str::trim)
        .filter(|d| Date::parse(d).is_ok())
        .map(str::to_owned)
}

pub(super) fn cursor_arg(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .filter(|c| {
            !c.is_empty()
                && c.len() <= 512
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'='))
        })
        .map(str::to_owned)
}

// ---- Pages by day -------------------------------------------------------------------------

#[derive(Deserialize)]
pub(super) struct HomeQuery {
    cursor: Option<String>,
}

struct DayView {
    date: String,
    pages: Vec<PageLink>,
}

struct PageLink {
    page_id: String,
    has_ink: bool,
    has_ocr: bool,
    /// The page's heading or first line (`list_pages`' `title`); the date names it without.
    title: Option<String>,
}

#[derive(Template)]
#[template(path = "app/home.html")]
struct Home {
    chrome: Chrome,
    days: Vec<DayView>,
    next: Option<String>,
    first_screen: bool,
}

/// `GET /app`: the pages, grouped by day, newest first.
pub(super) async fn home(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<HomeQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let cursor = cursor_arg(&q.cursor);
    let a = args(&[
        ("limit", Some(json!(PAGES_PER_SCREEN))),
        ("cursor", cursor.clone().map(Value::String)),
    ]);
    let listed = match call(&st, &v, "list_pages", a).await {
        Ok(l) => l,
        Err(e) => return tool_failure(e, "list_pages"),
    };
    let mut days: Vec<DayView> = Vec::new();
    for p in listed["pages"].as_array().into_iter().flatten() {
        let link = PageLink {
            page_id: str_of(p, "page_id").to_owned(),
            has_ink: p["has_ink"].as_bool().unwrap_or(false),
            has_ocr: p["has_ocr"].as_bool().unwrap_or(false),
            title: p["title"].as_str().map(str::to_owned),
        };
        let date = str_of(p, "date");
        match days.last_mut() {
            Some(day) if day.date == date => day.pages.push(link),
            _ => days.push(DayView {
                date: date.to_owned(),
                pages: vec![link],
            }),
        }
    }
    let page = Home {
        chrome: Chrome::new(&v, "pages"),
        days,
        next: listed["next_cursor"].as_str().map(str::to_owned),
        first_screen: cursor.is_none(),
    };
    render(&st, &page)
}

// ---- A page -------------------------------------------------------------------------------

struct LineView {
    line_id: String,
    notation: String,
    text: String,
    /// A task line's task and its status (`open`, `done`, `cancelled`, `migrated`).
    task: Option<(String, String)>,
    unsure: bool,
    /// Typed (a note or a task written through a tool), not read from the ink.
    typed: bool,
    tags: Vec<String>,
    /// The source a typed line was written from, linked only when it is an http(s) URL (a
    /// model gave it: another scheme is shown as text, never followed).
    source_link: Option<String>,
    source_text: Option<String>,
    /// The owner corrected what was read (`text_source: corrected`).
    corrected: bool,
    /// A task line's box as the page has it (not the task's status): what a correction sets.
    page_ticked: bool,
}

impl LineView {
    /// The status the checkbox sets: done for an open task, open (todo) again for a done one.
    fn toggle_to(&self) -> &'static str {
        match self.task.as_ref().map(|(_, s)| s.as_str()) {
            Some("done") | Some("cancelled") => "todo",
            _ => "done",
        }
    }

    fn checked(&self) -> bool {
        matches!(self.task.as_ref().map(|(_, s)| s.as_str()), Some("done"))
    }
}

#[derive(Template)]
#[template(path = "app/page.html")]
struct PageScreen {
    chrome: Chrome,
    here: String,
    page_id: String,
    date: String,
    png_url: Option<String>,
    pdf_url: Option<String>,
    ocr_engine: Option<String>,
    has_text: bool,
    lines: Vec<LineView>,
    unsure: usize,
}

/// `GET /app/pages/{page_id}`: the image beside its text, its tasks as checkboxes.
pub(super) async fn page(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path(page_id): Path<String>,
) -> Response {
    let Ok(id) = PageId::parse(&page_id) else {
        return not_found();
    };
    let here = format!("/app/pages/{id}");
    let v = match visitor(&st, &headers, &here).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let p = match call(&st, &v, "get_page", json!({ "page_id": id.to_string() })).await {
        Ok(p) => p,
        Err(e) => return tool_failure(e, "get_page"),
    };
    let lines: Vec<LineView> = p
        .pointer("/structure_json/lines")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|l| LineView {
            line_id: str_of(l, "line_id").to_owned(),
            corrected: l["text_source"] == "corrected",
            page_ticked: l["page_status"] == "done",
            notation: l["notation"].as_str().unwrap_or("text").to_owned(),
            text: str_of(l, "text").to_owned(),
            task: l["task_link_id"].as_str().map(|t| {
                (
                    t.to_owned(),
                    l["status"].as_str().unwrap_or("open").to_owned(),
                )
            }),
            unsure: l["ocr_confidence"]
                .as_f64()
                .is_some_and(|c| c < UNSURE_BELOW),
            typed: l["origin"] == "typed",
            tags: l["tags"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            source_link: l["source_url"]
                .as_str()
                .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
                .map(str::to_owned),
            source_text: l["source_url"]
                .as_str()
                .filter(|u| !(u.starts_with("https://") || u.starts_with("http://")))
                .map(str::to_owned),
        })
        .collect();
    let screen = PageScreen {
        chrome: Chrome::new(&v, "pages"),
        here,
        page_id: id.to_string(),
        date: str_of(&p, "date").to_owned(),
        png_url: p["png_url"].as_str().map(str::to_owned),
        pdf_url: p["pdf_url"].as_str().map(str::to_owned),
        ocr_engine: p["ocr_engine"].as_str().map(str::to_owned),
        has_text: p["ocr_text"].is_string() || p["ocr_markdown"].is_string(),
        unsure: lines.iter().filter(|l| l.unsure).count(),
        lines,
    };
    render(&st, &screen)
}

/// `POST /app/pages/{page_id}/lines/{line_id}` (`text`, `has_box` and `box` for a task line,
/// `back`, `csrf_token`): the owner's correction of a line written on the page
/// (`correct_line`, an app operation).
pub(super) async fn correct_line(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path((page_id, line_id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let Ok(page_id) = PageId::parse(&page_id) else {
        return not_found();
    };
    let text = form.get("text").map(str::trim).filter(|t| !t.is_empty());
    let ticked = form.get("has_box").map(|_| {
        if form.get("box") == Some("ticked") {
            "ticked"
        } else {
            "empty"
        }
    });
    if text.is_none() && ticked.is_none() {
        return message(
            axum::http::StatusCode::BAD_REQUEST,
            "Nothing to correct",
            "A corrected line needs its text.",
        );
    }
    let a = args(&[
        ("page_id", Some(json!(page_id.to_string()))),
        ("line_id", Some(json!(line_id))),
        ("text", text.map(|t| json!(t))),
        ("box", ticked.map(|b| json!(b))),
    ]);
    match call(&st, &v, "correct_line", a).await {
        Ok(_) => back_to(&form),
        Err(e) => tool_failure(e, "correct_line"),
    }
}

// ---- Tasks --------------------------------------------------------------------------------

#[derive(Deserialize)]
pub(super) struct TasksQuery {
    status: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
}

struct TaskRow {
    task_link_id: String,
    text: String,
    status: String,
    first_seen_date: String,
    completed_date: Option<String>,
    source_page_id: String,
}

impl TaskRow {
    fn done(&self) -> bool {
        self.status == "done"
    }

    fn toggle_to(&self) -> &'static str {
        if self.status == "todo" {
            "done"
        } else {
            "todo"
        }
    }
}

#[derive(Template)]
#[template(path = "app/tasks.html")]
struct TasksScreen {
    chrome: Chrome,
    here: String,
    status: &'static str,
    filter: String,
    /// `filter` as a query-string value.
    filter_q: String,
    tasks: Vec<TaskRow>,
    next: Option<String>,
}

/// `GET /app/tasks?status=open|done|all&q=words`.
pub(super) async fn tasks(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<TasksQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/tasks").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let status = match q.status.as_deref() {
        Some("done") => "done",
        Some("all") => "all",
        _ => "open",
    };
    let filter = q.q.unwrap_or_default().trim().to_owned();
    let a = args(&[
        ("status", Some(json!(status))),
        ("limit", Some(json!(TASKS_PER_SCREEN))),
        ("cursor", cursor_arg(&q.cursor).map(Value::String)),
    ]);
    let listed = match call(&st, &v, "list_tasks", a).await {
        Ok(l) => l,
        Err(e) => return tool_failure(e, "list_tasks"),
    };
    let needle = filter.to_lowercase();
    let tasks = listed["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| needle.is_empty() || str_of(t, "text").to_lowercase().contains(&needle))
        .map(|t| TaskRow {
            task_link_id: str_of(t, "task_link_id").to_owned(),
            text: str_of(t, "text").to_owned(),
            status: str_of(t, "status").to_owned(),
            first_seen_date: str_of(t, "first_seen_date").to_owned(),
            completed_date: t["completed_date"].as_str().map(str::to_owned),
            source_page_id: str_of(t, "source_page_id").to_owned(),
        })
        .collect();
    let here = "/app/tasks".to_owned();
    let screen = TasksScreen {
        chrome: Chrome::new(&v, "tasks"),
        here,
        status,
        filter_q: url::form_urlencoded::byte_serialize(filter.as_bytes()).collect(),
        filter,
        tasks,
        next: listed["next_cursor"].as_str().map(str::to_owned),
    };
    render(&st, &screen)
}

/// `POST /app/tasks/{task_link_id}` (`status`, `back`, `csrf_token`): the checkbox.
pub(super) async fn set_task(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path(task_link_id): Path<String>,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let status = match form.get("status") {
        Some(s @ ("todo" | "done" | "cancelled")) => s,
        _ => return not_found(),
    };
    let a = json!({ "task_link_id": task_link_id, "status": status });
    match call(&st, &v, "update_task_status", a).await {
        Ok(_) => back_to(&form),
        Err(e) => tool_failure(e, "update_task_status"),
    }
}

// ---- Search -------------------------------------------------------------------------------

#[derive(Deserialize)]
pub(super) struct SearchQuery {
    q: Option<String>,
    from: Option<String>,
    to: Option<String>,
}

/// A piece of a snippet: its text, and whether it matches a word of the query.
pub(super) struct Piece {
    pub text: String,
    pub hit: bool,
}

struct Hit {
    page_id: String,
    date: String,
    snippet: Vec<Piece>,
}

#[derive(Template)]
#[template(path = "app/search.html")]
struct SearchScreen {
    chrome: Chrome,
    query: String,
    from: String,
    to: String,
    searched: bool,
    hits: Vec<Hit>,
    error: Option<String>,
}

/// Cuts `snippet` into pieces, the words of `query` (at least 2 letters, any case) marked.
pub(super) fn highlight(snippet: &str, query: &str) -> Vec<Piece> {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2)
        .map(str::to_lowercase)
        .collect();
    let mut pieces: Vec<Piece> = Vec::new();
    let mut push = |text: &str, hit: bool| match pieces.last_mut() {
        Some(last) if last.hit == hit => last.text.push_str(text),
        _ => pieces.push(Piece {
            text: text.to_owned(),
            hit,
        }),
    };
    let mut rest = snippet;
    while !rest.is_empty() {
        // A token: a run of letters/digits, or one other character.
        let end = rest
            .char_indices()
            .find(|(_, c)| !c.is_alphanumeric())
            .map_or(rest.len(), |(i, _)| i);
        let end = if end == 0 {
            rest.chars().next().map_or(rest.len(), char::len_utf8)
        } else {
            end
        };
        let (token, tail) = rest.split_at(end);
        let lower = token.to_lowercase();
        let hit = lower.chars().next().is_some_and(char::is_alphanumeric)
            && words.iter().any(|w| lower.starts_with(w.as_str()));
        push(token, hit);
        rest = tail;
    }
    pieces
}

/// `GET /app/search?q=&from=&to=`: `search_pages` in its default (hybrid) mode.
pub(super) async fn search(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<SearchQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/search").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let query = q.q.unwrap_or_default().trim().to_owned();
    let (from, to) = (date_arg(&q.from), date_arg(&q.to));
    let mut screen = SearchScreen {
        chrome: Chrome::new(&v, "search"),
        query: query.clone(),
        from: from.clone().unwrap_or_default(),
        to: to.clone().unwrap_or_default(),
        searched: !query.is_empty(),
        hits: Vec::new(),
        error: None,
    };
    if !query.is_empty() {
        let a = args(&[
            ("query", Some(json!(query))),
            ("from", from.map(Value::String)),
            ("to", to.map(Value::String)),
            ("limit", Some(json!(20))),
        ]);
        match call(&st, &v, "search_pages", a).await {
            Ok(found) => {
                screen.hits = found["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|h| Hit {
                        page_id: str_of(h, "page_id").to_owned(),
                        date: str_of(h, "date").to_owned(),
                        snippet: highlight(str_of(h, "snippet"), &query),
                    })
                    .collect();
            }
            Err(crate::tools::ToolError::InvalidArgument { reason, .. }) => {
                screen.error = Some(reason);
            }
            Err(e) => return tool_failure(e, "search_pages"),
        }
    }
    render(&st, &screen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_mark_the_query_words_in_any_case_and_keep_every_character() {
        let pieces = highlight("…call the Dentist re: <filling>…", "dentist filling");
        let text: String = pieces.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(text, "…call the Dentist re: <filling>…");
        let hits: Vec<&str> = pieces
            .iter()
            .filter(|p| p.hit)
            .map(|p| p.text.as_str())
            .collect();
        assert_eq!(hits, ["Dentist", "filling"]);
        assert!(highlight("nothing here", "zzz").iter().all(|p| !p.hit));
    }
}
