//! Notion's public REST API: everything nib relies on about it, in this one module.
//!
//! Five calls (`Notion-Version: 2022-06-28`, `Authorization: Bearer <integration token>`,
//! JSON): `GET /v1/databases/{id}` (the schema, read on connect and mapped by
//! [`map_database`]), `PATCH /v1/databases/{id}` (on connect, adds the `nib id` text property
//! when the database has none), `POST /v1/pages` (a task becomes a page of the database, its
//! nib id in `nib id`), `POST /v1/databases/{id}/query` (the page holding a task's nib id: a
//! retried push finds the page an earlier attempt created but could not record) and
//! `PATCH /v1/pages/{id}` (its status property). The base URL is `https://api.notion.com`,
//! or `NIB_NOTION_API_URL` (tests point it at `nib_testkit::notion_standin`). Errors are
//! Notion's error object `{"object": "error", "status", "code", "message"}`, sorted into
//! [`NotionError`] by what the caller can do about them; `429` carries `Retry-After` (seconds).
//!
//! Tested only against the stand-in, which follows the documented shapes: the real Notion
//! is not reachable from where nib was built.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use zeroize::Zeroizing;

use crate::domain::{Date, TaskStatus};

/// The API version nib speaks (the `Notion-Version` header).
pub const NOTION_VERSION: &str = "2022-06-28";
/// Notion's API, unless `NIB_NOTION_API_URL` says otherwise.
pub const DEFAULT_API_URL: &str = "https://api.notion.com";
/// Notion's limit on one text object's content, in characters.
const MAX_TEXT_CONTENT: usize = 2000;
/// Notion's limit on a `url` property value, in characters.
const MAX_URL: usize = 2000;
/// The longest `Retry-After` honoured as such; a longer one is read as this.
const MAX_RETRY_AFTER: u64 = 3600;
/// The text property that holds each pushed task's nib id (connect adds it when missing).
pub const TASK_ID_PROPERTY: &str = "nib id";

/// An integration token. Never printed: `Debug` shows nothing of it, and it is sent only in
/// the `Authorization` header.
#[derive(Clone)]
pub struct NotionToken(Zeroizing<String>);

impl NotionToken {
    /// A token as the user pasted it (surrounding whitespace dropped); `None` when empty or
    /// when it holds characters a header cannot carry.
    pub fn parse(s: &str) -> Option<NotionToken> {
        let s = s.trim();
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic()))
            .then(|| NotionToken(Zeroizing::new(s.to_owned())))
    }

    /// The token itself, for sealing it into the connection record.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for NotionToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NotionToken(..)")
    }
}

/// What went wrong talking to Notion, by what can be done about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotionError {
    /// 401: the token is wrong or was revoked. Connect again with a valid token.
    #[error("Notion refused the token ({code}): {message}")]
    Unauthorized { code: String, message: String },
    /// 403: the integration lacks a capability (e.g. insert content).
    #[error("Notion forbids this to the integration ({code}): {message}")]
    Forbidden { code: String, message: String },
    /// 404: no such database or page, or it is not shared with the integration.
    #[error(
        "Notion has no such object, or it is not shared with the integration ({code}): {message}"
    )]
    NotFound { code: String, message: String },
    /// 400: the request does not fit the database (a renamed property, a bad value).
    #[error("Notion refused the request ({code}): {message}")]
    Validation { code: String, message: String },
    /// 429: too many requests; try again after `retry_after` seconds.
    #[error("Notion is rate limiting; retry after {retry_after} s")]
    RateLimited { retry_after: u64 },
    /// 5xx, 409, a timeout or no connection: try again later.
    #[error("Notion is unavailable: {0}")]
    Unavailable(String),
    /// An answer that is not what the documented shapes say.
    #[error("Notion's answer does not parse: {0}")]
    BadAnswer(String),
    /// The database has no property nib can map a task field to (connect refuses it).
    #[error("the database cannot hold nib's tasks: {0}")]
    Unmappable(String),
    /// An id that is not a Notion id (32 hex digits, dashes optional).
    #[error("not a Notion id: {0}")]
    BadId(String),
}

impl NotionError {
    /// Whether trying again later may succeed without anyone changing anything.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            NotionError::RateLimited { .. } | NotionError::Unavailable(_)
        )
    }

    /// A short name of the kind, for logs and `nib notion status`.
    pub fn kind(&self) -> &'static str {
        match self {
            NotionError::Unauthorized { .. } => "unauthorized",
            NotionError::Forbidden { .. } => "forbidden",
            NotionError::NotFound { .. } => "not_found",
            NotionError::Validation { .. } => "validation",
            NotionError::RateLimited { .. } => "rate_limited",
            NotionError::Unavailable(_) => "unavailable",
            NotionError::BadAnswer(_) => "bad_answer",
            NotionError::Unmappable(_) => "unmappable",
            NotionError::BadId(_) => "bad_id",
        }
    }
}

/// A Notion object id in its dashed form (`8-4-4-4-12` lower-case hex), so that it is safe in
/// a URL path. Accepts the undashed form of Notion's links too.
pub fn parse_id(s: &str) -> Result<String, NotionError> {
    let hex: String = s.trim().chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(NotionError::BadId(s.chars().take(64).collect()));
    }
    let h = hex.to_ascii_lowercase();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

/// How nib's task fields land in one database: property names, and the status options.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    /// The title property (whatever its name) <- the task text.
    pub title: String,
    pub status: StatusMapping,
    /// A `date` property <- the date of the task's page.
    pub date: Option<String>,
    /// A `url` property <- the task's `source_url`.
    pub url: Option<String>,
    /// The `rich_text` property [`TASK_ID_PROPERTY`] <- the task's nib id, by which a retried
    /// push finds a page already created for the task. `None` in connections made before nib
    /// had it (they push without it until `nib notion connect` runs again).
    #[serde(default)]
    pub task_id: Option<String>,
}

/// Where a task's status goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum StatusMapping {
    /// A `status` property: the option names for todo, done and cancelled.
    Status {
        property: String,
        todo: String,
        done: String,
        cancelled: String,
    },
    /// A `checkbox` property: ticked when done.
    Checkbox { property: String },
}

impl StatusMapping {
    pub fn property(&self) -> &str {
        match self {
            StatusMapping::Status { property, .. } | StatusMapping::Checkbox { property } => {
                property
            }
        }
    }

    /// The property value of `status` (`{"status": {"name": ..}}` or `{"checkbox": ..}`).
    fn value(&self, status: TaskStatus) -> Value {
        match self {
            StatusMapping::Status {
                todo,
                done,
                cancelled,
                ..
            } => {
                let name = match status {
                    TaskStatus::Todo => todo,
                    TaskStatus::Done => done,
                    TaskStatus::Cancelled => cancelled,
                };
                json!({ "status": { "name": name } })
            }
            StatusMapping::Checkbox { .. } => json!({ "checkbox": status == TaskStatus::Done }),
        }
    }
}

/// Lower-case letters and digits only: "To-do", "to do" and "TODO" compare equal.
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// The properties of a database object, as (name, type, object), sorted by name.
fn properties(db: &Value) -> Result<Vec<(&str, &str, &Value)>, NotionError> {
    let props = db
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| NotionError::BadAnswer("a database without properties".into()))?;
    let mut out: Vec<(&str, &str, &Value)> = props
        .iter()
        .filter_map(|(name, p)| Some((name.as_str(), p.get("type")?.as_str()?, p)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    Ok(out)
}

/// The property of `kind` to use: one whose name is among `preferred` (squashed), else the
/// first by name.
fn pick<'a>(
    props: &[(&'a str, &'a str, &'a Value)],
    kind: &str,
    preferred: &[&str],
) -> Option<(&'a str, &'a Value)> {
    let of_kind: Vec<_> = props.iter().filter(|p| p.1 == kind).collect();
    of_kind
        .iter()
        .find(|p| preferred.contains(&squash(p.0).as_str()))
        .or(of_kind.first())
        .map(|p| (p.0, p.2))
}

/// Maps a database object (`GET /v1/databases/{id}`) onto nib's task fields, or says which
/// property is missing or unusable.
pub fn map_database(db: &Value) -> Result<Mapping, NotionError> {
    let props = properties(db)?;
    let title = pick(&props, "title", &[])
        .map(|(n, _)| n.to_owned())
        .ok_or_else(|| NotionError::Unmappable("it has no title property".into()))?;
    let status = match pick(&props, "status", &["status", "state"]) {
        Some((name, p)) => status_options(name, p)?,
        None => match pick(&props, "checkbox", &["done", "complete", "completed"]) {
            Some((name, _)) => StatusMapping::Checkbox {
                property: name.to_owned(),
            },
            None => {
                return Err(NotionError::Unmappable(
                    "it has neither a status nor a checkbox property for the task's status".into(),
                ));
            }
        },
    };
    let date = pick(&props, "date", &["date", "due", "duedate", "day"]).map(|(n, _)| n.to_owned());
    let url =
        pick(&props, "url", &["url", "source", "link", "sourceurl"]).map(|(n, _)| n.to_owned());
    let task_id = match props
        .iter()
        .find(|p| squash(p.0) == squash(TASK_ID_PROPERTY))
    {
        Some((name, "rich_text", _)) => Some((*name).to_owned()),
        // Writing nib's ids there, or adding a text property of the same name, would clash.
        Some((name, kind, _)) => {
            return Err(NotionError::Unmappable(format!(
                "its property '{name}' is of type {kind}; nib keeps each task's id in a text \
                 property of that name: rename or delete it"
            )));
        }
        None => None,
    };
    Ok(Mapping {
        title,
        status,
        date,
        url,
        task_id,
    })
}

/// A `status` property's options for todo, done and cancelled: todo is the first option of its
/// "To-do" group (else an option named like "Not started"/"To do"), done the first of its
/// "Complete" group (else one named like "Done"), cancelled one named like "Cancelled" (else
/// done's: it is closed too).
fn status_options(name: &str, p: &Value) -> Result<StatusMapping, NotionError> {
    let config = p.get("status").unwrap_or(&Value::Null);
    let options: Vec<(&str, &str)> = config
        .get("options")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|o| Some((o.get("id")?.as_str()?, o.get("name")?.as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    let groups: Vec<(String, Vec<&str>)> = config
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|g| {
                    let ids = g
                        .get("option_ids")?
                        .as_array()?
                        .iter()
                        .filter_map(Value::as_str)
                        .collect();
                    Some((squash(g.get("name")?.as_str()?), ids))
                })
                .collect()
        })
        .unwrap_or_default();
    let first_of_group = |group: &str| -> Option<&str> {
        let (_, ids) = groups.iter().find(|(g, _)| g == group)?;
        ids.iter()
            .find_map(|id| options.iter().find(|(oid, _)| oid == id).map(|(_, n)| *n))
    };
    let named = |names: &[&str]| -> Option<&str> {
        options
            .iter()
            .find(|(_, n)| names.contains(&squash(n).as_str()))
            .map(|(_, n)| *n)
    };
    let todo = first_of_group("todo")
        .or_else(|| named(&["notstarted", "todo", "open"]))
        .ok_or_else(|| {
            NotionError::Unmappable(format!(
                "its status property '{name}' has no option in a To-do group"
            ))
        })?;
    let done = first_of_group("complete")
        .or_else(|| named(&["done", "complete", "completed"]))
        .ok_or_else(|| {
            NotionError::Unmappable(format!(
                "its status property '{name}' has no option in a Complete group, nor one named Done"
            ))
        })?;
    let cancelled = named(&["cancelled", "canceled", "cancel"]).unwrap_or(done);
    Ok(StatusMapping::Status {
        property: name.to_owned(),
        todo: todo.to_owned(),
        done: done.to_owned(),
        cancelled: cancelled.to_owned(),
    })
}

/// What one task becomes in Notion.
#[derive(Debug, Clone)]
pub struct TaskPush<'a> {
    /// The task's nib id (its `task_link_id`).
    pub id: &'a str,
    pub text: &'a str,
    pub status: TaskStatus,
    pub date: Date,
    pub source_url: Option<&'a str>,
}

/// A page Notion created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotionPage {
    pub id: String,
    pub url: String,
}

/// The `properties` of a new page for `task` in a database mapped by `mapping`.
pub fn page_properties(mapping: &Mapping, task: &TaskPush<'_>) -> Value {
    let chars: Vec<char> = task.text.chars().collect();
    let title: Vec<Value> = chars
        .chunks(MAX_TEXT_CONTENT)
        .map(|c| json!({ "type": "text", "text": { "content": c.iter().collect::<String>() } }))
        .collect();
    let mut props = serde_json::Map::new();
    props.insert(mapping.title.clone(), json!({ "title": title }));
    props.insert(
        mapping.status.property().to_owned(),
        mapping.status.value(task.status),
    );
    if let Some(date) = &mapping.date {
        props.insert(
            date.clone(),
            json!({ "date": { "start": task.date.to_string() } }),
        );
    }
    if let (Some(url), Some(source)) = (&mapping.url, task.source_url)
        && source.chars().count() <= MAX_URL
    {
        props.insert(url.clone(), json!({ "url": source }));
    }
    if let Some(task_id) = &mapping.task_id {
        props.insert(
            task_id.clone(),
            json!({ "rich_text": [{ "type": "text", "text": { "content": task.id } }] }),
        );
    }
    Value::Object(props)
}

/// A page object's id and URL.
fn page_of(page: &Value) -> Result<NotionPage, NotionError> {
    let id = page
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| NotionError::BadAnswer("a page without an id".into()))?;
    let url = page
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| NotionError::BadAnswer("a page without a url".into()))?;
    Ok(NotionPage {
        id: parse_id(id)?,
        url: url.to_owned(),
    })
}

/// The client of Notion's API. Cheap to share.
#[derive(Debug, Clone)]
pub struct NotionApi {
    http: reqwest::Client,
    base: String,
}

impl NotionApi {
    /// A client of the API at `base` (no trailing slash needed): connect timeout 3 s, 10 s for
    /// a whole request.
    pub fn new(base: &str) -> NotionApi {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a reqwest client builds");
        NotionApi {
            http,
            base: base.trim_end_matches('/').to_owned(),
        }
    }

    /// The API at `NIB_NOTION_API_URL`, else Notion's.
    pub fn from_env() -> NotionApi {
        NotionApi::new(&api_url_from_env())
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// `GET /v1/databases/{id}`: the database object.
    pub async fn database(&self, token: &NotionToken, id: &str) -> Result<Value, NotionError> {
        let id = parse_id(id)?;
        let req = self.http.get(format!("{}/v1/databases/{id}", self.base));
        let db = self.send(req, token).await?;
        if db.get("object").and_then(Value::as_str) != Some("database") {
            return Err(NotionError::BadAnswer("not a database object".into()));
        }
        Ok(db)
    }

    /// `POST /v1/pages`: the task as a new page of the database.
    pub async fn create_page(
        &self,
        token: &NotionToken,
        database_id: &str,
        mapping: &Mapping,
        task: &TaskPush<'_>,
    ) -> Result<NotionPage, NotionError> {
        let body = json!({
            "parent": { "database_id": parse_id(database_id)? },
            "properties": page_properties(mapping, task),
        });
        let req = self
            .http
            .post(format!("{}/v1/pages", self.base))
            .json(&body);
        page_of(&self.send(req, token).await?)
    }

    /// `PATCH /v1/databases/{id}`: adds the text property [`TASK_ID_PROPERTY`]; the updated
    /// database object.
    pub async fn add_task_id_property(
        &self,
        token: &NotionToken,
        database_id: &str,
    ) -> Result<Value, NotionError> {
        let id = parse_id(database_id)?;
        let req = self
            .http
            .patch(format!("{}/v1/databases/{id}", self.base))
            .json(&json!({ "properties": { TASK_ID_PROPERTY: { "rich_text": {} } } }));
        let db = self.send(req, token).await?;
        if db.get("object").and_then(Value::as_str) != Some("database") {
            return Err(NotionError::BadAnswer("not a database object".into()));
        }
        Ok(db)
    }

    /// `POST /v1/databases/{id}/query` filtered on the task id property: the page of the
    /// database that holds `task_id` (the first, should there be several), if any.
    pub async fn find_task_page(
        &self,
        token: &NotionToken,
        database_id: &str,
        property: &str,
        task_id: &str,
    ) -> Result<Option<NotionPage>, NotionError> {
        let id = parse_id(database_id)?;
        let req = self
            .http
            .post(format!("{}/v1/databases/{id}/query", self.base))
            .json(&json!({
                "filter": { "property": property, "rich_text": { "equals": task_id } },
                "page_size": 1,
            }));
        let list = self.send(req, token).await?;
        let results = list
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| NotionError::BadAnswer("a query answer without results".into()))?;
        results.first().map(page_of).transpose()
    }

    /// `PATCH /v1/pages/{id}`: the page's status property.
    pub async fn update_status(
        &self,
        token: &NotionToken,
        page_id: &str,
        mapping: &Mapping,
        status: TaskStatus,
    ) -> Result<(), NotionError> {
        let id = parse_id(page_id)?;
        let mut props = serde_json::Map::new();
        props.insert(
            mapping.status.property().to_owned(),
            mapping.status.value(status),
        );
        let req = self
            .http
            .patch(format!("{}/v1/pages/{id}", self.base))
            .json(&json!({ "properties": props }));
        self.send(req, token).await.map(|_| ())
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        token: &NotionToken,
    ) -> Result<Value, NotionError> {
        let resp = req
            .bearer_auth(token.expose())
            .header("Notion-Version", NOTION_VERSION)
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(|e| NotionError::Unavailable(transport_reason(&e)))?;
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| NotionError::Unavailable(transport_reason(&e)))?;
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            if body.is_null() {
                return Err(NotionError::BadAnswer(format!("{status} without JSON")));
            }
            return Ok(body);
        }
        Err(error_from(status, retry_after, &body))
    }
}

/// The API base URL from `NIB_NOTION_API_URL`, else Notion's.
pub fn api_url_from_env() -> String {
    std::env::var("NIB_NOTION_API_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_API_URL.to_owned())
}

/// Why a request got no answer, without the URL (it holds ids only, but the reason is enough).
fn transport_reason(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        "the connection failed".into()
    }
}

/// Notion's error object `{"object": "error", "status", "code", "message"}` as a
/// [`NotionError`], by the HTTP status.
pub fn error_from(status: u16, retry_after: Option<u64>, body: &Value) -> NotionError {
    let field = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect::<String>()
    };
    let code = field("code");
    let message = field("message");
    match status {
        401 => NotionError::Unauthorized { code, message },
        403 => NotionError::Forbidden { code, message },
        404 => NotionError::NotFound { code, message },
        429 => NotionError::RateLimited {
            retry_after: retry_after.unwrap_or(1).clamp(1, MAX_RETRY_AFTER),
        },
        400 | 413 | 422 => NotionError::Validation { code, message },
        _ if status == 409 || status >= 500 => {
            NotionError::Unavailable(format!("{status} {code}").trim().to_owned())
        }
        _ => NotionError::BadAnswer(format!("unexpected status {status} {code}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(props: Value) -> Value {
        json!({ "object": "database", "id": "d", "properties": props })
    }

    #[test]
    fn ids_are_normalized_and_checked() {
        assert_eq!(
            parse_id("59833787E15A4D9D8A9F6D5C4B3A2910").unwrap(),
            "59833787-e15a-4d9d-8a9f-6d5c4b3a2910"
        );
        assert!(parse_id("../v1/users").is_err());
        assert!(parse_id("").is_err());
    }

    #[test]
    fn a_status_database_maps_by_groups() {
        let m = map_database(&db(json!({
            "Task": { "id": "title", "type": "title", "title": {} },
            "Progress": { "id": "s", "type": "status", "status": {
                "options": [
                    { "id": "1", "name": "Backlog" }, { "id": "2", "name": "Doing" },
                    { "id": "3", "name": "Shipped" }, { "id": "4", "name": "Canceled" } ],
                "groups": [
                    { "id": "g1", "name": "To-do", "option_ids": ["1"] },
                    { "id": "g2", "name": "In progress", "option_ids": ["2"] },
                    { "id": "g3", "name": "Complete", "option_ids": ["3", "4"] } ] } },
            "Due": { "id": "d", "type": "date", "date": {} },
            "Link": { "id": "u", "type": "url", "url": {} }
        })))
        .unwrap();
        assert_eq!(m.title, "Task");
        assert_eq!(
            m.status,
            StatusMapping::Status {
                property: "Progress".into(),
                todo: "Backlog".into(),
                done: "Shipped".into(),
                cancelled: "Canceled".into()
            }
        );
        assert_eq!(m.date.as_deref(), Some("Due"));
        assert_eq!(m.url.as_deref(), Some("Link"));
    }

    #[test]
    fn a_checkbox_database_maps_and_one_without_status_is_refused() {
        let m = map_database(&db(json!({
            "Name": { "type": "title", "title": {} },
            "Done": { "type": "checkbox", "checkbox": {} }
        })))
        .unwrap();
        assert_eq!(
            m.status,
            StatusMapping::Checkbox {
                property: "Done".into()
            }
        );
        assert_eq!(m.date, None);
        let e = map_database(&db(json!({ "Name": { "type": "title", "title": {} } })));
        assert!(matches!(e, Err(NotionError::Unmappable(m)) if m.contains("status")));
        let e = map_database(&db(json!({
            "Name": { "type": "title", "title": {} },
            "Stage": { "type": "status", "status": { "options": [{ "id": "1", "name": "Waiting" }], "groups": [] } }
        })));
        assert!(matches!(e, Err(NotionError::Unmappable(m)) if m.contains("'Stage'")));
    }

    #[test]
    fn the_task_id_property_maps_by_name_and_one_of_another_type_is_refused() {
        let base = json!({
            "Name": { "type": "title", "title": {} },
            "Done": { "type": "checkbox", "checkbox": {} },
            "Notes": { "type": "rich_text", "rich_text": {} }
        });
        // Another text property is not taken for it: nib's ids go only where they are named.
        assert_eq!(map_database(&db(base.clone())).unwrap().task_id, None);
        let mut with = base.clone();
        with["Nib ID"] = json!({ "type": "rich_text", "rich_text": {} });
        assert_eq!(
            map_database(&db(with)).unwrap().task_id.as_deref(),
            Some("Nib ID")
        );
        let mut clash = base;
        clash["nib id"] = json!({ "type": "number", "number": {} });
        let e = map_database(&db(clash));
        assert!(
            matches!(e, Err(NotionError::Unmappable(m)) if m.contains("'nib id'") && m.contains("number"))
        );
    }

    #[test]
    fn a_mapping_stored_before_the_task_id_property_reads_without_it() {
        let m: Mapping = serde_json::from_value(json!({
            "title": "Name",
            "status": { "type": "checkbox", "property": "Done" },
            "date": null,
            "url": null
        }))
        .unwrap();
        assert_eq!(m.task_id, None);
    }

    #[test]
    fn long_titles_are_split_into_text_objects() {
        let m = Mapping {
            title: "Name".into(),
            status: StatusMapping::Checkbox {
                property: "Done".into(),
            },
            date: None,
            url: Some("URL".into()),
            task_id: Some("nib id".into()),
        };
        let text = "a".repeat(4500);
        let p = page_properties(
            &m,
            &TaskPush {
                id: "t_1",
                text: &text,
                status: TaskStatus::Done,
                date: Date::parse("2026-06-20").unwrap(),
                source_url: Some("https://example.com/x"),
            },
        );
        assert_eq!(p["Name"]["title"].as_array().unwrap().len(), 3);
        assert_eq!(p["Done"]["checkbox"], json!(true));
        assert_eq!(p["URL"]["url"], json!("https://example.com/x"));
        assert_eq!(p["nib id"]["rich_text"][0]["text"]["content"], json!("t_1"));
    }

    #[test]
    fn errors_sort_by_status() {
        let body = json!({ "object": "error", "status": 400, "code": "validation_error", "message": "Nope is not a property that exists." });
        assert!(matches!(
            error_from(400, None, &body),
            NotionError::Validation { message, .. } if message.contains("Nope")
        ));
        assert_eq!(
            error_from(429, Some(30), &json!({})),
            NotionError::RateLimited { retry_after: 30 }
        );
        assert!(error_from(503, None, &json!({})).is_transient());
        assert!(!error_from(401, None, &json!({})).is_transient());
    }
}
