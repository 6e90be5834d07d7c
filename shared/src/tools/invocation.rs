//! The payload between the `mcp` front and a class function (docs/design.md §3): the front invokes the
//! function that owns the tool with the verified principal, the tool's name and its arguments;
//! the function runs the same handler the local server runs in process and answers with the
//! result or the error's kind.
//!
//! The class function is invoked directly (Lambda Invoke, never through API Gateway), and only
//! the front's role may invoke it (IAM), so the principal in the payload is the one the front
//! verified. Nothing here reads a client header. The principal still passes [`UserId`]'s parse
//! on the way in, so a malformed payload cannot reach the store.
//!
//! ```json
//! {"principal":{"user":"default","scope":"write","credential_id":"tok_..."},
//!  "tool":"get_page","arguments":{"page_id":"..."}}
//! ```
//! `resources/read` crosses the same way, to the pages function, as the "tool"
//! [`READ_RESOURCE`] with the arguments `{"uri": ...}`; its result is the `contents` array.
//!
//! answers `{"result":{...}}`, `{"error":{"kind":"business","message":"page not found"}}`,
//! `{"error":{"kind":"unknown_tool","message":"..."}}` or `{"error":{"kind":"internal"}}`.
//!
//! [`UserId`]: crate::domain::UserId

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::resources::READ_RESOURCE;
use super::{Dispatch, Output, ToolClass, ToolError};
use crate::auth::Principal;

/// What the front sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInvocation {
    pub principal: Principal,
    pub tool: String,
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// What the class function answers: the tool's output as it was written (the front passes
/// it on without parsing it into a tree).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolReply {
    Result(Output),
    Error(ReplyError),
}

impl PartialEq for ToolReply {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ToolReply::Result(a), ToolReply::Result(b)) => a.get() == b.get(),
            (ToolReply::Error(a), ToolReply::Error(b)) => a == b,
            _ => false,
        }
    }
}

/// A failed call, as much of it as the front may tell the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyError {
    pub kind: ReplyErrorKind,
    /// The message the model sees (business errors), or the unknown tool's name. Internal
    /// errors carry none: their cause is logged by the function that had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyErrorKind {
    /// Invalid arguments, refused: an `isError` result the model can act on.
    Business,
    /// No such page, task or resource for this user (also an `isError` result): kept apart
    /// so the front's web app can answer it as not found.
    NotFound,
    /// Not a tool of this function (or of any).
    UnknownTool,
    Internal,
}

/// What a [`ToolError::NotFound`] names, as it crosses between functions.
const NOT_FOUND_KINDS: [&str; 5] = ["page", "task", "resource", "page image", "account"];

/// The internal error a class function reported (its cause is in that function's log).
#[derive(Debug, thiserror::Error)]
#[error("the {function} function reported an internal error")]
pub struct RemoteInternal {
    pub function: String,
}

impl ToolReply {
    /// The reply for a handler's outcome. Internal causes are logged here, once, and not sent.
    pub fn from_outcome(tool: &str, outcome: Result<Output, ToolError>) -> ToolReply {
        match outcome {
            Ok(value) => ToolReply::Result(value),
            Err(ToolError::UnknownTool(name)) => ToolReply::Error(ReplyError {
                kind: ReplyErrorKind::UnknownTool,
                message: Some(name),
            }),
            Err(e @ (ToolError::Internal(_) | ToolError::Unavailable(_))) => {
                tracing::error!(tool, error = %crate::telemetry::chain(&e), "tool failed");
                ToolReply::Error(ReplyError {
                    kind: ReplyErrorKind::Internal,
                    message: None,
                })
            }
            Err(ToolError::NotFound(what)) => ToolReply::Error(ReplyError {
                kind: ReplyErrorKind::NotFound,
                message: Some(what.to_owned()),
            }),
            Err(business) => ToolReply::Error(ReplyError {
                kind: ReplyErrorKind::Business,
                message: Some(business.to_string()),
            }),
        }
    }

    /// Back into the outcome the front hands to the MCP layer. `function` names the function
    /// that answered, for the log line of an internal error.
    pub fn into_outcome(self, function: &str) -> Result<Output, ToolError> {
        match self {
            ToolReply::Result(value) => Ok(value),
            ToolReply::Error(e) => Err(match e.kind {
                ReplyErrorKind::Business => ToolError::Rejected(e.message.unwrap_or_default()),
                ReplyErrorKind::NotFound => ToolError::NotFound(
                    NOT_FOUND_KINDS
                        .into_iter()
                        .find(|k| e.message.as_deref() == Some(*k))
                        .unwrap_or("item"),
                ),
                ReplyErrorKind::UnknownTool => {
                    ToolError::UnknownTool(e.message.unwrap_or_default())
                }
                ReplyErrorKind::Internal => ToolError::Unavailable(Box::new(RemoteInternal {
                    function: function.to_owned(),
                })),
            }),
        }
    }
}

/// A class function's handler: runs `invocation` with `dispatch` (the in-process handlers)
/// when the tool belongs to `class`; any other tool is unknown here.
pub async fn serve(
    dispatch: &dyn Dispatch,
    class: ToolClass,
    invocation: ToolInvocation,
) -> ToolReply {
    let ToolInvocation {
        principal,
        tool,
        arguments,
    } = invocation;
    let outcome = match super::find_for(&principal, &tool) {
        Some(def) if def.class == class => dispatch.call(&principal, &tool, arguments).await,
        None if tool == READ_RESOURCE && class == ToolClass::Pages => {
            match arguments.get("uri").and_then(Value::as_str) {
                Some(uri) => dispatch
                    .read_resource(&principal, uri)
                    .await
                    .and_then(|contents| super::output(&contents)),
                None => Err(ToolError::invalid("uri", "must be a string")),
            }
        }
        _ => Err(ToolError::UnknownTool(tool.clone())),
    };
    // The call's access record is written before its answer leaves: no answer without it.
    let outcome = match (outcome, dispatch.settle().await) {
        (Ok(_), Err(e)) => Err(e),
        (outcome, _) => outcome,
    };
    ToolReply::from_outcome(&tool, outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;
    use crate::domain::UserId;

    #[test]
    fn replies_round_trip_as_json() {
        let ok =
            ToolReply::Result(super::super::output(&serde_json::json!({"pages": []})).unwrap());
        let text = serde_json::to_string(&ok).unwrap();
        assert_eq!(text, r#"{"result":{"pages":[]}}"#);
        assert_eq!(serde_json::from_str::<ToolReply>(&text).unwrap(), ok);

        let err = ToolReply::from_outcome("get_page", Err(ToolError::NotFound("page")));
        let text = serde_json::to_string(&err).unwrap();
        assert_eq!(text, r#"{"error":{"kind":"not_found","message":"page"}}"#);
        let back = serde_json::from_str::<ToolReply>(&text)
            .unwrap()
            .into_outcome("pages");
        // The client sees the same text as from the local server, and the front the same kind.
        let back = back.unwrap_err();
        assert_eq!(back.to_string(), "page not found");
        assert!(matches!(back, ToolError::NotFound("page")));
    }

    #[test]
    fn an_internal_error_crosses_without_its_cause() {
        let err = ToolReply::from_outcome(
            "get_page",
            Err(ToolError::Internal(
                crate::notebook::NotebookError::Corrupt("secret detail".into()),
            )),
        );
        let text = serde_json::to_string(&err).unwrap();
        assert!(!text.contains("secret detail"), "{text}");
        assert!(matches!(
            err.into_outcome("pages"),
            Err(ToolError::Unavailable(_))
        ));
    }

    /// Answers every read with the URI it was asked, and every call with the tool's name.
    struct Echo;

    #[async_trait::async_trait]
    impl Dispatch for Echo {
        async fn call(
            &self,
            _: &Principal,
            name: &str,
            _: Map<String, Value>,
        ) -> Result<Output, ToolError> {
            super::super::output(&name)
        }
        async fn read_resource(&self, _: &Principal, uri: &str) -> Result<Vec<Value>, ToolError> {
            Ok(vec![Value::String(uri.to_owned())])
        }
    }

    #[tokio::test]
    async fn only_the_pages_function_reads_resources() {
        let invocation = |tool: &str, arguments: Value| ToolInvocation {
            principal: Principal {
                user: UserId::parse("alice").unwrap(),
                scope: Scope::Read,
                credential_id: "tok".into(),
                client: None,
            },
            tool: tool.into(),
            arguments: arguments.as_object().cloned().unwrap(),
        };
        let read = || invocation(READ_RESOURCE, serde_json::json!({ "uri": "nib://x" }));
        assert_eq!(
            serve(&Echo, ToolClass::Pages, read()).await,
            ToolReply::Result(super::super::output(&["nib://x"]).unwrap())
        );
        let refused = serve(&Echo, ToolClass::Tasks, read()).await;
        assert!(
            matches!(&refused, ToolReply::Error(e) if e.kind == ReplyErrorKind::UnknownTool),
            "{refused:?}"
        );
        let no_uri = serve(
            &Echo,
            ToolClass::Pages,
            invocation(READ_RESOURCE, serde_json::json!({})),
        )
        .await;
        assert!(matches!(&no_uri, ToolReply::Error(e) if e.kind == ReplyErrorKind::Business));
    }

    #[test]
    fn a_forged_principal_does_not_parse() {
        let payload = serde_json::json!({
            "principal": {"user": "../etc", "scope": "admin", "credential_id": "x"},
            "tool": "list_pages",
        });
        assert!(serde_json::from_value::<ToolInvocation>(payload).is_err());
        let payload = serde_json::json!({
            "principal": {"user": "alice", "scope": "write", "credential_id": "x"},
            "tool": "list_pages",
        });
        let inv: ToolInvocation = serde_json::from_value(payload).unwrap();
        assert_eq!(inv.principal.user, UserId::parse("alice").unwrap());
        assert_eq!(inv.principal.scope, Scope::Write);
        assert!(inv.arguments.is_empty());
    }
}
