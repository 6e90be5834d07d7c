//! The owner's web app at `/app`: the notebook, tasks, search, connections and tokens, the
//! trash and the access record, in a browser, for the signed-in owner.
//!
//! Server-rendered HTML (askama templates in `templates/app/`); every screen works with
//! JavaScript off. The little script there is (`/app/static/app.js`: drag and drop, live
//! upload progress, the copy button) is a file of this server, so the Content-Security-Policy
//! allows scripts from `'self'` only and no inline script or style at all.
//!
//! **Sessions.** Sign-in is the pages' (`/oauth/signin?next=/app...`, `auth::web_sessions`).
//! It sets two cookies holding the same session id: `nib_session` (`SameSite=Lax`: a link
//! followed from another site shows the app) and `nib_change` (`SameSite=Strict`, `Path=/`,
//! since the password form posts to the authorization server: only a request that started on
//! this site carries it). Reading needs the first; a change
//! (every POST here) needs both, the form's CSRF token (an HMAC keyed by the session id,
//! [`WebSessions::csrf_token`]) and, when the browser sends one, an `Origin` that is ours. A
//! change that fails any of them changes nothing and says so (403). Sign-out and "sign out
//! everywhere" are forms to the authorization server's `/oauth/signout`, which owns deleting
//! sessions.
//!
//! **Where it runs.** Everything here acts through the same `Dispatch` as an assistant's tool
//! calls, as the principal of the signed-in user with credential `web_app`, so on AWS the `mcp`
//! front serves `/app` and the `pages` and `tasks` functions do the reading and writing
//! (`infra/api.tf`); what the app reads and changes appears in the access record under "web
//! app". Connections (OAuth grants) and bearer tokens are the front's own items (`GRANT#`,
//! `TOK#`), listed through the user's index partitions.
//!
//! | route | what |
//! |---|---|
//! | `GET /app` | pages by day, newest first, paged |
//! | `GET /app/pages/{page_id}` | a page: its image beside its lines, unsure lines marked, its tasks with checkboxes |
//! | `POST /app/pages/{page_id}/lines/{line_id}` | corrects a line written on the page: its text, a task's box (`correct_line`, an app operation the pages function runs) |
//! | `GET /app/tasks` | tasks, open or done or all, with a text filter |
//! | `POST /app/tasks/{task_link_id}` | sets a task's status (the checkbox) |
//! | `GET /app/search` | hybrid search with date filters and highlighted snippets |
//! | `GET /app/account` | connections (grants), tokens, sign out everywhere |
//! | `POST /app/account/grants/{grant_id}/revoke` | revokes a grant |
//! | `POST /app/account/tokens` | creates a token (shown once) |
//! | `POST /app/account/tokens/{token_id}/revoke` | revokes a token |
//! | `POST /app/account/delete` | deletes the account (the user name typed), as `nib user delete` (`nib serve` only) |
//! | `GET /app/data` | the trash (restore, purge dates) and the access record |
//! | `GET /app/data/export?format=` | the bundle or the Markdown ZIP: streamed locally, a redirect to a presigned GET on AWS (`data.rs`) |
//! | `POST /app/data/import` | locally: a bundle (multipart), imported as `nib import --bundle` does |
//! | `POST /app/data/restore/{kind}/{id}` | restores a trashed page or task |
//! | `POST /app/data/notion/connect`, `.../disconnect` | the Notion connection (app operations the tasks function runs, `tools::notion_app`) |
//! | `POST /app/data/timezone` | the user's time zone (`zone`; app operations the tasks function runs, `tools::settings_app`) |
//! | `GET /app/upload` | the upload page (drag and drop, or choose files) |
//! | `POST /app/upload` | locally: the files, imported as `nib import` does (`upload.rs`) |
//! | `POST /app/upload/sign` | on AWS: a presigned POST for one file to `uploads/{user}/` |
//! | `GET /app/upload/status` | on AWS: a date's pages and revisions, to see the ingest finish |
//! | `GET /app/static/{file}` | the style sheet and the script |

mod account;
mod data;
pub use data::EXPORTS_PER_HOUR;
mod notebook;
mod upload;

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value};

use super::HttpState;
use super::oauth::{cookie_value as cookie, see_other};
use super::pages::SIGNIN_PATH;
use crate::auth::web_sessions::WebSessions;
use crate::auth::{Principal, Scope};
use crate::domain::UserId;
use crate::ports::RateDecision;
use crate::telemetry;
use crate::tools::ToolError;

/// The app's root.
pub const APP_PATH: &str = "/app";
/// The cookie that lets a request change something: the session id again, `SameSite=Strict`.
pub const CHANGE_COOKIE: &str = "nib_change";
/// The purpose the app's forms' tokens are made for ([`WebSessions::csrf_token`]).
const FORM_PURPOSE: &str = "app";
/// The largest form accepted (uploads have their own limit).
const MAX_FORM_BYTES: usize = 64 * 1024;
/// The credential id the app's calls carry (rate limits, the access record, and the one that
/// reaches the app operations).
pub use crate::tools::APP_CREDENTIAL;
/// The name the access record shows for the app.
const APP_CLIENT: &str = "web app";

/// The app's routes (the front's: `nib serve` and the mcp function).
pub(super) fn routes() -> Router<Arc<HttpState>> {
    Router::new()
        .route(APP_PATH, get(notebook::home))
        .route("/app/pages/{page_id}", get(notebook::page))
        .route("/app/tasks", get(notebook::tasks))
        .route("/app/tasks/{task_link_id}", post(notebook::set_task))
        .route(
            "/app/pages/{page_id}/lines/{line_id}",
            post(notebook::correct_line),
        )
        .route("/app/search", get(notebook::search))
        .route("/app/account", get(account::show))
        .route(
            "/app/account/grants/{grant_id}/revoke",
            post(account::revoke_grant),
        )
        .route("/app/account/tokens", post(account::create_token))
        .route(
            "/app/account/tokens/{token_id}/revoke",
            post(account::revoke_token),
        )
        .route("/app/account/delete", post(account::delete_account))
        .route("/app/data", get(data::show))
        .route("/app/data/export", get(data::export))
        .route("/app/data/import/sent", get(data::import_sent))
        .route("/app/data/restore/{kind}/{id}", post(data::restore))
        .route("/app/data/notion/connect", post(data::notion_connect))
        .route("/app/data/notion/disconnect", post(data::notion_disconnect))
        .route("/app/data/timezone", post(data::time_zone_set))
        .route("/app/upload", get(upload::show))
        .route("/app/upload/sign", post(upload::sign))
        .route("/app/upload/status", get(upload::status))
        .route("/app/upload/sent", get(upload::sent))
        .route("/app/static/{file}", get(static_file))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .merge(
            Router::new()
                .route("/app/upload", post(upload::receive))
                .layer(axum::extract::DefaultBodyLimit::max(
                    upload::MAX_UPLOAD_REQUEST,
                )),
        )
        .merge(
            Router::new()
                .route("/app/data/import", post(data::import))
                .layer(axum::extract::DefaultBodyLimit::max(
                    data::MAX_IMPORT_REQUEST,
                )),
        )
}

/// True when `path` is a path of the app that sign-in may return to: `/app` or below it, made
/// of plain characters (no `..`, no `//`, no query), so it cannot be turned into an open
/// redirect.
pub fn is_app_path(path: &str) -> bool {
    let plain = |rest: &str| {
        rest.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_'))
            && !rest.contains("//")
    };
    path == APP_PATH
        || path
            .strip_prefix("/app/")
            .is_some_and(|rest| !rest.is_empty() && plain(rest))
}

/// The signed-in owner of a request.
pub(super) struct Visitor {
    pub user: UserId,
    /// The session id (the CSRF tokens' key).
    session_id: String,
    /// Whether the request carried the strict cookie of the same session (it started on
    /// this site).
    same_site: bool,
}

impl Visitor {
    /// The app's forms' token.
    pub fn csrf(&self) -> String {
        WebSessions::csrf_token(&self.session_id, FORM_PURPOSE)
    }

    /// The sign-out forms' token (the authorization server's `/oauth/signout`).
    pub fn signout_csrf(&self) -> String {
        WebSessions::csrf_token(&self.session_id, super::pages::SIGNOUT_PURPOSE)
    }

    /// The password form's token (the authorization server's `/oauth/password`).
    pub fn password_csrf(&self) -> String {
        WebSessions::csrf_token(&self.session_id, super::pages::PASSWORD_PURPOSE)
    }

    /// The principal the app acts as.
    pub fn principal(&self) -> Principal {
        Principal {
            user: self.user.clone(),
            scope: Scope::Write,
            credential_id: APP_CREDENTIAL.into(),
            client: Some(APP_CLIENT.into()),
        }
    }
}

/// What every screen's frame shows: the navigation (which tab is here) and the sign-out forms.
pub(super) struct Chrome {
    pub active: &'static str,
    pub user: String,
    pub csrf: String,
    pub signout_action: &'static str,
    pub signout_csrf: String,
}

impl Chrome {
    pub fn new(v: &Visitor, active: &'static str) -> Chrome {
        Chrome {
            active,
            user: v.user.to_string(),
            csrf: v.csrf(),
            signout_action: super::pages::SIGNOUT_PATH,
            signout_csrf: v.signout_csrf(),
        }
    }

    /// The class of a navigation link: `here` for the current tab.
    pub fn tab(&self, name: &str) -> &'static str {
        if self.active == name { "here" } else { "" }
    }
}

/// The owner of a GET: the session's user, or (as the response) a redirect to sign-in that
/// comes back to `here`, or an error page.
pub(super) async fn visitor(
    st: &HttpState,
    headers: &HeaderMap,
    here: &str,
) -> Result<Visitor, Response> {
    let cid = telemetry::correlation_id();
    if st.oauth.is_none() || st.dispatch.is_none() {
        // Without an authorization server nobody can sign in.
        return Err(not_found());
    }
    let (session_id, session) = match super::pages::session_of(st, headers).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            let back = if is_app_path(here) { here } else { APP_PATH };
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("next", back)
                .finish();
            return Err(see_other(&format!("{SIGNIN_PATH}?{query}")));
        }
        Err(e) => {
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "cannot read the app session");
            return Err(error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("Your session could not be checked (correlation id {cid}); try again."),
            ));
        }
    };
    let same_site = cookie(headers, &super::cookie_name(&st.config, CHANGE_COOKIE))
        == Some(session_id.as_str());
    let visitor = Visitor {
        user: session.user,
        session_id,
        same_site,
    };
    rate_limit(st, &visitor.user, &cid).await?;
    Ok(visitor)
}

/// The owner of a POST that changes something, with its form: the session as for a GET, then
/// the strict cookie, the `Origin` and the form's CSRF token; anything missing is a 403 that
/// changed nothing.
pub(super) async fn changer(
    st: &HttpState,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<(Visitor, Form), Response> {
    let form = Form::parse(body);
    let Some(back) = form.get("back").filter(|b| is_app_path(b)) else {
        return Err(refused_form());
    };
    let visitor = visitor(st, headers, back).await?;
    if !may_change(
        st,
        headers,
        &visitor,
        form.get("csrf_token").unwrap_or_default(),
    ) {
        return Err(refused_form());
    }
    Ok((visitor, form))
}

/// Whether a request of `visitor` carrying the form token `token` may change something: the
/// strict cookie of its session, our `Origin` when one is sent, the token (logged when not).
pub(super) fn may_change(
    st: &HttpState,
    headers: &HeaderMap,
    visitor: &Visitor,
    token: &str,
) -> bool {
    let origin_ok = from_our_origin(st, headers);
    let token_ok = WebSessions::check_csrf(&visitor.session_id, FORM_PURPOSE, token);
    let ok = visitor.same_site && origin_ok && token_ok;
    if !ok {
        tracing::warn!(
            same_site = visitor.same_site,
            origin_ok,
            token_ok,
            "app form refused"
        );
    }
    ok
}

/// True unless the browser says the request comes from another origin than the public URL's
/// (`Origin`, which a form post carries; none is taken as ours: the token still decides).
pub(super) fn from_our_origin(st: &HttpState, headers: &HeaderMap) -> bool {
    headers.get(header::ORIGIN).is_none_or(|o| {
        o.to_str().ok() == Some(crate::mcp::viewer::origin_of(&st.config.public_url).as_str())
    })
}

/// The app's requests count against the same per-user limits as the page links.
async fn rate_limit(st: &HttpState, user: &UserId, cid: &str) -> Result<(), Response> {
    let windows = st.config.rate_limits.all();
    if windows.is_empty() {
        return Ok(());
    }
    match st.limiter.hit(&format!("pages#{user}"), &windows).await {
        Ok(RateDecision::Allowed) => Ok(()),
        Ok(RateDecision::Limited {
            retry_after_secs, ..
        }) => {
            let mut r = message(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many requests",
                &format!("Try again in {retry_after_secs} s."),
            );
            if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            Err(r)
        }
        Err(e) => {
            tracing::warn!(correlation_id = %cid, error = %telemetry::chain(&e), "rate limiter unavailable");
            Ok(())
        }
    }
}

/// A posted form's fields.
pub(super) struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Form {
        Form(
            url::form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Calls a tool as the visitor; the result as JSON.
pub(super) async fn call(
    st: &HttpState,
    v: &Visitor,
    tool: &str,
    args: Value,
) -> Result<Value, ToolError> {
    let Value::Object(args) = args else {
        return Err(ToolError::invalid("args", "not an object"));
    };
    let dispatch = st
        .dispatch
        .as_ref()
        .ok_or_else(|| ToolError::UnknownTool(tool.into()))?;
    let out = dispatch.call(&v.principal(), tool, args).await?;
    Ok(serde_json::from_str(out.get()).unwrap_or_default())
}

/// The arguments of a tool call from `pairs`, leaving out empty values.
pub(super) fn args(pairs: &[(&str, Option<Value>)]) -> Value {
    let mut map = Map::new();
    for (k, v) in pairs {
        if let Some(v) = v {
            map.insert((*k).to_owned(), v.clone());
        }
    }
    Value::Object(map)
}

/// What a failed tool call shows: not found and bad input as themselves, anything else as
/// our failure with a correlation id (logged once here).
pub(super) fn tool_failure(e: ToolError, what: &str) -> Response {
    match e {
        // A malformed id is as unknown as another user's.
        ToolError::NotFound(_) | ToolError::InvalidArgument { .. } => not_found(),
        ToolError::Rejected(reason) => message(StatusCode::CONFLICT, "That did not work", &reason),
        e => failure(
            &e,
            what,
            StatusCode::INTERNAL_SERVER_ERROR,
            "This could not be done",
        ),
    }
}

/// The Content-Security-Policy of the app's pages: everything from this server only, images
/// also from where page images are (S3's presigned URLs on AWS), forms to this server only.
fn csp(st: &HttpState) -> String {
    let images = st.config.asset_origin.as_deref().unwrap_or("");
    // On AWS the upload page posts files to the bucket (presigned POST): its script, or its
    // form when the script is off.
    let uploads = match (&st.notebook, &st.upload_signer) {
        (None, Some(signer)) => signer.upload_origin().unwrap_or_default(),
        _ => String::new(),
    };
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' {images}; \
         connect-src 'self' {uploads}; form-action 'self' {uploads}; frame-ancestors 'none'; \
         base-uri 'none'"
    )
}

/// A rendered screen with the app's headers.
pub(super) fn render(st: &HttpState, page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => with_headers(Some(st), StatusCode::OK, body),
        Err(e) => {
            let cid = telemetry::correlation_id();
            tracing::error!(correlation_id = %cid, error = %e, "app rendering failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

fn with_headers(st: Option<&HttpState>, status: StatusCode, body: String) -> Response {
    let csp = st.map(csp).unwrap_or_else(|| {
        "default-src 'none'; style-src 'self'; frame-ancestors 'none'; base-uri 'none'".into()
    });
    let mut r = super::oauth::html_page(status, body, &csp);
    // Our pages send no referrer elsewhere, but a form posted under `no-referrer` carries
    // `Origin: null`, which the change check refuses: the app's own forms must show theirs.
    r.headers_mut().insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r
}

#[derive(Template)]
#[template(path = "app/message.html")]
struct MessagePage<'a> {
    title: &'a str,
    message: &'a str,
}

/// A plain page saying something (errors, refusals).
pub(super) fn message(status: StatusCode, title: &str, message: &str) -> Response {
    match (MessagePage { title, message }).render() {
        Ok(body) => with_headers(None, status, body),
        Err(_) => status.into_response(),
    }
}

fn error_page(status: StatusCode, text: &str) -> Response {
    message(status, "Something went wrong", text)
}

/// Our failure: logged once here with its cause chain (`log` names what failed), answered as
/// `status` with `told` (what did not happen) and the correlation id.
pub(super) fn failure(
    e: &(dyn std::error::Error + 'static),
    log: &str,
    status: StatusCode,
    told: &str,
) -> Response {
    let cid = telemetry::correlation_id();
    tracing::error!(correlation_id = %cid, error = %telemetry::chain(e), what = log, "app request failed");
    error_page(
        status,
        &format!("{told} (correlation id {cid}); try again."),
    )
}

/// The next part of one of the app's multipart forms (upload, bundle import); a form that
/// cannot be read is answered as `what` not arriving whole, nothing imported, with `hint`.
pub(super) async fn next_part<'f>(
    form: &'f mut axum::extract::Multipart,
    what: &str,
    hint: &str,
) -> Result<Option<axum::extract::multipart::Field<'f>>, Response> {
    form.next_field().await.map_err(|e| {
        tracing::warn!(error = %telemetry::chain(&e), what, "app form unreadable");
        message(
            StatusCode::BAD_REQUEST,
            &format!("The {what} did not arrive whole"),
            &format!("Nothing was imported. {hint}"),
        )
    })
}

/// The most of a multipart form's token field that is read: a token is 43 characters
/// ([`WebSessions::csrf_token`]), so anything longer is no token, and reading it whole would let
/// one request fill the memory up to the route's body limit before its 403.
const MAX_TOKEN_FIELD: usize = 256;

/// A multipart form's `csrf_token` field, read chunk by chunk up to [`MAX_TOKEN_FIELD`] bytes;
/// `None` (refuse the form, reading no further) when it is longer, unreadable or not UTF-8.
pub(super) async fn token_field(field: &mut axum::extract::multipart::Field<'_>) -> Option<String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.ok()? {
        if bytes.len() + chunk.len() > MAX_TOKEN_FIELD {
            tracing::warn!("app form token field too long");
            return None;
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes).ok()
}

/// Another user's id, a malformed one and a missing one all answer this.
pub(super) fn not_found() -> Response {
    message(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is no such thing in your notebook.",
    )
}

pub(super) fn refused_form() -> Response {
    message(
        StatusCode::FORBIDDEN,
        "This form cannot be used",
        "Nothing was changed. Open the page again from your notebook and try once more.",
    )
}

/// `303 See Other` back to the form's page (an app path, checked by [`changer`]).
pub(super) fn back_to(form: &Form) -> Response {
    see_other(form.get("back").unwrap_or(APP_PATH))
}

/// `GET /app/static/{file}`: the style sheet and the script, compiled in.
async fn static_file(Path(file): Path<String>) -> Response {
    let (kind, body) = match file.as_str() {
        "app.css" => (
            "text/css; charset=utf-8",
            include_str!("../../../static/app.css"),
        ),
        "app.js" => (
            "text/javascript; charset=utf-8",
            include_str!("../../../static/app.js"),
        ),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=300"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// The cookies a sign-in sets for the app beside the session cookie: the strict one.
pub fn change_cookie(config: &super::HttpConfig, value: &str, max_age: i64) -> Option<HeaderValue> {
    let secure = if super::https(config) { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        super::cookie_name(config, CHANGE_COOKIE)
    ))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_in_returns_only_to_paths_of_the_app() {
        for good in [
            "/app",
            "/app/tasks",
            "/app/pages/0f9e8d7c-aaaa",
            "/app/account",
        ] {
            assert!(is_app_path(good), "{good}");
        }
        for bad in [
            "/app/",
            "/apple",
            "/app//evil.example",
            "/app/../oauth",
            "/app/x?y=1",
            "https://evil.example/app",
            "//evil.example/app",
            "/app/a.b",
            "",
        ] {
            assert!(!is_app_path(bad), "{bad}");
        }
    }
}
