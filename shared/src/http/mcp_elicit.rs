//! Asking the client while a call waits, in the eras with sessions (2025-06-18, 2025-11-25):
//! the protocol layer's question (an `InputRequiredResult`, [`crate::mcp::confirm`]) goes to
//! the client as an `elicitation/create` request on the call's own event stream; the client
//! POSTs its answer to `/mcp` (a JSON-RPC response, delivered here by its id to the call that
//! waits for it); the call runs again with that answer and its result ends the stream.
//!
//! Only where a call can wait in the process that will receive the answer: `nib serve`. The
//! functions on AWS issue no session ids (API Gateway cannot hold the stream, and the answer
//! could reach another instance), so their clients of these eras are never asked.
//!
//! A call waits at most [`ANSWER_WAIT`]; no answer, an error answer or a client that goes
//! away counts as cancel, and nothing changes. An answer is taken only for an id this process
//! issued and still waits on (random, 128 bits), in the session and from the credential the
//! question was put to; the call then runs again as the credential that answered (the answer's
//! own request authenticated it just now, so a credential revoked meanwhile cannot answer).
//!
//! A waiting call holds a connection and a task, so waits are capped: [`MAX_WAITING_PER_USER`]
//! per user and [`MAX_WAITING`] in the process. Beyond either, the call is answered at once
//! with a refusal that changes nothing. What a wait keeps is only what the second run needs:
//! the tool's name and its arguments, which the protocol layer checked before asking
//! ([`crate::mcp::confirm::check_arguments`]: known names, at most a few ids).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ContentBlock,
    InputRequiredResult, InputResponses, JsonObject, ProtocolVersion, RequestMetaObject,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::mcp_transport::{error_body, result_body};
use crate::auth::Principal;
use crate::domain::UserId;
use crate::mcp::{Ctx, NibMcp, protocol};

/// How long a call waits for its client's answer: time for a person to read a one-line
/// question; a call not answered by then is cancelled, changes nothing and can be made again.
pub const ANSWER_WAIT: Duration = Duration::from_secs(120);

/// The most calls of one user waiting for an answer at once (a person answers one at a time).
pub const MAX_WAITING_PER_USER: usize = 4;

/// The most calls of the process waiting for an answer at once.
pub const MAX_WAITING: usize = 64;

/// Who a question was put to: an answer must come from the same.
struct Asked {
    user: UserId,
    credential_id: String,
    session: String,
    answer: oneshot::Sender<(Value, Principal)>,
}

/// The calls waiting for an answer, by the id of the request put to the client.
pub struct Waiting {
    calls: Mutex<HashMap<String, Asked>>,
    per_user: usize,
    total: usize,
}

impl Default for Waiting {
    fn default() -> Self {
        Waiting::with_caps(MAX_WAITING_PER_USER, MAX_WAITING)
    }
}

/// Why a call cannot wait for an answer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Full {
    User,
    Process,
}

impl Full {
    /// The call's answer: nothing changed, and why.
    fn refusal(&self, tool: &str) -> CallToolResult {
        let why = match self {
            Full::User => format!(
                "{MAX_WAITING_PER_USER} confirmations are already waiting for your answer: answer them, or wait until they lapse (after {} seconds), then call {tool} again",
                ANSWER_WAIT.as_secs()
            ),
            Full::Process => format!(
                "this server is waiting for too many confirmations: call {tool} again in a few minutes"
            ),
        };
        CallToolResult::error(vec![ContentBlock::text(format!(
            "Nothing was changed, and nothing was asked: {why}."
        ))])
    }
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waiting(..)")
    }
}

/// One call's wait; dropping it (the client went away) forgets the call.
struct Ticket {
    id: String,
    waiting: Arc<Waiting>,
    answer: oneshot::Receiver<(Value, Principal)>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

impl Waiting {
    pub fn with_caps(per_user: usize, total: usize) -> Self {
        Waiting {
            calls: Mutex::default(),
            per_user,
            total,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Asked>> {
        // A panic while holding the lock leaves a plain map behind: keep using it.
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A wait for the answer of `principal` in `session`, unless the caps are reached.
    fn wait(self: &Arc<Self>, principal: &Principal, session: &str) -> Result<Ticket, Full> {
        let (tx, rx) = oneshot::channel();
        let id = format!("nib-ask-{:032x}", rand::random::<u128>());
        let mut calls = self.lock();
        if calls.len() >= self.total {
            return Err(Full::Process);
        }
        if calls.values().filter(|a| a.user == principal.user).count() >= self.per_user {
            return Err(Full::User);
        }
        calls.insert(
            id.clone(),
            Asked {
                user: principal.user.clone(),
                credential_id: principal.credential_id.clone(),
                session: session.to_owned(),
                answer: tx,
            },
        );
        Ok(Ticket {
            id,
            waiting: self.clone(),
            answer: rx,
        })
    }

    /// A client's response (`result`) or error (`None`) to request `id`, sent by `principal`
    /// in `session`: true when a call waited for it from that same credential and session.
    pub fn deliver(
        &self,
        id: &Value,
        principal: &Principal,
        session: Option<&str>,
        result: Option<Value>,
    ) -> bool {
        let Some(id) = id.as_str() else {
            return false;
        };
        let mut calls = self.lock();
        let from_the_asked = calls.get(id).is_some_and(|a| {
            a.user == principal.user
                && a.credential_id == principal.credential_id
                && session == Some(a.session.as_str())
        });
        if !from_the_asked {
            return false;
        }
        let Some(asked) = calls.remove(id) else {
            return false;
        };
        // An error answer is no answer: cancel.
        let answer = result.unwrap_or_else(|| json!({ "action": "cancel" }));
        asked.answer.send((answer, principal.clone())).is_ok()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// What the second run of the call needs, owned: the stream outlives the request handler.
/// Only the tool and its checked arguments are kept of the request: not its `_meta`, not the
/// body (the second run is of the 2025 eras, where `_meta` says nothing the call uses).
pub(super) struct Call {
    pub mcp: NibMcp,
    pub principal: Principal,
    /// The verified session id the question is put in.
    pub session: String,
    pub correlation_id: String,
    pub version: ProtocolVersion,
    pub tool: String,
    pub arguments: JsonObject,
    pub id: Value,
}

/// The question as an `elicitation/create` request of this revision, with its id.
fn question(asked: &InputRequiredResult, id: &str, version: &ProtocolVersion) -> Option<Value> {
    let asked = serde_json::to_value(asked).ok()?;
    let request = asked["inputRequests"][crate::mcp::confirm::KEY].as_object()?;
    if request.get("method")?.as_str()? != "elicitation/create" {
        return None;
    }
    let mut params = request.get("params")?.clone();
    if version.as_str() < ProtocolVersion::V_2025_11_25.as_str()
        && let Some(params) = params.as_object_mut()
    {
        // `mode` arrived with 2025-11-25; 2025-06-18's form has no such field.
        params.remove("mode");
    }
    Some(json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "elicitation/create",
        "params": params,
    }))
}

fn event(message: &[u8]) -> Result<Bytes, Infallible> {
    let mut out = Vec::with_capacity(message.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    Ok(Bytes::from(out))
}

/// The call's event stream: the question, then (once answered) the call's result; `Err` the
/// call's answer at once when it cannot wait ([`Full`]). `None` when the result holds no
/// question this transport can put (the caller then answers as usual).
pub(super) fn ask_on_stream(
    waiting: &Arc<Waiting>,
    asked: &InputRequiredResult,
    call: Call,
) -> Option<Result<Body, CallToolResult>> {
    // An id for the shape check only: the ticket's is put in the question sent.
    question(asked, "", &call.version)?;
    let ticket = match waiting.wait(&call.principal, &call.session) {
        Ok(ticket) => ticket,
        Err(full) => {
            tracing::info!(correlation_id = %call.correlation_id, full = ?full, "too many questions waiting: refused");
            return Some(Err(full.refusal(&call.tool)));
        }
    };
    let question = question(asked, &ticket.id, &call.version)?;
    let state = asked.request_state.clone();
    let first =
        futures::stream::once(
            async move { event(&serde_json::to_vec(&question).unwrap_or_default()) },
        );
    let then = futures::stream::once(async move {
        let mut ticket = ticket;
        let (answer, by) = match tokio::time::timeout(ANSWER_WAIT, &mut ticket.answer).await {
            Ok(Ok(answered)) => answered,
            _ => {
                tracing::info!(correlation_id = %call.correlation_id, "no answer to the question: cancelled");
                // No run as anyone: a cancel changes nothing.
                (json!({ "action": "cancel" }), call.principal.clone())
            }
        };
        event(&answer_again(call, by, state, answer).await)
    });
    use futures::StreamExt;
    Some(Ok(Body::from_stream(first.chain(then))))
}

/// The call again, with the client's answer to its question, as the credential that answered
/// (`by`: the same credential as the call's, authenticated again by the answer's request, so
/// its scope is the one it has now).
async fn answer_again(call: Call, by: Principal, state: Option<String>, answer: Value) -> Vec<u8> {
    let Call {
        mcp,
        correlation_id,
        version,
        tool,
        arguments,
        id,
        ..
    } = call;
    let mut responses = InputResponses::new();
    responses.insert(crate::mcp::confirm::KEY.to_owned(), answer);
    let mut params = CallToolRequestParams::new(tool);
    params.arguments = Some(arguments);
    params.input_responses = Some(responses);
    params.request_state = state;
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let ctx = Ctx {
        principal: Some(&by),
        correlation_id: &correlation_id,
        version,
        meta: RequestMetaObject::default(),
        elicits_on_stream: true,
    };
    match protocol::serve(&mcp, request, &ctx).await {
        Ok(reply) => result_body(&id, &reply),
        Err(error) => error_body(&id, &error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(user: &str, credential: &str) -> Principal {
        Principal {
            user: UserId::parse(user).unwrap(),
            scope: crate::auth::Scope::Write,
            credential_id: credential.into(),
            client: None,
        }
    }

    #[test]
    fn answers_reach_only_the_call_of_their_credential_session_and_id() {
        let waiting = Arc::new(Waiting::default());
        let alice = principal("alice", "tok_a");
        let mut ticket = waiting.wait(&alice, "s1").unwrap();
        let id = Value::String(ticket.id.clone());
        let accept = || Some(json!({"action": "accept"}));
        assert!(!waiting.deliver(&id, &principal("bob", "tok_a"), Some("s1"), accept()));
        // The same user's other credential (a read token, say), or another session of hers.
        assert!(!waiting.deliver(&id, &principal("alice", "tok_b"), Some("s1"), accept()));
        assert!(!waiting.deliver(&id, &alice, Some("s2"), accept()));
        assert!(!waiting.deliver(&id, &alice, None, accept()));
        assert!(!waiting.deliver(&json!("nib-ask-other"), &alice, Some("s1"), None));
        assert!(!waiting.deliver(&json!(7), &alice, Some("s1"), None));
        assert!(
            waiting.deliver(&id, &alice, Some("s1"), None),
            "an error answer"
        );
        let (answer, by) = ticket.answer.try_recv().unwrap();
        assert_eq!(answer, json!({"action": "cancel"}));
        assert_eq!(by.credential_id, "tok_a");
        assert!(
            !waiting.deliver(&id, &alice, Some("s1"), None),
            "answered once"
        );
        drop(ticket);
        let ticket = waiting.wait(&alice, "s1").unwrap();
        assert_eq!(waiting.len(), 1);
        drop(ticket);
        assert_eq!(waiting.len(), 0, "a call that goes away is forgotten");
    }

    #[test]
    fn waits_are_capped_per_user_and_per_process() {
        let waiting = Arc::new(Waiting::with_caps(2, 3));
        let alice = principal("alice", "tok_a");
        let bob = principal("bob", "tok_b");
        let a1 = waiting.wait(&alice, "s").unwrap();
        let _a2 = waiting.wait(&alice, "s").unwrap();
        assert_eq!(waiting.wait(&alice, "s").err(), Some(Full::User));
        let _b1 = waiting.wait(&bob, "s").unwrap();
        assert_eq!(waiting.wait(&bob, "s").err(), Some(Full::Process));
        drop(a1);
        assert!(
            waiting.wait(&alice, "s").is_ok(),
            "a wait that ends frees its place"
        );
        let refusal = Full::User.refusal("delete_page");
        assert_eq!(refusal.is_error, Some(true));
    }

    #[test]
    fn the_question_speaks_the_revision_of_the_call() {
        let asked = crate::mcp::confirm::ask("Delete it?".into(), "s".into());
        let new = question(&asked, "q1", &ProtocolVersion::V_2025_11_25).unwrap();
        assert_eq!(new["method"], "elicitation/create");
        assert_eq!(new["id"], "q1");
        assert_eq!(new["params"]["message"], "Delete it?");
        assert_eq!(new["params"]["mode"], "form");
        assert_eq!(new["params"]["requestedSchema"]["type"], "object");
        let old = question(&asked, "q1", &ProtocolVersion::V_2025_06_18).unwrap();
        assert!(old["params"].get("mode").is_none(), "{old}");
        assert_eq!(old["params"]["message"], "Delete it?");
    }
}
