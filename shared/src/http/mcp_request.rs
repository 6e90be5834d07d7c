//! The one parse of a `POST /mcp` body: what the checks need of each JSON-RPC message (its id,
//! method, the tool, prompt or URI it names, whether `_meta` names a protocol version) and
//! the message's own bytes, borrowed from the body, to hand to the protocol layer unchanged.
//! Nothing is built as a `serde_json::Value` tree and nothing is serialized again.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::HttpError;

/// A parsed body: one message, or a 2025-03-26 batch.
#[derive(Debug)]
pub struct McpRequest<'a> {
    pub batch: bool,
    pub messages: Vec<Message<'a>>,
}

/// One JSON-RPC message whose shape has been checked.
#[derive(Debug)]
pub struct Message<'a> {
    /// The message's bytes as they came (a slice of the body).
    pub raw: &'a RawValue,
    /// Its id (`None` for a notification).
    pub id: Option<Value>,
    /// Its method (`None` for a client's response).
    pub method: Option<Cow<'a, str>>,
    /// `params.name` (`tools/call`, `prompts/get`) or `params.uri` (`resources/read`).
    pub name: Option<Cow<'a, str>>,
    /// Whether `params._meta` names a protocol version.
    pub meta_version: bool,
}

impl Message<'_> {
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The tool a `tools/call` names.
    pub fn tool(&self) -> Option<&str> {
        (self.method() == Some("tools/call"))
            .then(|| self.name())
            .flatten()
    }
}

impl McpRequest<'_> {
    /// The id of the first message, for an error about the whole request.
    pub fn first_id(&self) -> Option<Value> {
        self.messages.first().and_then(|m| m.id.clone())
    }

    /// The `initialize` message, if the request holds one.
    pub fn initialize(&self) -> Option<&Message<'_>> {
        self.messages
            .iter()
            .find(|m| m.method() == Some("initialize"))
    }
}

/// Parses a body. `legacy_batches`: whether the request's era allows batches (2025-03-26).
pub fn parse(
    body: &[u8],
    legacy_batches: Result<(), String>,
    max_batch: usize,
) -> Result<McpRequest<'_>, HttpError> {
    let top: &RawValue = serde_json::from_slice(body).map_err(|_| HttpError::Parse)?;
    let text = top.get();
    if !text.starts_with('[') {
        return Ok(McpRequest {
            batch: false,
            messages: vec![message(top)?],
        });
    }
    let invalid = |message: String| HttpError::InvalidRequest { id: None, message };
    legacy_batches.map_err(invalid)?;
    let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| HttpError::Parse)?;
    if items.is_empty() {
        return Err(invalid("empty batch".into()));
    }
    if items.len() > max_batch {
        return Err(invalid(format!(
            "a batch holds at most {max_batch} messages; this one has {}",
            items.len()
        )));
    }
    let messages = items.into_iter().map(message).collect::<Result<_, _>>()?;
    Ok(McpRequest {
        batch: true,
        messages,
    })
}

/// A field that is present, even as `null` (plain `Option` would read `null` as absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(default, borrow)]
    name: Option<&'a RawValue>,
    #[serde(default, borrow)]
    uri: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// The key of `_meta` that carries a request's protocol version (2026-07-28).
#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(
        default,
        borrow,
        deserialize_with = "present",
        rename = "io.modelcontextprotocol/protocolVersion"
    )]
    version: Option<&'a RawValue>,
}

/// A JSON string's value, or `None` for any other JSON.
fn string(raw: &RawValue) -> Option<Cow<'_, str>> {
    serde_json::from_str(raw.get()).ok()
}

fn is_object(raw: &RawValue) -> bool {
    raw.get().starts_with('{')
}

/// Checks one message's shape.
fn message(raw: &RawValue) -> Result<Message<'_>, HttpError> {
    let text = raw.get();
    let invalid = |id: Option<Value>, message: &str| HttpError::InvalidRequest {
        id,
        message: message.to_owned(),
    };
    if !is_object(raw) {
        return Err(invalid(None, "a JSON-RPC message must be an object"));
    }
    let fields: Fields = serde_json::from_str(text).map_err(|_| HttpError::Parse)?;
    let id: Option<Value> = fields
        .id
        .map(|r| serde_json::from_str(r.get()))
        .transpose()
        .map_err(|_| HttpError::Parse)?;
    if fields.jsonrpc.and_then(string).as_deref() != Some("2.0") {
        return Err(invalid(id, "jsonrpc must be \"2.0\""));
    }
    // Integers beyond i64 (u64's upper half) are refused here too: rmcp's model types hold an
    // id as an i64, so one would otherwise fail the typed parse later as invalid params.
    if let Some(v) = &id {
        if v.is_u64() && !v.is_i64() {
            return Err(invalid(
                id,
                "an integer id must fit in a signed 64-bit integer",
            ));
        }
        if !(v.is_string() || v.is_i64()) {
            return Err(invalid(id, "id must be a string or an integer"));
        }
    }
    let method = match fields.method {
        Some(m) => match string(m) {
            Some(m) => Some(m),
            None => return Err(invalid(id, "method must be a string")),
        },
        None if id.is_some() && (fields.result.is_some() || fields.error.is_some()) => None,
        None => {
            return Err(invalid(
                id,
                "not a JSON-RPC request, notification or response",
            ));
        }
    };
    let mut name = None;
    let mut meta_version = false;
    if method.is_some()
        && let Some(p) = fields.params
    {
        if !is_object(p) && !p.get().starts_with('[') {
            return Err(invalid(id, "params must be an object"));
        }
        if is_object(p) {
            let params: Params = serde_json::from_str(p.get()).map_err(|_| HttpError::Parse)?;
            let named = if method.as_deref() == Some("resources/read") {
                params.uri
            } else {
                params.name
            };
            name = named.and_then(string);
            meta_version = params
                .meta
                .filter(|m| is_object(m))
                .and_then(|m| serde_json::from_str::<Meta>(m.get()).ok())
                .is_some_and(|m| m.version.is_some());
        }
    }
    Ok(Message {
        raw,
        id,
        method,
        name,
        meta_version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str) -> Result<Message<'_>, HttpError> {
        parse(body.as_bytes(), Ok(()), 50).map(|mut r| r.messages.remove(0))
    }

    fn refusal(body: &str) -> String {
        match parse(body.as_bytes(), Ok(()), 2) {
            Err(HttpError::InvalidRequest { message, .. }) => message,
            Err(e) => format!("{e:?}"),
            Ok(r) => format!("accepted {r:?}"),
        }
    }

    #[test]
    fn a_request_is_read_once_with_its_bytes_kept() {
        let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_page","arguments":{"page_id":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let m = one(body).unwrap();
        assert_eq!(m.raw.get(), body);
        assert_eq!(m.id, Some(serde_json::json!(7)));
        assert_eq!(m.method(), Some("tools/call"));
        assert_eq!(m.tool(), Some("get_page"));
        assert!(m.meta_version);
        let m = one(r#"{"jsonrpc":"2.0","id":"a","method":"resources/read","params":{"uri":"nib://x","name":"n"}}"#).unwrap();
        assert_eq!(m.name(), Some("nib://x"));
        assert_eq!(m.tool(), None);
        assert!(!m.meta_version);
        let m = one(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(
            (&m.id, m.method()),
            (&None, Some("notifications/initialized"))
        );
        let m = one(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#).unwrap();
        assert_eq!(m.method(), None);
    }

    #[test]
    fn malformed_messages_are_refused_with_the_reason() {
        assert_eq!(refusal("3"), "a JSON-RPC message must be an object");
        assert_eq!(
            refusal(r#"{"id":1,"method":"ping"}"#),
            "jsonrpc must be \"2.0\""
        );
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            "id must be a string or an integer"
        );
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            "id must be a string or an integer"
        );
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}"#),
            "an integer id must fit in a signed 64-bit integer"
        );
        assert!(one(r#"{"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}"#).is_ok());
        assert!(one(r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#).is_ok());
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":1,"method":3}"#),
            "method must be a string"
        );
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#),
            "params must be an object"
        );
        assert_eq!(
            refusal(r#"{"jsonrpc":"2.0","id":1}"#),
            "not a JSON-RPC request, notification or response"
        );
        assert_eq!(refusal("[]"), "empty batch");
        let three = r#"[{"jsonrpc":"2.0","method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","method":"c"}]"#;
        assert_eq!(
            refusal(three),
            "a batch holds at most 2 messages; this one has 3"
        );
        assert!(matches!(
            parse(b"{not json", Ok(()), 2),
            Err(HttpError::Parse)
        ));
        assert!(matches!(
            parse(b"[]", Err("no batches here".into()), 2),
            Err(HttpError::InvalidRequest { message, .. }) if message == "no batches here"
        ));
    }

    #[test]
    fn a_batch_keeps_each_message_as_sent() {
        let body = r#"[ {"jsonrpc":"2.0","id":1,"method":"ping"} ,{"jsonrpc":"2.0","method":"notifications/x"}]"#;
        let r = parse(body.as_bytes(), Ok(()), 50).unwrap();
        assert!(r.batch);
        assert_eq!(
            r.messages[0].raw.get(),
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
        );
        assert_eq!(
            r.messages[1].raw.get(),
            r#"{"jsonrpc":"2.0","method":"notifications/x"}"#
        );
        assert_eq!(r.first_id(), Some(serde_json::json!(1)));
    }
}
