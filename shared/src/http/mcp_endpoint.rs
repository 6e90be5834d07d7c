//! `/mcp`: our checks in the fixed order, then rmcp.
//!
//! Authentication takes either credential: an API token (`nib_live_...`, one store read) or an
//! OAuth access token (a JWT: signature, issuer, audience and lifetime checked locally, then
//! one read of its grant, so a revoked grant is refused at once). Anything else, expired or
//! revoked is a 401 with the challenge, never a tool result, so clients know to refresh.
//! Authenticated requests then count against the credential's rate limits (429).

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::{HttpError, HttpState};
use crate::auth::oauth::jwt::Verifier;
use crate::auth::tokens::{self, TokenError};
use crate::auth::{Principal, Scope};
use crate::mcp::{CorrelationId, SUPPORTED_VERSIONS};
use crate::ports::RateDecision;
use crate::telemetry;

const LEGACY_DEFAULT_VERSION: &str = "2025-03-26";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const META_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// The most messages a JSON-RPC batch (2025-03-26) may hold; a bigger one is refused whole.
pub const MAX_BATCH_MESSAGES: usize = 50;

/// What we learned about the request while checking it, for the log line.
#[derive(Default)]
struct Seen {
    method: Option<String>,
    tool: Option<String>,
}

pub async fn handle(State(st): State<Arc<HttpState>>, req: Request<Body>) -> Response {
    let started = Instant::now();
    let cid = telemetry::correlation_id();
    let mut seen = Seen::default();
    let http_method = req.method().clone();
    let mut response = match check_and_forward(&st, req, &cid, &mut seen).await {
        Ok(r) => r,
        Err(e) => e.into_response(&cid, &st.config),
    };
    if let Ok(v) = HeaderValue::from_str(&cid) {
        response.headers_mut().insert("x-correlation-id", v);
    }
    tracing::info!(
        target: "nib::request",
        http_method = %http_method,
        method = seen.method.as_deref().unwrap_or("-"),
        tool = seen.tool.as_deref().unwrap_or("-"),
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        correlation_id = %cid,
        "request"
    );
    response
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// `name` or `name:port` against the allow-list (an entry without a port allows any port).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port))
            if !name.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && !host.ends_with(']') =>
        {
            name
        }
        _ => host,
    };
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name))
}

fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    allowed.iter().any(|a| {
        a.eq_ignore_ascii_case(origin)
            || a.split_once("://").is_some_and(|(s, host)| {
                s.eq_ignore_ascii_case(scheme) && host_allowed(rest, &[host.to_owned()])
            })
    })
}

fn media_type(headers: &HeaderMap, name: header::HeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = header_str(headers, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Checks one JSON-RPC message's shape; returns its method (None for a client response).
fn check_message(msg: &Value) -> Result<Option<&str>, HttpError> {
    let id = msg.get("id").cloned();
    let invalid = |message: &str| HttpError::InvalidRequest {
        id: id.clone(),
        message: message.to_owned(),
    };
    let Some(obj) = msg.as_object() else {
        return Err(invalid("a JSON-RPC message must be an object"));
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    if let Some(id) = obj.get("id")
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return Err(invalid("id must be a string or an integer"));
    }
    match obj.get("method") {
        Some(Value::String(m)) => {
            if let Some(p) = obj.get("params")
                && !p.is_object()
                && !p.is_array()
            {
                return Err(invalid("params must be an object"));
            }
            Ok(Some(m))
        }
        Some(_) => Err(invalid("method must be a string")),
        None if obj.contains_key("id")
            && (obj.contains_key("result") || obj.contains_key("error")) =>
        {
            Ok(None)
        }
        None => Err(invalid("not a JSON-RPC request, notification or response")),
    }
}

async fn check_and_forward(
    st: &HttpState,
    req: Request<Body>,
    cid: &str,
    seen: &mut Seen,
) -> Result<Response, HttpError> {
    let cfg = &st.config;
    let (mut parts, body) = req.into_parts();

    // 1. Host and Origin (DNS rebinding).
    let host = header_str(&parts.headers, "host")
        .or(parts.uri.authority().map(|a| a.as_str()))
        .unwrap_or("");
    if !host_allowed(host, &cfg.allowed_hosts) {
        return Err(HttpError::Forbidden("Host not allowed"));
    }
    if let Some(origin) = parts.headers.get(header::ORIGIN)
        && !origin
            .to_str()
            .is_ok_and(|o| origin_allowed(o, &cfg.allowed_origins))
    {
        return Err(HttpError::Forbidden("Origin not allowed"));
    }

    // 2. Size.
    let is_post = parts.method == Method::POST;
    let mut bytes = Bytes::new();
    if is_post {
        if header_str(&parts.headers, "content-length")
            .and_then(|v| v.parse::<usize>().ok())
            .is_some_and(|n| n > cfg.max_body_bytes)
        {
            return Err(HttpError::TooLarge(cfg.max_body_bytes));
        }
        let limited = http_body_util::Limited::new(body, cfg.max_body_bytes);
        bytes = match limited.collect().await {
            Ok(c) => c.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(HttpError::TooLarge(cfg.max_body_bytes));
            }
            Err(e) => {
                tracing::warn!(correlation_id = cid, error = %e, "could not read request body");
                return Err(HttpError::InvalidRequest {
                    id: None,
                    message: "could not read the request body".into(),
                });
            }
        };
    }

    // 3. Malformed headers or message.
    let mut messages: Vec<Value> = Vec::new();
    let mut batch = false;
    if is_post {
        if !media_type(&parts.headers, header::CONTENT_TYPE)
            .iter()
            .any(|m| m == "application/json")
        {
            return Err(HttpError::UnsupportedMediaType);
        }
        let accept = media_type(&parts.headers, header::ACCEPT);
        if !accept.is_empty()
            && !accept
                .iter()
                .any(|m| m == "application/json" || m == "application/*" || m == "*/*")
        {
            return Err(HttpError::NotAcceptable);
        }
        let parsed: Value = serde_json::from_slice(&bytes).map_err(|_| HttpError::Parse)?;
        match parsed {
            Value::Array(items) => {
                let version =
                    header_str(&parts.headers, VERSION_HEADER).unwrap_or(LEGACY_DEFAULT_VERSION);
                if version != LEGACY_DEFAULT_VERSION {
                    return Err(HttpError::InvalidRequest {
                        id: None,
                        message: format!(
                            "JSON-RPC batches are not part of protocol version {version}"
                        ),
                    });
                }
                if items.is_empty() {
                    return Err(HttpError::InvalidRequest {
                        id: None,
                        message: "empty batch".into(),
                    });
                }
                if items.len() > MAX_BATCH_MESSAGES {
                    return Err(HttpError::InvalidRequest {
                        id: None,
                        message: format!(
                            "a batch holds at most {MAX_BATCH_MESSAGES} messages; this one has {}",
                            items.len()
                        ),
                    });
                }
                batch = true;
                messages = items;
            }
            other => messages.push(other),
        }
        for m in &messages {
            let method = check_message(m)?;
            if seen.method.is_none() {
                seen.method = method.map(str::to_owned);
            }
            if method == Some("tools/call") {
                seen.tool = m
                    .pointer("/params/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        if batch {
            seen.method = Some("batch".into());
        }
        if let Some(v) = header_str(&parts.headers, VERSION_HEADER) {
            // A request that names its version in `_meta` is judged by rmcp (it answers with the
            // protocol's own error code); only a bare header naming a version we do not speak
            // is refused here.
            let has_meta_version = messages.iter().any(|m| {
                m.pointer("/params/_meta")
                    .and_then(|x| x.get(META_VERSION_KEY))
                    .is_some()
            });
            if !SUPPORTED_VERSIONS.iter().any(|s| s.as_str() == v) && !has_meta_version {
                return Err(HttpError::InvalidRequest {
                    id: messages.first().and_then(|m| m.get("id").cloned()),
                    message: format!(
                        "unsupported MCP-Protocol-Version '{v}'; supported: {}",
                        SUPPORTED_VERSIONS
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
    }

    // 4. Authentication.
    let principal: Option<Principal> = match bearer(&parts.headers) {
        Some(token) => match authenticate(st, token).await {
            Ok(p) => Some(p),
            Err(TokenError::Invalid) => {
                return Err(HttpError::Unauthorized {
                    invalid_token: true,
                });
            }
            Err(e) => {
                tracing::error!(correlation_id = cid, error = %telemetry::chain(&e), "token verification failed");
                return Err(HttpError::Internal);
            }
        },
        None => None,
    };
    // Without a token, a GET (nothing to judge) and notifications (no reply to carry an error)
    // are refused here. Requests go on: rmcp validates them first, then the handler asks for
    // authentication per method, and the marker it returns becomes the 401 below.
    if principal.is_none() {
        let notifications_only = messages.iter().all(|m| m.get("id").is_none());
        if !is_post || (notifications_only && !cfg.public_discovery) {
            return Err(HttpError::Unauthorized {
                invalid_token: false,
            });
        }
    }

    // 5. Method.
    if !is_post {
        return Err(HttpError::MethodNotAllowed);
    }

    // Sessions (opt-in): signed ids bound to the user, for the eras before 2026-07-28.
    let initialize = messages
        .iter()
        .any(|m| m.get("method").and_then(Value::as_str) == Some("initialize"));
    if let (Some(signer), Some(p)) = (&st.sessions, &principal) {
        let stateless_era =
            header_str(&parts.headers, VERSION_HEADER).is_some_and(|v| v >= "2026-07-28");
        if !initialize && !stateless_era {
            match header_str(&parts.headers, SESSION_HEADER) {
                Some(id) if signer.check(id, &p.user, st.clock.unix()) => {}
                Some(_) => return Err(HttpError::UnknownSession),
                None => return Err(HttpError::MissingSession),
            }
        }
    }

    // Rate limits, per credential.
    if let Some(p) = &principal {
        // Every message of a batch counts, so a batch is no way around the limits.
        let all = messages.len() as u64;
        let writes = messages.iter().filter(|m| is_write_call(m)).count() as u64;
        rate_limit(st, p, all, writes, cid)
            .await
            .map_err(|e| match e {
                HttpError::RateLimited {
                    max,
                    window_secs,
                    retry_after_secs,
                    ..
                } => HttpError::RateLimited {
                    id: messages.first().and_then(|m| m.get("id").cloned()),
                    max,
                    window_secs,
                    retry_after_secs,
                },
                other => other,
            })?;
    }

    // Hand over to rmcp. We never stream, so both media types are acceptable to it.
    parts.headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    parts.headers.remove(SESSION_HEADER);
    parts.extensions.insert(CorrelationId(cid.to_owned()));
    if let Some(p) = &principal {
        parts.extensions.insert(p.clone());
    }
    let mut response = if batch {
        let mut replies = Vec::new();
        for m in messages {
            let body = serde_json::to_vec(&m).expect("re-serialize");
            let (status, _, bytes) = forward(st, &parts, Bytes::from(body)).await?;
            if status == StatusCode::ACCEPTED || bytes.is_empty() {
                continue;
            }
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(v) => {
                    if let Some(e) = auth_marker(&v) {
                        return Err(e);
                    }
                    replies.push(v)
                }
                Err(_) => replies.push(serde_json::json!({
                    "jsonrpc": "2.0", "id": m.get("id").cloned().unwrap_or(Value::Null),
                    "error": { "code": -32600, "message": String::from_utf8_lossy(&bytes) }
                })),
            }
        }
        if replies.is_empty() {
            StatusCode::ACCEPTED.into_response()
        } else {
            (StatusCode::OK, axum::Json(Value::Array(replies))).into_response()
        }
    } else {
        let (status, headers, bytes) = forward(st, &parts, bytes).await?;
        // Only a reply that carries the marker key is worth parsing: most replies are results,
        // and parsing a tools/list reply just to find nothing was most of its cost.
        if may_carry_marker(&bytes)
            && let Some(e) = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .as_ref()
                .and_then(auth_marker)
        {
            return Err(e);
        }
        let is_json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if status.is_client_error() && !is_json && !bytes.is_empty() {
            // rmcp's transport errors are plain text; give clients JSON like every other error.
            let message = String::from_utf8_lossy(&bytes).into_owned();
            let id = messages
                .first()
                .and_then(|m| m.get("id").cloned())
                .unwrap_or(Value::Null);
            let body = serde_json::json!({
                "jsonrpc": "2.0", "id": id,
                "error": { "code": -32600, "message": message, "data": { "correlationId": cid } }
            });
            (status, axum::Json(body)).into_response()
        } else {
            let mut r = Response::new(Body::from(bytes));
            *r.status_mut() = status;
            *r.headers_mut() = headers;
            r
        }
    };
    if initialize
        && response.status() == StatusCode::OK
        && let (Some(signer), Some(p)) = (&st.sessions, &principal)
        && let Ok(v) = HeaderValue::from_str(&signer.issue(&p.user, st.clock.unix()))
    {
        response.headers_mut().insert(SESSION_HEADER, v);
    }
    Ok(response)
}

/// The caller of a bearer token: an API token, or an access token of our authorization server.
async fn authenticate(st: &HttpState, token: &str) -> Result<Principal, TokenError> {
    if token.starts_with(tokens::PREFIX) {
        return st.tokens.verify(token).await;
    }
    match &st.oauth {
        Some(oauth) if Verifier::looks_like_jwt(token) => oauth.verifier.verify(token).await,
        _ => Err(TokenError::Invalid),
    }
}

/// True for a `tools/call` of a tool that needs more than the read scope.
fn is_write_call(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("tools/call")
        && message
            .pointer("/params/name")
            .and_then(Value::as_str)
            .and_then(crate::tools::find)
            .is_some_and(|t| t.scope > Scope::Read)
}

/// Counts the request's `all` messages against the credential's limits, and its `writes`
/// (calls of write tools) against its write limits. A limiter that cannot be reached lets the
/// request through: limits protect capacity, not data, and the request would need the same
/// store anyway.
async fn rate_limit(
    st: &HttpState,
    principal: &Principal,
    all: u64,
    writes: u64,
    cid: &str,
) -> Result<(), HttpError> {
    let limits = &st.config.rate_limits;
    let checks = [
        (principal.credential_id.clone(), limits.all(), all),
        (
            format!("{}#w", principal.credential_id),
            limits.writes(),
            writes,
        ),
    ];
    for (key, windows, n) in checks {
        if windows.is_empty() || n == 0 {
            continue;
        }
        match st.limiter.hit_many(&key, &windows, n).await {
            Ok(RateDecision::Allowed) => {}
            Ok(RateDecision::Limited {
                window,
                retry_after_secs,
            }) => {
                return Err(HttpError::RateLimited {
                    id: None,
                    max: window.max,
                    window_secs: window.secs,
                    retry_after_secs,
                });
            }
            Err(e) => {
                tracing::warn!(correlation_id = cid, error = %telemetry::chain(&e), "rate limiter unavailable");
            }
        }
    }
    Ok(())
}

/// Whether a reply may hold a marker: a cheap byte search that spares parsing every result.
fn may_carry_marker(reply: &[u8]) -> bool {
    const KEY: &[u8] = b"\"nib\":";
    reply.windows(KEY.len()).any(|w| w == KEY)
}

/// The handler's request for authentication or a higher scope, as the HTTP error to answer.
fn auth_marker(reply: &Value) -> Option<HttpError> {
    let data = reply.pointer("/error/data")?;
    match data.get("nib")?.as_str()? {
        crate::mcp::MARKER_UNAUTHENTICATED => Some(HttpError::Unauthorized {
            invalid_token: false,
        }),
        crate::mcp::MARKER_INSUFFICIENT_SCOPE => Some(HttpError::InsufficientScope {
            tool: data.get("tool")?.as_str()?.to_owned(),
            scope: serde_json::from_value(data.get("scope")?.clone()).ok()?,
        }),
        _ => None,
    }
}

/// One message through rmcp, buffered.
async fn forward(
    st: &HttpState,
    parts: &axum::http::request::Parts,
    body: Bytes,
) -> Result<(StatusCode, HeaderMap, Bytes), HttpError> {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(parts.uri.clone())
        .version(parts.version);
    if let Some(h) = req.headers_mut() {
        *h = parts.headers.clone();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    if let Some(x) = req.extensions_mut() {
        *x = parts.extensions.clone();
    }
    let req = req
        .body(http_body_util::Full::new(body))
        .map_err(|_| HttpError::Internal)?;
    // Only the `oauth` Lambda has no service, and its router has no /mcp.
    let mcp = st.mcp.clone().ok_or(HttpError::Internal)?;
    let response = mcp
        .oneshot(req)
        .await
        .unwrap_or_else(|never| match never {});
    let (rparts, rbody) = response.into_parts();
    let bytes = rbody
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_else(|never| match never {});
    Ok((rparts.status, rparts.headers, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_match_with_or_without_ports() {
        let allowed = vec![
            "127.0.0.1".to_owned(),
            "example.com:443".to_owned(),
            "[::1]".to_owned(),
        ];
        assert!(host_allowed("127.0.0.1:8080", &allowed));
        assert!(host_allowed("127.0.0.1", &allowed));
        assert!(host_allowed("example.com:443", &allowed));
        assert!(!host_allowed("example.com:80", &allowed));
        assert!(!host_allowed("evil.com", &allowed));
        assert!(host_allowed("[::1]:9", &allowed));
    }

    #[test]
    fn origins_match_scheme_and_host() {
        let allowed = vec!["http://localhost".to_owned()];
        assert!(origin_allowed("http://localhost:3000", &allowed));
        assert!(!origin_allowed("https://localhost:3000", &allowed));
        assert!(!origin_allowed("http://evil.com", &allowed));
        assert!(!origin_allowed("null", &allowed));
    }
}
