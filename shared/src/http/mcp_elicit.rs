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
//! away counts as cancel, and nothing changes. An answer is taken only from the user the
//! question was put to, for an id this process issued and still waits on (random, 128 bits).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use rmcp::model::{
    ClientRequest, InputRequiredResult, InputResponses, ProtocolVersion, RequestMetaObject,
};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::mcp_transport::{error_body, result_body};
use crate::auth::Principal;
use crate::domain::UserId;
use crate::mcp::{Ctx, NibMcp, protocol};

/// How long a call waits for its client's answer.
pub const ANSWER_WAIT: Duration = Duration::from_secs(600);

/// The calls waiting for an answer, by the id of the request put to the client.
#[derive(Default)]
pub struct Waiting {
    calls: Mutex<HashMap<String, (UserId, oneshot::Sender<Value>)>>,
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
    answer: oneshot::Receiver<Value>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.waiting.lock().remove(&self.id);
    }
}

impl Waiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (UserId, oneshot::Sender<Value>)>> {
        // A panic while holding the lock leaves a plain map behind: keep using it.
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait(self: &Arc<Self>, user: &UserId) -> Ticket {
        let (tx, rx) = oneshot::channel();
        let id = format!("nib-ask-{:032x}", rand::random::<u128>());
        self.lock().insert(id.clone(), (user.clone(), tx));
        Ticket {
            id,
            waiting: self.clone(),
            answer: rx,
        }
    }

    /// A client's response (`result`) or error (`None`) to request `id`: true when a call of
    /// this user waited for it.
    pub fn deliver(&self, id: &Value, user: &UserId, result: Option<Value>) -> bool {
        let Some(id) = id.as_str() else {
            return false;
        };
        let mut calls = self.lock();
        if calls.get(id).is_none_or(|(owner, _)| owner != user) {
            return false;
        }
        let Some((_, tx)) = calls.remove(id) else {
            return false;
        };
        // An error answer is no answer: cancel.
        tx.send(result.unwrap_or_else(|| json!({ "action": "cancel" })))
            .is_ok()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// What the second run of the call needs, owned: the stream outlives the request handler.
pub(super) struct Call {
    pub mcp: NibMcp,
    pub principal: Principal,
    pub correlation_id: String,
    pub version: ProtocolVersion,
    pub meta: RequestMetaObject,
    pub request: ClientRequest,
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

/// The call's event stream: the question, then (once answered) the call's result. `None` when
/// the result holds no question this transport can put (the caller then answers as usual).
pub(super) fn ask_on_stream(
    waiting: &Arc<Waiting>,
    asked: &InputRequiredResult,
    call: Call,
) -> Option<Body> {
    let ticket = waiting.wait(&call.principal.user);
    let question = question(asked, &ticket.id, &call.version)?;
    let state = asked.request_state.clone();
    let first =
        futures::stream::once(
            async move { event(&serde_json::to_vec(&question).unwrap_or_default()) },
        );
    let then = futures::stream::once(async move {
        let mut ticket = ticket;
        let answer = match tokio::time::timeout(ANSWER_WAIT, &mut ticket.answer).await {
            Ok(Ok(answer)) => answer,
            _ => {
                tracing::info!(correlation_id = %call.correlation_id, "no answer to the question: cancelled");
                json!({ "action": "cancel" })
            }
        };
        event(&answer_again(call, state, answer).await)
    });
    use futures::StreamExt;
    Some(Body::from_stream(first.chain(then)))
}

/// The call again, with the client's answer to its question.
async fn answer_again(call: Call, state: Option<String>, answer: Value) -> Vec<u8> {
    let Call {
        mcp,
        principal,
        correlation_id,
        version,
        meta,
        mut request,
        id,
    } = call;
    if let ClientRequest::CallToolRequest(r) = &mut request {
        let mut responses = InputResponses::new();
        responses.insert(crate::mcp::confirm::KEY.to_owned(), answer);
        r.params.input_responses = Some(responses);
        r.params.request_state = state;
    }
    let ctx = Ctx {
        principal: Some(&principal),
        correlation_id: &correlation_id,
        version,
        meta,
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

    #[test]
    fn answers_reach_only_the_call_of_their_user_and_id() {
        let waiting = Arc::new(Waiting::default());
        let alice = UserId::parse("alice").unwrap();
        let bob = UserId::parse("bob").unwrap();
        let mut ticket = waiting.wait(&alice);
        let id = Value::String(ticket.id.clone());
        assert!(!waiting.deliver(&id, &bob, Some(json!({"action": "accept"}))));
        assert!(!waiting.deliver(&json!("nib-ask-other"), &alice, None));
        assert!(!waiting.deliver(&json!(7), &alice, None));
        assert!(waiting.deliver(&id, &alice, None), "an error answer");
        assert_eq!(
            ticket.answer.try_recv().unwrap(),
            json!({"action": "cancel"})
        );
        assert!(!waiting.deliver(&id, &alice, None), "answered once");
        drop(ticket);
        let ticket = waiting.wait(&alice);
        assert_eq!(waiting.len(), 1);
        drop(ticket);
        assert_eq!(waiting.len(), 0, "a call that goes away is forgotten");
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
