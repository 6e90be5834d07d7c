//! The authorization endpoint: validating a request, the consent form's CSRF token, and the
//! authorization code issued when the user approves.
//!
//! The order of checks matters. Until the client and its redirect URI are known to match, no
//! error may be sent to the redirect URI (that would make us an open redirector): those failures
//! are an error page ([`AuthorizeError::Page`]). After that, errors go back to the client
//! ([`AuthorizeError::Redirect`]) with `state` and `iss` (RFC 9207), but only for a client
//! someone vouched for to this browser: a pre-registered one, or one that the user whose
//! session cookie the browser carries approved before (before sign-in no other user is known,
//! and one user's approval says nothing to another: whoever registers a client can approve it
//! themselves). Anyone may register a client (or publish a metadata document) with any
//! redirect URI, so for the others a bad request is an error page too: a link to our
//! authorization endpoint must never bounce a browser to an arbitrary site without that
//! person's say (RFC 9700 §4.11.2).
//!
//! The consent form is protected twice: a random cookie (`SameSite=Strict`, `HttpOnly`) and a
//! form field that is an HMAC over that cookie, the exact request parameters and an expiry. A
//! POST from another site has neither the cookie nor a token for it; a token cannot be moved
//! to other parameters. The user's password is asked on every consent (there is no login
//! session to ride on).

use std::borrow::Cow;
use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use url::Url;

use super::clients::ClientRecord;
use super::{OAuth, OAuthError, random_secret, sha256_hex};
use crate::auth::Scope;
use crate::domain::UserId;
use crate::ports::{Cond, Item};

/// How long a consent form stays valid.
pub const CSRF_TTL_SECS: i64 = 1800;
/// How long a used or expired code is remembered, so that a replay can still revoke its grant.
pub(crate) const CODE_RETENTION_SECS: i64 = 3600;

/// The parameters of an authorization request, as sent (query string or consent form).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizeParams {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub resource: Option<String>,
}

impl AuthorizeParams {
    /// Splits `pairs` into the request parameters and the other fields (the consent form's own).
    /// A request parameter given twice is an error (RFC 6749 §3.1).
    pub fn from_pairs<'a>(
        pairs: impl Iterator<Item = (Cow<'a, str>, Cow<'a, str>)>,
    ) -> Result<(AuthorizeParams, Vec<(String, String)>), OAuthError> {
        let mut p = AuthorizeParams::default();
        let mut seen = HashSet::new();
        let mut other = Vec::new();
        for (name, value) in pairs {
            let slot = match name.as_ref() {
                "response_type" => &mut p.response_type,
                "client_id" => &mut p.client_id,
                "redirect_uri" => &mut p.redirect_uri,
                "scope" => &mut p.scope,
                "state" => &mut p.state,
                "code_challenge" => &mut p.code_challenge,
                "code_challenge_method" => &mut p.code_challenge_method,
                "resource" => &mut p.resource,
                _ => {
                    other.push((name.into_owned(), value.into_owned()));
                    continue;
                }
            };
            if !seen.insert(name.clone().into_owned()) {
                return Err(OAuthError::InvalidRequest(format!(
                    "parameter {name} is given more than once"
                )));
            }
            *slot = Some(value.into_owned());
        }
        Ok((p, other))
    }

    /// The parameters that are present, for the consent form's hidden fields.
    pub fn present(&self) -> Vec<(&'static str, &str)> {
        [
            ("response_type", &self.response_type),
            ("client_id", &self.client_id),
            ("redirect_uri", &self.redirect_uri),
            ("scope", &self.scope),
            ("state", &self.state),
            ("code_challenge", &self.code_challenge),
            ("code_challenge_method", &self.code_challenge_method),
            ("resource", &self.resource),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
        .collect()
    }

    /// A digest of exactly these parameters (absent and empty differ).
    fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        for v in [
            &self.response_type,
            &self.client_id,
            &self.redirect_uri,
            &self.scope,
            &self.state,
            &self.code_challenge,
            &self.code_challenge_method,
            &self.resource,
        ] {
            match v {
                Some(v) => {
                    h.update([1u8]);
                    h.update((v.len() as u64).to_be_bytes());
                    h.update(v.as_bytes());
                }
                None => h.update([0u8]),
            }
        }
        h.finalize().into()
    }
}

/// A request that passed every check: what the consent page shows and the code records.
#[derive(Debug, Clone)]
pub struct AuthorizeRequest {
    pub client: ClientRecord,
    pub redirect_uri: String,
    pub scope: Scope,
    pub state: Option<String>,
    pub code_challenge: String,
    pub resource: String,
}

impl AuthorizeRequest {
    /// The host the browser will be sent back to, for the consent page.
    pub fn redirect_host(&self) -> String {
        Url::parse(&self.redirect_uri)
            .ok()
            .map(|u| match (u.host_str(), u.port()) {
                (Some(h), Some(p)) => format!("{h}:{p}"),
                (Some(h), None) => h.to_owned(),
                (None, _) => format!("{}:", u.scheme()),
            })
            .unwrap_or_default()
    }
}

/// Why a request was refused, and where to say so.
#[derive(Debug)]
pub enum AuthorizeError {
    /// The client or redirect URI cannot be trusted: show an error page, never redirect.
    Page(OAuthError),
    /// Send the error back to the client's (verified) redirect URI.
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: OAuthError,
    },
}

/// What is stored for an authorization code (under the SHA-256 of the code).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CodeRecord {
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub scope: Scope,
    pub resource: String,
    pub user: UserId,
    /// The grant the exchange creates; a replayed code revokes it.
    pub grant_id: String,
    /// The code is valid until then.
    pub expires: i64,
    pub used_at: Option<i64>,
}

/// The partition-key prefix of authorization codes: `CODE#{sha256(code)}`.
pub const CODE_PREFIX: &str = "CODE#";

pub(crate) fn code_key(code: &str) -> String {
    format!("{CODE_PREFIX}{}", sha256_hex(code))
}

pub(crate) fn code_item(record: &CodeRecord, pk: String, version: u64) -> Item {
    Item {
        pk,
        sk: "CODE".into(),
        gsi1: None,
        version,
        expires_at: Some(record.expires + CODE_RETENTION_SECS),
        body: serde_json::to_vec(record).expect("code record serializes"),
    }
}

/// True for a PKCE S256 challenge: 43 base64url characters (a SHA-256).
fn valid_challenge(c: &str) -> bool {
    c.len() == 43
        && c.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

type HmacSha256 = Hmac<Sha256>;

impl OAuth {
    /// Checks an authorization request, in the order that never redirects to an unverified URI.
    /// `signed_in` is the user of the browser's session, if it has one: a request error goes
    /// back to a client that user approved (see [`Self::redirects_errors`]).
    pub async fn validate_authorize(
        &self,
        p: &AuthorizeParams,
        signed_in: Option<&UserId>,
    ) -> Result<AuthorizeRequest, AuthorizeError> {
        use AuthorizeError::Page;
        let client_id = p
            .client_id
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Page(OAuthError::InvalidRequest("client_id is missing".into())))?;
        let client = match self.clients.resolve(client_id).await {
            Ok(Some(c)) => c,
            Ok(None) => return Err(Page(OAuthError::InvalidRequest("unknown client_id".into()))),
            Err(e) => return Err(Page(e)),
        };
        let redirect_uri = match p.redirect_uri.as_deref() {
            Some(r) if client.redirect_uri_allowed(r) => r.to_owned(),
            Some(_) => {
                return Err(Page(OAuthError::InvalidRequest(
                    "redirect_uri is not registered for this client".into(),
                )));
            }
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => {
                return Err(Page(OAuthError::InvalidRequest(
                    "redirect_uri is missing".into(),
                )));
            }
        };
        match self.check_request(p, &client) {
            Ok((scope, code_challenge, resource)) => Ok(AuthorizeRequest {
                client,
                redirect_uri,
                scope,
                state: p.state.clone(),
                code_challenge,
                resource,
            }),
            Err(error) if self.redirects_errors(&client, signed_in).await => {
                Err(AuthorizeError::Redirect {
                    redirect_uri,
                    state: p.state.clone(),
                    error,
                })
            }
            Err(error) => Err(Page(error)),
        }
    }

    /// The checks after the client and redirect URI are known: scope, PKCE challenge and
    /// resource, or the error to report.
    fn check_request(
        &self,
        p: &AuthorizeParams,
        client: &ClientRecord,
    ) -> Result<(Scope, String, String), OAuthError> {
        match p.response_type.as_deref() {
            Some("code") => {}
            None => {
                return Err(OAuthError::InvalidRequest(
                    "response_type is missing".into(),
                ));
            }
            Some(_) => return Err(OAuthError::UnsupportedResponseType),
        }
        if !client.grant_types.iter().any(|g| g == "authorization_code") {
            return Err(OAuthError::UnauthorizedClient(
                "this client may not use the authorization code grant",
            ));
        }
        let code_challenge = match (
            p.code_challenge.as_deref(),
            p.code_challenge_method.as_deref(),
        ) {
            (Some(c), Some("S256")) if valid_challenge(c) => c.to_owned(),
            (None, _) => {
                return Err(OAuthError::InvalidRequest(
                    "code_challenge is required (PKCE with S256)".into(),
                ));
            }
            (Some(_), Some("S256")) => {
                return Err(OAuthError::InvalidRequest(
                    "code_challenge is not an S256 challenge".into(),
                ));
            }
            (Some(_), _) => {
                return Err(OAuthError::InvalidRequest(
                    "code_challenge_method must be S256".into(),
                ));
            }
        };
        let resource = match p.resource.as_deref() {
            Some(r) if self.is_our_resource(r) => self.config.resource.clone(),
            Some(r) => {
                return Err(OAuthError::InvalidTarget(format!(
                    "unknown resource {r:?}; this server issues tokens for {}",
                    self.config.resource
                )));
            }
            None => {
                return Err(OAuthError::InvalidTarget(format!(
                    "the resource parameter (RFC 8707) is required: {}",
                    self.config.resource
                )));
            }
        };
        let scope = super::parse_scope(p.scope.as_deref(), super::DEFAULT_SCOPE)?;
        Ok((scope, code_challenge, resource))
    }

    /// True when a request error may go back to `client`'s (verified) redirect URI: the
    /// operator registered the client, or `signed_in` (the user of the browser's session, the
    /// only user known before sign-in) approved it before. When that cannot be read, the error
    /// page (the safe side).
    async fn redirects_errors(&self, client: &ClientRecord, signed_in: Option<&UserId>) -> bool {
        if client.is_verified() {
            return true;
        }
        let Some(user) = signed_in else {
            return false;
        };
        match self.clients.approved(&client.client_id, user).await {
            Ok(approved) => approved,
            Err(e) => {
                tracing::warn!(client_id = %client.client_id, error = %crate::telemetry::chain(&e), "cannot read whether the client was approved; showing the error page");
                false
            }
        }
    }

    /// `redirect_uri` with these query parameters added (and `iss`, RFC 9207).
    pub fn redirect_url(&self, redirect_uri: &str, params: &[(&str, &str)]) -> String {
        let mut url = match Url::parse(redirect_uri) {
            Ok(u) => u,
            // Registered URIs always parse; this is only a fallback.
            Err(_) => return redirect_uri.to_owned(),
        };
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            q.append_pair("iss", &self.config.issuer);
        }
        url.into()
    }

    /// Where to send an error that may go back to the client.
    pub fn error_redirect(
        &self,
        redirect_uri: &str,
        state: Option<&str>,
        error: &OAuthError,
    ) -> String {
        let description = error.description();
        let mut params = vec![
            ("error", error.code()),
            ("error_description", description.as_str()),
        ];
        if let Some(s) = state {
            params.push(("state", s));
        }
        self.redirect_url(redirect_uri, &params)
    }

    /// A new random value for the CSRF cookie.
    pub fn new_csrf_cookie() -> String {
        random_secret(18)
    }

    fn csrf_mac(&self, cookie: &str, p: &AuthorizeParams, expires: i64) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.csrf_key[..]).expect("any key length");
        mac.update(b"consent\x1f");
        mac.update(cookie.as_bytes());
        mac.update(b"\x1f");
        mac.update(&p.digest());
        mac.update(&expires.to_be_bytes());
        mac
    }

    /// The consent form's token for this cookie and these exact parameters.
    pub fn csrf_token(&self, cookie: &str, p: &AuthorizeParams) -> String {
        let expires = self.clock.unix() + CSRF_TTL_SECS;
        let tag = self.csrf_mac(cookie, p, expires).finalize().into_bytes();
        format!("{expires}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// True when `token` was made by [`Self::csrf_token`] for this cookie and these parameters
    /// and has not expired.
    pub fn check_csrf(
        &self,
        cookie: Option<&str>,
        token: Option<&str>,
        p: &AuthorizeParams,
    ) -> bool {
        let (Some(cookie), Some(token)) = (cookie, token) else {
            return false;
        };
        if cookie.len() < 16 {
            return false;
        }
        let Some((expires, tag)) = token.split_once('.') else {
            return false;
        };
        let (Ok(expires), Ok(tag)) = (expires.parse::<i64>(), URL_SAFE_NO_PAD.decode(tag)) else {
            return false;
        };
        expires > self.clock.unix() && self.csrf_mac(cookie, p, expires).verify_slice(&tag).is_ok()
    }

    /// The user approved: stores a single-use code bound to the client, the redirect URI and
    /// the PKCE challenge, and returns where to send the browser.
    pub async fn approve(
        &self,
        req: &AuthorizeRequest,
        user: &UserId,
    ) -> Result<String, OAuthError> {
        let code = random_secret(32);
        let record = CodeRecord {
            client_id: req.client.client_id.clone(),
            client_name: req.client.display_name(),
            redirect_uri: req.redirect_uri.clone(),
            code_challenge: req.code_challenge.clone(),
            scope: req.scope,
            resource: req.resource.clone(),
            user: user.clone(),
            grant_id: format!("gr_{}", random_secret(12)),
            expires: self.clock.unix() + self.config.code_ttl_secs,
            used_at: None,
        };
        self.store
            .put(code_item(&record, code_key(&code), 1), Cond::NotExists)
            .await?;
        if !req.client.is_verified() {
            self.clients
                .mark_approved(&req.client.client_id, user)
                .await?;
        }
        tracing::info!(client_id = %record.client_id, user = %user, grant_id = %record.grant_id, "authorization code issued");
        let mut params = vec![("code", code.as_str())];
        if let Some(s) = &req.state {
            params.push(("state", s));
        }
        Ok(self.redirect_url(&req.redirect_uri, &params))
    }

    /// The user declined: `access_denied` back to the client.
    pub fn deny(&self, req: &AuthorizeRequest) -> String {
        self.error_redirect(
            &req.redirect_uri,
            req.state.as_deref(),
            &OAuthError::AccessDenied("the user declined"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_parameters_are_refused() {
        let q = "client_id=a&client_id=b";
        let r = AuthorizeParams::from_pairs(url::form_urlencoded::parse(q.as_bytes()));
        assert!(r.is_err());
        let q = "client_id=a&csrf=x&password=y";
        let (p, other) =
            AuthorizeParams::from_pairs(url::form_urlencoded::parse(q.as_bytes())).unwrap();
        assert_eq!(p.client_id.as_deref(), Some("a"));
        assert_eq!(other.len(), 2);
    }

    #[test]
    fn digests_tell_absent_from_empty() {
        let a = AuthorizeParams::default();
        let b = AuthorizeParams {
            state: Some(String::new()),
            ..Default::default()
        };
        assert_ne!(a.digest(), b.digest());
    }
}
