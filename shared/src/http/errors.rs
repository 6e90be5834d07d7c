//! Every HTTP-level failure, mapped to a status, headers and a JSON body in one place.
//! Message-level failures are JSON-RPC errors; the rest are `{error, message, correlationId}`.
//! Internal causes are logged by the caller and never put in a body.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::HttpConfig;
use crate::auth::Scope;
use crate::auth::oauth::OAuthError;
use crate::telemetry;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("request body larger than {0} bytes")]
    TooLarge(usize),
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error("Accept must allow application/json")]
    NotAcceptable,
    #[error("parse error: the body is not valid JSON")]
    Parse,
    #[error("invalid request: {message}")]
    InvalidRequest { id: Option<Value>, message: String },
    #[error("authentication required")]
    Unauthorized { invalid_token: bool },
    #[error("method not allowed: POST JSON-RPC messages to this endpoint")]
    MethodNotAllowed,
    #[error("unknown or expired session")]
    UnknownSession,
    #[error("missing Mcp-Session-Id header: initialize first")]
    MissingSession,
    #[error("{tool} needs the {scope} scope")]
    InsufficientScope { tool: String, scope: Scope },
    #[error(
        "rate limit exceeded: at most {max} requests per {} for this token; retry after {retry_after_secs} s",
        window_name(*window_secs)
    )]
    RateLimited {
        id: Option<Value>,
        max: u64,
        window_secs: u64,
        retry_after_secs: u64,
    },
    /// A message the transport's rules of its protocol revision refuse: a JSON-RPC error
    /// (`code`) with an HTTP status (headers that contradict the body, missing request
    /// metadata, params that do not parse, a client's response sent to a stateless server).
    #[error("{message}")]
    Rpc {
        status: StatusCode,
        id: Option<Value>,
        code: i64,
        message: String,
    },
    #[error("internal error")]
    Internal,
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::Forbidden(_) | HttpError::InsufficientScope { .. } => StatusCode::FORBIDDEN,
            HttpError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HttpError::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            HttpError::Parse | HttpError::InvalidRequest { .. } | HttpError::MissingSession => {
                StatusCode::BAD_REQUEST
            }
            HttpError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            HttpError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            HttpError::UnknownSession => StatusCode::NOT_FOUND,
            HttpError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            HttpError::Rpc { status, .. } => *status,
            HttpError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            HttpError::Forbidden(_) => "forbidden",
            HttpError::TooLarge(_) => "payload_too_large",
            HttpError::UnsupportedMediaType => "unsupported_media_type",
            HttpError::NotAcceptable => "not_acceptable",
            HttpError::Parse => "parse_error",
            HttpError::InvalidRequest { .. } => "invalid_request",
            HttpError::Unauthorized {
                invalid_token: true,
            } => "invalid_token",
            HttpError::Unauthorized {
                invalid_token: false,
            } => "unauthorized",
            HttpError::MethodNotAllowed => "method_not_allowed",
            HttpError::UnknownSession => "session_not_found",
            HttpError::MissingSession => "session_required",
            HttpError::InsufficientScope { .. } => "insufficient_scope",
            HttpError::RateLimited { .. } => "rate_limited",
            HttpError::Rpc { .. } => "invalid_request",
            HttpError::Internal => "internal_error",
        }
    }

    pub fn into_response(self, correlation_id: &str, config: &HttpConfig) -> Response {
        let status = self.status();
        let message = self.to_string();
        let cid = json!({ "correlationId": correlation_id });
        let body = match &self {
            HttpError::Parse => jsonrpc_error(None, PARSE_ERROR, &message, cid),
            HttpError::InvalidRequest { id, .. } => {
                jsonrpc_error(id.clone(), INVALID_REQUEST, &message, cid)
            }
            HttpError::Rpc { id, code, .. } => jsonrpc_error(id.clone(), *code, &message, cid),
            HttpError::RateLimited {
                id,
                retry_after_secs,
                ..
            } => jsonrpc_error(
                id.clone(),
                RATE_LIMITED_CODE,
                &message,
                json!({ "retryAfterSeconds": retry_after_secs, "correlationId": correlation_id }),
            ),
            _ => {
                json!({ "error": self.code(), "message": message, "correlationId": correlation_id })
            }
        };
        let mut response = (status, axum::Json(body)).into_response();
        let headers = response.headers_mut();
        let challenge = match &self {
            HttpError::Unauthorized { invalid_token } => Some(format!(
                "Bearer resource_metadata=\"{}\", scope=\"read write\"{}",
                config.resource_metadata_url(),
                if *invalid_token {
                    ", error=\"invalid_token\""
                } else {
                    ""
                }
            )),
            HttpError::InsufficientScope { scope, .. } => Some(format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{}\"",
                config.resource_metadata_url()
            )),
            _ => None,
        };
        if let Some(c) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            headers.insert(header::WWW_AUTHENTICATE, c);
        }
        if matches!(self, HttpError::MethodNotAllowed) {
            headers.insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        if let HttpError::RateLimited {
            retry_after_secs, ..
        } = self
        {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        response
    }
}

/// The JSON-RPC error code of a rate-limited request (implementation-defined server error).
pub const RATE_LIMITED_CODE: i64 = -32029;
/// JSON-RPC 2.0's own codes.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;

/// JSON-RPC's code for params that do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;
/// MCP's code for transport headers that contradict the body (2026-07-28, SEP-2243).
pub const HEADER_MISMATCH: i64 = -32020;

/// The one writer of JSON-RPC error bodies: the HTTP layer's refusals, and the protocol
/// layer's errors (rmcp's `ErrorData`: its code, message and data).
/// A `data` of `null` is left out.
pub fn jsonrpc_error(id: Option<Value>, code: i64, message: &str, data: Value) -> Value {
    let mut error = json!({ "code": code, "message": message });
    if !data.is_null() {
        error["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id.unwrap_or(Value::Null), "error": error })
}

fn window_name(secs: u64) -> String {
    match secs {
        60 => "minute".into(),
        3600 => "hour".into(),
        s => format!("{s} s"),
    }
}

/// An OAuth error as RFC 6749 §5.2 wants it: `{error, error_description}`, 400, or 401 with a
/// Basic challenge for client authentication failures, 503 with `Retry-After` when the server
/// is too busy for the request, 500 (logged with its cause, never shown) for our own. Never
/// cached.
pub fn oauth_error_response(error: &OAuthError, correlation_id: &str) -> Response {
    let status = match error {
        OAuthError::InvalidClient => StatusCode::UNAUTHORIZED,
        OAuthError::TemporarilyUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
        e if e.is_internal() => {
            tracing::error!(correlation_id, error = %telemetry::chain(e), "oauth request failed");
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let mut description = error.description();
    if error.is_internal() {
        description = format!("{description} (correlation id {correlation_id})");
    }
    let body = json!({ "error": error.code(), "error_description": description });
    let mut response = (status, axum::Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    if matches!(error, OAuthError::InvalidClient) {
        headers.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"nib\""),
        );
    }
    if let OAuthError::TemporarilyUnavailable {
        retry_after_secs, ..
    } = error
    {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
    }
    if let Ok(v) = HeaderValue::from_str(correlation_id) {
        headers.insert("x-correlation-id", v);
    }
    response
}
