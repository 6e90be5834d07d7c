//! Destructive tools ask first: where the client can ask its user (2026-07-28 with the
//! `elicitation` capability in the request's `_meta`), `tools/call` of a tool annotated
//! destructive answers an `InputRequiredResult` (SEP-2322, multi round-trip requests) holding
//! one `elicitation/create` that names what will change, and a `requestState`. The client asks
//! its user and calls again with the same arguments, the answer in `inputResponses` and the
//! state echoed. Accept runs the tool; decline or cancel changes nothing and says so.
//!
//! The eras with sessions (2025-06-18, 2025-11-25) ask the same question the old way: the
//! client declared the capability at `initialize`, sealed in its session id, and the transport
//! turns the `InputRequiredResult` into an `elicitation/create` request on the call's event
//! stream, waits for the client's POSTed answer and calls again with it
//! (`http::mcp_elicit`). A client without the capability, without a session (the functions on
//! AWS issue none: API Gateway cannot hold the stream), or 2025-03-26 gets the tool as before;
//! its annotations say destructive.
//!
//! **Arguments are checked before anything is asked** ([`check_arguments`]): a call that
//! waits for its answer (in the eras with sessions, on a stream) keeps its arguments, so they
//! must be the tool's own and few.
//!
//! **The state is a binding, not a secret.** It is a digest of the caller, the tool and the
//! arguments; the retry must carry the same, so an answer given for one page cannot delete
//! another (a mismatch, or any other string, is refused as invalid params). It is not keyed:
//! nothing in it is trusted. Authorisation is the caller's token, as for any call, and the
//! user's answer is only ever the client's word; a client willing to lie about it needs no
//! state to do so. The confirmation guards the user against the model acting alone, which
//! goes through an honest client.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::model::{
    CallToolResult, ContentBlock, ElicitRequest, ElicitRequestParams, ElicitationSchema, ErrorData,
    InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{Ctx, NibMcp};
use crate::auth::Principal;
use crate::notebook::TRASH_DAYS;
use crate::tools::resources::{page_uri, task_uri};
use crate::tools::{Args, ToolDef, ToolError};

/// The key of the one input request.
pub const KEY: &str = "confirm";
const STATE_PREFIX: &str = "nib-confirm-1.";

/// Whether this call must ask before it runs: a destructive tool, and a client that can be
/// asked: at 2026-07-28 it says so in the request's capabilities; before, the transport says
/// whether it can ask on the call's stream.
pub fn must_ask(destructive: bool, ctx: &Ctx<'_>) -> bool {
    destructive && (ctx.elicits_on_stream || stateless_can_elicit(ctx))
}

fn stateless_can_elicit(ctx: &Ctx<'_>) -> bool {
    ctx.is_stateless_era()
        && ctx
            .meta
            .client_capabilities()
            .is_some_and(|caps| caps.elicitation.is_some())
}

/// The most bytes the arguments of a call that asks may hold (serialised): the destructive
/// tools take one or two ids (about 60 bytes each).
pub const MAX_ASKED_ARGUMENT_BYTES: usize = 1024;

/// The arguments of a call about to be asked, checked as its tool checks them: only names
/// its schema declares, and at most [`MAX_ASKED_ARGUMENT_BYTES`]. A call refused here is
/// answered the tool's error at once, without a question.
pub fn check_arguments(tool: &ToolDef, args: &Map<String, Value>) -> Result<(), ToolError> {
    Args::new(args, tool.input_schema["properties"].as_object()).check_known()?;
    let size = serde_json::to_vec(args).map_or(usize::MAX, |v| v.len());
    if size > MAX_ASKED_ARGUMENT_BYTES {
        return Err(ToolError::Rejected(format!(
            "the arguments of {} hold at most {MAX_ASKED_ARGUMENT_BYTES} bytes",
            tool.name
        )));
    }
    Ok(())
}

/// What the retry said.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// No answer yet (a first call, or a retry without our key): ask.
    None,
    Accept,
    /// Declined or cancelled: nothing changes.
    Refused(&'static str),
}

/// The state binding an answer to this caller, tool and arguments.
pub fn state(principal: &Principal, tool: &str, args: &Map<String, Value>) -> String {
    let mut h = Sha256::new();
    for part in [
        principal.user.as_str(),
        principal.credential_id.as_str(),
        tool,
    ] {
        h.update(part.as_bytes());
        h.update([0x1f]);
    }
    // serde_json's Map keeps its keys sorted (no preserve_order feature), so equal arguments
    // serialise to equal bytes.
    h.update(serde_json::to_vec(args).unwrap_or_default());
    format!(
        "{STATE_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(&h.finalize()[..18])
    )
}

/// The retry's answer, after its state is checked against this call.
pub fn answer(
    expected_state: &str,
    request_state: Option<&str>,
    responses: Option<&InputResponses>,
) -> Result<Answer, ErrorData> {
    let Some(response) = responses.and_then(|r| r.get(KEY)) else {
        // No answer to our question: ask (again). A state sent alone is not an answer.
        return Ok(Answer::None);
    };
    if request_state != Some(expected_state) {
        return Err(ErrorData::invalid_params(
            "requestState does not belong to this call: call again without inputResponses",
            None,
        ));
    }
    Ok(match response.get("action").and_then(Value::as_str) {
        Some("accept") => Answer::Accept,
        Some("decline") => Answer::Refused("declined"),
        Some("cancel") => Answer::Refused("cancelled"),
        _ => {
            return Err(ErrorData::invalid_params(
                "inputResponses.confirm must be an elicitation result (action accept, decline or cancel)",
                None,
            ));
        }
    })
}

/// The question: `what` names what will change.
pub fn ask(what: String, state: String) -> InputRequiredResult {
    // A yes/no question: a form without fields (the client offers accept, decline, cancel).
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: what,
        requested_schema: ElicitationSchema::new(Default::default()),
    };
    let mut requests = InputRequests::new();
    requests.insert(
        KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    InputRequiredResult::new(Some(requests), Some(state))
}

/// The first line of a page's text, shortened, to name it in a question.
fn first_line(text: &str) -> Option<String> {
    let line = text
        .lines()
        .map(|l| l.trim_start_matches(['#', '-', '*', ' ']).trim())
        .find(|l| !l.is_empty())?;
    Some(quoted(line))
}

/// The longest quotation of a page or task in a question, in characters.
const QUOTE_CHARS: usize = 60;

/// `text` (a page's first line, a task's text: written by a model or read from ink) quoted in
/// a question: on one line, without control characters, its own double quotes made single so
/// that the quotation cannot end early and the text cannot pass for the question's own words,
/// and shortened to [`QUOTE_CHARS`].
fn quoted(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let line = words.join(" ");
    let mut short: String = line
        .chars()
        .filter(|c| !c.is_control())
        .map(|c| {
            if matches!(c, '"' | '“' | '”') {
                '\''
            } else {
                c
            }
        })
        .take(QUOTE_CHARS)
        .collect();
    if line.chars().filter(|c| !c.is_control()).count() > QUOTE_CHARS {
        short.push('…');
    }
    format!("\"{short}\"")
}

impl NibMcp {
    /// The question for `tool` on these arguments, naming what it would change; `None` when
    /// there is nothing to name (an unknown or foreign id: the tool then says not found).
    pub(super) async fn what_would_change(
        &self,
        principal: &Principal,
        tool: &str,
        args: &Map<String, Value>,
    ) -> Option<String> {
        let id = |key: &str| args.get(key).and_then(Value::as_str);
        let read = |uri: String| async move {
            let contents = self.dispatch.read_resource(principal, &uri).await.ok()?;
            contents.into_iter().next()
        };
        match tool {
            "delete_page" => {
                let page = read(page_uri(&id("page_id")?)).await?;
                let date = page["_meta"]["date"].as_str().unwrap_or("an unknown day");
                let named = page["text"]
                    .as_str()
                    .and_then(first_line)
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default();
                Some(format!(
                    "Move the page of {date}{named} to the trash? Tasks written only on it go with it. It can be restored for {TRASH_DAYS} days."
                ))
            }
            "delete_task" => {
                let task = read(task_uri(&id("task_link_id")?)).await?;
                let task: Value = serde_json::from_str(task["text"].as_str()?).ok()?;
                let text = quoted(task["text"].as_str()?);
                Some(format!(
                    "Delete the task {text} from every page it is on? It can be restored for {TRASH_DAYS} days."
                ))
            }
            "link_tasks" => {
                let text = |task: Value| -> Option<String> {
                    let task: Value = serde_json::from_str(task["text"].as_str()?).ok()?;
                    Some(quoted(task["text"].as_str()?))
                };
                let kept = text(read(task_uri(&id("task_link_id")?)).await?)?;
                let merged = text(read(task_uri(&id("same_as")?)).await?)?;
                Some(format!(
                    "Make {merged} the same task as {kept}? They become one task with one status across both pages (unlink_tasks splits them again)."
                ))
            }
            // A destructive tool without its own question still asks, by name.
            other => Some(format!("Run {other}? It changes your notebook.")),
        }
    }
}

/// The answer to a refusal: a tool result that says nothing changed.
pub fn refused(tool: &str, how: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "Nothing was changed: the user {how} {tool}."
    ))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;
    use crate::domain::UserId;
    use serde_json::json;

    fn principal(user: &str, credential: &str) -> Principal {
        Principal {
            user: UserId::parse(user).unwrap(),
            scope: Scope::Write,
            credential_id: credential.into(),
            client: None,
        }
    }

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_state_binds_the_caller_the_tool_and_the_arguments() {
        let p = principal("alice", "tok_1");
        let a = args(json!({ "page_id": "p1" }));
        let s = state(&p, "delete_page", &a);
        assert_eq!(s, state(&p, "delete_page", &a));
        assert_ne!(
            s,
            state(&p, "delete_page", &args(json!({ "page_id": "p2" })))
        );
        assert_ne!(s, state(&p, "delete_task", &a));
        assert_ne!(s, state(&principal("bob", "tok_1"), "delete_page", &a));
        assert_ne!(s, state(&principal("alice", "tok_2"), "delete_page", &a));
    }

    #[test]
    fn arguments_are_checked_before_asking() {
        let tool = crate::tools::find("delete_page").unwrap();
        assert!(check_arguments(tool, &args(json!({ "page_id": "p1" }))).is_ok());
        let unknown = check_arguments(tool, &args(json!({ "page_id": "p1", "pad": "x" })));
        assert!(
            unknown
                .unwrap_err()
                .to_string()
                .contains("'pad': is not an argument"),
        );
        let long = "x".repeat(MAX_ASKED_ARGUMENT_BYTES);
        assert!(check_arguments(tool, &args(json!({ "page_id": long }))).is_err());
    }

    #[test]
    fn answers_are_read_only_with_their_own_state() {
        let s = "nib-confirm-1.abc";
        let with = |action: &str| {
            let mut r = InputResponses::new();
            r.insert(KEY.into(), json!({ "action": action }));
            r
        };
        assert_eq!(answer(s, None, None).unwrap(), Answer::None);
        assert_eq!(
            answer(s, Some(s), Some(&InputResponses::new())).unwrap(),
            Answer::None
        );
        assert_eq!(
            answer(s, Some(s), Some(&with("accept"))).unwrap(),
            Answer::Accept
        );
        assert_eq!(
            answer(s, Some(s), Some(&with("decline"))).unwrap(),
            Answer::Refused("declined")
        );
        assert_eq!(
            answer(s, Some(s), Some(&with("cancel"))).unwrap(),
            Answer::Refused("cancelled")
        );
        assert!(answer(s, Some("nib-confirm-1.abc-TAMPERED"), Some(&with("accept"))).is_err());
        assert!(answer(s, None, Some(&with("accept"))).is_err());
        assert!(answer(s, Some(s), Some(&with("maybe"))).is_err());
    }
}
