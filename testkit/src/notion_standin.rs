//! A stand-in for Notion's REST API, for tests (the real Notion is not reachable from where
//! nib is built and tested).
//!
//! [`NotionStandin::start`] serves on 127.0.0.1, port 0, the five endpoints nib calls, with
//! the documented request and response shapes of API version `2022-06-28`:
//!
//! - `GET /v1/databases/{id}`: the database object (`object: "database"`, `id`, `title`,
//!   `url`, `properties` keyed by name, each with `id`, `name`, `type` and its configuration:
//!   a `status` property has `options` and `groups` with `option_ids`).
//! - `PATCH /v1/databases/{id}` with `properties` keyed by name: a property schema object
//!   (`{"rich_text": {}}`, ...) adds the property or changes its type, `{"name": ..}` renames
//!   it, `null` removes it; the updated database object.
//! - `POST /v1/databases/{id}/query` with an optional `filter` (`{"property", "rich_text":
//!   {"equals"}}` only, the one nib sends) and `page_size`: a list object (`object: "list"`,
//!   `results` of page objects, `next_cursor`, `has_more`, `type: "page_or_database"`).
//! - `POST /v1/pages` with `parent.database_id` and `properties`: the new page object
//!   (`object: "page"`, `id`, `url`, `parent`, `properties`).
//! - `PATCH /v1/pages/{id}` with `properties`: the updated page object.
//!
//! Every request needs `Authorization: Bearer <the token the test chose>` (else 401
//! `unauthorized`) and a `Notion-Version` header (else 400 `missing_version`). A property key
//! the database does not have is 400 `validation_error` ("X is not a property that exists."),
//! as is a value of the wrong type or a status option the property lacks; unknown ids are 404
//! `object_not_found`. Errors are Notion's error object `{object: "error", status, code,
//! message}`. [`NotionStandin::set_mode`] makes every request fail as during an outage (503
//! `service_unavailable`) or under rate limiting (429 `rate_limited` with `Retry-After`), every
//! request or every Nth write ([`Mode::RateLimitEvery`]).
//! [`NotionStandin::on_create_page`] runs a test's code while a page is being created (after
//! its request was accepted, before the page exists and is answered), as a slow Notion would
//! leave time for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde_json::{Value, json};

/// How the stand-in answers every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Normal,
    /// 503 `service_unavailable`.
    Outage,
    /// 429 `rate_limited` with `Retry-After: {0}`.
    RateLimited(u64),
    /// Every `every`-th write (`POST /v1/pages`, `PATCH` of a page or database; counted from
    /// the mode's start, so the `every`-th write after it is the first refused) is 429
    /// `rate_limited` with `Retry-After: {retry_after}`; reads and other writes are answered.
    RateLimitEvery {
        every: usize,
        retry_after: u64,
    },
}

/// Code a test runs inside `POST /v1/pages`, given how many pages were requested so far (1
/// for the first).
pub type CreateHook = Arc<
    dyn Fn(usize) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

/// One request as the stand-in received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    pub notion_version: Option<String>,
    pub body: Value,
}

#[derive(Default)]
struct Inner {
    token: String,
    mode: Option<Mode>,
    /// id -> database object.
    databases: HashMap<String, Value>,
    /// id -> page object.
    pages: HashMap<String, Value>,
    requests: Vec<Recorded>,
    /// Accepted `POST /v1/pages` requests so far.
    creates: usize,
    /// Writes received since the mode was last set (for [`Mode::RateLimitEvery`]).
    writes: usize,
    /// Requests answered 429 so far.
    refused_429: usize,
    on_create: Option<CreateHook>,
}

/// The running stand-in; stops when dropped.
pub struct NotionStandin {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for NotionStandin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Shared = Arc<Mutex<Inner>>;

impl NotionStandin {
    /// Serves on 127.0.0.1:0, accepting `token`.
    pub async fn start(token: &str) -> std::io::Result<NotionStandin> {
        let inner: Shared = Arc::new(Mutex::new(Inner {
            token: token.to_owned(),
            ..Inner::default()
        }));
        let router = Router::new()
            .route(
                "/v1/databases/{id}",
                get(get_database).patch(update_database),
            )
            .route("/v1/databases/{id}/query", post(query_database))
            .route("/v1/pages", post(create_page))
            .route("/v1/pages/{id}", patch(update_page))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(NotionStandin { url, inner, task })
    }

    /// Adds a database with these `properties` (keyed by name, each `{type, <type>: config}`;
    /// `id` and `name` are filled in) and returns its id.
    pub fn add_database(&self, properties: Value) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let mut props = serde_json::Map::new();
        for (i, (name, p)) in properties.as_object().into_iter().flatten().enumerate() {
            let mut p = p.clone();
            let kind = p["type"].as_str().unwrap_or_default().to_owned();
            p["name"] = json!(name);
            p["id"] = json!(if kind == "title" {
                "title".to_owned()
            } else {
                format!("p{i}")
            });
            props.insert(name.clone(), p);
        }
        let db = json!({
            "object": "database",
            "id": id,
            "created_time": "2026-01-01T00:00:00.000Z",
            "last_edited_time": "2026-01-01T00:00:00.000Z",
            "title": [{ "type": "text", "text": { "content": "Tasks", "link": null }, "plain_text": "Tasks", "href": null }],
            "description": [],
            "properties": props,
            "parent": { "type": "workspace", "workspace": true },
            "url": format!("https://www.notion.so/{}", id.replace('-', "")),
            "archived": false,
            "is_inline": false,
        });
        self.lock().databases.insert(id.clone(), db);
        id
    }

    /// The usual task database: `Name` (title), `Status` (status with Not started / In
    /// progress / Done in the To-do / In progress / Complete groups), `Date`, `URL`.
    pub fn add_task_database(&self) -> String {
        self.add_database(json!({
            "Name": { "type": "title", "title": {} },
            "Status": { "type": "status", "status": {
                "options": [
                    { "id": "o1", "name": "Not started", "color": "default" },
                    { "id": "o2", "name": "In progress", "color": "blue" },
                    { "id": "o3", "name": "Done", "color": "green" } ],
                "groups": [
                    { "id": "g1", "name": "To-do", "color": "gray", "option_ids": ["o1"] },
                    { "id": "g2", "name": "In progress", "color": "blue", "option_ids": ["o2"] },
                    { "id": "g3", "name": "Complete", "color": "green", "option_ids": ["o3"] } ] } },
            "Date": { "type": "date", "date": {} },
            "URL": { "type": "url", "url": {} }
        }))
    }

    /// Renames a property of a database (pages sent with the old name then fail validation).
    pub fn rename_property(&self, db: &str, from: &str, to: &str) {
        let mut inner = self.lock();
        let props = inner.databases.get_mut(db).expect("known database")["properties"]
            .as_object_mut()
            .expect("properties");
        let mut p = props.remove(from).expect("known property");
        p["name"] = json!(to);
        props.insert(to.to_owned(), p);
    }

    /// Deletes a page, as a user may in Notion (updates of it are then 404).
    pub fn remove_page(&self, id: &str) {
        self.lock().pages.remove(id);
    }

    /// Accepts another token only (the old one is then revoked: 401).
    pub fn set_token(&self, token: &str) {
        self.lock().token = token.to_owned();
    }

    pub fn set_mode(&self, mode: Mode) {
        let mut inner = self.lock();
        inner.mode = Some(mode);
        inner.writes = 0;
    }

    /// How many requests were refused with 429 so far.
    pub fn rate_limited(&self) -> usize {
        self.lock().refused_429
    }

    /// Runs `hook` inside every accepted `POST /v1/pages` from now on, before the page exists;
    /// the request is answered once it has finished.
    pub fn on_create_page<F, Fut>(&self, hook: F)
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let hook: CreateHook = Arc::new(move |n| Box::pin(hook(n)));
        self.lock().on_create = Some(hook);
    }

    /// No more hook inside `POST /v1/pages`.
    pub fn clear_create_hook(&self) {
        self.lock().on_create = None;
    }

    /// The pages created, in no particular order.
    pub fn pages(&self) -> Vec<Value> {
        self.lock().pages.values().cloned().collect()
    }

    pub fn page(&self, id: &str) -> Option<Value> {
        self.lock().pages.get(id).cloned()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({
            "object": "error",
            "status": status.as_u16(),
            "code": code,
            "message": message,
        })),
    )
        .into_response()
}

/// Records the request and applies the checks every endpoint shares: the refusal, if any.
fn admit(
    inner: &mut Inner,
    method: &str,
    path: String,
    headers: &HeaderMap,
    body: Value,
) -> Option<Response> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization");
    let notion_version = header("notion-version");
    let write = method == "PATCH" || (method == "POST" && path == "/v1/pages");
    inner.requests.push(Recorded {
        method: method.into(),
        path,
        authorization: authorization.clone(),
        notion_version: notion_version.clone(),
        body,
    });
    if write {
        inner.writes += 1;
    }
    let limited = match inner.mode {
        Some(Mode::RateLimited(secs)) => Some(secs),
        Some(Mode::RateLimitEvery { every, retry_after })
            if write && every > 0 && inner.writes.is_multiple_of(every) =>
        {
            Some(retry_after)
        }
        _ => None,
    };
    if let Some(secs) = limited {
        inner.refused_429 += 1;
        let mut r = error(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "You have been rate limited. Please try again in a few minutes.",
        );
        r.headers_mut()
            .insert("retry-after", secs.to_string().parse().expect("a number"));
        return Some(r);
    }
    if let Some(Mode::Outage) = inner.mode {
        return Some(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "Notion is unavailable, please try again later.",
        ));
    }
    if authorization.as_deref() != Some(&format!("Bearer {}", inner.token)) {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "API token is invalid.",
        ));
    }
    if notion_version.is_none() {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "missing_version",
            "Notion-Version header failed validation: Notion-Version header should be defined, instead was `undefined`.",
        ));
    }
    None
}

async fn get_database(
    State(inner): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = admit(
        &mut inner,
        "GET",
        format!("/v1/databases/{id}"),
        &headers,
        Value::Null,
    ) {
        return r;
    }
    match inner.databases.get(&id) {
        Some(db) => axum::Json(db.clone()).into_response(),
        None => not_found("database", &id),
    }
}

fn not_found(what: &str, id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "object_not_found",
        &format!(
            "Could not find {what} with ID: {id}. Make sure the relevant pages and databases are shared with your integration."
        ),
    )
}

/// Checks `properties` against the database schema, as Notion does: the refusal, if any.
fn validate(db: &Value, properties: &Value) -> Option<Response> {
    let invalid = |m: String| error(StatusCode::BAD_REQUEST, "validation_error", &m);
    let Some(props) = properties.as_object() else {
        return Some(invalid(
            "body failed validation: body.properties should be an object.".into(),
        ));
    };
    for (name, value) in props {
        let Some(schema) = db["properties"].get(name) else {
            return Some(invalid(format!("{name} is not a property that exists.")));
        };
        let kind = schema["type"].as_str().unwrap_or_default();
        let Some(v) = value.get(kind) else {
            return Some(invalid(format!("{name} is expected to be {kind}.")));
        };
        let ok = match kind {
            "title" => v.as_array().is_some_and(|a| {
                a.iter().all(|t| {
                    t["text"]["content"]
                        .as_str()
                        .is_some_and(|c| c.chars().count() <= 2000)
                })
            }),
            "rich_text" => v.as_array().is_some_and(|a| {
                a.iter().all(|t| {
                    t["text"]["content"]
                        .as_str()
                        .is_some_and(|c| c.chars().count() <= 2000)
                })
            }),
            "checkbox" => v.is_boolean(),
            "url" => v.is_string() || v.is_null(),
            "date" => v["start"].as_str().is_some_and(|s| s.len() >= 10),
            "status" => {
                let wanted = v["name"].as_str().unwrap_or_default();
                schema["status"]["options"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|o| o["name"] == wanted))
            }
            _ => true,
        };
        if !ok {
            return Some(invalid(format!(
                "body failed validation: body.properties.{name}.{kind} is not valid."
            )));
        }
    }
    None
}

async fn create_page(
    State(shared): State<Shared>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let db_id = body["parent"]["database_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    // The checks, then the test's hook with the lock released (it may call Notion again).
    let hook = {
        let mut inner = shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = admit(
            &mut inner,
            "POST",
            "/v1/pages".into(),
            &headers,
            body.clone(),
        ) {
            return r;
        }
        let Some(db) = inner.databases.get(&db_id) else {
            return not_found("database", &db_id);
        };
        if let Some(r) = validate(db, &body["properties"]) {
            return r;
        }
        inner.creates += 1;
        inner.on_create.clone().map(|h| h(inner.creates))
    };
    if let Some(hook) = hook {
        hook.await;
    }
    let mut inner = shared.lock().unwrap_or_else(|e| e.into_inner());
    let Some(db) = inner.databases.get(&db_id) else {
        return not_found("database", &db_id);
    };
    let title = db["properties"]
        .as_object()
        .and_then(|p| p.values().find(|p| p["type"] == "title"))
        .and_then(|p| p["name"].as_str())
        .unwrap_or_default()
        .to_owned();
    let slug: String = body["properties"][&title]["title"][0]["text"]["content"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    let id = uuid::Uuid::new_v4().to_string();
    let page = json!({
        "object": "page",
        "id": id,
        "created_time": "2026-01-01T00:00:00.000Z",
        "last_edited_time": "2026-01-01T00:00:00.000Z",
        "archived": false,
        "parent": { "type": "database_id", "database_id": db_id },
        "properties": body["properties"],
        "url": format!("https://www.notion.so/{slug}-{}", id.replace('-', "")),
    });
    inner.pages.insert(id, page.clone());
    axum::Json(page).into_response()
}

async fn update_page(
    State(inner): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = admit(
        &mut inner,
        "PATCH",
        format!("/v1/pages/{id}"),
        &headers,
        body.clone(),
    ) {
        return r;
    }
    let Some(page) = inner.pages.get(&id) else {
        return not_found("page", &id);
    };
    let db_id = page["parent"]["database_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Some(db) = inner.databases.get(&db_id) else {
        return not_found("database", &db_id);
    };
    if let Some(r) = validate(db, &body["properties"]) {
        return r;
    }
    let page = inner.pages.get_mut(&id).expect("checked");
    for (name, value) in body["properties"].as_object().into_iter().flatten() {
        page["properties"][name] = value.clone();
    }
    axum::Json(page.clone()).into_response()
}

async fn update_database(
    State(inner): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = admit(
        &mut inner,
        "PATCH",
        format!("/v1/databases/{id}"),
        &headers,
        body.clone(),
    ) {
        return r;
    }
    let Some(db) = inner.databases.get_mut(&id) else {
        return not_found("database", &id);
    };
    let invalid = |m: String| error(StatusCode::BAD_REQUEST, "validation_error", &m);
    let changes = match body.get("properties") {
        None => serde_json::Map::new(),
        Some(Value::Object(p)) => p.clone(),
        Some(_) => {
            return invalid("body failed validation: body.properties should be an object.".into());
        }
    };
    const KINDS: &[&str] = &[
        "title",
        "rich_text",
        "number",
        "select",
        "multi_select",
        "status",
        "date",
        "checkbox",
        "url",
        "email",
        "phone_number",
        "people",
        "files",
    ];
    let props = db["properties"].as_object_mut().expect("properties");
    for (name, change) in changes {
        if change.is_null() {
            props.remove(&name);
            continue;
        }
        let kind = KINDS.iter().find(|k| change.get(**k).is_some());
        let new_name = change["name"].as_str().map(str::to_owned);
        match (kind, props.get(&name)) {
            (Some(kind), existing) => {
                if existing.is_some_and(|p| p["type"] == "title") && *kind != "title" {
                    return invalid(format!(
                        "Cannot change the type of the title property {name}."
                    ));
                }
                let id = existing.map(|p| p["id"].clone()).unwrap_or_else(|| {
                    json!(uuid::Uuid::new_v4().simple().to_string()[..8].to_owned())
                });
                let mut p = json!({ "id": id, "type": kind });
                p[*kind] = change[*kind].clone();
                props.remove(&name);
                let name = new_name.unwrap_or(name);
                p["name"] = json!(name);
                props.insert(name, p);
            }
            (None, Some(_)) if new_name.is_some() => {
                let mut p = props.remove(&name).expect("checked");
                let to = new_name.expect("checked");
                p["name"] = json!(to);
                props.insert(to, p);
            }
            _ => {
                return invalid(format!(
                    "body failed validation: body.properties.{name} should be a property schema object or null."
                ));
            }
        }
    }
    axum::Json(db.clone()).into_response()
}

async fn query_database(
    State(inner): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = admit(
        &mut inner,
        "POST",
        format!("/v1/databases/{id}/query"),
        &headers,
        body.clone(),
    ) {
        return r;
    }
    let Some(db) = inner.databases.get(&id) else {
        return not_found("database", &id);
    };
    let invalid = |m: String| error(StatusCode::BAD_REQUEST, "validation_error", &m);
    // `None` keeps every page; else the property and the text it must equal.
    let filter = match body.get("filter") {
        None | Some(Value::Null) => None,
        Some(f) => {
            let name = f["property"].as_str().unwrap_or_default();
            let Some(schema) = db["properties"].get(name) else {
                return invalid(format!("Could not find property with name or id: {name}"));
            };
            let Some(equals) = f["rich_text"]["equals"].as_str() else {
                return invalid(
                    "body failed validation: the stand-in filters on rich_text.equals only.".into(),
                );
            };
            if schema["type"] != "rich_text" {
                return invalid(format!(
                    "body failed validation: body.filter.rich_text does not match the type of {name}."
                ));
            }
            Some((name.to_owned(), equals.to_owned()))
        }
    };
    let page_size = body["page_size"].as_u64().unwrap_or(100).clamp(1, 100) as usize;
    let mut results: Vec<Value> = inner
        .pages
        .values()
        .filter(|p| p["parent"]["database_id"] == json!(id))
        .filter(|p| match &filter {
            None => true,
            Some((name, equals)) => {
                let text: String = p["properties"][name]["rich_text"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["text"]["content"].as_str())
                    .collect();
                text == *equals
            }
        })
        .cloned()
        .collect();
    results.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let has_more = results.len() > page_size;
    let next_cursor = results.get(page_size).map(|p| p["id"].clone());
    results.truncate(page_size);
    axum::Json(json!({
        "object": "list",
        "results": results,
        "next_cursor": next_cursor,
        "has_more": has_more,
        "type": "page_or_database",
        "page_or_database": {},
    }))
    .into_response()
}
