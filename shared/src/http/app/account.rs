//! Connections and tokens: each OAuth grant (revoke), each bearer token (create, revoke), and
//! the sign-out forms.

use std::collections::HashMap;
use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::json;

use super::{
    Chrome, Visitor, back_to, call, changer, failure, message, not_found, render, visitor,
};
use crate::auth::Scope;
use crate::auth::tokens::TokenError;
use crate::http::HttpState;
use crate::telemetry;
use crate::tools::rfc3339_ms;

/// How many access records are read to find when each connection was last used.
const ACCESS_LOOKBACK: u64 = 200;
/// The longest token label accepted.
const MAX_LABEL_CHARS: usize = 80;

struct GrantRow {
    grant_id: String,
    client_name: String,
    verified: bool,
    redirect_host: Option<String>,
    scope: &'static str,
    granted: String,
    last_used: Option<String>,
}

struct TokenRow {
    token_id: String,
    label: String,
    scope: &'static str,
    created: String,
    last_used: Option<String>,
}

#[derive(Template)]
#[template(path = "app/account.html")]
struct AccountScreen {
    chrome: Chrome,
    here: &'static str,
    grants: Vec<GrantRow>,
    tokens: Vec<TokenRow>,
    /// A token just created: its secret, shown this once.
    new_token: Option<String>,
    password_action: &'static str,
    password_csrf: String,
}

fn day_time(unix: i64) -> String {
    let s = rfc3339_ms(unix.saturating_mul(1000));
    // `2026-06-19T08:15:02.000Z` -> `2026-06-19 08:15 UTC`
    match (s.get(..10), s.get(11..16)) {
        (Some(d), Some(t)) => format!("{d} {t} UTC"),
        _ => s,
    }
}

/// When each credential was last seen in the access record (its newest records).
async fn last_uses(st: &HttpState, v: &Visitor) -> HashMap<String, String> {
    let mut seen = HashMap::new();
    match call(st, v, "list_access", json!({ "limit": ACCESS_LOOKBACK })).await {
        Ok(listed) => {
            for r in listed["records"].as_array().into_iter().flatten() {
                let (Some(cred), Some(at)) = (r["credential_id"].as_str(), r["at"].as_str()) else {
                    continue;
                };
                seen.entry(cred.to_owned()).or_insert_with(|| {
                    format!(
                        "{} {} UTC",
                        at.get(..10).unwrap_or(at),
                        at.get(11..16).unwrap_or("")
                    )
                });
            }
        }
        // The list still shows; "last used" is then unknown.
        Err(e) => {
            tracing::warn!(error = %telemetry::chain(&e), "access record unavailable for the connections list")
        }
    }
    seen
}

async fn screen(st: &HttpState, v: &Visitor, new_token: Option<String>) -> Response {
    let oauth = st
        .oauth
        .as_ref()
        .expect("the app runs with an authorization server");
    let now = st.clock.unix();
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    let grants = match oauth.grants.list(&v.user).await {
        Ok(g) => g,
        Err(e) => {
            return failure(
                &e,
                "grants unavailable",
                unavailable,
                "Your connections could not be read",
            );
        }
    };
    let tokens = match st.tokens.list(&v.user).await {
        Ok(t) => t,
        Err(e) => {
            return failure(
                &e,
                "tokens unavailable",
                unavailable,
                "Your tokens could not be read",
            );
        }
    };
    let used = last_uses(st, v).await;
    let mut grants: Vec<GrantRow> = grants
        .into_iter()
        .filter(|g| g.is_active(now))
        .map(|g| GrantRow {
            last_used: used.get(&format!("grant_{}", g.grant_id)).cloned(),
            grant_id: g.grant_id,
            client_name: g.client_name,
            verified: g.name_verified,
            redirect_host: g.redirect_host,
            scope: g.scope.as_str(),
            granted: day_time(g.created_at),
        })
        .collect();
    grants.reverse();
    let tokens = tokens
        .into_iter()
        .filter(|t| t.revoked_at.is_none())
        .map(|t| TokenRow {
            last_used: used
                .get(&t.token_id)
                .cloned()
                .or(t.last_used_at.map(day_time)),
            token_id: t.token_id,
            label: t.label.unwrap_or_default(),
            scope: t.scope.as_str(),
            created: day_time(t.created_at),
        })
        .collect();
    render(
        st,
        &AccountScreen {
            chrome: Chrome::new(v, "account"),
            here: "/app/account",
            grants,
            tokens,
            new_token,
            password_action: crate::http::pages::PASSWORD_PATH,
            password_csrf: v.password_csrf(),
        },
    )
}

/// `GET /app/account`.
pub(super) async fn show(State(st): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    match visitor(&st, &headers, "/app/account").await {
        Ok(v) => screen(&st, &v, None).await,
        Err(r) => r,
    }
}

/// `POST /app/account/grants/{grant_id}/revoke`: the client's tokens stop working at once.
pub(super) async fn revoke_grant(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path(grant_id): Path<String>,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let oauth = st
        .oauth
        .as_ref()
        .expect("the app runs with an authorization server");
    match oauth
        .grants
        .revoke(
            &grant_id,
            Some(&v.user),
            "revoked by its owner in the web app",
        )
        .await
    {
        Ok(Some(_)) => {
            tracing::info!(user = v.user.as_str(), "grant revoked in the web app");
            back_to(&form)
        }
        Ok(None) => not_found(),
        Err(e) => failure(
            &e,
            "grant revocation failed",
            StatusCode::INTERNAL_SERVER_ERROR,
            "The connection was not revoked",
        ),
    }
}

/// `POST /app/account/tokens` (`label`, `preset`: read, edit (no deletes) or write): the new
/// token is shown once, in this answer.
pub(super) async fn create_token(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let scope = match form.get("preset") {
        Some("read") => Scope::Read,
        Some("edit") => Scope::Edit,
        Some("write") => Scope::Write,
        _ => {
            return message(
                StatusCode::BAD_REQUEST,
                "Choose what the token may do",
                "A token can read the notebook, read and write it without deleting, or read and write it. Nothing was created.",
            );
        }
    };
    let label = form.get("label").unwrap_or_default().trim();
    if label.chars().count() > MAX_LABEL_CHARS || label.chars().any(char::is_control) {
        return message(
            StatusCode::BAD_REQUEST,
            "That label cannot be used",
            &format!(
                "A label is at most {MAX_LABEL_CHARS} characters on one line. Nothing was created."
            ),
        );
    }
    let label = (!label.is_empty()).then(|| label.to_owned());
    // Matched before the screen's awaits: the error is not kept across them.
    let new = match st.tokens.create(&v.user, scope, label).await {
        Ok(new) => new,
        Err(e) => {
            return failure(
                &e,
                "token creation failed",
                StatusCode::INTERNAL_SERVER_ERROR,
                "No token was created",
            );
        }
    };
    tracing::info!(user = v.user.as_str(), token_id = %new.record.token_id, "token created in the web app");
    screen(&st, &v, Some(new.token)).await
}

/// `POST /app/account/tokens/{token_id}/revoke`.
pub(super) async fn revoke_token(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path(token_id): Path<String>,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    match st.tokens.revoke(&v.user, &token_id).await {
        Ok(_) => {
            tracing::info!(user = v.user.as_str(), token_id = %token_id, "token revoked in the web app");
            back_to(&form)
        }
        Err(TokenError::UnknownId(_)) => not_found(),
        Err(e) => failure(
            &e,
            "token revocation failed",
            StatusCode::INTERNAL_SERVER_ERROR,
            "The token was not revoked",
        ),
    }
}

/// `POST /app/account/delete` (`confirm`: the user name, typed): the account and everything in
/// it, as `nib user delete` does (the data key destroyed first, then every item and image),
/// through the dispatch as the app operation `delete_account`: in process on `nib serve`, the
/// `account` function on AWS. The session ends with the account (its credentials are deleted
/// first), so the answer clears the cookies.
pub(super) async fn delete_account(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    if form.get("confirm").map(str::trim) != Some(v.user.as_str()) {
        return message(
            StatusCode::BAD_REQUEST,
            "Nothing was deleted",
            "Type your user name exactly to delete your account.",
        );
    }
    // The password again: an open session alone (a borrowed or stolen browser) does not
    // erase an account. The operation checks it where `USER#` is reachable.
    let password = form.get("password").unwrap_or_default();
    match call(&st, &v, "delete_account", json!({ "password": password })).await {
        Ok(done) => {
            tracing::info!(
                user = v.user.as_str(),
                items = done["items"].as_u64(),
                assets = done["assets"].as_u64(),
                "account deleted in the web app"
            );
            let mut r = message(
                StatusCode::OK,
                "Your account is deleted",
                "Your notebook, its images, your tokens and connections are gone, and the key that opened them is destroyed.",
            );
            let secure = if crate::http::https(&st.config) {
                "; Secure"
            } else {
                ""
            };
            let cookies = [
                axum::http::HeaderValue::from_str(&format!(
                    "{}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{secure}",
                    crate::http::cookie_name(&st.config, crate::auth::web_sessions::SESSION_COOKIE)
                ))
                .ok(),
                super::change_cookie(&st.config, "", 0),
            ];
            for c in cookies.into_iter().flatten() {
                r.headers_mut().append(axum::http::header::SET_COOKIE, c);
            }
            r
        }
        Err(crate::tools::ToolError::Rejected(_)) => {
            tracing::info!(
                user = v.user.as_str(),
                "account deletion refused: wrong password"
            );
            message(
                StatusCode::FORBIDDEN,
                "Nothing was deleted",
                "The password is not right. Type your password to delete your account.",
            )
        }
        // Each step is idempotent: the same form again (or `nib user delete`, once the
        // credentials are gone and with them this session) finishes what was begun.
        Err(e) => failure(
            &e,
            "account deletion failed",
            StatusCode::INTERNAL_SERVER_ERROR,
            "The deletion stopped halfway: send the form again to finish it, or ask your operator to (nib user delete)",
        ),
    }
}
