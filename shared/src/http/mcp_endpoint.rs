//! `/mcp`: the body parsed once ([`McpRequest`]), our checks in the order the design fixes,
//! each a small function, then each message through the transport's rules and the protocol
//! layer.
//!
//! 1. Host and Origin (403), 2. size (413), 3. shape and headers: media types (415/406), the
//!    one parse, the messages' shape, batches, the version header (400), 4. authentication
//!    (401), 5. method (405), 6. what each message needs of its caller, from
//!    [`crate::mcp::access`] and the tool catalog (401/403), 7. the signed session (opt-in),
//!    8. rate limits (429), then rmcp. Every refusal is an [`HttpError`], written in one place.
//!
//! Authentication takes either credential: an API token (`nib_live_...`, one store read) or an
//! OAuth access token (a JWT: signature, issuer, audience and lifetime checked locally, then
//! one read of its grant, so a revoked grant is refused at once). Anything else, expired or
//! revoked is a 401 with the challenge, never a tool result, so clients know to refresh.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use super::mcp_request::{self, McpRequest};
use super::mcp_transport::{self, Answer, Asking};
use super::{HttpConfig, HttpError, HttpState};
use crate::auth::oauth::jwt::Verifier;
use crate::auth::sessions::Session;
use crate::auth::tokens::{self, TokenError};
use crate::auth::{Principal, Scope};
use crate::mcp::SUPPORTED_VERSIONS;
use crate::mcp::access::{self, Need};
use crate::ports::RateDecision;
use crate::telemetry;

const LEGACY_DEFAULT_VERSION: &str = "2025-03-26";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const EVENT_STREAM: &str = "text/event-stream";
/// The most messages a JSON-RPC batch (2025-03-26) may hold; a bigger one is refused whole.
pub const MAX_BATCH_MESSAGES: usize = 50;

/// What we learned about the request while checking it, for the log line.
#[derive(Default)]
struct Seen {
    method: Option<String>,
    tool: Option<String>,
}

impl Seen {
    fn record(&mut self, request: &McpRequest) {
        self.method = if request.batch {
            Some("batch".into())
        } else {
            request
                .messages
                .iter()
                .find_map(|m| m.method().map(str::to_owned))
        };
        self.tool = request
            .messages
            .iter()
            .rev()
            .find_map(|m| m.tool().map(str::to_owned));
    }
}

pub async fn handle(State(st): State<Arc<HttpState>>, req: Request<Body>) -> Response {
    let started = Instant::now();
    let cid = telemetry::correlation_id();
    let mut seen = Seen::default();
    let http_method = req.method().clone();
    let mut response = match serve(&st, req, &cid, &mut seen).await {
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

/// The checks in order, then the protocol.
async fn serve(
    st: &HttpState,
    req: Request<Body>,
    cid: &str,
    seen: &mut Seen,
) -> Result<Response, HttpError> {
    let cfg = &st.config;
    let (parts, body) = req.into_parts();
    check_host_and_origin(cfg, &parts)?;
    let is_post = parts.method == Method::POST;
    let body = if is_post {
        read_body(cfg, &parts.headers, body, cid).await?
    } else {
        Bytes::new()
    };
    let request = if is_post {
        let request = check_shape(&parts.headers, &body)?;
        seen.record(&request);
        Some(request)
    } else {
        None
    };
    let principal = authenticate(st, &parts.headers, cid).await?;
    let Some(request) = request else {
        // Check 5, method: nothing to judge without a body; the challenge first, then the 405.
        return Err(match principal {
            Some(_) => HttpError::MethodNotAllowed,
            None => HttpError::Unauthorized {
                invalid_token: false,
            },
        });
    };
    authorize(cfg, principal.as_ref(), &request)?;
    let session = check_session(st, &parts.headers, principal.as_ref(), &request)?;
    if let Some(p) = &principal {
        rate_limit(st, p, &request, cid).await?;
    }
    let asking = Asking {
        waiting: st.sessions.as_ref().map(|s| &s.waiting),
        on_stream: session.is_some_and(|s| s.elicits)
            && media_types(&parts.headers, header::ACCEPT)
                .any(|m| m.eq_ignore_ascii_case(EVENT_STREAM)),
        // Checked by `check_session` (ours, this user's, live) when `session` is some.
        session: session.and_then(|_| header_str(&parts.headers, SESSION_HEADER)),
    };
    let initialize = request.initialize();
    let mut response = to_protocol(
        st,
        &parts.headers,
        &request,
        principal.as_ref(),
        cid,
        asking,
    )
    .await?;
    if let Some(init) = initialize
        && response.status() == StatusCode::OK
        && let (Some(sessions), Some(p)) = (&st.sessions, &principal)
    {
        let session = Session {
            elicits: declares_elicitation(init),
        };
        if (sessions.required || session.elicits)
            && let Ok(v) =
                HeaderValue::from_str(&sessions.signer.issue(&p.user, session, st.clock.unix()))
        {
            response.headers_mut().insert(SESSION_HEADER, v);
        }
    }
    Ok(response)
}

/// Whether an `initialize` declares that its client can answer a form `elicitation/create`
/// (2025-06-18 and 2025-11-25; at 2025-11-25 an `elicitation` of `url` alone cannot).
fn declares_elicitation(init: &mcp_request::Message) -> bool {
    #[derive(serde::Deserialize)]
    struct Init {
        params: Params,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        protocol_version: String,
        #[serde(default)]
        capabilities: serde_json::Map<String, serde_json::Value>,
    }
    let Ok(init) = serde_json::from_str::<Init>(init.raw.get()) else {
        return false;
    };
    let version = init.params.protocol_version.as_str();
    let Some(elicitation) = init
        .params
        .capabilities
        .get("elicitation")
        .and_then(|e| e.as_object())
    else {
        return false;
    };
    ("2025-06-18".."2026-07-28").contains(&version)
        && (elicitation.is_empty() || elicitation.contains_key("form"))
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Check 1: Host and Origin (DNS rebinding), against the configured lists.
fn check_host_and_origin(cfg: &HttpConfig, parts: &Parts) -> Result<(), HttpError> {
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
    Ok(())
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

/// Check 2, size: the body, read once, at most `max_body_bytes`.
async fn read_body(
    cfg: &HttpConfig,
    headers: &HeaderMap,
    body: Body,
    cid: &str,
) -> Result<Bytes, HttpError> {
    if header_str(headers, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > cfg.max_body_bytes)
    {
        return Err(HttpError::TooLarge(cfg.max_body_bytes));
    }
    match http_body_util::Limited::new(body, cfg.max_body_bytes)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(HttpError::TooLarge(cfg.max_body_bytes))
        }
        Err(e) => {
            tracing::warn!(correlation_id = cid, error = %e, "could not read request body");
            Err(HttpError::InvalidRequest {
                id: None,
                message: "could not read the request body".into(),
            })
        }
    }
}

/// The media types a header lists (`type/subtype`, parameters dropped), as written.
fn media_types(headers: &HeaderMap, name: header::HeaderName) -> impl Iterator<Item = &str> {
    headers
        .get_all(name)
        .into_iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.split(';').next().unwrap_or("").trim())
}

/// Check 3, shape and headers: the media types, the one parse of the body, each message's shape,
/// batches only in 2025-03-26, and a version header nib speaks.
fn check_shape<'b>(headers: &HeaderMap, body: &'b [u8]) -> Result<McpRequest<'b>, HttpError> {
    if !media_types(headers, header::CONTENT_TYPE)
        .any(|m| m.eq_ignore_ascii_case("application/json"))
    {
        return Err(HttpError::UnsupportedMediaType);
    }
    let mut accept = media_types(headers, header::ACCEPT).peekable();
    if accept.peek().is_some()
        && !accept.any(|m| {
            ["application/json", "application/*", "*/*"]
                .iter()
                .any(|ok| m.eq_ignore_ascii_case(ok))
        })
    {
        return Err(HttpError::NotAcceptable);
    }
    let version = header_str(headers, VERSION_HEADER);
    let batches = match version.unwrap_or(LEGACY_DEFAULT_VERSION) {
        LEGACY_DEFAULT_VERSION => Ok(()),
        v => Err(format!(
            "JSON-RPC batches are not part of protocol version {v}"
        )),
    };
    let request = mcp_request::parse(body, batches, MAX_BATCH_MESSAGES)?;
    // A request that names its version in `_meta` is judged by the protocol layer (it answers
    // with the protocol's own error code); only a bare header naming a version we do not
    // speak is refused here.
    if let Some(v) = version
        && !SUPPORTED_VERSIONS.iter().any(|s| s.as_str() == v)
        && !request.messages.iter().any(|m| m.meta_version)
    {
        return Err(HttpError::InvalidRequest {
            id: request.first_id(),
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
    Ok(request)
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = header_str(headers, "authorization")?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Check 4, authentication: the bearer token's principal, or `None` without one.
async fn authenticate(
    st: &HttpState,
    headers: &HeaderMap,
    cid: &str,
) -> Result<Option<Principal>, HttpError> {
    let Some(token) = bearer(headers) else {
        return Ok(None);
    };
    match verify(st, token).await {
        Ok(p) => Ok(Some(p)),
        Err(TokenError::Invalid) => Err(HttpError::Unauthorized {
            invalid_token: true,
        }),
        Err(e) => {
            tracing::error!(correlation_id = cid, error = %telemetry::chain(&e), "token verification failed");
            Err(HttpError::Internal)
        }
    }
}

/// Check 6, what each message needs of its caller: the challenge without a token, 403 for a scope
/// the token lacks. The first message that is refused refuses the whole request.
fn authorize(
    cfg: &HttpConfig,
    principal: Option<&Principal>,
    request: &McpRequest,
) -> Result<(), HttpError> {
    for m in &request.messages {
        let need = access::need(m.method(), m.name());
        match (need, principal) {
            (Need::Nothing, _) => {}
            (Need::Discovery, Some(_)) => {}
            (Need::Discovery, None) if cfg.public_discovery => {}
            (Need::Scope(scope), Some(p)) if !p.scope.allows(scope) => {
                let method = m.method().unwrap_or_default();
                let what = match method {
                    "tools/call" | "prompts/get" => m.name().unwrap_or(method),
                    _ => method,
                };
                return Err(HttpError::InsufficientScope {
                    tool: what.to_owned(),
                    scope,
                });
            }
            (Need::Scope(_), Some(_)) => {}
            (Need::Discovery | Need::Scope(_), None) => {
                return Err(HttpError::Unauthorized {
                    invalid_token: false,
                });
            }
        }
    }
    Ok(())
}

/// Check 7, sessions: signed ids bound to the user, for the eras before 2026-07-28. An id that
/// is sent must be ours, this user's and live (404); one is required only with `--sessions`.
/// Each message is judged on its own: only `initialize` goes without a session, so a batch
/// that holds one besides other messages still needs a session for those.
fn check_session(
    st: &HttpState,
    headers: &HeaderMap,
    principal: Option<&Principal>,
    request: &McpRequest,
) -> Result<Option<Session>, HttpError> {
    let (Some(sessions), Some(p)) = (&st.sessions, principal) else {
        return Ok(None);
    };
    let stateless_era = header_str(headers, VERSION_HEADER).is_some_and(|v| v >= "2026-07-28");
    let needs_session = request
        .messages
        .iter()
        .any(|m| m.method() != Some("initialize"));
    if !needs_session || stateless_era {
        return Ok(None);
    }
    match header_str(headers, SESSION_HEADER) {
        Some(id) => sessions
            .signer
            .check(id, &p.user, st.clock.unix())
            .map(Some)
            .ok_or(HttpError::UnknownSession),
        None if sessions.required => Err(HttpError::MissingSession),
        None => Ok(None),
    }
}

/// After the checks: each message through the transport's rules and the protocol layer
/// ([`mcp_transport`]). A batch's replies are joined in order; a member the transport refuses
/// is answered with its JSON-RPC error in its place.
async fn to_protocol(
    st: &HttpState,
    headers: &HeaderMap,
    request: &McpRequest<'_>,
    principal: Option<&Principal>,
    cid: &str,
    asking: Asking<'_>,
) -> Result<Response, HttpError> {
    // Only the `oauth` Lambda has no server, and its router has no /mcp.
    let mcp = st.mcp.as_ref().ok_or(HttpError::Internal)?;
    if !request.batch {
        let m = &request.messages[0];
        return Ok(
            match mcp_transport::answer(mcp, headers, m, principal, cid, asking).await? {
                Answer::Accepted => StatusCode::ACCEPTED.into_response(),
                Answer::Message { status, body } => json_response(status, body),
                Answer::Stream(body) => event_stream(body),
            },
        );
    }
    // A batch (2025-03-26) is answered whole, as JSON: none of its calls asks on a stream.
    let asking = Asking {
        on_stream: false,
        ..asking
    };
    let mut joined = Vec::with_capacity(256 * request.messages.len());
    for m in &request.messages {
        let body = match mcp_transport::answer(mcp, headers, m, principal, cid, asking).await {
            Ok(Answer::Accepted) => continue,
            Ok(Answer::Message { body, .. }) => body,
            Ok(Answer::Stream(_)) => return Err(HttpError::Internal),
            Err(HttpError::Rpc {
                id, code, message, ..
            }) => {
                let error = super::errors::jsonrpc_error(
                    id,
                    code,
                    &message,
                    serde_json::json!({ "correlationId": cid }),
                );
                serde_json::to_vec(&error).unwrap_or_default()
            }
            Err(other) => return Err(other),
        };
        joined.push(if joined.is_empty() { b'[' } else { b',' });
        joined.extend_from_slice(&body);
    }
    if joined.is_empty() {
        return Ok(StatusCode::ACCEPTED.into_response());
    }
    joined.push(b']');
    Ok(json_response(StatusCode::OK, joined))
}

/// A call's event stream (a question to the client, then the result).
fn event_stream(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(EVENT_STREAM)),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// The caller of a bearer token: an API token, or an access token of our authorization server.
async fn verify(st: &HttpState, token: &str) -> Result<Principal, TokenError> {
    if token.starts_with(tokens::PREFIX) {
        return st.tokens.verify(token).await;
    }
    match &st.oauth {
        Some(oauth) if Verifier::looks_like_jwt(token) => oauth.verifier.verify(token).await,
        _ => Err(TokenError::Invalid),
    }
}

/// True for a `tools/call` of a tool that needs more than the read scope.
fn is_write_call(message: &mcp_request::Message) -> bool {
    message
        .tool()
        .and_then(crate::tools::find)
        .is_some_and(|t| t.scope > Scope::Read)
}

/// What a message counts against the credential's limits: one, except a `prompts/get` of one
/// of nib's prompts, which counts the most dispatches building it makes (up to 15 tool calls
/// and page reads; on AWS, Lambda invocations), charged up front.
fn units(message: &mcp_request::Message) -> u64 {
    match (message.method(), message.name()) {
        (Some("prompts/get"), Some(name)) => crate::mcp::prompt_max_dispatches(name).unwrap_or(1),
        _ => 1,
    }
}

/// Check 8, rate limits per credential: every message counts against the credential's limits (so a
/// batch is no way around them), a prompt by what it dispatches ([`units`]), and calls of write
/// tools against its write limits too. A limiter that cannot be reached lets the request
/// through: limits protect capacity, not data, and the request would need the same store
/// anyway.
async fn rate_limit(
    st: &HttpState,
    principal: &Principal,
    request: &McpRequest<'_>,
    cid: &str,
) -> Result<(), HttpError> {
    let limits = &st.config.rate_limits;
    let all = request.messages.iter().map(units).sum();
    let writes = request.messages.iter().filter(|m| is_write_call(m)).count() as u64;
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
                    id: request.first_id(),
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

    /// Only a client that can answer a form question is asked, and only in the eras with
    /// sessions (2026-07-28 says its capabilities with every request).
    #[test]
    fn initialize_declares_elicitation_only_for_forms_in_the_eras_with_sessions() {
        let declares = |version: &str, caps: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{caps},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
            );
            let request = mcp_request::parse(body.as_bytes(), Ok(()), 1).unwrap();
            declares_elicitation(&request.messages[0])
        };
        assert!(declares("2025-06-18", r#"{"elicitation":{}}"#));
        assert!(declares("2025-11-25", r#"{"elicitation":{"form":{}}}"#));
        assert!(declares(
            "2025-11-25",
            r#"{"elicitation":{"form":{},"url":{}}}"#
        ));
        assert!(!declares("2025-11-25", r#"{"elicitation":{"url":{}}}"#));
        assert!(!declares("2025-11-25", r#"{"sampling":{}}"#));
        assert!(!declares("2025-03-26", r#"{"elicitation":{}}"#));
        assert!(!declares("2026-07-28", r#"{"elicitation":{}}"#));
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
