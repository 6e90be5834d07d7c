//! The authorization server's HTTP endpoints (the `oauth` function on AWS, docs/design.md §3):
//!
//! | route | what |
//! |---|---|
//! | `GET /.well-known/oauth-authorization-server`, `/.well-known/openid-configuration` | RFC 8414 metadata |
//! | `POST /oauth/register` | RFC 7591 dynamic client registration |
//! | `GET /oauth/authorize` | the sign-in and consent page (or an error page, or an error redirect) |
//! | `POST /oauth/authorize` | the consent form: CSRF check, password, then the code redirect |
//! | `POST /oauth/token` | authorization code and refresh token grants |
//! | `POST /oauth/revoke` | RFC 7009 revocation |
//! | `GET /oauth/jwks.json` | the access token signing key |
//!
//! The logic is in `crate::auth::oauth`; this file parses requests and shapes responses. OAuth
//! errors become responses in `errors::oauth_error_response`, pages in `error_page`.
//!
//! Brakes on abuse, all failing closed (a limiter that cannot be reached answers 503 with
//! `Retry-After`, never lets the request through):
//!
//! | what | limit |
//! |---|---|
//! | sign-in attempts (an argon2id check each) | per client address, then per user name; at most [`crate::auth::oauth::SIGN_IN_SLOTS`] at once |
//! | metadata document fetches (a URL `client_id` not cached) | per client address; at most [`crate::auth::oauth::FETCH_SLOTS`] at once |
//! | dynamic registrations | per client address, then per server |
//!
//! The client address is [`ClientAddr`] (API Gateway's `sourceIp`, set by the oauth function's
//! entry point) or the TCP peer (`ConnectInfo`, `nib serve`); never a header such as
//! `X-Forwarded-For`, which the client writes. An IPv6 client counts by its /64.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, DefaultBodyLimit, FromRequestParts, RawQuery, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::errors::oauth_error_response;
use super::{ClientAddr, HttpState};
use crate::auth::Scope;
use crate::auth::oauth::authorize::{AuthorizeError, AuthorizeParams, AuthorizeRequest};
use crate::auth::oauth::clients::{ClientKind, RegistrationRequest};
use crate::auth::oauth::metadata::{self, AUTHORIZE_PATH};
use crate::auth::oauth::token::{basic_credentials, form_fields};
use crate::auth::oauth::{OAuth, OAuthError};
use crate::domain::UserId;
use crate::ports::{RateDecision, Window};
use crate::telemetry;

/// The CSRF cookie of the consent form.
const CSRF_COOKIE: &str = "nib_csrf";
/// The largest registration or form body accepted.
const MAX_FORM_BYTES: usize = 16 * 1024;
/// The rate-limit key of sign-in attempts per user name: `login#{name}` (counter items
/// `RL#login#...`, in `crate::functions::OAUTH_PARTITIONS`).
const LOGIN_KEY: &str = "login#";
/// The rate-limit key of registrations per server (counter items `RL#oauth-register#...`).
const REGISTER_KEY: &str = "oauth-register";
/// The rate-limit key prefix of everything limited per client address:
/// `oauth-addr#{what}#{address}` (counter items `RL#oauth-addr#...`).
const ADDRESS_KEY: &str = "oauth-addr#";
/// What a 503 from an unreachable limiter asks the client to wait.
const UNAVAILABLE_RETRY_SECS: u64 = 30;
/// What a sign-in refused for want of a free slot asks the client to wait.
const SIGN_IN_BUSY_RETRY_SECS: u64 = 2;
/// Sign-in attempts per client address: whoever tries many user names from one place.
const ADDRESS_LOGIN_LIMITS: [Window; 2] = [
    Window { secs: 60, max: 20 },
    Window {
        secs: 3600,
        max: 200,
    },
];
/// Metadata document fetches (URL client ids not cached) per client address.
const ADDRESS_FETCH_LIMITS: [Window; 2] = [
    Window { secs: 60, max: 10 },
    Window {
        secs: 3600,
        max: 100,
    },
];
/// Dynamic registrations per client address, so that one cannot use up the server's.
const ADDRESS_REGISTER_LIMITS: [Window; 2] = [
    Window { secs: 60, max: 10 },
    Window {
        secs: 3600,
        max: 50,
    },
];
/// Sign-in attempts per user name: a brake on password guessing.
const LOGIN_LIMITS: [Window; 2] = [
    Window { secs: 60, max: 10 },
    Window {
        secs: 3600,
        max: 100,
    },
];
/// Dynamic registrations per server: a brake on filling the table with clients.
const REGISTER_LIMITS: [Window; 2] = [
    Window { secs: 60, max: 30 },
    Window {
        secs: 3600,
        max: 300,
    },
];

pub(super) fn routes() -> Router<Arc<HttpState>> {
    Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(server_metadata).options(preflight),
        )
        .route(
            "/.well-known/openid-configuration",
            get(server_metadata).options(preflight),
        )
        .route(metadata::REGISTER_PATH, post(register).options(preflight))
        .route(AUTHORIZE_PATH, get(authorize_page).post(authorize_submit))
        .route(metadata::TOKEN_PATH, post(token).options(preflight))
        .route(metadata::REVOKE_PATH, post(revoke).options(preflight))
        .route(metadata::JWKS_PATH, get(jwks).options(preflight))
        .layer(DefaultBodyLimit::max(MAX_FORM_BYTES))
}

fn oauth(st: &HttpState) -> &OAuth {
    st.oauth
        .as_deref()
        .expect("OAuth routes are mounted only with an authorization server")
}

/// Browser-based clients (MCP Inspector) call discovery, registration and the token endpoint
/// from another origin; none of these use cookies, so any origin may.
fn cors(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("www-authenticate"),
    );
    response
}

pub(super) async fn preflight() -> Response {
    let mut r = cors(StatusCode::NO_CONTENT.into_response());
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    r
}

fn json_no_store(status: StatusCode, body: serde_json::Value) -> Response {
    let mut r = (status, axum::Json(body)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut()
        .insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    cors(r)
}

async fn server_metadata(State(st): State<Arc<HttpState>>) -> Response {
    cors(
        (
            [(header::CACHE_CONTROL, "public, max-age=300")],
            axum::Json(metadata::authorization_server(&oauth(&st).config)),
        )
            .into_response(),
    )
}

async fn jwks(State(st): State<Arc<HttpState>>) -> Response {
    cors(
        (
            [(header::CACHE_CONTROL, "public, max-age=300")],
            axum::Json(oauth(&st).jwks()),
        )
            .into_response(),
    )
}

fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The client address of a request, when known: [`ClientAddr`] (Lambda), else the TCP peer.
pub(super) struct Peer(Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ClientAddr>()
            .map(|a| a.0)
            .or_else(|| {
                parts
                    .extensions
                    .get::<ConnectInfo<SocketAddr>>()
                    .map(|c| c.0.ip())
            });
        Ok(Peer(ip))
    }
}

impl Peer {
    /// The rate-limit key of `what` for this address: an IPv4 address, or an IPv6 address's
    /// /64 (one subscriber's usual allocation, so walking through it does not help). Without
    /// an address (a server started without `ConnectInfo`) every client shares one key.
    fn key(&self, what: &str) -> String {
        let address = match self.0.map(|ip| ip.to_canonical()) {
            Some(IpAddr::V4(v4)) => v4.to_string(),
            Some(IpAddr::V6(v6)) => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
            None => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!("no client address on OAuth requests: per-address limits are shared by all clients");
                });
                "unknown".to_owned()
            }
        };
        format!("{ADDRESS_KEY}{what}#{address}")
    }
}

/// Why a limited request may not go on.
#[derive(Debug, Clone, Copy)]
enum Refusal {
    /// Over the limit; the window ends in this many seconds.
    Limited(u64),
    /// The limiter cannot be reached (logged): fail closed.
    Unavailable,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Refusal::Limited(_) => StatusCode::TOO_MANY_REQUESTS,
            Refusal::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn retry_after(self) -> u64 {
        match self {
            Refusal::Limited(secs) => secs,
            Refusal::Unavailable => UNAVAILABLE_RETRY_SECS,
        }
    }

    /// What to tell the client: `what` when over the limit.
    fn message(self, what: &'static str) -> &'static str {
        match self {
            Refusal::Limited(_) => what,
            Refusal::Unavailable => "this server cannot take the request right now",
        }
    }
}

/// Counts a hit of `key` in `windows`. Fails closed: a limiter error refuses the request.
/// `limit` names the limit in the log (the key may hold a user name or an address).
async fn check_limit(
    st: &HttpState,
    limit: &'static str,
    key: &str,
    windows: &[Window],
) -> Result<(), Refusal> {
    match st.limiter.hit(key, windows).await {
        Ok(RateDecision::Allowed) => Ok(()),
        Ok(RateDecision::Limited {
            retry_after_secs, ..
        }) => {
            tracing::info!(limit, "over an authorization server limit");
            Err(Refusal::Limited(retry_after_secs))
        }
        Err(e) => {
            tracing::error!(limit, error = %telemetry::chain(&e), "rate limiter unavailable; request refused");
            Err(Refusal::Unavailable)
        }
    }
}

/// The per-address limit on metadata document fetches, when resolving `client_id` would fetch.
async fn check_fetch_limit(
    st: &HttpState,
    peer: &Peer,
    client_id: Option<&str>,
) -> Result<(), Refusal> {
    match client_id {
        Some(id) if oauth(st).clients.would_fetch(id) => {
            check_limit(
                st,
                "metadata fetches per address",
                &peer.key("fetch"),
                &ADDRESS_FETCH_LIMITS,
            )
            .await
        }
        _ => Ok(()),
    }
}

fn with_retry_after(mut r: Response, secs: u64) -> Response {
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    r
}

/// A refused JSON request (registration, token, revocation): 429 or 503, `Retry-After`.
fn refused_json(refusal: Refusal, what: &'static str) -> Response {
    let body = serde_json::json!({
        "error": "temporarily_unavailable",
        "error_description": format!("{}; try again in {} s", refusal.message(what), refusal.retry_after()),
    });
    with_retry_after(json_no_store(refusal.status(), body), refusal.retry_after())
}

async fn register(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cid = telemetry::correlation_id();
    if media_type(&headers) != "application/json" {
        return oauth_error_response(
            &OAuthError::InvalidClientMetadata("the body must be application/json".into()),
            &cid,
        );
    }
    let request: RegistrationRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(_) => {
            return oauth_error_response(
                &OAuthError::InvalidClientMetadata("the body is not valid client metadata".into()),
                &cid,
            );
        }
    };
    let allowed = match check_limit(
        &st,
        "registrations per address",
        &peer.key("register"),
        &ADDRESS_REGISTER_LIMITS,
    )
    .await
    {
        Ok(()) => check_limit(&st, "registrations", REGISTER_KEY, &REGISTER_LIMITS).await,
        refused => refused,
    };
    if let Err(refusal) = allowed {
        return refused_json(refusal, "too many registrations");
    }
    match oauth(&st)
        .clients
        .register(request, ClientKind::Dynamic)
        .await
    {
        Ok(registered) => {
            tracing::info!(client_id = %registered.record.client_id, "client registered");
            json_no_store(StatusCode::CREATED, registered.response())
        }
        Err(e) => oauth_error_response(&e, &cid),
    }
}

/// The form's HTML, with the headers every page of ours carries.
fn html(status: StatusCode, body: String) -> Response {
    html_page(
        status,
        body,
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
    )
}

/// An HTML page of ours: never cached, never framed, no referrer, and `csp`.
pub(super) fn html_page(status: StatusCode, body: String, csp: &str) -> Response {
    let mut r = (status, axum::response::Html(body)).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if let Ok(v) = HeaderValue::from_str(csp) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    r
}

#[derive(Template)]
#[template(path = "oauth_error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: String,
    code: &'a str,
}

/// An error page: used whenever the redirect URI cannot be trusted, so nothing redirects.
fn error_page(status: StatusCode, title: &str, error: &OAuthError, cid: &str) -> Response {
    if error.is_internal() {
        tracing::error!(correlation_id = cid, error = %telemetry::chain(error), "authorization failed");
    }
    let page = ErrorPage {
        title,
        message: if error.is_internal() {
            format!("Something went wrong on our side (correlation id {cid}).")
        } else {
            error.description()
        },
        code: error.code(),
    };
    match page.render() {
        Ok(body) => html(status, body),
        Err(_) => status.into_response(),
    }
}

/// The page of a request refused for now (a limit, a full gate, an unreachable limiter).
fn busy_page(status: StatusCode, what: &'static str, retry_after_secs: u64, cid: &str) -> Response {
    let error = OAuthError::TemporarilyUnavailable {
        what,
        retry_after_secs,
    };
    with_retry_after(
        error_page(status, "Please wait a moment", &error, cid),
        retry_after_secs,
    )
}

/// The busy page of a refusal.
fn refused_page(refusal: Refusal, what: &'static str, cid: &str) -> Response {
    busy_page(
        refusal.status(),
        refusal.message(what),
        refusal.retry_after(),
        cid,
    )
}

#[derive(Template)]
#[template(path = "consent.html")]
struct ConsentPage<'a> {
    client_name: String,
    unverified: bool,
    /// The host a metadata-document client's id names.
    document_host: Option<String>,
    issuer: &'a str,
    resource: &'a str,
    redirect_host: String,
    scopes: Vec<(&'static str, &'static str)>,
    hidden: Vec<(&'static str, &'a str)>,
    csrf: String,
    action: &'static str,
    username: &'a str,
    error: Option<&'a str>,
    /// Offer "no deletes" (a grant of `write` can be narrowed to `edit`), and whether it is ticked.
    offer_no_deletes: bool,
    no_deletes: bool,
}

/// The consent form's "no deletes" box: ticked, a `write` request is granted as `edit`.
const NO_DELETES_FIELD: &str = "no_deletes";

fn scope_lines(scope: Scope) -> Vec<(&'static str, &'static str)> {
    Scope::ALL
        .iter()
        .filter(|s| scope.allows(**s))
        .map(|s| match s {
            Scope::Read => ("read", "list, read and search your pages and tasks"),
            Scope::Edit => (
                "edit",
                "create tasks, change their status, restore from the trash",
            ),
            Scope::Write => (
                "write",
                "delete pages and tasks (to the trash, restorable for 30 days)",
            ),
            Scope::Admin => ("admin", "everything above, and administrative tools"),
        })
        .collect()
}

/// The CSRF cookie's value: at least 16 base64url characters.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    cookie_value(headers, name).filter(|v| v.len() >= 16 && !v.contains('.'))
}

/// A cookie's value when it is base64url or dotted base64url (a JWT); anything else is absent.
pub(super) fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| {
            !v.is_empty()
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// What the consent page says besides the request: the user name typed and an error, if any.
struct Feedback<'a> {
    username: &'a str,
    error: Option<&'a str>,
    status: StatusCode,
    no_deletes: bool,
}

const FRESH: Feedback<'static> = Feedback {
    no_deletes: false,
    username: "",
    error: None,
    status: StatusCode::OK,
};

/// Renders the consent page for a valid request, setting the CSRF cookie when it is missing.
fn consent(
    st: &HttpState,
    req: &AuthorizeRequest,
    params: &AuthorizeParams,
    existing_cookie: Option<&str>,
    feedback: Feedback<'_>,
) -> Response {
    let oauth = oauth(st);
    let cookie_value = existing_cookie
        .map(str::to_owned)
        .unwrap_or_else(OAuth::new_csrf_cookie);
    let page = ConsentPage {
        client_name: req.client.display_name(),
        unverified: !req.client.is_verified(),
        document_host: req.client.document_host(),
        issuer: &oauth.config.issuer,
        resource: &req.resource,
        redirect_host: req.redirect_host(),
        scopes: scope_lines(req.scope),
        hidden: params.present(),
        csrf: oauth.csrf_token(&cookie_value, params),
        action: AUTHORIZE_PATH,
        username: feedback.username,
        error: feedback.error,
        offer_no_deletes: req.scope == Scope::Write,
        no_deletes: feedback.no_deletes,
    };
    let Ok(body) = page.render() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let mut r = html(feedback.status, body);
    if existing_cookie.is_none() {
        let secure = if super::https(&st.config) {
            "; Secure"
        } else {
            ""
        };
        let c = format!(
            "{}={cookie_value}; Path={}; HttpOnly; SameSite=Strict; Max-Age=3600{secure}",
            super::cookie_name(&st.config, CSRF_COOKIE),
            super::csrf_cookie_path(&st.config),
        );
        if let Ok(v) = HeaderValue::from_str(&c) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    r
}

pub(super) fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(v) => {
            let mut r = StatusCode::SEE_OTHER.into_response();
            r.headers_mut().insert(header::LOCATION, v);
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// What a failed validation answers: an error page, or the error sent back to the client.
fn refused(oauth: &OAuth, e: AuthorizeError, cid: &str) -> Response {
    match e {
        AuthorizeError::Page(OAuthError::TemporarilyUnavailable {
            what,
            retry_after_secs,
        }) => busy_page(StatusCode::SERVICE_UNAVAILABLE, what, retry_after_secs, cid),
        AuthorizeError::Page(error) => {
            let status = if error.is_internal() {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::BAD_REQUEST
            };
            error_page(status, "This sign-in request cannot be used", &error, cid)
        }
        AuthorizeError::Redirect {
            redirect_uri,
            state,
            error,
        } => see_other(&oauth.error_redirect(&redirect_uri, state.as_deref(), &error)),
    }
}

async fn authorize_page(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let cid = telemetry::correlation_id();
    let oauth = oauth(&st);
    let query = query.unwrap_or_default();
    let params = match AuthorizeParams::from_pairs(url::form_urlencoded::parse(query.as_bytes())) {
        Ok((p, _)) => p,
        Err(e) => return refused(oauth, AuthorizeError::Page(e), &cid),
    };
    if let Err(refusal) = check_fetch_limit(&st, &peer, params.client_id.as_deref()).await {
        return refused_page(refusal, "too many new apps from your network", &cid);
    }
    let signed_in = super::pages::signed_in_user(&st, &headers, &cid).await;
    match oauth.validate_authorize(&params, signed_in.as_ref()).await {
        Ok(req) => consent(
            &st,
            &req,
            &params,
            cookie(&headers, &super::cookie_name(&st.config, CSRF_COOKIE)),
            FRESH,
        ),
        Err(e) => refused(oauth, e, &cid),
    }
}

/// Why a sign-in was refused before its password was checked.
pub(super) struct SignInRefused {
    pub status: StatusCode,
    pub message: &'static str,
    pub retry_after: u64,
}

/// The brakes in front of a password check (the consent page's and the page sign-in's): the
/// client address's limit, the user name's, then a free argon2 slot, which the caller holds
/// while it checks. Every limiter error refuses (fails closed).
pub(super) async fn sign_in_gate<'a>(
    st: &'a HttpState,
    peer: &Peer,
    username: &str,
    cid: &str,
) -> Result<tokio::sync::SemaphorePermit<'a>, SignInRefused> {
    let refused = |refusal: Refusal| SignInRefused {
        status: refusal.status(),
        message: match refusal {
            Refusal::Limited(_) => "Too many sign-in attempts; wait a minute and try again.",
            Refusal::Unavailable => "Sign-in is unavailable right now; try again in a minute.",
        },
        retry_after: refusal.retry_after(),
    };
    // Per address first: a refused attempt then costs no counter per user name.
    check_limit(
        st,
        "sign-ins per address",
        &peer.key("sign-in"),
        &ADDRESS_LOGIN_LIMITS,
    )
    .await
    .map_err(refused)?;
    // Names that cannot be a user share one counter: the key space stays that of real names.
    let login_key = match UserId::parse(&username.trim().to_ascii_lowercase()) {
        Ok(user) => format!("{LOGIN_KEY}{user}"),
        Err(_) => format!("{LOGIN_KEY}#not-a-user"),
    };
    check_limit(st, "sign-ins per user", &login_key, &LOGIN_LIMITS)
        .await
        .map_err(refused)?;
    oauth(st).gates.sign_in.try_acquire().map_err(|_| {
        tracing::warn!(correlation_id = %cid, "every sign-in slot is taken; sign-in refused");
        SignInRefused {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "Many sign-ins are running right now; try again in a moment.",
            retry_after: SIGN_IN_BUSY_RETRY_SECS,
        }
    })
}

async fn authorize_submit(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cid = telemetry::correlation_id();
    let oauth = oauth(&st);
    let form_error = |message: &str| {
        error_page(
            StatusCode::BAD_REQUEST,
            "This sign-in request cannot be used",
            &OAuthError::InvalidRequest(message.into()),
            &cid,
        )
    };
    if media_type(&headers) != "application/x-www-form-urlencoded" {
        return form_error("the consent form must be sent as a form");
    }
    let (params, fields) = match AuthorizeParams::from_pairs(url::form_urlencoded::parse(&body)) {
        Ok(x) => x,
        Err(e) => return refused(oauth, AuthorizeError::Page(e), &cid),
    };
    let fields: HashMap<String, String> = fields.into_iter().collect();
    if let Err(refusal) = check_fetch_limit(&st, &peer, params.client_id.as_deref()).await {
        return refused_page(refusal, "too many new apps from your network", &cid);
    }
    let signed_in = super::pages::signed_in_user(&st, &headers, &cid).await;
    let req = match oauth.validate_authorize(&params, signed_in.as_ref()).await {
        Ok(r) => r,
        Err(e) => return refused(oauth, e, &cid),
    };
    let cookie_value = cookie(&headers, &super::cookie_name(&st.config, CSRF_COOKIE));
    if !oauth.check_csrf(
        cookie_value,
        fields.get("csrf_token").map(String::as_str),
        &params,
    ) {
        tracing::warn!(correlation_id = %cid, client_id = %req.client.client_id, "consent form without a valid CSRF token");
        return error_page(
            StatusCode::FORBIDDEN,
            "This form has expired",
            &OAuthError::AccessDenied(
                "the consent form expired or was not sent from this page; start the connection again from your app",
            ),
            &cid,
        );
    }
    match fields.get("decision").map(String::as_str) {
        Some("deny") => return see_other(&oauth.deny(&req)),
        Some("approve") => {}
        _ => return form_error("choose Approve or Deny"),
    }
    let username = fields.get("username").map(String::as_str).unwrap_or("");
    let password = fields.get("password").map(String::as_str).unwrap_or("");
    let no_deletes = fields.get(NO_DELETES_FIELD).is_some_and(|v| v == "1");
    let retry = |message: &str, status| {
        let feedback = Feedback {
            no_deletes,
            username,
            error: Some(message),
            status,
        };
        consent(&st, &req, &params, cookie_value, feedback)
    };
    let _slot = match sign_in_gate(&st, &peer, username, &cid).await {
        Ok(slot) => slot,
        Err(refused) => {
            return with_retry_after(retry(refused.message, refused.status), refused.retry_after);
        }
    };
    let user = match oauth.users.check(username, password).await {
        Ok(Some(user)) => user,
        Ok(None) => {
            tracing::info!(correlation_id = %cid, "sign-in refused");
            return retry("Wrong user name or password.", StatusCode::UNAUTHORIZED);
        }
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "sign-in failed");
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Sign-in failed",
                &OAuthError::Internal("user store"),
                &cid,
            );
        }
    };
    // "No deletes": the grant reaches every tool but the destructive ones.
    let mut req = req;
    if no_deletes && req.scope == Scope::Write {
        req.scope = Scope::Edit;
    }
    match oauth.approve(&req, &user).await {
        Ok(location) => see_other(&location),
        Err(e) => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Sign-in failed",
            &e,
            &cid,
        ),
    }
}

/// A token or revocation request: its form fields and its Basic credentials, if any.
type TokenRequest = (HashMap<String, String>, Option<(String, String)>);

fn token_request(headers: &HeaderMap, body: &Bytes) -> Result<TokenRequest, OAuthError> {
    if media_type(headers) != "application/x-www-form-urlencoded" {
        return Err(OAuthError::InvalidRequest(
            "the body must be application/x-www-form-urlencoded".into(),
        ));
    }
    let form = form_fields(url::form_urlencoded::parse(body))?;
    let basic = match headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(basic_credentials)
    {
        Some(result) => Some(result?),
        None => None,
    };
    Ok((form, basic))
}

/// The client id a token or revocation request names (Basic credentials or the form).
fn named_client<'a>(
    form: &'a HashMap<String, String>,
    basic: &'a Option<(String, String)>,
) -> Option<&'a str> {
    basic
        .as_ref()
        .map(|(id, _)| id.as_str())
        .or_else(|| form.get("client_id").map(String::as_str))
}

async fn token(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cid = telemetry::correlation_id();
    let result = match token_request(&headers, &body) {
        Ok((form, basic)) => {
            if let Err(refusal) = check_fetch_limit(&st, &peer, named_client(&form, &basic)).await {
                return refused_json(refusal, "too many new apps from your network");
            }
            oauth(&st).token(&form, basic).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(t) => json_no_store(StatusCode::OK, t.json()),
        Err(e) => {
            tracing::info!(correlation_id = %cid, error = e.code(), "token request refused");
            cors(oauth_error_response(&e, &cid))
        }
    }
}

async fn revoke(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cid = telemetry::correlation_id();
    let result = match token_request(&headers, &body) {
        Ok((form, basic)) => {
            if let Err(refusal) = check_fetch_limit(&st, &peer, named_client(&form, &basic)).await {
                return refused_json(refusal, "too many new apps from your network");
            }
            oauth(&st).revoke_token(&form, basic).await
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => cors((StatusCode::OK, [(header::CACHE_CONTROL, "no-store")], "").into_response()),
        Err(e) => cors(oauth_error_response(&e, &cid)),
    }
}
