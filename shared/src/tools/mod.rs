//! The tool catalog: one definition per tool (name, title, description, scope, annotations,
//! input and output schemas, handler). It is the single source for `tools/list`, routing and
//! scope checks; the MCP layer only renders it.

mod account_app;
mod add_note;
mod args;
mod correct_line_app;
mod create_task;
mod cursor;
mod delete_page;
mod delete_task;
pub mod export_notebook;
mod fetch;
mod get_page;
pub mod get_task;
pub mod invocation;
mod link_tasks;
mod list_access;
mod list_notes;
mod list_pages;
mod list_tags;
mod list_tasks;
mod list_trash;
mod notion_app;
mod output;
pub mod resources;
mod restore_page;
mod restore_task;
pub mod scan;
mod search;
mod search_pages;
mod settings_app;
mod update_task_status;
mod upload_app;

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::{Map, Value};

pub use args::Args;
pub use list_access::{AccessRecordView, rfc3339_ms};
pub use output::{Annotations, Output, Paging, Revisable, output, output_schema};

use crate::auth::{Principal, Scope};
use crate::domain::{PageId, TaskLinkId};
use crate::notebook::{Notebook, NotebookError};

/// Why a tool call failed. `Invalid`/`NotFound` are business failures the model can act on
/// (an `isError` result); `UnknownTool` is a protocol error; `Internal` never shows its cause
/// to the client.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("unknown tool: {0}")]
    UnknownTool(String),
    #[error("invalid argument '{name}': {reason}")]
    InvalidArgument { name: String, reason: String },
    #[error("{0}")]
    Rejected(String),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("internal error")]
    Internal(#[source] NotebookError),
    /// The function that owns the tool could not be reached, or failed without an answer.
    #[error("the tool's function failed")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ToolError {
    pub fn invalid(name: &str, reason: impl Into<String>) -> Self {
        ToolError::InvalidArgument {
            name: name.to_owned(),
            reason: reason.into(),
        }
    }
}

impl From<NotebookError> for ToolError {
    fn from(e: NotebookError) -> Self {
        match e {
            NotebookError::NotFound(what) => ToolError::NotFound(what),
            NotebookError::Invalid(m) | NotebookError::InTrash(m) => ToolError::Rejected(m),
            other => ToolError::Internal(other),
        }
    }
}

/// What a tool's handler gets.
pub struct Ctx<'a> {
    pub notebook: &'a Notebook,
    pub principal: &'a Principal,
    pub args: Args<'a>,
}

type Handler = for<'a> fn(Ctx<'a>) -> BoxFuture<'a, Result<Output, ToolError>>;

/// The class function that owns a tool on AWS (docs/design.md §3): the Lambda the `mcp` front invokes
/// for it. Locally every class runs in the one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolClass {
    /// list_pages, get_page, search_pages, search, fetch, list_notes, list_tags, delete_page,
    /// restore_page, list_trash, list_access; the web app's export_notebook, upload_result and
    /// correct_line.
    Pages,
    /// list_tasks, get_task, create_task, update_task_status, add_note, delete_task,
    /// restore_task, link_tasks, unlink_tasks; the web app's Notion and time-zone operations.
    Tasks,
    /// No tool: the web app's `delete_account`, in the one function that reaches every
    /// partition and object a deletion removes.
    Account,
}

impl ToolClass {
    pub const ALL: [ToolClass; 3] = [ToolClass::Pages, ToolClass::Tasks, ToolClass::Account];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolClass::Pages => "pages",
            ToolClass::Tasks => "tasks",
            ToolClass::Account => "account",
        }
    }
}

/// One tool of the catalog: a tool is its module (arguments, handler, a typed output whose
/// schema is derived, [`output_schema`]) plus one line in [`catalog`].
pub struct ToolDef {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// The least scope that may list and call it.
    pub scope: Scope,
    /// The function that runs it on AWS.
    pub class: ToolClass,
    pub annotations: Annotations,
    pub input_schema: Value,
    pub output_schema: Value,
    pub handler: Handler,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .finish()
    }
}

static CATALOG: LazyLock<Vec<ToolDef>> = LazyLock::new(|| {
    vec![
        list_pages::def(),
        get_page::def(),
        search_pages::def(),
        list_tasks::def(),
        get_task::def(),
        create_task::def(),
        update_task_status::def(),
        add_note::def(),
        list_notes::def(),
        list_tags::def(),
        search::def(),
        fetch::def(),
        delete_page::def(),
        restore_page::def(),
        delete_task::def(),
        restore_task::def(),
        link_tasks::link_def(),
        link_tasks::unlink_def(),
        list_trash::def(),
        list_access::def(),
    ]
});

/// Every tool, in the order `tools/list` shows them.
pub fn catalog() -> &'static [ToolDef] {
    &CATALOG
}

pub fn find(name: &str) -> Option<&'static ToolDef> {
    catalog().iter().find(|t| t.name == name)
}

/// The credential id of the owner's web app (`http::app`): the one principal that reaches the
/// [`app_operations`]. No token or grant has it (their ids are `tok_...` and `grant_...`).
pub const APP_CREDENTIAL: &str = "web_app";

static APP_OPERATIONS: LazyLock<Vec<ToolDef>> = LazyLock::new(|| {
    vec![
        notion_app::connect_def(),
        notion_app::status_def(),
        notion_app::disconnect_def(),
        account_app::delete_def(),
        upload_app::result_def(),
        settings_app::get_def(),
        settings_app::set_def(),
        export_notebook::def(),
        correct_line_app::def(),
    ]
});

/// What only the owner's web app calls (the Notion connection, deleting the account, an
/// upload's result, the time zone, exporting the whole notebook, correcting a page's line): run like tools, by the class
/// function that owns them, but never listed or callable over MCP (`find` does not see them).
pub fn app_operations() -> &'static [ToolDef] {
    &APP_OPERATIONS
}

/// The tool, or for the web app's principal also the app operation, called `name`.
pub fn find_for(principal: &Principal, name: &str) -> Option<&'static ToolDef> {
    find(name).or_else(|| {
        (principal.credential_id == APP_CREDENTIAL)
            .then(|| app_operations().iter().find(|t| t.name == name))
            .flatten()
    })
}

/// Runs tool calls. In process for the local server; a Lambda Invoke of the class function
/// that owns the tool on AWS. Both run the same handlers.
#[async_trait]
pub trait Dispatch: Send + Sync {
    async fn call(
        &self,
        principal: &Principal,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<Output, ToolError>;

    /// `resources/read` of `uri` ([`resources`]): the result's `contents`. On AWS the pages
    /// function reads it, as it runs the page tools.
    async fn read_resource(
        &self,
        principal: &Principal,
        uri: &str,
    ) -> Result<Vec<Value>, ToolError>;

    /// Writes what the calls so far left to write (their access records) before a reply
    /// leaves: a class function calls it after each call. Nothing to do by default.
    async fn settle(&self) -> Result<(), ToolError> {
        Ok(())
    }
}

/// The tool `name`, when `principal` may call it. The HTTP layer answers 403 before any
/// dispatch; this is the second lock on the door, in every `Dispatch`.
pub fn permitted(principal: &Principal, name: &str) -> Result<&'static ToolDef, ToolError> {
    let tool = find_for(principal, name).ok_or_else(|| ToolError::UnknownTool(name.to_owned()))?;
    if !principal.scope.allows(tool.scope) {
        return Err(ToolError::Rejected(format!(
            "{name} needs the {} scope",
            tool.scope
        )));
    }
    Ok(tool)
}

/// Calls the handlers in this process.
pub struct InProcess {
    pub notebook: Arc<Notebook>,
}

#[async_trait]
impl Dispatch for InProcess {
    async fn call(
        &self,
        principal: &Principal,
        name: &str,
        args: Map<String, Value>,
    ) -> Result<Output, ToolError> {
        let tool = permitted(principal, name)?;
        let args = Args::new(&args, tool.input_schema["properties"].as_object());
        args.check_known()?;
        let result = (tool.handler)(Ctx {
            notebook: &self.notebook,
            principal,
            args,
        })
        .await?;
        if let Some(opened) = opened(tool.name, &result) {
            self.record(principal, tool.name, opened);
        }
        Ok(result)
    }

    async fn read_resource(
        &self,
        principal: &Principal,
        uri: &str,
    ) -> Result<Vec<Value>, ToolError> {
        let contents = resources::read(&self.notebook, principal, uri).await?;
        let mut opened = Opened::default();
        for c in &contents {
            if let Some(uri) = c["uri"].as_str().and_then(resources::NibUri::parse) {
                opened.add_uri(uri);
            }
        }
        self.record(principal, resources::READ_RESOURCE, opened);
        Ok(contents)
    }

    async fn settle(&self) -> Result<(), ToolError> {
        self.notebook
            .access_log()
            .flush()
            .await
            .map(drop)
            .map_err(ToolError::Internal)
    }
}

impl InProcess {
    fn record(&self, principal: &Principal, tool: &str, opened: Opened) {
        self.notebook.access_log().record(
            &principal.user,
            &principal.credential_id,
            principal.client.as_deref(),
            tool,
            opened.pages,
            opened.tasks,
        );
    }
}

/// The tools whose calls are not recorded here: they open no notebook content (the access
/// record itself is not the notebook). `delete_account` opens none either, and its record
/// would be an item of the user written after the deletion. `export_notebook` records itself:
/// its result names no ids, and its records name every page and task it wrote
/// ([`crate::notebook::AccessLog::record_all`]).
const UNRECORDED: &[&str] = &["list_access", "delete_account", "export_notebook"];

/// The pages and tasks a call opened, in the order its result names them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Opened {
    pub pages: Vec<PageId>,
    pub tasks: Vec<TaskLinkId>,
}

impl Opened {
    fn page(&mut self, id: PageId) {
        if !self.pages.contains(&id) {
            self.pages.push(id);
        }
    }

    fn task(&mut self, id: TaskLinkId) {
        if !self.tasks.contains(&id) {
            self.tasks.push(id);
        }
    }

    fn add_uri(&mut self, uri: resources::NibUri) {
        match uri {
            resources::NibUri::Page(id) | resources::NibUri::PageImage(id) => self.page(id),
            resources::NibUri::Task(id) => self.task(id),
        }
    }
}

/// What a successful call of `tool` answering `result` opened, for the access record; `None`
/// when it records nothing: an unchanged answer (nothing was opened), or a tool of
/// [`UNRECORDED`]. Every other tool is recorded by construction, new ones included: the ids
/// come from the result, which names what the call showed: every `page_id` (and `id`, the
/// connector tools' page id) and `task_link_id` in it ([`scan::fields`], no parse).
pub fn opened(tool: &str, result: &Output) -> Option<Opened> {
    // An unchanged answer is `Revisable::Unchanged`, which writes `unchanged` first.
    if UNRECORDED.contains(&tool) || result.get().starts_with(r#"{"unchanged":true"#) {
        return None;
    }
    // A kept answer (get_page's) is given again and again: its ids are found once.
    let opened = result.opened(|json| {
        let mut opened = Opened::default();
        for (key, value) in scan::fields(json, &["page_id", "id", "task_link_id"]) {
            if key < 2 {
                if let Ok(id) = PageId::parse(value) {
                    opened.page(id);
                }
            } else if let Ok(id) = TaskLinkId::parse(value) {
                opened.task(id);
            }
        }
        opened
    });
    Some(opened.clone())
}

/// `{"type":"object","properties":...,"required":[...],"additionalProperties":false}`.
pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

pub(crate) const DATE_PATTERN: &str = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$";

/// The `limit` argument of a list: a whole number of at least 1, lowered to `max` when above
/// it (no `maximum` in the schema, so that clients do not refuse the call before sending it).
pub(crate) fn limit_schema(default: usize, max: usize) -> Value {
    serde_json::json!({
        "type": "integer",
        "minimum": 1,
        "default": default,
        "description": format!("How many to return (default {default}); above {max} counts as {max}, and the result's limit_applied says what was used."),
    })
}

/// The `cursor` argument of a list.
pub(crate) fn cursor_schema() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "The next_cursor of the previous call, to continue the list after it.",
    })
}

/// The `if_revision` argument of a read that may answer "unchanged".
pub(crate) fn if_revision_schema() -> Value {
    serde_json::json!({
        "type": "string",
        "description": "The revision of an answer you already have to this same call: if nothing it shows has changed, the answer is only {\"unchanged\": true, \"revision\"}. Any other value gets the whole answer.",
    })
}
