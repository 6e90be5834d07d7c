//! One JSON-RPC message of a `POST /mcp`, after the endpoint's checks: the typed parse (rmcp's
//! model types), the Streamable HTTP transport's rules of the message's protocol revision,
//! the protocol layer ([`crate::mcp::protocol`]), and the reply's status and bytes.
//!
//! The transport's rules, in the order they are checked:
//! 1. `initialize`: an `MCP-Protocol-Version` header, when sent, names the version in its params
//!    (400, -32600).
//! 2. SEP-2243: `Mcp-Method` equals the body's method, `Mcp-Name` the tool, prompt or URI the
//!    body names (Base64 when wrapped as `=?base64?...?=`); each at most once (400, -32020).
//!    Required from 2026-07-28 (the header's version); before it optional, but checked
//!    when sent. `initialize` may omit them, but one it sends must say `initialize`.
//! 3. A `_meta` protocol version needs the header, naming the same version (400, -32020);
//!    without one, `server/discover` and a request whose header says 2026-07-28 or later lack
//!    their required metadata (400, -32602).
//! 4. Then the protocol layer. A request that negotiates inline (a `_meta` version, or
//!    `server/discover`) has its protocol errors mapped to statuses: unsupported version,
//!    missing capability and header mismatch 400, malformed metadata 400, unknown method 404;
//!    every other reply is 200 with the JSON-RPC message.
//!
//! A notification is answered 202 once its headers pass. A client's response or error is taken
//! only as the answer to a question a call of the same user waits on (202, [`mcp_elicit`]);
//! any other is refused, as no request of ours is pending.
//!
//! In the eras with sessions, a call whose question the client can be asked on the call's
//! stream ([`Asking`]) is answered as an event stream: the question, then the result.

use std::io::Write;

use axum::http::{HeaderMap, StatusCode};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, JsonRpcRequest, ProtocolVersion,
};
use serde_json::Value;

use std::sync::Arc;

use axum::body::Body;
use rmcp::model::ServerResult;

use super::HttpError;
use super::errors::{HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, jsonrpc_error};
use super::mcp_elicit::{self, Waiting};
use super::mcp_request::Message;
use crate::auth::Principal;
use crate::mcp::{Ctx, NibMcp, Reply, protocol};

const VERSION_HEADER: &str = "mcp-protocol-version";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// What a message is answered with.
#[derive(Debug)]
pub(super) enum Answer {
    /// Nothing (a notification): 202 when the whole request is such.
    Accepted,
    /// A JSON-RPC response or error.
    Message { status: StatusCode, body: Vec<u8> },
    /// An event stream: a question to the client, then the call's result.
    Stream(Body),
}

/// What the transport can do besides answering: take the answers of waiting calls, and (for a
/// session whose client declared elicitation, on a request that accepts an event stream) put
/// a call's question to its client.
#[derive(Clone, Copy, Default)]
pub(super) struct Asking<'a> {
    pub waiting: Option<&'a Arc<Waiting>>,
    pub on_stream: bool,
    /// The request's session id, checked: a question is put in it, and its answer must come
    /// in it.
    pub session: Option<&'a str>,
}

/// `m` as rmcp's typed message. rmcp's `ClientRequest` is an untagged union of 22 request
/// types, tried in order (a `tools/call` failed 13 of them first, each failure an error value
/// built and dropped: 7% of a `get_page`'s CPU). A request whose method is one of the calls a
/// client makes all the time is read as its own type; anything else, and any such request
/// its own type refuses, is read through the union as before, so what is accepted and what is
/// refused do not change.
fn typed_message(m: &Message<'_>) -> Result<ClientJsonRpcMessage, serde_json::Error> {
    fn direct<R: serde::de::DeserializeOwned>(
        raw: &str,
        wrap: fn(R) -> ClientRequest,
    ) -> Option<ClientJsonRpcMessage> {
        let r: JsonRpcRequest<R> = serde_json::from_str(raw).ok()?;
        Some(ClientJsonRpcMessage::Request(JsonRpcRequest {
            jsonrpc: r.jsonrpc,
            id: r.id,
            request: wrap(r.request),
        }))
    }
    let raw = m.raw.get();
    let fast = match (m.method(), m.id.is_some()) {
        (Some("tools/call"), true) => direct(raw, ClientRequest::CallToolRequest),
        (Some("tools/list"), true) => direct(raw, ClientRequest::ListToolsRequest),
        (Some("resources/read"), true) => direct(raw, ClientRequest::ReadResourceRequest),
        _ => None,
    };
    match fast {
        Some(typed) => Ok(typed),
        None => serde_json::from_str(raw),
    }
}

/// The message `m` through the transport's rules and the protocol layer.
pub(super) async fn answer(
    mcp: &NibMcp,
    headers: &HeaderMap,
    m: &Message<'_>,
    principal: Option<&Principal>,
    correlation_id: &str,
    asking: Asking<'_>,
) -> Result<Answer, HttpError> {
    let refuse = |status: StatusCode, code: i64, message: String| HttpError::Rpc {
        status,
        id: m.id.clone(),
        code,
        message,
    };
    let typed = typed_message(m).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            INVALID_PARAMS,
            format!(
                "invalid params for {}: {e}",
                m.method().unwrap_or("the message")
            ),
        )
    })?;
    let header_version = header(headers, VERSION_HEADER)
        .map_err(|e| refuse(StatusCode::BAD_REQUEST, INVALID_REQUEST, e))?;
    let request = match typed {
        ClientJsonRpcMessage::Request(r) => r.request,
        ClientJsonRpcMessage::Notification(_) => {
            check_standard_headers(headers, header_version, m, false)
                .map_err(|e| refuse(StatusCode::BAD_REQUEST, HEADER_MISMATCH, e))?;
            return Ok(Answer::Accepted);
        }
        ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_) => {
            let delivered = match (asking.waiting, principal, m.id.as_ref()) {
                (Some(waiting), Some(p), Some(id)) => {
                    let result = match typed {
                        ClientJsonRpcMessage::Response(r) => serde_json::to_value(&r.result).ok(),
                        _ => None,
                    };
                    waiting.deliver(id, p, asking.session, result)
                }
                _ => false,
            };
            if delivered {
                return Ok(Answer::Accepted);
            }
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "no request of this server is waiting for this response".into(),
            ));
        }
    };
    let version = match &request {
        ClientRequest::InitializeRequest(init) => {
            let asked = init.params.protocol_version.as_str();
            if let Some(h) = header_version
                && h != asked
            {
                return Err(refuse(
                    StatusCode::BAD_REQUEST,
                    INVALID_REQUEST,
                    format!(
                        "MCP-Protocol-Version header ({h}) does not match initialize params.protocolVersion ({asked})"
                    ),
                ));
            }
            init.params.protocol_version.clone()
        }
        _ => header_version
            .and_then(|v| serde_json::from_value(Value::String(v.to_owned())).ok())
            .unwrap_or(ProtocolVersion::V_2025_03_26),
    };
    let initialize = matches!(request, ClientRequest::InitializeRequest(_));
    check_standard_headers(headers, header_version, m, initialize)
        .map_err(|e| refuse(StatusCode::BAD_REQUEST, HEADER_MISMATCH, e))?;
    if !initialize {
        check_meta_version(header_version, &request)
            .map_err(|(code, e)| refuse(StatusCode::BAD_REQUEST, code, e))?;
    }
    let inline = protocol::negotiates_inline(&request);
    let meta_malformed = inline && protocol::meta_malformed(&request);
    // A question can be put on the call's stream in the eras with sessions and elicitation.
    let on_stream = asking.on_stream
        && asking.waiting.is_some()
        && asking.session.is_some()
        && version.as_str() >= ProtocolVersion::V_2025_06_18.as_str()
        && version.as_str() < ProtocolVersion::V_2026_07_28.as_str()
        && matches!(request, ClientRequest::CallToolRequest(_));
    let ctx = Ctx {
        principal,
        correlation_id,
        version,
        meta: rmcp::model::GetMeta::get_meta(&request).clone(),
        elicits_on_stream: on_stream,
    };
    // What a second run needs, of a call that may ask: its tool and arguments. The protocol
    // layer asks only about arguments it checked, so what a wait keeps is small.
    let again = match &request {
        ClientRequest::CallToolRequest(r)
            if on_stream
                && crate::tools::find(&r.params.name)
                    .is_some_and(|t| t.annotations.destructive) =>
        {
            Some((
                r.params.name.to_string(),
                r.params.arguments.clone().unwrap_or_default(),
            ))
        }
        _ => None,
    };
    let answer = protocol::serve(mcp, request, &ctx).await;
    let id = m.id.as_ref().unwrap_or(&Value::Null);
    if let (
        Ok(Reply::Result(result)),
        Some((tool, arguments)),
        Some(waiting),
        Some(p),
        Some(session),
    ) = (&answer, again, asking.waiting, principal, asking.session)
        && let ServerResult::InputRequiredResult(asked) = result.as_ref()
    {
        let call = mcp_elicit::Call {
            mcp: mcp.clone(),
            principal: p.clone(),
            session: session.to_owned(),
            correlation_id: correlation_id.to_owned(),
            version: ctx.version.clone(),
            tool,
            arguments,
            id: id.clone(),
        };
        match mcp_elicit::ask_on_stream(waiting, asked, call) {
            Some(Ok(body)) => return Ok(Answer::Stream(body)),
            Some(Err(refusal)) => {
                return Ok(Answer::Message {
                    status: StatusCode::OK,
                    body: result_body(
                        id,
                        &Reply::Result(Box::new(ServerResult::CallToolResult(refusal))),
                    ),
                });
            }
            None => {}
        }
    }
    Ok(match answer {
        Ok(reply) => Answer::Message {
            status: StatusCode::OK,
            body: result_body(id, &reply),
        },
        Err(error) => Answer::Message {
            status: if inline {
                inline_error_status(error.code, meta_malformed)
            } else {
                StatusCode::OK
            },
            body: error_body(id, &error),
        },
    })
}

/// The HTTP status of a protocol error of a request that negotiates inline.
fn inline_error_status(code: ErrorCode, meta_malformed: bool) -> StatusCode {
    match code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS if meta_malformed => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub(super) fn result_body(id: &Value, reply: &Reply) -> Vec<u8> {
    let mut out = Vec::with_capacity(match reply {
        Reply::Json(json) => json.len() + 48,
        Reply::Result(_) => 1024,
    });
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Ids and results are JSON values already: writing them cannot fail.
    let _ = serde_json::to_writer(&mut out, id);
    out.extend_from_slice(b",\"result\":");
    match reply {
        Reply::Json(json) => out.extend_from_slice(json),
        Reply::Result(result) => {
            let _ = serde_json::to_writer(&mut out, result);
        }
    }
    let _ = out.write_all(b"}");
    out
}

/// The protocol layer's error, written by the one JSON-RPC error writer.
pub(super) fn error_body(id: &Value, error: &ErrorData) -> Vec<u8> {
    let body = jsonrpc_error(
        Some(id.clone()),
        i64::from(error.code.0),
        &error.message,
        error.data.clone().unwrap_or(Value::Null),
    );
    serde_json::to_vec(&body).unwrap_or_default()
}

/// A header's one value as text; `None` when absent. Twice, or not text, is an error.
fn header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("duplicate {name} header"));
    }
    value
        .to_str()
        .map(Some)
        .map_err(|_| format!("{name} header contains invalid characters"))
}

/// Rule 2, SEP-2243's standard headers: required from 2026-07-28 (the header's version), and
/// in every revision, when sent, equal to the body. Intermediaries may route or authorize on
/// them, so a header that says one thing while the body does another is refused in any era.
fn check_standard_headers(
    headers: &HeaderMap,
    header_version: Option<&str>,
    m: &Message<'_>,
    initialize: bool,
) -> Result<(), String> {
    let required = header_version.is_some_and(|v| v >= ProtocolVersion::STANDARD_HEADERS.as_str());
    let Some(method) = m.method() else {
        return Ok(());
    };
    match header(headers, METHOD_HEADER)? {
        None if initialize || !required => {}
        None => return Err("missing required Mcp-Method header".to_owned()),
        Some(value) if value != method => {
            return Err(format!(
                "Mcp-Method header `{value}` does not match body method `{method}`"
            ));
        }
        Some(_) => {}
    }
    if initialize {
        return Ok(());
    }
    if let Some(expected) = named(method, m) {
        match header(headers, NAME_HEADER)? {
            None if !required => {}
            None => return Err(format!("missing required Mcp-Name header for `{method}`")),
            Some(raw) => {
                let decoded = decode_header_value(raw)
                    .ok_or_else(|| "Mcp-Name header is not valid Base64".to_owned())?;
                if decoded != expected {
                    return Err(format!(
                        "Mcp-Name header `{decoded}` does not match body value `{expected}`"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// What `Mcp-Name` must carry for a method: the tool or prompt name, the resource URI, the
/// task id. `None` for methods without a name.
fn named<'m>(method: &str, m: &'m Message<'_>) -> Option<&'m str> {
    match method {
        "tools/call"
        | "prompts/get"
        | "resources/read"
        | "resources/subscribe"
        | "resources/unsubscribe"
        | "tasks/get"
        | "tasks/update"
        | "tasks/cancel" => m.name(),
        _ => None,
    }
}

/// A header value as SEP-2243 encodes it: as is, or `=?base64?{Base64 of UTF-8}?=`.
fn decode_header_value(value: &str) -> Option<String> {
    use base64::Engine;
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Some(value.to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Rule 3: a `_meta` version and the header agree; the stateless revision's requests carry
/// their metadata.
fn check_meta_version(
    header_version: Option<&str>,
    request: &ClientRequest,
) -> Result<(), (i64, String)> {
    let meta = rmcp::model::GetMeta::get_meta(request);
    let Some(meta_version) = meta.protocol_version() else {
        let required = matches!(request, ClientRequest::DiscoverRequest(_))
            || header_version.is_some_and(|v| v >= ProtocolVersion::V_2026_07_28.as_str());
        if required {
            let missing = meta.missing_required_keys(&ProtocolVersion::V_2026_07_28);
            return Err((
                INVALID_PARAMS,
                format!(
                    "Invalid params: request _meta is missing or has malformed required fields: {}",
                    missing.join(", ")
                ),
            ));
        }
        return Ok(());
    };
    match header_version {
        None => Err((
            HEADER_MISMATCH,
            "request _meta protocolVersion requires MCP-Protocol-Version header".into(),
        )),
        Some(h) if h != meta_version.as_str() => Err((
            HEADER_MISMATCH,
            format!(
                "MCP-Protocol-Version header ({h}) does not match request _meta protocolVersion ({meta_version})"
            ),
        )),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_decode_as_sep_2243_writes_them() {
        assert_eq!(decode_header_value("get_page").as_deref(), Some("get_page"));
        assert_eq!(
            decode_header_value("=?base64?Y2Fmw6k=?=").as_deref(),
            Some("café")
        );
        assert_eq!(decode_header_value("=?base64?***?="), None);
    }

    /// The requests read as their own type come out as the union reads them, and one that its
    /// own type refuses is still read (or refused) by the union.
    #[test]
    fn frequent_requests_read_as_their_own_type_read_as_the_union_does() {
        let bodies: [&[u8]; 7] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_page","arguments":{"page_id":"p1"},"_meta":{"progressToken":3}}}"#,
            br#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#,
            br#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"cursor":"NTA"}}"#,
            br#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"nib://pages/p1"}}"#,
            // Malformed for their own type: the union decides, as it did before.
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"arguments":{}}}"#,
            br#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":7}}"#,
            br#"{"jsonrpc":"2.0","method":"tools/list"}"#,
        ];
        for body in bodies {
            let request = super::super::mcp_request::parse(body, Ok(()), 1).unwrap();
            let m = &request.messages[0];
            let ours = typed_message(m).map(|t| serde_json::to_value(t).unwrap());
            let union = serde_json::from_str::<ClientJsonRpcMessage>(m.raw.get())
                .map(|t| serde_json::to_value(t).unwrap());
            match (ours, union) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{}", m.raw.get()),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("{}: {a:?} against {b:?}", m.raw.get()),
            }
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    /// `Mcp-Method` and `Mcp-Name` are required only from 2026-07-28, but in every revision a
    /// header that is sent must say what the body says (they used to be ignored below it).
    #[test]
    fn standard_headers_that_are_sent_must_match_the_body_in_every_revision() {
        let body =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_pages"}}"#;
        let request = super::super::mcp_request::parse(body, Ok(()), 1).unwrap();
        let m = &request.messages[0];
        let check = |version: Option<&str>, pairs: &[(&'static str, &'static str)]| {
            check_standard_headers(&headers(pairs), version, m, false)
        };
        for version in [
            None,
            Some("2025-03-26"),
            Some("2025-06-18"),
            Some("2025-11-25"),
        ] {
            assert_eq!(check(version, &[]), Ok(()), "{version:?}: optional");
            assert_eq!(
                check(
                    version,
                    &[("mcp-method", "tools/call"), ("mcp-name", "list_pages")]
                ),
                Ok(()),
                "{version:?}"
            );
            let wrong_method = check(version, &[("mcp-method", "tools/list")]);
            assert!(
                wrong_method
                    .as_ref()
                    .is_err_and(|e| e.contains("does not match")),
                "{version:?}: {wrong_method:?}"
            );
            let wrong_name = check(version, &[("mcp-name", "=?base64?Z2V0X3BhZ2U=?=")]);
            assert!(
                wrong_name.as_ref().is_err_and(|e| e.contains("`get_page`")),
                "{version:?}: {wrong_name:?}"
            );
        }
        assert!(check(Some("2026-07-28"), &[]).is_err(), "required there");
        assert_eq!(
            check(
                Some("2026-07-28"),
                &[("mcp-method", "tools/call"), ("mcp-name", "list_pages")]
            ),
            Ok(())
        );
    }

    #[test]
    fn inline_errors_map_to_statuses() {
        assert_eq!(
            inline_error_status(ErrorCode::METHOD_NOT_FOUND, false),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            inline_error_status(ErrorCode::INVALID_PARAMS, false),
            StatusCode::OK
        );
        assert_eq!(
            inline_error_status(ErrorCode::INVALID_PARAMS, true),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            inline_error_status(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, false),
            StatusCode::BAD_REQUEST
        );
    }
}
