//! Your data: the trash (restore, purge dates) and the access record (who read what, when).

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Chrome, args, back_to, call, changer, not_found, render, tool_failure, visitor};
use crate::http::HttpState;

/// Access records per screen.
const RECORDS_PER_SCREEN: u64 = 50;

struct TrashRow {
    kind: String,
    id: String,
    title: String,
    date: String,
    deleted_on: String,
    purge_on: String,
    tasks: u64,
}

/// The Notion connection as the screen shows it.
struct NotionView {
    connected: bool,
    database_id: String,
    last_ok: Option<String>,
    last_error: Option<String>,
    pending: u64,
}

struct AccessRow {
    at: String,
    client: String,
    credential_id: String,
    tool: String,
    pages: Vec<String>,
    tasks: usize,
}

#[derive(Template)]
#[template(path = "app/data.html")]
struct DataScreen {
    chrome: Chrome,
    here: &'static str,
    trash: Vec<TrashRow>,
    records: Vec<AccessRow>,
    next_records: Option<String>,
    notion: NotionView,
}

fn moment(unix: Option<i64>) -> Option<String> {
    unix.map(|t| {
        let s = crate::tools::rfc3339_ms(t.saturating_mul(1000));
        format!(
            "{} {} UTC",
            s.get(..10).unwrap_or(&s),
            s.get(11..16).unwrap_or("")
        )
    })
}

#[derive(Deserialize)]
pub(super) struct DataQuery {
    access_cursor: Option<String>,
}

fn s(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

/// `GET /app/data`.
pub(super) async fn show(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<DataQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/data").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let trash = match call(&st, &v, "list_trash", json!({ "limit": 200 })).await {
        Ok(t) => t,
        Err(e) => return tool_failure(e, "list_trash"),
    };
    let a = args(&[
        ("limit", Some(json!(RECORDS_PER_SCREEN))),
        (
            "cursor",
            super::notebook::cursor_arg(&q.access_cursor).map(Value::String),
        ),
    ]);
    let access = match call(&st, &v, "list_access", a).await {
        Ok(a) => a,
        Err(e) => return tool_failure(e, "list_access"),
    };
    let notion = match call(&st, &v, "notion_status", json!({})).await {
        Ok(n) => n,
        Err(e) => return tool_failure(e, "notion_status"),
    };
    let notion = NotionView {
        connected: notion["connected"].as_bool().unwrap_or(false),
        database_id: s(&notion, "database_id"),
        last_ok: moment(notion["last_ok_at"].as_i64()),
        last_error: notion["last_error"].as_str().map(|e| {
            format!(
                "{} ({})",
                e,
                moment(notion["last_error_at"].as_i64()).unwrap_or_default()
            )
        }),
        pending: notion["pending"].as_u64().unwrap_or(0),
    };
    let trash = trash["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| TrashRow {
            kind: s(i, "kind"),
            id: s(i, "id"),
            title: s(i, "title"),
            date: s(i, "date"),
            deleted_on: s(i, "deleted_on"),
            purge_on: s(i, "purge_on"),
            tasks: i["tasks"].as_u64().unwrap_or(0),
        })
        .collect();
    let records = access["records"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let at = s(r, "at");
            AccessRow {
                at: format!(
                    "{} {} UTC",
                    at.get(..10).unwrap_or(&at),
                    at.get(11..19).unwrap_or("")
                ),
                client: r["client"].as_str().unwrap_or("(no name)").to_owned(),
                credential_id: s(r, "credential_id"),
                tool: s(r, "tool"),
                pages: r["page_ids"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                tasks: r["task_ids"].as_array().map_or(0, Vec::len),
            }
        })
        .collect();
    render(
        &st,
        &DataScreen {
            chrome: Chrome::new(&v, "data"),
            here: "/app/data",
            trash,
            records,
            next_records: access["next_cursor"].as_str().map(str::to_owned),
            notion,
        },
    )
}

/// `POST /app/data/restore/{kind}/{id}`: `restore_page` or `restore_task`.
pub(super) async fn restore(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path((kind, id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let (tool, a) = match kind.as_str() {
        "page" => ("restore_page", json!({ "page_id": id })),
        "task" => ("restore_task", json!({ "task_link_id": id })),
        _ => return not_found(),
    };
    match call(&st, &v, tool, a).await {
        Ok(_) => back_to(&form),
        // "Not in the trash": what another user's trash id is too.
        Err(crate::tools::ToolError::Rejected(_)) => not_found(),
        Err(e) => tool_failure(e, tool),
    }
}

/// `POST /app/data/notion/connect` (`database`, `token`): what `nib notion connect` does; Notion's
/// refusal (a wrong token, a database not shared with the integration) is shown as it is.
pub(super) async fn notion_connect(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let a = json!({
        "database": form.get("database").unwrap_or_default(),
        "token": form.get("token").unwrap_or_default(),
    });
    match call(&st, &v, "notion_connect", a).await {
        Ok(_) => back_to(&form),
        Err(crate::tools::ToolError::Rejected(why))
        | Err(crate::tools::ToolError::InvalidArgument { reason: why, .. }) => super::message(
            axum::http::StatusCode::BAD_REQUEST,
            "Notion is not connected",
            &why,
        ),
        Err(e) => tool_failure(e, "notion_connect"),
    }
}

/// `POST /app/data/notion/disconnect`.
pub(super) async fn notion_disconnect(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    match call(&st, &v, "notion_disconnect", json!({})).await {
        Ok(_) => back_to(&form),
        Err(e) => tool_failure(e, "notion_disconnect"),
    }
}
