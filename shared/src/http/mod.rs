//! The one place that maps HTTP to the protocol and errors to HTTP statuses.
//!
//! `POST /mcp` runs the checks in the order the design fixes: Origin/Host (403), size (413),
//! malformed message or headers (400/406/415), authentication (401), method (405), scope (403),
//! session (404), rate limits (429), then hands each JSON-RPC message to `mcp_transport` (the
//! Streamable HTTP rules of its revision) and our stateless server on rmcp's model types
//! (`mcp::protocol`). Errors are JSON bodies with correlation ids from one writer
//! (`errors.rs`), each request is one log line, and a handler that panics answers its own 500
//! (`catch_panic`) while the server goes on.
//!
//! With an authorization server (`HttpState::oauth`), `oauth.rs` adds its endpoints, the
//! protected resource metadata names it, and `/mcp` accepts its JWT access tokens beside
//! `nib_live_` API tokens.

mod app;
pub use app::EXPORTS_PER_HOUR;
mod errors;
pub mod mcp_elicit;
mod mcp_endpoint;
mod mcp_request;
mod mcp_transport;
mod oauth;
mod pages;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde::Deserialize;

pub use app::{APP_PATH, CHANGE_COOKIE, is_app_path};
pub use errors::{HttpError, RATE_LIMITED_CODE, oauth_error_response};
pub use mcp_endpoint::MAX_BATCH_MESSAGES;
pub use pages::{SIGNIN_PATH, SIGNOUT_PATH};

/// The address a request came from, as the platform saw it, for the authorization server's
/// per-address limits. The oauth Lambda's entry point inserts it from API Gateway's `sourceIp`;
/// `nib serve` has the TCP peer instead (`ConnectInfo`, when served with
/// `into_make_service_with_connect_info`). Never read from a header a client writes
/// (`X-Forwarded-For`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub std::net::IpAddr);

use crate::adapters::local_assets::{FetchError, LocalAssets};
use crate::auth::oauth::{OAuth, OAuthConfig, metadata};
use crate::auth::sessions::SessionSigner;
use crate::auth::tokens::Tokens;
use crate::auth::web_sessions::WebSessions;
use crate::mcp::NibMcp;
use crate::ports::{Clock, RateLimiter, Window};
use crate::tools::Dispatch;

/// The biggest request body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 2_000_000;

/// Whether the public URL is https: the server's cookies are then `Secure` and `__Host-`.
pub(crate) fn https(config: &HttpConfig) -> bool {
    config.public_url.starts_with("https://")
}

/// A cookie's name on this server. On https, `__Host-{name}`: a browser keeps such a cookie
/// only when it is `Secure`, has `Path=/` and no `Domain`, so a sibling subdomain can neither
/// plant nor shadow it (a plain name can be set for the parent domain by any subdomain). On
/// http (a loopback `nib serve`) the plain name: browsers refuse the prefix without `Secure`.
pub(crate) fn cookie_name(config: &HttpConfig, name: &str) -> String {
    if https(config) {
        format!("__Host-{name}")
    } else {
        name.to_owned()
    }
}

/// The `Path` of the sign-in and consent forms' CSRF cookie: `/oauth` where it can be, `/` on
/// https, which `__Host-` requires.
pub(crate) fn csrf_cookie_path(config: &HttpConfig) -> &'static str {
    if https(config) { "/" } else { "/oauth" }
}

/// Settings of the HTTP front.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The public base URL, without a trailing slash (`http://127.0.0.1:8787`).
    pub public_url: String,
    /// Accepted `Host` values: `name` (any port) or `name:port`.
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values: `scheme://host` (any port) or `scheme://host:port`.
    pub allowed_origins: Vec<String>,
    /// Answer the discovery methods without a token.
    pub public_discovery: bool,
    /// Issue signed `Mcp-Session-Id`s to every client and require them (eras before
    /// 2026-07-28). Without it, `nib serve` issues one only to a client that declares
    /// elicitation, and honours it when sent (destructive tools then ask first).
    pub sessions: bool,
    pub max_body_bytes: usize,
    /// Per-credential request limits on `/mcp`.
    pub rate_limits: RateLimits,
    /// The authorization server's settings; `None` runs without one (API tokens only).
    pub oauth: Option<OAuthConfig>,
    /// Where page images come from when not from this server (S3's origin on AWS), for the
    /// web app's Content-Security-Policy.
    pub asset_origin: Option<String>,
}

/// Requests per credential (API token, or OAuth grant) on `/mcp`; 0 means no limit. Writes
/// (calls of write tools) also count against the write limits when those are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub per_minute: u64,
    pub per_hour: u64,
    pub writes_per_minute: u64,
    pub writes_per_hour: u64,
}

impl RateLimits {
    /// No limits (the library's default; `nib serve` sets [`RateLimits::DEFAULT`]).
    pub const OFF: RateLimits = RateLimits {
        per_minute: 0,
        per_hour: 0,
        writes_per_minute: 0,
        writes_per_hour: 0,
    };

    /// 60 requests a minute and 1,000 an hour, writes not counted apart.
    pub const DEFAULT: RateLimits = RateLimits {
        per_minute: 60,
        per_hour: 1000,
        writes_per_minute: 0,
        writes_per_hour: 0,
    };

    fn windows(minute: u64, hour: u64) -> Vec<Window> {
        [(60, minute), (3600, hour)]
            .into_iter()
            .filter(|(_, max)| *max > 0)
            .map(|(secs, max)| Window { secs, max })
            .collect()
    }

    /// The windows of all requests.
    pub fn all(&self) -> Vec<Window> {
        Self::windows(self.per_minute, self.per_hour)
    }

    /// The windows of write requests.
    pub fn writes(&self) -> Vec<Window> {
        Self::windows(self.writes_per_minute, self.writes_per_hour)
    }
}

impl HttpConfig {
    /// Local defaults: loopback hosts and origins only.
    pub fn local(public_url: String) -> Self {
        HttpConfig {
            allowed_hosts: vec!["127.0.0.1".into(), "localhost".into(), "[::1]".into()],
            allowed_origins: vec![
                "http://127.0.0.1".into(),
                "http://localhost".into(),
                "http://[::1]".into(),
            ],
            public_discovery: false,
            sessions: false,
            max_body_bytes: MAX_BODY_BYTES,
            rate_limits: RateLimits::OFF,
            oauth: Some(OAuthConfig::new(&public_url)),
            asset_origin: None,
            public_url,
        }
    }

    /// A deployed function's settings: the public URL's host is the one accepted `Host` (API
    /// Gateway passes the client's), its origin the one accepted `Origin`; no session ids (each
    /// request may land on another instance, so the stateless era's rules apply to every era);
    /// the authorization server at the public URL.
    pub fn deployed(public_url: &str, rate_limits: RateLimits) -> Self {
        let host = url_authority(public_url).unwrap_or_default().to_owned();
        let scheme = public_url.split("://").next().unwrap_or("https");
        HttpConfig {
            public_url: public_url.to_owned(),
            allowed_origins: vec![format!("{scheme}://{host}")],
            allowed_hosts: vec![host],
            public_discovery: false,
            sessions: false,
            max_body_bytes: MAX_BODY_BYTES,
            rate_limits,
            oauth: Some(OAuthConfig::new(public_url)),
            asset_origin: None,
        }
    }

    /// Where the protected resource metadata for `/mcp` lives.
    pub fn resource_metadata_url(&self) -> String {
        format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            self.public_url
        )
    }
}

/// The `host[:port]` of a URL such as `https://nib.example.com:8443/x`, as a `Host` header
/// carries it; `None` without a scheme or a host.
pub fn url_authority(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    rest.split('/').next().filter(|host| !host.is_empty())
}

/// MCP sessions of the eras before 2026-07-28: signed ids, checked without a lookup, and the
/// calls waiting for their client's answer to a question ([`mcp_elicit`]).
#[derive(Debug)]
pub struct Sessions {
    pub signer: SessionSigner,
    /// Every client gets an id and must send it (`HttpConfig::sessions`); else only a client
    /// that can be asked gets one, and sending it is up to the client.
    pub required: bool,
    waiting: Arc<mcp_elicit::Waiting>,
}

impl Sessions {
    pub fn new(signer: SessionSigner, required: bool) -> Self {
        Sessions {
            signer,
            required,
            waiting: Arc::default(),
        }
    }
}

/// What the handlers share.
pub struct HttpState {
    pub config: HttpConfig,
    pub tokens: Arc<Tokens>,
    /// The MCP server behind `/mcp`; `None` for a process that serves only the authorization
    /// server (the `oauth` Lambda, [`authorization_router`]).
    pub mcp: Option<NibMcp>,
    /// MCP sessions; `None` where a call cannot wait for its client (the functions).
    pub sessions: Option<Sessions>,
    pub assets: Option<Arc<LocalAssets>>,
    pub clock: Arc<dyn Clock>,
    /// The authorization server, when `config.oauth` is set.
    pub oauth: Option<Arc<OAuth>>,
    /// Counts requests for `config.rate_limits` (and sign-in attempts).
    pub limiter: Arc<dyn RateLimiter>,
    /// Runs `get_page` for `/pages/{id}` (the tool calls' own dispatch); `None` where no page
    /// is served (the `oauth` Lambda).
    pub dispatch: Option<Arc<dyn Dispatch>>,
    /// Browser sessions: created at `/oauth/signin`, checked by `/pages/{id}` and
    /// `/oauth/authorize`, ended at `/oauth/signout`.
    pub web_sessions: WebSessions,
    /// The notebook, where this process has one (`nib serve`): the web app's uploads import
    /// through it, as `nib import` does. `None` on the mcp function, whose uploads go to S3.
    pub notebook: Option<Arc<crate::notebook::Notebook>>,
    /// Signs the web app's presigned POST uploads (the mcp function on AWS).
    pub upload_signer: Option<Arc<dyn crate::ports::UploadSigner>>,
}

/// Everything, for `nib serve`: `/mcp`, the well-known documents, the authorization server
/// (when `state.oauth` is set), `/assets` and `/healthz`.
pub fn router(state: Arc<HttpState>) -> Router {
    let with_oauth = state.oauth.is_some();
    let router = mcp_routes().merge(protected_resource_routes());
    let router = router.route("/assets/{*path}", get(asset));
    let router = if with_oauth {
        router
            .merge(oauth::routes())
            .merge(pages::signin_routes())
            .merge(app::routes())
    } else {
        router
    };
    with_panic_boundary(router, state)
}

/// The `mcp` Lambda's part (API Gateway routes `/mcp`, `/pages/{id}` and `/app` to it):
/// `/mcp`, `/pages/{id}`, the web app and `/healthz`. Separate from [`router`] so the front's
/// binary links no authorization-server endpoints.
pub fn front_router(state: Arc<HttpState>) -> Router {
    with_panic_boundary(mcp_routes().merge(app::routes()), state)
}

/// The `oauth` Lambda's part: the well-known documents, the authorization server and the page
/// sign-in.
pub fn authorization_router(state: Arc<HttpState>) -> Router {
    let routes = protected_resource_routes()
        .merge(oauth::routes())
        .merge(pages::signin_routes());
    with_panic_boundary(routes, state)
}

/// The routes with their state, behind [`catch_panic`].
fn with_panic_boundary(routes: Router<Arc<HttpState>>, state: Arc<HttpState>) -> Router {
    routes
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            catch_panic,
        ))
        .with_state(state)
}

/// The request boundary: a panic in a handler becomes that request's 500 (the error writer's
/// JSON body with a correlation id, also in `x-correlation-id`), logged once here, and the
/// server goes on with its other requests. It works only where panics unwind: `nib serve`'s
/// release profile does; the Lambda functions' (`release-lambda`) aborts, and there a panic
/// ends the instance with its one request (Lambda starts another). Shared state a panic
/// leaves half-changed is not repaired: a mutex it poisoned fails later requests the same
/// way (500s), it does not corrupt them.
async fn catch_panic(
    State(st): State<Arc<HttpState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use futures::FutureExt;
    // Both are cheap to clone (a standard method is a tag, a URI shares its bytes).
    let http_method = req.method().clone();
    let uri = req.uri().clone();
    match std::panic::AssertUnwindSafe(next.run(req))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(_) => {
            let cid = crate::telemetry::correlation_id();
            // The panic's message is not in this line (it may quote a value); the standard
            // panic hook has put it and its location on stderr.
            // The path only (ids at most, as in `/pages/{id}`), never the query string.
            tracing::error!(
                correlation_id = %cid,
                http_method = %http_method,
                path = uri.path(),
                "request handler panicked"
            );
            let mut response = HttpError::Internal.into_response(&cid, &st.config);
            if let Ok(v) = header::HeaderValue::from_str(&cid) {
                response.headers_mut().insert("x-correlation-id", v);
            }
            response
        }
    }
}

fn mcp_routes() -> Router<Arc<HttpState>> {
    Router::new()
        .route("/mcp", any(mcp_endpoint::handle))
        .route("/healthz", get(|| async { "ok" }))
        .merge(pages::page_routes())
}

fn protected_resource_routes() -> Router<Arc<HttpState>> {
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource).options(oauth::preflight),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource).options(oauth::preflight),
        )
}

/// RFC 9728 protected resource metadata: names nib's own authorization server when it runs
/// one; without it the list is empty and clients use `nib token create` bearer tokens.
async fn protected_resource(State(st): State<Arc<HttpState>>) -> Response {
    let issuer = st.oauth.as_ref().map(|o| o.config.issuer.as_str());
    let body = metadata::protected_resource(&st.config.public_url, issuer);
    (
        [
            (header::CACHE_CONTROL, "public, max-age=300"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        axum::Json(body),
    )
        .into_response()
}

#[derive(Deserialize)]
struct AssetQuery {
    expires: Option<String>,
    sig: Option<String>,
}

/// Serves page images through expiring signed URLs; anything wrong with the URL is a 403.
async fn asset(
    State(st): State<Arc<HttpState>>,
    axum::extract::Path(path): axum::extract::Path<String>,
    Query(q): Query<AssetQuery>,
) -> Response {
    let Some(assets) = &st.assets else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let (Some(expires), Some(sig)) = (q.expires, q.sig) else {
        return StatusCode::FORBIDDEN.into_response();
    };
    match assets.fetch(&path, &expires, &sig).await {
        Ok((kind, bytes)) => {
            // Shown in the browser as what it is, never sniffed into something else, and saved
            // under a plain name: the page id's when the path ends in one, else `page`.
            let stem = path
                .rsplit('/')
                .next()
                .and_then(|last| last.strip_suffix(&format!(".{}", kind.ext())))
                .filter(|s| {
                    !s.is_empty()
                        && s.len() <= 64
                        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
                .unwrap_or("page");
            let disposition = format!("inline; filename=\"{stem}.{}\"", kind.ext());
            (
                [
                    (header::CONTENT_TYPE, kind.content_type().to_owned()),
                    (header::CACHE_CONTROL, "private, max-age=60".to_owned()),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
                    (header::CONTENT_DISPOSITION, disposition),
                ],
                bytes,
            )
                .into_response()
        }
        Err(FetchError::Forbidden) => StatusCode::FORBIDDEN.into_response(),
        Err(FetchError::NotFound) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => {
            tracing::error!(error = %crate::telemetry::chain(&e), "asset read failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
