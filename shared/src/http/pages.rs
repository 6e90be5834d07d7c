//! Page links a person can open: `GET /pages/{page_id}` shows one page to its owner as plain
//! HTML (the image, the text, the tasks; no JavaScript), after sign-in on `/oauth/signin`.
//!
//! This is the stable `url` of `search`/`fetch` (what a ChatGPT citation links to, long after a
//! signed image URL has expired) and the `page_url` of the page tools. The page is read through
//! the same `Dispatch` as a `get_page` tool call, with the read scope, so on AWS the mcp front
//! serves it and the pages function reads it, exactly as for an assistant. Another user's page
//! id, a malformed one and a missing one are the same 404.
//!
//! | route | where | what |
//! |---|---|---|
//! | `GET /pages/{page_id}` | the front (`nib serve`, the mcp function) | the page (with a sign-out form), or a redirect to sign-in |
//! | `GET /oauth/signin?next=/pages/{id}` | the authorization server | the sign-in form |
//! | `POST /oauth/signin` | the authorization server | password check, then a session (`auth::web_sessions`), its cookie, and back |
//! | `POST /oauth/signout` | the authorization server | ends the session (its item is deleted) and clears the cookie |
//!
//! The session cookie has `Path=/`: `/oauth/authorize` reads it too, to know whose approval of
//! a client may vouch for it before sign-in (`auth::oauth::authorize`).

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::HttpState;
use super::oauth::{Peer, cookie_value as cookie, html_page, see_other, sign_in_gate};
use crate::auth::oauth::OAuth;
use crate::auth::web_sessions::{ABSOLUTE_SECS, SESSION_COOKIE, WebSession, WebSessions};
use crate::auth::{Principal, Scope};
use crate::domain::{PageId, UserId};
use crate::ports::RateDecision;
use crate::telemetry;
use crate::tools::ToolError;

/// Where the sign-in form lives (the authorization server's path space).
pub const SIGNIN_PATH: &str = "/oauth/signin";
/// Where the pages' sign-out form posts (the authorization server's, like sign-in).
pub const SIGNOUT_PATH: &str = "/oauth/signout";
/// The purpose the sign-out form's token is made for ([`WebSessions::csrf_token`]).
pub(super) const SIGNOUT_PURPOSE: &str = "sign-out";
/// Where the web app's password form posts (the authorization server's, which owns `USER#`).
pub const PASSWORD_PATH: &str = "/oauth/password";
/// The purpose the password form's token is made for.
pub(super) const PASSWORD_PURPOSE: &str = "password";
/// The CSRF cookie of the sign-in form (the consent form's name: one per browser is enough).
const CSRF_COOKIE: &str = "nib_csrf";
/// The largest sign-in form accepted.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// `GET /pages/{page_id}`, for the front.
pub(super) fn page_routes() -> Router<Arc<HttpState>> {
    Router::new().route("/pages/{page_id}", get(page))
}

/// `GET|POST /oauth/signin` and `POST /oauth/signout`, for the authorization server.
pub(super) fn signin_routes() -> Router<Arc<HttpState>> {
    Router::new()
        .route(SIGNIN_PATH, get(signin_page).post(signin_submit))
        .route(SIGNOUT_PATH, axum::routing::post(signout))
        .route(PASSWORD_PATH, axum::routing::post(change_password))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
}

/// The browser's session and its id, when its cookie names a live one. A store failure is
/// the caller's to log and to judge (a page view refuses, `/oauth/authorize` trusts no one).
pub(super) async fn session_of(
    st: &HttpState,
    headers: &HeaderMap,
) -> Result<Option<(String, WebSession)>, crate::auth::web_sessions::SessionError> {
    let Some(id) = cookie(headers, &super::cookie_name(&st.config, SESSION_COOKIE)) else {
        return Ok(None);
    };
    Ok(st
        .web_sessions
        .check(id)
        .await?
        .map(|session| (id.to_owned(), session)))
}

/// The user signed in on this browser, for `/oauth/authorize`; `None` when there is none or
/// the store cannot say (the safe side: no one vouches).
pub(super) async fn signed_in_user(
    st: &HttpState,
    headers: &HeaderMap,
    cid: &str,
) -> Option<UserId> {
    match session_of(st, headers).await {
        Ok(session) => session.map(|(_, s)| s.user),
        Err(e) => {
            tracing::warn!(correlation_id = %cid, error = %telemetry::chain(&e), "cannot read the browser's session; treated as none");
            None
        }
    }
}

/// The `Set-Cookie` of a session: every path (the pages and `/oauth/authorize`), script-proof,
/// sent on a link followed from another site (a citation) but not on its POSTs.
fn session_cookie(st: &HttpState, value: &str, max_age: i64) -> Option<HeaderValue> {
    HeaderValue::from_str(&format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
        super::cookie_name(&st.config, SESSION_COOKIE),
        secure(st)
    ))
    .ok()
}

/// The path on this server sign-in may return to, when `next` is one: a page link or a path
/// of the web app (the only places sign-in returns to, so it cannot be turned into an open
/// redirect).
fn page_path(next: &str) -> Option<String> {
    if super::app::is_app_path(next) {
        return Some(next.to_owned());
    }
    let id = next.strip_prefix("/pages/")?;
    PageId::parse(id).ok().map(|id| format!("/pages/{id}"))
}

/// Our pages' headers; images may come from this server or, on AWS, from the bucket's
/// presigned HTTPS URLs.
fn html(status: StatusCode, body: String) -> Response {
    html_page(
        status,
        body,
        "default-src 'none'; img-src 'self' https:; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    )
}

fn secure(st: &HttpState) -> &'static str {
    if st.config.public_url.starts_with("https://") {
        "; Secure"
    } else {
        ""
    }
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    title: &'a str,
    message: String,
}

fn message(status: StatusCode, title: &str, message: String) -> Response {
    match (MessagePage { title, message }).render() {
        Ok(body) => html(status, body),
        Err(_) => status.into_response(),
    }
}

fn not_found() -> Response {
    message(
        StatusCode::NOT_FOUND,
        "Page not found",
        "There is no such page in your notebook.".into(),
    )
}

/// One line of the page as shown.
struct LineView {
    /// `heading`, `task`, `bullet` or `text`.
    notation: String,
    text: String,
    /// The box of a task line: ☐ open, ☑ done, ☒ cancelled, → migrated.
    mark: &'static str,
    status: String,
}

#[derive(Template)]
#[template(path = "page.html")]
struct PageView {
    date: String,
    png_url: Option<String>,
    pdf_url: Option<String>,
    has_ocr: bool,
    lines: Vec<LineView>,
    signout_action: &'static str,
    /// The sign-out form's token, made from the session id.
    signout_token: String,
}

impl PageView {
    /// From `get_page`'s result, for the session `session_id`.
    fn from_result(v: &Value, session_id: &str) -> PageView {
        let s = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
        let lines = v
            .pointer("/structure_json/lines")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|l| {
                let status = l["status"].as_str().unwrap_or("").to_owned();
                LineView {
                    notation: l["notation"].as_str().unwrap_or("text").to_owned(),
                    text: l["text"].as_str().unwrap_or("").to_owned(),
                    mark: match status.as_str() {
                        "done" => "☑",
                        "cancelled" => "☒",
                        "migrated" => "→",
                        _ => "☐",
                    },
                    status,
                }
            })
            .collect();
        PageView {
            date: s("/date").unwrap_or_default(),
            png_url: s("/png_url"),
            pdf_url: s("/pdf_url"),
            has_ocr: s("/ocr_text").is_some() || s("/ocr_markdown").is_some(),
            lines,
            signout_action: SIGNOUT_PATH,
            signout_token: WebSessions::csrf_token(session_id, SIGNOUT_PURPOSE),
        }
    }
}

/// `GET /pages/{page_id}`: the page for its signed-in owner.
async fn page(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path(page_id): Path<String>,
) -> Response {
    let cid = telemetry::correlation_id();
    let (Some(_), Some(dispatch)) = (&st.oauth, &st.dispatch) else {
        // Without an authorization server nobody can sign in, so there is nothing to show.
        return not_found();
    };
    let Some(path) = page_path(&format!("/pages/{page_id}")) else {
        return not_found();
    };
    let (session_id, user) = match session_of(&st, &headers).await {
        Ok(Some((id, session))) => (id, session.user),
        Ok(None) => {
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("next", &path)
                .finish();
            return see_other(&format!("{SIGNIN_PATH}?{query}"));
        }
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "cannot read the page session");
            return message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Something went wrong",
                format!("Your session could not be checked (correlation id {cid}); try again."),
            );
        }
    };
    let windows = st.config.rate_limits.all();
    if !windows.is_empty() {
        match st.limiter.hit(&format!("pages#{user}"), &windows).await {
            Ok(RateDecision::Allowed) => {}
            Ok(RateDecision::Limited {
                retry_after_secs, ..
            }) => {
                let mut r = message(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many requests",
                    format!("Try again in {retry_after_secs} s."),
                );
                if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                    r.headers_mut().insert(header::RETRY_AFTER, v);
                }
                return r;
            }
            Err(e) => {
                tracing::warn!(correlation_id = %cid, error = %telemetry::chain(&e), "rate limiter unavailable");
            }
        }
    }
    let principal = Principal {
        user,
        scope: Scope::Read,
        credential_id: "page_session".into(),
        client: Some("page link (signed in)".into()),
    };
    let args = json!({ "page_id": page_id });
    let Value::Object(args) = args else {
        unreachable!("an object literal")
    };
    match dispatch.call(&principal, "get_page", args).await {
        Ok(result) => {
            match PageView::from_result(
                &serde_json::from_str(result.get()).unwrap_or_default(),
                &session_id,
            )
            .render()
            {
                Ok(body) => html(StatusCode::OK, body),
                Err(e) => {
                    tracing::error!(correlation_id = %cid, error = %e, "page rendering failed");
                    StatusCode::INTERNAL_SERVER_ERROR.into_response()
                }
            }
        }
        Err(
            ToolError::NotFound(_) | ToolError::InvalidArgument { .. } | ToolError::Rejected(_),
        ) => not_found(),
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "page view failed");
            message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                format!("The page could not be read (correlation id {cid})."),
            )
        }
    }
}

#[derive(Template)]
#[template(path = "signin.html")]
struct SigninPage<'a> {
    issuer: &'a str,
    action: &'static str,
    next: &'a str,
    csrf: String,
    username: &'a str,
    error: Option<&'a str>,
}

fn oauth(st: &HttpState) -> &OAuth {
    st.oauth
        .as_deref()
        .expect("sign-in routes are mounted only with an authorization server")
}

/// Renders the sign-in form, setting the CSRF cookie when it is missing.
fn signin_form(
    st: &HttpState,
    next: &str,
    existing_cookie: Option<&str>,
    username: &str,
    error: Option<(&str, StatusCode)>,
) -> Response {
    let oauth = oauth(st);
    let cookie_value = existing_cookie
        .filter(|c| c.len() >= 16)
        .map(str::to_owned)
        .unwrap_or_else(OAuth::new_csrf_cookie);
    let page = SigninPage {
        issuer: &oauth.config.issuer,
        action: SIGNIN_PATH,
        next,
        csrf: oauth.signin_csrf_token(&cookie_value, next),
        username,
        error: error.map(|(m, _)| m),
    };
    let Ok(body) = page.render() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let mut r = html(error.map_or(StatusCode::OK, |(_, s)| s), body);
    if existing_cookie != Some(cookie_value.as_str()) {
        let c = format!(
            "{}={cookie_value}; Path={}; HttpOnly; SameSite=Strict; Max-Age=3600{}",
            super::cookie_name(&st.config, CSRF_COOKIE),
            super::csrf_cookie_path(&st.config),
            secure(st)
        );
        if let Ok(v) = HeaderValue::from_str(&c) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
    }
    r
}

fn bad_link() -> Response {
    message(
        StatusCode::BAD_REQUEST,
        "This link cannot be used",
        "Sign-in returns only to a page of your notebook; open the page link again.".into(),
    )
}

/// `GET /oauth/signin?next=/pages/{id}`.
async fn signin_page(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    let query = query.unwrap_or_default();
    let next = url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "next")
        .and_then(|(_, v)| page_path(&v));
    match next {
        Some(next) => signin_form(
            &st,
            &next,
            cookie(&headers, &super::cookie_name(&st.config, CSRF_COOKIE)),
            "",
            None,
        ),
        None => bad_link(),
    }
}

/// `POST /oauth/signin`: CSRF, the sign-in limit, the password; then the session cookie.
async fn signin_submit(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cid = telemetry::correlation_id();
    let oauth = oauth(&st);
    let field = |name: &str| {
        url::form_urlencoded::parse(&body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let Some(next) = field("next").and_then(|n| page_path(&n)) else {
        return bad_link();
    };
    let csrf_cookie = cookie(&headers, &super::cookie_name(&st.config, CSRF_COOKIE));
    if !oauth.check_signin_csrf(csrf_cookie, field("csrf_token").as_deref(), &next) {
        tracing::warn!(correlation_id = %cid, "sign-in form without a valid CSRF token");
        return signin_form(
            &st,
            &next,
            None,
            "",
            Some(("This form expired; sign in again.", StatusCode::FORBIDDEN)),
        );
    }
    let username = field("username").unwrap_or_default();
    let password = field("password").unwrap_or_default();
    let retry =
        |m: &str, status| signin_form(&st, &next, csrf_cookie, &username, Some((m, status)));
    // The consent page's brakes: per address, per name, a free argon2 slot; fail closed.
    let _slot = match sign_in_gate(&st, &peer, &username, &cid).await {
        Ok(slot) => slot,
        Err(refused) => {
            let mut r = retry(refused.message, refused.status);
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(refused.retry_after));
            return r;
        }
    };
    let user = match oauth.users.check(&username, &password).await {
        Ok(Some(user)) => user,
        Ok(None) => {
            tracing::info!(correlation_id = %cid, "page sign-in refused");
            return retry("Wrong user name or password.", StatusCode::UNAUTHORIZED);
        }
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "page sign-in failed");
            return retry(
                "Sign-in failed on our side; try again.",
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    let session = match st.web_sessions.create(&user).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "page session could not be stored");
            return retry(
                "Sign-in failed on our side; try again.",
                StatusCode::INTERNAL_SERVER_ERROR,
            );
        }
    };
    tracing::info!(correlation_id = %cid, user = user.as_str(), "page sign-in");
    let mut r = see_other(&next);
    // The cookies may outlive an idle session; the store decides, and a dead one is asked to
    // sign in again. The strict one lets the web app's forms change things (`http::app`).
    let cookies = [
        session_cookie(&st, &session.id, ABSOLUTE_SECS),
        super::app::change_cookie(&st.config, &session.id, ABSOLUTE_SECS),
    ];
    for v in cookies.into_iter().flatten() {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

/// `POST /oauth/signout`: the sign-out form of the pages and the web app. With the session's
/// form token, deletes the session (so the cookie is refused everywhere from now on) and
/// clears the cookies; with `everywhere=1`, every session of its user (every browser signed
/// in). Without a session there is nothing to end. A form without the token (a post from
/// another page) ends nothing.
async fn signout(State(st): State<Arc<HttpState>>, headers: HeaderMap, body: Bytes) -> Response {
    let cid = telemetry::correlation_id();
    let field = |name: &str| {
        url::form_urlencoded::parse(&body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let token = field("csrf_token").unwrap_or_default();
    let everywhere = field("everywhere").as_deref() == Some("1");
    let mut ended = "You are signed out of nib on this browser.";
    if let Some(id) = cookie(&headers, &super::cookie_name(&st.config, SESSION_COOKIE)) {
        if !WebSessions::check_csrf(id, SIGNOUT_PURPOSE, &token) {
            tracing::warn!(correlation_id = %cid, "sign-out form without a valid token");
            return message(
                StatusCode::FORBIDDEN,
                "This form cannot be used",
                "Sign out from a page of your notebook.".into(),
            );
        }
        let result = match st.web_sessions.check(id).await {
            Ok(Some(session)) if everywhere => {
                ended = "You are signed out of nib on every browser.";
                st.web_sessions.end_all(&session.user).await.map(|n| {
                    tracing::info!(correlation_id = %cid, user = session.user.as_str(), sessions = n, "signed out everywhere");
                })
            }
            Ok(_) => st.web_sessions.end(id).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "sign-out failed");
            return message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                format!("You are still signed in (correlation id {cid}); try again."),
            );
        }
        tracing::info!(correlation_id = %cid, everywhere, "sign-out");
    }
    let mut r = message(StatusCode::OK, "Signed out", ended.into());
    let cookies = [
        session_cookie(&st, "", 0),
        super::app::change_cookie(&st.config, "", 0),
    ];
    for v in cookies.into_iter().flatten() {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
    r
}

/// `POST /oauth/password` (`current`, `new`, `repeat`, the form's token): the web app's
/// password change. The session, its strict cookie and the token first (as any change of the
/// app), then the current password through the sign-in brakes; the new one replaces it, every
/// session of the user ends (`Users::set_password`), and this browser gets a new one: every
/// *other* browser is signed out.
async fn change_password(
    State(st): State<Arc<HttpState>>,
    peer: Peer,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let cid = telemetry::correlation_id();
    let field = |name: &str| {
        url::form_urlencoded::parse(&body)
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default()
    };
    let session = match session_of(&st, &headers).await {
        Ok(Some(found)) => Some(found),
        Ok(None) => None,
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "cannot read the session of a password change");
            return message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Something went wrong",
                format!("Your password was not changed (correlation id {cid}); try again."),
            );
        }
    };
    let Some((id, session)) = session.filter(|(id, _)| {
        cookie(
            &headers,
            &super::cookie_name(&st.config, super::app::CHANGE_COOKIE),
        ) == Some(id.as_str())
            && WebSessions::check_csrf(id, PASSWORD_PURPOSE, &field("csrf_token"))
            && super::app::from_our_origin(&st, &headers)
    }) else {
        tracing::warn!(correlation_id = %cid, "password form refused");
        return message(
            StatusCode::FORBIDDEN,
            "This form cannot be used",
            "Your password was not changed. Open your account page again and try once more.".into(),
        );
    };
    let retry = |status, text: &str| message(status, "Your password was not changed", text.into());
    let (new, repeat) = (field("new"), field("repeat"));
    if new != repeat {
        return retry(StatusCode::BAD_REQUEST, "The two new passwords differ.");
    }
    let user = session.user.clone();
    let _slot = match sign_in_gate(&st, &peer, user.as_str(), &cid).await {
        Ok(slot) => slot,
        Err(refused) => return retry(refused.status, refused.message),
    };
    let users = &oauth(&st).users;
    match users.check(user.as_str(), &field("current")).await {
        Ok(Some(checked)) if checked == user => {}
        Ok(_) => return retry(StatusCode::UNAUTHORIZED, "The current password is wrong."),
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "password check failed");
            return retry(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The check failed on our side; try again.",
            );
        }
    }
    match users.set_password(&user, &new, false).await {
        Ok(()) => {}
        Err(crate::auth::users::UserError::WeakPassword) => {
            return retry(
                StatusCode::BAD_REQUEST,
                &format!(
                    "A password has at least {} characters.",
                    crate::auth::users::MIN_PASSWORD_LEN
                ),
            );
        }
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "password change failed");
            return retry(
                StatusCode::INTERNAL_SERVER_ERROR,
                "The change failed on our side; try again.",
            );
        }
    }
    tracing::info!(correlation_id = %cid, user = user.as_str(), "password changed in the web app");
    let _ = id;
    let mut r = message(
        StatusCode::OK,
        "Password changed",
        "Your password is changed, and every other browser signed in as you is signed out.".into(),
    );
    match st.web_sessions.create(&user).await {
        Ok(fresh) => {
            let cookies = [
                session_cookie(&st, &fresh.id, ABSOLUTE_SECS),
                super::app::change_cookie(&st.config, &fresh.id, ABSOLUTE_SECS),
            ];
            for v in cookies.into_iter().flatten() {
                r.headers_mut().append(header::SET_COOKIE, v);
            }
        }
        // Changed; this browser signs in again with the new password.
        Err(e) => {
            tracing::warn!(correlation_id = %cid, error = %telemetry::chain(&e), "no new session after a password change")
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_returns_only_to_a_page_of_this_server() {
        let id = uuid::Uuid::new_v4().to_string();
        assert_eq!(
            page_path(&format!("/pages/{id}")),
            Some(format!("/pages/{id}"))
        );
        for bad in [
            "https://evil.example/pages/x".to_owned(),
            "//evil.example".to_owned(),
            format!("/pages/{id}/../../oauth"),
            "/pages/".to_owned(),
            format!("/pages/{id}?x=1"),
        ] {
            assert_eq!(page_path(&bad), None, "{bad}");
        }
    }
}
