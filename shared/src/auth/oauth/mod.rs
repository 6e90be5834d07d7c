//! nib's OAuth 2.1 authorization server, for its own MCP resource only (docs/design.md §3 `oauth`).
//!
//! # Layout
//!
//! - [`metadata`]: RFC 8414 authorization server metadata and RFC 9728 protected resource
//!   metadata.
//! - [`clients`]: dynamic registration (RFC 7591), pre-registered clients, redirect URI rules.
//! - [`cimd`]: client ID metadata documents (an HTTPS URL as `client_id`), fetched and cached.
//! - [`authorize`]: the authorization request, CSRF tokens of the consent form, and the code.
//! - [`token`]: the token endpoint (code exchange, refresh rotation) and revocation (RFC 7009).
//! - [`jwt`]: ES256 access tokens (RFC 9068 shape), their signers (local, KMS on AWS,
//!   verify-only on the mcp front), their verification, and the JWKS.
//! - [`grants`]: one grant per user consent; what `nib grant list/revoke` shows and revokes.
//! - [`signin`]: the CSRF token of the page links' sign-in form (`/oauth/signin`).
//!
//! Store items (docs/design.md §5): `CLIENT#{id}` / `CLIENT` (and `CLIENT#{id}` / `APPROVED#{user}`
//! once that user approved the client, GSI `U#{user}#APPROVED`), `CODE#{sha256(code)}` / `CODE`, `RT#{sha256(token)}` / `RT`,
//! `GRANT#{id}` / `GRANT` (GSI `U#{user}#GRANTS`). Codes and refresh tokens carry
//! `expires_at`, so the table forgets them by TTL. Secrets (codes, refresh tokens, client
//! secrets) are stored only as SHA-256 hashes. Every partition the authorization server
//! reaches is in [`crate::functions::OAUTH_PARTITIONS`], which the oauth function's role must
//! match (`infra/iam.tf`).
//!
//! Two kinds of work cost the server more than the request costs the client: an argon2id
//! password check (sign-in) and the fetch of a client ID metadata document. Each is capped
//! per process by a [`Gates`] semaphore (over it: [`OAuthError::TemporarilyUnavailable`]);
//! the HTTP layer also limits both per client address.
//!
//! Errors are [`OAuthError`]s with the RFC 6749 codes; `crate::http` turns them into responses
//! in one place and never shows an internal cause.

pub mod authorize;
pub mod cimd;
pub mod clients;
pub mod grants;
pub mod jwt;
pub mod metadata;
pub mod signin;
pub mod token;

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::Scope;
use super::users::Users;
use crate::ports::{Clock, Store, StoreError};

/// The longest an access token may live.
pub const MAX_ACCESS_TTL_SECS: i64 = 3600;

/// Settings of the authorization server.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The issuer identifier: the public base URL, no trailing slash (`http://127.0.0.1:8787`).
    pub issuer: String,
    /// The one protected resource, the `aud` of every access token (`{issuer}/mcp`).
    pub resource: String,
    /// Access token lifetime, at most [`MAX_ACCESS_TTL_SECS`].
    pub access_ttl_secs: i64,
    /// Refresh token lifetime; each refresh issues a new one with a fresh lifetime.
    pub refresh_ttl_secs: i64,
    /// Authorization code lifetime.
    pub code_ttl_secs: i64,
    /// Accept `http://127.0.0.1/...` / `http://localhost/...` client ID metadata documents
    /// (development and tests only; the specification requires HTTPS).
    pub allow_http_loopback_client_ids: bool,
}

impl OAuthConfig {
    /// The defaults for a server at `public_url`: 1 h access tokens, 30 day refresh tokens,
    /// 60 s codes.
    pub fn new(public_url: &str) -> Self {
        let issuer = public_url.trim_end_matches('/').to_owned();
        OAuthConfig {
            resource: format!("{issuer}/mcp"),
            issuer,
            access_ttl_secs: MAX_ACCESS_TTL_SECS,
            refresh_ttl_secs: 30 * 24 * 3600,
            code_ttl_secs: 60,
            allow_http_loopback_client_ids: false,
        }
    }

    pub fn endpoint(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }
}

/// An OAuth failure, named by its RFC 6749 / 7591 / 8707 error code.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    InvalidRequest(String),
    /// Unknown client, or wrong or missing credentials: the client learns nothing more.
    #[error("client authentication failed")]
    InvalidClient,
    #[error("{0}")]
    InvalidGrant(&'static str),
    #[error("{0}")]
    UnauthorizedClient(&'static str),
    #[error("grant_type {0} is not supported")]
    UnsupportedGrantType(String),
    #[error("response_type must be code")]
    UnsupportedResponseType,
    #[error("{0}")]
    InvalidScope(String),
    #[error("{0}")]
    InvalidTarget(String),
    #[error("{0}")]
    AccessDenied(&'static str),
    #[error("{0}")]
    InvalidRedirectUri(String),
    #[error("{0}")]
    InvalidClientMetadata(String),
    #[error("store unavailable")]
    Store(#[from] StoreError),
    #[error("a stored record is corrupt")]
    Corrupt(#[from] serde_json::Error),
    #[error("cannot sign the access token")]
    Signing(#[from] jwt::SignError),
    #[error("{0}")]
    Internal(&'static str),
    /// Too much of some costly work at once (sign-ins, metadata fetches), or the limiter that
    /// guards it cannot be reached: try again later (503 with `Retry-After`).
    #[error("{what}; try again in {retry_after_secs} s")]
    TemporarilyUnavailable {
        what: &'static str,
        retry_after_secs: u64,
    },
}

impl OAuthError {
    /// The `error` value of the response.
    pub fn code(&self) -> &'static str {
        match self {
            OAuthError::InvalidRequest(_) => "invalid_request",
            OAuthError::InvalidClient => "invalid_client",
            OAuthError::InvalidGrant(_) => "invalid_grant",
            OAuthError::UnauthorizedClient(_) => "unauthorized_client",
            OAuthError::UnsupportedGrantType(_) => "unsupported_grant_type",
            OAuthError::UnsupportedResponseType => "unsupported_response_type",
            OAuthError::InvalidScope(_) => "invalid_scope",
            OAuthError::InvalidTarget(_) => "invalid_target",
            OAuthError::AccessDenied(_) => "access_denied",
            OAuthError::InvalidRedirectUri(_) => "invalid_redirect_uri",
            OAuthError::InvalidClientMetadata(_) => "invalid_client_metadata",
            OAuthError::TemporarilyUnavailable { .. } => "temporarily_unavailable",
            OAuthError::Store(_)
            | OAuthError::Corrupt(_)
            | OAuthError::Signing(_)
            | OAuthError::Internal(_) => "server_error",
        }
    }

    /// True for our own failures: logged with their cause, shown only as `server_error`.
    pub fn is_internal(&self) -> bool {
        self.code() == "server_error"
    }

    /// The `error_description` a client may see.
    pub fn description(&self) -> String {
        if self.is_internal() {
            "internal error".into()
        } else {
            self.to_string()
        }
    }
}

/// `len` random bytes, base64url without padding.
pub(crate) fn random_secret(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A random password for the first start: 20 characters from an alphabet without look-alikes.
pub fn random_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..20)
        .map(|_| ALPHABET[rand::Rng::random_range(&mut rng, 0..ALPHABET.len())] as char)
        .collect()
}

/// The SHA-256 of a secret, hex: how codes, refresh tokens and client secrets are stored.
pub(crate) fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The consent form's CSRF key, derived from the server's 32-byte OAuth secret (locally from
/// `master.key`, on AWS the KMS-wrapped `SECRET#oauth`).
pub fn csrf_key(secret: &[u8; 32]) -> Zeroizing<[u8; 32]> {
    derive(secret, "csrf/v1")
}

/// A 32-byte key for one purpose, derived from the authorization server's secret.
fn derive(secret: &[u8; 32], label: &str) -> Zeroizing<[u8; 32]> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("any key length");
    mac.update(b"nib/oauth\x1f");
    mac.update(label.as_bytes());
    Zeroizing::new(mac.finalize().into_bytes().into())
}

/// Parses a space-separated scope list; the grant holds the highest scope named (each scope
/// includes those below it). Empty means `default`.
pub fn parse_scope(requested: Option<&str>, default: Scope) -> Result<Scope, OAuthError> {
    let mut best: Option<Scope> = None;
    for word in requested.unwrap_or("").split(' ').filter(|w| !w.is_empty()) {
        let scope = Scope::parse(word)
            .ok_or_else(|| OAuthError::InvalidScope(format!("unknown scope {word:?}")))?;
        best = Some(best.map_or(scope, |b| b.max(scope)));
    }
    Ok(best.unwrap_or(default))
}

/// The scope string of a grant: every scope it includes (`write` -> `read write`).
pub fn scope_string(scope: Scope) -> String {
    Scope::ALL
        .iter()
        .filter(|s| scope.allows(**s))
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The scope a client gets when it asks for none: read and write, not admin.
pub const DEFAULT_SCOPE: Scope = Scope::Write;

/// Password checks (argon2id, about 19 MiB and tens of milliseconds each) running at once in
/// one process, at most.
pub const SIGN_IN_SLOTS: usize = 4;
/// Client ID metadata document fetches (up to 5 s each) in flight in one process, at most.
pub const FETCH_SLOTS: usize = 8;

/// Caps on the authorization server's costly work in this process: a request that finds no
/// free slot is answered 503 at once rather than queued, so a flood cannot pile up behind
/// them. Shared by every [`OAuth`] built with the same gates (the router's and the CLI's).
#[derive(Debug, Clone)]
pub struct Gates {
    /// Held for the duration of one password check.
    pub sign_in: Arc<tokio::sync::Semaphore>,
    /// Held for the duration of one metadata document fetch.
    pub fetch: Arc<tokio::sync::Semaphore>,
}

impl Gates {
    pub fn new(sign_ins: usize, fetches: usize) -> Self {
        Gates {
            sign_in: Arc::new(tokio::sync::Semaphore::new(sign_ins)),
            fetch: Arc::new(tokio::sync::Semaphore::new(fetches)),
        }
    }
}

impl Default for Gates {
    fn default() -> Self {
        Gates::new(SIGN_IN_SLOTS, FETCH_SLOTS)
    }
}

/// The authorization server: every endpoint's logic over the store, independent of HTTP.
pub struct OAuth {
    pub config: OAuthConfig,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    pub users: Users,
    pub clients: clients::Clients,
    pub grants: grants::Grants,
    signer: Arc<dyn jwt::TokenSigner>,
    pub verifier: jwt::Verifier,
    csrf_key: Zeroizing<[u8; 32]>,
    /// The caps on password checks and metadata fetches.
    pub gates: Gates,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("config", &self.config)
            .field("kid", &self.signer.kid())
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// `signer` signs access tokens (a [`jwt::LocalSigner`] derived from the server's OAuth
    /// secret locally, KMS on AWS) and its public key verifies them; `csrf_key` keys the consent
    /// form's CSRF tokens ([`csrf_key`] of the same secret). No key material sits in
    /// configuration.
    pub fn new(
        config: OAuthConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        signer: Arc<dyn jwt::TokenSigner>,
        csrf_key: Zeroizing<[u8; 32]>,
    ) -> Self {
        Self::with_gates(config, store, clock, signer, csrf_key, Gates::default())
    }

    /// [`OAuth::new`] with these caps on costly work (shared with other instances, or small
    /// ones in tests).
    pub fn with_gates(
        config: OAuthConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        signer: Arc<dyn jwt::TokenSigner>,
        csrf_key: Zeroizing<[u8; 32]>,
        gates: Gates,
    ) -> Self {
        let grants = grants::Grants::new(store.clone(), clock.clone());
        let verifier =
            jwt::Verifier::new(signer.public_key(), &config, grants.clone(), clock.clone());
        OAuth {
            users: Users::new(store.clone(), clock.clone()),
            clients: clients::Clients::new(
                store.clone(),
                clock.clone(),
                cimd::Fetcher::new(clock.clone(), config.allow_http_loopback_client_ids)
                    .with_slots(gates.fetch.clone()),
            ),
            gates,
            grants,
            signer,
            verifier,
            csrf_key,
            config,
            store,
            clock,
        }
    }

    /// The resource server's view (the mcp front): it verifies access tokens with the public
    /// key alone and holds no secret. Its token endpoint answers `server_error` (it cannot
    /// sign) and its CSRF key is random (it serves no consent page; a form it did not render
    /// never passes).
    pub fn verify_only(
        config: OAuthConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        public: jwt::VerifyOnly,
    ) -> Self {
        let csrf_key = Zeroizing::new(rand::random::<[u8; 32]>());
        OAuth::new(config, store, clock, Arc::new(public), csrf_key)
    }

    /// The public keys access tokens are signed with (RFC 7517).
    pub fn jwks(&self) -> serde_json::Value {
        jwt::jwks(self.signer.as_ref())
    }

    /// Signs arbitrary access token claims with the server's key: for operators' tooling and
    /// tests (the token endpoint is the only place that issues tokens to clients).
    pub async fn sign_access_token(
        &self,
        claims: &jwt::AccessClaims,
    ) -> Result<String, jwt::SignError> {
        jwt::sign_token(self.signer.as_ref(), claims).await
    }

    /// True when `resource` names our MCP endpoint (a trailing slash is forgiven).
    pub(crate) fn is_our_resource(&self, resource: &str) -> bool {
        resource.trim_end_matches('/') == self.config.resource.trim_end_matches('/')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_to_the_highest() {
        assert_eq!(parse_scope(None, Scope::Read).unwrap(), Scope::Read);
        assert_eq!(
            parse_scope(Some("read write"), Scope::Read).unwrap(),
            Scope::Write
        );
        assert_eq!(
            parse_scope(Some("admin read"), Scope::Read).unwrap(),
            Scope::Admin
        );
        assert!(matches!(
            parse_scope(Some("read openid"), Scope::Read),
            Err(OAuthError::InvalidScope(_))
        ));
        assert_eq!(scope_string(Scope::Write), "read edit write");
        // "No deletes" sits below write; a grant made before it said "read write".
        assert_eq!(scope_string(Scope::Edit), "read edit");
        assert_eq!(
            parse_scope(Some("read edit"), Scope::Read).unwrap(),
            Scope::Edit
        );
    }
}
