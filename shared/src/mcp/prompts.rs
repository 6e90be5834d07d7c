//! The prompts (`prompts/list`, `prompts/get`): slash commands a notebook user reaches for.
//!
//! - `daily_review {date?}`: that day's pages and the tasks open on it;
//! - `weekly_review {week?}`: the week's pages, the tasks done in it, the ones carried over;
//! - `carry_forward {days?}`: open tasks first seen more than `days` ago, with their pages.
//!
//! Each builds its messages from tool calls through the [`Dispatch`] port (`list_pages`,
//! `list_tasks`) and embeds the pages as resources (`resources/read` of `nib://pages/{id}`),
//! so the model gets each page as a document with its URI rather than pasted text. Dates
//! default to today in UTC.

use futures::future::join_all;
use rmcp::model::{
    CacheScope, EmbeddedResource, GetPromptResult, ListPromptsResult, Prompt, PromptArgument,
    PromptMessage, ResourceContents, Role,
};
use serde_json::{Map, Value, json};

use super::icons;
use crate::auth::Principal;
use crate::domain::Date;
use crate::tools::{Dispatch, ToolError, resources};

/// Pages embedded in one prompt at most (each is one read).
pub const MAX_EMBEDDED_PAGES: usize = 10;
/// Tasks one prompt looks through at most, per status.
const MAX_TASKS: usize = 200;
/// Tasks asked for by one `list_tasks` call.
const TASKS_PER_CALL: usize = 100;
/// `list_tasks` calls per status at most: the loop stops there even if a short page still
/// carries a cursor, so a prompt's dispatches are bounded whatever the notebook answers.
const TASK_CALLS: usize = MAX_TASKS.div_ceil(TASKS_PER_CALL);
const PROMPTS_TTL_MS: u64 = 3_600_000;

pub const DAILY_REVIEW: &str = "daily_review";
pub const WEEKLY_REVIEW: &str = "weekly_review";
pub const CARRY_FORWARD: &str = "carry_forward";

pub(super) fn list() -> ListPromptsResult {
    let arg = |name: &str, description: &str| {
        PromptArgument::new(name)
            .with_description(description)
            .with_required(false)
    };
    let mut prompts = if super::fixtures::enabled() {
        super::fixtures::prompts()
    } else {
        Vec::new()
    };
    prompts.extend([
        Prompt::new(
            DAILY_REVIEW,
            Some("Review one day: its pages (embedded) and the tasks open on it."),
            Some(vec![arg("date", "The day, YYYY-MM-DD (default: today, UTC).")]),
        )
        .with_title("Daily review")
        .with_icons(icons()),
        Prompt::new(
            WEEKLY_REVIEW,
            Some("Review a week (Monday to Sunday): what was written, what got done, what carried over."),
            Some(vec![arg(
                "week",
                "The ISO week (YYYY-Www, e.g. 2026-W25) or any day in it (YYYY-MM-DD); default: this week.",
            )]),
        )
        .with_title("Weekly review")
        .with_icons(icons()),
        Prompt::new(
            CARRY_FORWARD,
            Some("Open tasks older than N days, with the pages they came from, to decide on: do, move or drop."),
            Some(vec![arg("days", "How old a task must be, in days (default 7).")]),
        )
        .with_title("Carry forward")
        .with_icons(icons()),
    ]);
    // The same for every caller.
    ListPromptsResult::with_all_items(prompts)
        .with_ttl_ms(PROMPTS_TTL_MS)
        .with_cache_scope(CacheScope::Public)
}

pub(super) fn is_prompt(name: &str) -> bool {
    [DAILY_REVIEW, WEEKLY_REVIEW, CARRY_FORWARD].contains(&name)
}

/// The most dispatches (tool calls and resource reads through the [`Dispatch`] port; on AWS,
/// Lambda invocations) that building the prompt `name` makes, `None` for a name that is not
/// one of nib's prompts. A `prompts/get` counts this much against the caller's rate limits,
/// up front: what the prompt may cost, not one request's worth.
pub fn max_dispatches(name: &str) -> Option<u64> {
    let (list_pages, task_statuses, embedded) = match name {
        // The day's pages, the open tasks, the pages embedded.
        DAILY_REVIEW => (1, 1, MAX_EMBEDDED_PAGES),
        // The week's pages, the done and the open tasks, the pages embedded.
        WEEKLY_REVIEW => (1, 2, MAX_EMBEDDED_PAGES),
        // The open tasks, the pages they came from.
        CARRY_FORWARD => (0, 1, MAX_EMBEDDED_PAGES),
        _ => return None,
    };
    Some((list_pages + task_statuses * TASK_CALLS + embedded) as u64)
}

/// Why a prompt could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    #[error("invalid argument '{0}': {1}")]
    Argument(&'static str, String),
    #[error("reading the notebook failed")]
    Tool(#[source] ToolError),
}

impl From<ToolError> for PromptError {
    fn from(e: ToolError) -> Self {
        PromptError::Tool(e)
    }
}

fn today() -> Date {
    Date::from_time(time::OffsetDateTime::now_utc().date())
}

fn arg<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn parse_date(name: &'static str, s: &str) -> Result<Date, PromptError> {
    Date::parse(s).map_err(|e| PromptError::Argument(name, e.to_string()))
}

/// Monday and Sunday of the week `spec` names: `YYYY-Www` or a day in it.
fn week_bounds(spec: Option<&str>, today: Date) -> Result<(Date, Date), PromptError> {
    let day = match spec {
        None => today.inner(),
        Some(s) if s.len() == 8 && s.as_bytes()[4] == b'-' && s.as_bytes()[5] == b'W' => {
            let bad = || PromptError::Argument("week", "must be YYYY-Www or YYYY-MM-DD".into());
            let year: i32 = s[..4].parse().map_err(|_| bad())?;
            let week: u8 = s[6..].parse().map_err(|_| bad())?;
            time::Date::from_iso_week_date(year, week, time::Weekday::Monday).map_err(|_| bad())?
        }
        Some(s) => parse_date("week", s)?.inner(),
    };
    let monday = day - time::Duration::days(i64::from(day.weekday().number_days_from_monday()));
    let sunday = monday + time::Duration::days(6);
    Ok((Date::from_time(monday), Date::from_time(sunday)))
}

fn text(s: impl Into<String>) -> PromptMessage {
    PromptMessage::new_text(Role::User, s)
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// A task as one line of a prompt: its text, dates and URI.
fn task_line(t: &Value) -> String {
    let mut line = format!(
        "- {} (first seen {}; {})",
        str_of(t, "text"),
        str_of(t, "first_seen_date"),
        resources::task_uri(&str_of(t, "task_link_id")),
    );
    if let Some(done) = t["completed_date"].as_str() {
        line.push_str(&format!(", done {done}"));
    }
    line
}

fn task_list(title: &str, tasks: &[Value]) -> String {
    if tasks.is_empty() {
        return format!("{title}: none.");
    }
    let lines: Vec<String> = tasks.iter().map(task_line).collect();
    format!("{title} ({}):\n{}", tasks.len(), lines.join("\n"))
}

/// Builds prompts over the notebook of one principal.
pub(super) struct Builder<'a> {
    pub dispatch: &'a dyn Dispatch,
    pub principal: &'a Principal,
}

impl Builder<'_> {
    /// A tool's output as JSON to read fields from (prompts are not a hot path).
    fn read(&self, output: &serde_json::value::RawValue) -> Value {
        serde_json::from_str(output.get()).unwrap_or_default()
    }

    async fn pages(&self, from: Date, to: Date) -> Result<Vec<Value>, PromptError> {
        let mut args = Map::new();
        args.insert("from".into(), json!(from));
        args.insert("to".into(), json!(to));
        args.insert("limit".into(), json!(MAX_EMBEDDED_PAGES));
        let v = self.read(
            &self
                .dispatch
                .call(self.principal, "list_pages", args)
                .await?,
        );
        let mut pages = v["pages"].as_array().cloned().unwrap_or_default();
        // Oldest first reads like a diary.
        pages.reverse();
        Ok(pages)
    }

    /// Tasks of a status (`open`, `done`), oldest first seen first, up to [`MAX_TASKS`].
    async fn tasks(&self, status: &str) -> Result<Vec<Value>, PromptError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..TASK_CALLS {
            let mut args = Map::new();
            args.insert("status".into(), json!(status));
            args.insert("limit".into(), json!(TASKS_PER_CALL));
            if let Some(c) = cursor.take() {
                args.insert("cursor".into(), json!(c));
            }
            let v = self.read(
                &self
                    .dispatch
                    .call(self.principal, "list_tasks", args)
                    .await?,
            );
            out.extend(v["tasks"].as_array().cloned().unwrap_or_default());
            match v["next_cursor"].as_str() {
                Some(c) if out.len() < MAX_TASKS => cursor = Some(c.to_owned()),
                _ => break,
            }
        }
        out.truncate(MAX_TASKS);
        Ok(out)
    }

    /// The pages as embedded resources, in order; a page that vanished meanwhile is skipped.
    async fn embed(&self, page_ids: &[String]) -> Result<Vec<PromptMessage>, PromptError> {
        let reads = page_ids
            .iter()
            .take(MAX_EMBEDDED_PAGES)
            .map(|id| async move {
                let uri = resources::page_uri(id);
                (
                    uri.clone(),
                    self.dispatch.read_resource(self.principal, &uri).await,
                )
            });
        let mut messages = Vec::new();
        for (_, read) in join_all(reads).await {
            let contents = match read {
                Ok(c) => c,
                Err(ToolError::NotFound(_) | ToolError::Rejected(_)) => continue,
                Err(e) => return Err(e.into()),
            };
            for c in contents {
                let c: ResourceContents = serde_json::from_value(c).map_err(|e| {
                    PromptError::Tool(ToolError::Internal(
                        crate::notebook::NotebookError::Corrupt(e.to_string()),
                    ))
                })?;
                messages.push(PromptMessage::new(
                    Role::User,
                    rmcp::model::ContentBlock::Resource(EmbeddedResource::new(c)),
                ));
            }
        }
        Ok(messages)
    }

    pub async fn get(
        &self,
        name: &str,
        args: &Map<String, Value>,
    ) -> Result<GetPromptResult, PromptError> {
        let today = today();
        match name {
            DAILY_REVIEW => {
                let date = match arg(args, "date") {
                    Some(s) => parse_date("date", s)?,
                    None => today,
                };
                let pages = self.pages(date, date).await?;
                let open: Vec<Value> = self
                    .tasks("open")
                    .await?
                    .into_iter()
                    .filter(|t| str_of(t, "first_seen_date") <= date.to_string().as_str())
                    .collect();
                let ids: Vec<String> = pages
                    .iter()
                    .map(|p| str_of(p, "page_id").to_owned())
                    .collect();
                let mut messages = vec![text(format!(
                    "Daily review of my notebook for {date}. {} page(s) of that day follow as resources. \
                     Summarize what I wrote, list what I decided or learned, and for the open tasks below say \
                     which look done, which need a next step today, and which to drop. Quote the pages; do not invent.",
                    ids.len()
                ))];
                messages.extend(self.embed(&ids).await?);
                messages.push(text(task_list(&format!("Tasks open on {date}"), &open)));
                Ok(GetPromptResult::new(messages)
                    .with_description(format!("Daily review of {date}")))
            }
            WEEKLY_REVIEW => {
                let (monday, sunday) = week_bounds(arg(args, "week"), today)?;
                let pages = self.pages(monday, sunday).await?;
                let (from, to) = (monday.to_string(), sunday.to_string());
                let done: Vec<Value> = self
                    .tasks("done")
                    .await?
                    .into_iter()
                    .filter(|t| {
                        t["completed_date"]
                            .as_str()
                            .is_some_and(|d| d >= from.as_str() && d <= to.as_str())
                    })
                    .collect();
                let carried: Vec<Value> = self
                    .tasks("open")
                    .await?
                    .into_iter()
                    .filter(|t| str_of(t, "first_seen_date") <= to.as_str())
                    .collect();
                let ids: Vec<String> = pages
                    .iter()
                    .map(|p| str_of(p, "page_id").to_owned())
                    .collect();
                let mut messages = vec![text(format!(
                    "Weekly review of my notebook, {monday} to {sunday}. {} page(s) of the week follow as resources. \
                     Tell me what I wrote about (themes, decisions), what got done, and what carried over; \
                     suggest what to focus on next week. Quote the pages; do not invent.",
                    ids.len()
                ))];
                messages.extend(self.embed(&ids).await?);
                messages.push(text(task_list("Done this week", &done)));
                messages.push(text(task_list("Carried over (still open)", &carried)));
                Ok(GetPromptResult::new(messages)
                    .with_description(format!("Weekly review of {monday} to {sunday}")))
            }
            CARRY_FORWARD => {
                let days: u16 = match arg(args, "days") {
                    Some(s) => s.parse().map_err(|_| {
                        PromptError::Argument(
                            "days",
                            "must be a whole number of days (0 to 65535)".into(),
                        )
                    })?,
                    None => 7,
                };
                let cutoff = Date::from_time(today.inner() - time::Duration::days(i64::from(days)))
                    .to_string();
                let old: Vec<Value> = self
                    .tasks("open")
                    .await?
                    .into_iter()
                    .filter(|t| str_of(t, "first_seen_date") < cutoff.as_str())
                    .collect();
                let mut ids: Vec<String> = Vec::new();
                for t in &old {
                    let id = str_of(t, "source_page_id").to_owned();
                    if !id.is_empty() && !ids.contains(&id) {
                        ids.push(id);
                    }
                }
                let mut messages = vec![text(format!(
                    "These tasks have been open for more than {days} day(s). For each, help me decide: do it now, \
                     schedule it, or drop it. The pages they were written on follow as resources (at most {MAX_EMBEDDED_PAGES})."
                ))];
                messages.push(text(task_list("Open tasks", &old)));
                messages.extend(self.embed(&ids).await?);
                Ok(GetPromptResult::new(messages)
                    .with_description(format!("Open tasks older than {days} day(s)")))
            }
            _ => Err(PromptError::Argument(
                "name",
                format!("no prompt named {name}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::auth::Scope;
    use crate::domain::UserId;

    /// A notebook at its least helpful: every list is longer than a prompt takes (fifty
    /// pages on any day; tasks six at a time, each from its own page, and every list of
    /// them with another cursor), every page readable. It counts what it is asked.
    #[derive(Default)]
    struct Endless {
        dispatches: AtomicU64,
    }

    #[async_trait::async_trait]
    impl Dispatch for Endless {
        async fn call(
            &self,
            _: &Principal,
            name: &str,
            _: Map<String, Value>,
        ) -> Result<crate::tools::Output, ToolError> {
            let n = self.dispatches.fetch_add(1, Ordering::SeqCst);
            let page = |i: u64| json!({ "page_id": format!("p{i}"), "date": "2026-06-16" });
            let value = match name {
                "list_pages" => json!({ "pages": (0..50).map(page).collect::<Vec<_>>() }),
                _ => json!({
                    "tasks": (0..6).map(|k| json!({
                        "task_link_id": format!("t{n}-{k}"), "text": "x",
                        "first_seen_date": "2000-01-01", "completed_date": "2026-06-16",
                        "source_page_id": format!("p{n}-{k}"),
                    })).collect::<Vec<_>>(),
                    "next_cursor": format!("c{n}"),
                }),
            };
            crate::tools::output(&value)
        }

        async fn read_resource(&self, _: &Principal, uri: &str) -> Result<Vec<Value>, ToolError> {
            self.dispatches.fetch_add(1, Ordering::SeqCst);
            Ok(vec![
                json!({ "uri": uri, "mimeType": "text/markdown", "text": "a page" }),
            ])
        }
    }

    /// Each prompt makes at most the dispatches it is charged for (its worst case is reached
    /// here exactly): the task lists stop at their call budget even when every page carries a
    /// cursor (the loop used to follow cursors until it held 200 tasks).
    #[tokio::test]
    async fn a_prompt_makes_at_most_the_dispatches_it_is_charged() {
        let principal = Principal {
            user: UserId::parse("u").unwrap(),
            scope: Scope::Read,
            credential_id: "t".into(),
            client: None,
        };
        for name in [DAILY_REVIEW, WEEKLY_REVIEW, CARRY_FORWARD] {
            let dispatch = Endless::default();
            let builder = Builder {
                dispatch: &dispatch,
                principal: &principal,
            };
            builder.get(name, &Map::new()).await.unwrap();
            assert_eq!(
                Some(dispatch.dispatches.load(Ordering::SeqCst)),
                max_dispatches(name),
                "{name}"
            );
        }
        assert_eq!(max_dispatches(WEEKLY_REVIEW), Some(15));
        assert_eq!(max_dispatches("test_simple_prompt"), None);
    }

    #[test]
    fn weeks_run_monday_to_sunday() {
        let today = Date::parse("2026-06-18").unwrap(); // a Thursday
        let (m, s) = week_bounds(None, today).unwrap();
        assert_eq!(
            (m.to_string(), s.to_string()),
            ("2026-06-15".into(), "2026-06-21".into())
        );
        let (m, _) = week_bounds(Some("2026-W25"), today).unwrap();
        assert_eq!(m.to_string(), "2026-06-15");
        assert!(week_bounds(Some("2026-W99"), today).is_err());
        assert!(week_bounds(Some("june"), today).is_err());
    }
}
