//! The token endpoint (authorization code and refresh token grants) and revocation (RFC 7009).
//!
//! - Clients authenticate with `client_secret_basic` or `client_secret_post` when they have a
//!   secret (either works, whichever they registered), or send only `client_id` (`none`).
//! - A code is single use: it is burnt before it is judged, so a wrong verifier or redirect URI
//!   also ends it, and a second use revokes the grant the first one created (OAuth 2.1 §4.1.3),
//!   even when the first exchange has not created it yet (a revoked grant is written in its
//!   place, and the first exchange then fails: [`super::grants::Grants::revoke_or_forestall`]).
//! - Refresh tokens rotate: each refresh returns a new one and marks the old one used. Presenting
//!   a used one again is reuse, which revokes the whole grant (OAuth 2.1 §4.3.1). Two refreshes
//!   racing with one token count as reuse too.
//! - Revoking either kind of token revokes its grant, which ends every token of that grant.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::authorize::{CODE_RETENTION_SECS, CodeRecord, code_item, code_key};
use super::clients::ClientRecord;
use super::grants::{GrantRecord, grant_item};
use super::jwt::{self, AccessClaims, Verifier};
use super::{OAuth, OAuthError, random_secret, scope_string, sha256_hex};
use crate::auth::Scope;
use crate::domain::UserId;
use crate::ports::{Cond, Item, StoreError, Write};

/// Refresh tokens start with this, so a scanner (and a person) can tell them apart.
pub const REFRESH_PREFIX: &str = "nib_rt_";

/// What the token endpoint returns.
#[derive(Debug, Clone)]
pub struct TokenResponse {
    pub access_token: String,
    pub expires_in: i64,
    pub refresh_token: String,
    pub scope: Scope,
}

impl TokenResponse {
    pub fn json(&self) -> Value {
        json!({
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": self.refresh_token,
            "scope": scope_string(self.scope),
        })
    }
}

/// What is stored for a refresh token (under the SHA-256 of the token).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RefreshRecord {
    grant_id: String,
    client_id: String,
    user: UserId,
    scope: Scope,
    issued_at: i64,
    expires: i64,
    /// Set when the token was exchanged for a new one; presenting it again is reuse.
    rotated_at: Option<i64>,
}

/// The partition-key prefix of refresh tokens: `RT#{sha256(token)}`.
pub const REFRESH_KEY_PREFIX: &str = "RT#";

fn refresh_key(token: &str) -> String {
    format!("{REFRESH_KEY_PREFIX}{}", sha256_hex(token))
}

fn refresh_item(pk: String, record: &RefreshRecord, version: u64) -> Item {
    Item {
        gsi1: Some((format!("U#{}#RT", record.user), pk.clone())),
        pk,
        sk: "RT".into(),
        version,
        expires_at: Some(record.expires),
        body: serde_json::to_vec(record).expect("refresh record serializes"),
    }
}

/// The request's form fields; a field given twice is an error (RFC 6749 §3.2).
pub fn form_fields<'a>(
    pairs: impl Iterator<Item = (std::borrow::Cow<'a, str>, std::borrow::Cow<'a, str>)>,
) -> Result<HashMap<String, String>, OAuthError> {
    let mut out = HashMap::new();
    for (k, v) in pairs {
        if out.insert(k.clone().into_owned(), v.into_owned()).is_some() {
            return Err(OAuthError::InvalidRequest(format!(
                "parameter {k} is given more than once"
            )));
        }
    }
    Ok(out)
}

/// Client id and secret from an `Authorization: Basic` header (each form-urlencoded, RFC 6749
/// §2.3.1). `None` when the header is not Basic; `Some(Err)` when it is but is malformed.
pub fn basic_credentials(header: &str) -> Option<Result<(String, String), OAuthError>> {
    let (scheme, rest) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bad = || OAuthError::InvalidClient;
    let decoded = STANDARD
        .decode(rest.trim())
        .ok()
        .and_then(|b| String::from_utf8(b).ok());
    Some((|| {
        let decoded = decoded.ok_or_else(bad)?;
        let (id, secret) = decoded.split_once(':').ok_or_else(bad)?;
        let unescape = |s: &str| -> String {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        Ok((unescape(id), unescape(secret)))
    })())
}

/// True when `verifier` is a valid PKCE verifier whose S256 challenge is `challenge`.
fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    well_formed && bool::from(computed.as_bytes().ct_eq(challenge.as_bytes()))
}

impl OAuth {
    /// Authenticates the client of a token or revocation request.
    pub async fn authenticate_client(
        &self,
        form: &HashMap<String, String>,
        basic: Option<(String, String)>,
    ) -> Result<ClientRecord, OAuthError> {
        let body_id = form.get("client_id");
        let body_secret = form.get("client_secret");
        let (client_id, secret) = match basic {
            Some((id, secret)) => {
                if body_secret.is_some() || body_id.is_some_and(|b| b != &id) {
                    return Err(OAuthError::InvalidRequest(
                        "use one client authentication method".into(),
                    ));
                }
                (id, Some(secret))
            }
            None => (
                body_id.cloned().ok_or(OAuthError::InvalidClient)?,
                body_secret.cloned(),
            ),
        };
        let client = match self.clients.resolve(&client_id).await {
            Ok(Some(c)) => c,
            Ok(None) | Err(OAuthError::InvalidClientMetadata(_)) => {
                return Err(OAuthError::InvalidClient);
            }
            Err(e) => return Err(e),
        };
        if client.is_confidential() && !secret.is_some_and(|s| client.secret_matches(&s)) {
            return Err(OAuthError::InvalidClient);
        }
        // A public client has no secret to check; one sent anyway (some send an empty one) is
        // ignored.
        Ok(client)
    }

    /// The token endpoint.
    pub async fn token(
        &self,
        form: &HashMap<String, String>,
        basic: Option<(String, String)>,
    ) -> Result<TokenResponse, OAuthError> {
        let grant_type = form
            .get("grant_type")
            .ok_or_else(|| OAuthError::InvalidRequest("grant_type is missing".into()))?;
        let client = self.authenticate_client(form, basic).await?;
        match grant_type.as_str() {
            "authorization_code" => self.exchange_code(&client, form).await,
            "refresh_token" => self.refresh(&client, form).await,
            other => Err(OAuthError::UnsupportedGrantType(
                other.chars().take(40).collect(),
            )),
        }
    }

    fn check_resource(&self, form: &HashMap<String, String>) -> Result<(), OAuthError> {
        match form.get("resource") {
            Some(r) if !self.is_our_resource(r) => Err(OAuthError::InvalidTarget(format!(
                "this server issues tokens only for {}",
                self.config.resource
            ))),
            _ => Ok(()),
        }
    }

    /// A signed access token for `grant` and its lifetime. Signed before the grant's writes
    /// commit, so a signing failure (KMS unreachable) leaves a refresh token unrotated and
    /// usable again.
    async fn access_token(
        &self,
        grant: &GrantRecord,
        scope: Scope,
    ) -> Result<(String, i64), OAuthError> {
        let now = self.clock.unix();
        let ttl = self.config.access_ttl_secs.min(super::MAX_ACCESS_TTL_SECS);
        let claims = AccessClaims {
            iss: self.config.issuer.clone(),
            sub: grant.user.to_string(),
            aud: grant.resource.clone(),
            exp: now + ttl,
            iat: now,
            jti: random_secret(16),
            scope: scope_string(scope),
            client_id: grant.client_id.clone(),
            gid: grant.grant_id.clone(),
        };
        Ok((jwt::sign_token(self.signer.as_ref(), &claims).await?, ttl))
    }

    fn new_refresh(&self, grant: &GrantRecord) -> (String, RefreshRecord) {
        let now = self.clock.unix();
        let token = format!("{REFRESH_PREFIX}{}", random_secret(32));
        let record = RefreshRecord {
            grant_id: grant.grant_id.clone(),
            client_id: grant.client_id.clone(),
            user: grant.user.clone(),
            scope: grant.scope,
            issued_at: now,
            expires: now + self.config.refresh_ttl_secs,
            rotated_at: None,
        };
        (token, record)
    }

    async fn exchange_code(
        &self,
        client: &ClientRecord,
        form: &HashMap<String, String>,
    ) -> Result<TokenResponse, OAuthError> {
        let need = |k: &str| {
            form.get(k)
                .ok_or_else(|| OAuthError::InvalidRequest(format!("{k} is missing")))
        };
        let code = need("code")?;
        let verifier = need("code_verifier")?;
        let redirect_uri = need("redirect_uri")?;
        let key = code_key(code);
        let invalid = OAuthError::InvalidGrant("the authorization code is invalid or expired");
        let Some(item) = self.store.get(&key, "CODE").await? else {
            return Err(invalid);
        };
        let mut record: CodeRecord = serde_json::from_slice(&item.body)?;
        let now = self.clock.unix();
        let replayed = OAuthError::InvalidGrant(
            "the authorization code was already used; tokens issued for it are revoked",
        );
        if record.used_at.is_some() {
            self.revoke_replayed(&record).await?;
            return Err(replayed);
        }
        // Burn the code first: whatever happens next, it cannot be tried again.
        record.used_at = Some(now);
        match self
            .store
            .put(
                code_item(&record, key, item.version + 1),
                Cond::Version(item.version),
            )
            .await
        {
            Ok(()) => {}
            Err(StoreError::ConditionFailed { .. } | StoreError::Conflict) => {
                self.revoke_replayed(&record).await?;
                return Err(replayed);
            }
            Err(e) => return Err(e.into()),
        }
        if record.expires <= now {
            return Err(invalid);
        }
        if record.client_id != client.client_id {
            return Err(OAuthError::InvalidGrant(
                "the authorization code was issued to another client",
            ));
        }
        if redirect_uri != &record.redirect_uri {
            return Err(OAuthError::InvalidGrant(
                "redirect_uri does not match the authorization request",
            ));
        }
        if !pkce_matches(verifier, &record.code_challenge) {
            return Err(OAuthError::InvalidGrant(
                "code_verifier does not match the code_challenge",
            ));
        }
        self.check_resource(form)?;
        let grant = GrantRecord {
            grant_id: record.grant_id.clone(),
            user: record.user.clone(),
            client_id: record.client_id.clone(),
            client_name: record.client_name.clone(),
            scope: record.scope,
            resource: record.resource.clone(),
            created_at: now,
            last_issued_at: now,
            revoked_at: None,
            revoked_reason: None,
            expires_at: now + self.config.refresh_ttl_secs + self.config.access_ttl_secs,
            redirect_host: crate::http::url_authority(redirect_uri).map(str::to_owned),
            name_verified: client.is_verified(),
        };
        let (refresh_token, refresh) = self.new_refresh(&grant);
        let (access_token, expires_in) = self.access_token(&grant, grant.scope).await?;
        match self
            .store
            .transact(vec![
                Write::put(grant_item(&grant, 1), Cond::NotExists),
                Write::put(
                    refresh_item(refresh_key(&refresh_token), &refresh, 1),
                    Cond::NotExists,
                ),
            ])
            .await
        {
            Ok(()) => {}
            // The grant exists already: a replay of this code revoked it first (it wrote the
            // grant, revoked). The token just signed is dropped unseen.
            Err(StoreError::ConditionFailed { .. }) => {
                tracing::warn!(client_id = %client.client_id, grant_id = %grant.grant_id, "code exchange lost to a replay of its code; nothing issued");
                return Err(replayed);
            }
            Err(e) => return Err(e.into()),
        }
        tracing::info!(client_id = %client.client_id, grant_id = %grant.grant_id, "code exchanged");
        Ok(TokenResponse {
            access_token,
            expires_in,
            refresh_token,
            scope: grant.scope,
        })
    }

    /// A used code came again: revoke its grant, or forestall it when its first exchange has
    /// not created it yet.
    async fn revoke_replayed(&self, code: &CodeRecord) -> Result<(), OAuthError> {
        let now = self.clock.unix();
        let pending = GrantRecord {
            grant_id: code.grant_id.clone(),
            user: code.user.clone(),
            client_id: code.client_id.clone(),
            client_name: code.client_name.clone(),
            scope: code.scope,
            resource: code.resource.clone(),
            created_at: now,
            last_issued_at: now,
            revoked_at: None,
            revoked_reason: None,
            // Long past any exchange still in flight (the code itself is kept as long).
            expires_at: now.max(code.expires) + CODE_RETENTION_SECS,
            redirect_host: None,
            name_verified: false,
        };
        self.grants
            .revoke_or_forestall(pending, "authorization code replayed")
            .await?;
        Ok(())
    }

    async fn refresh(
        &self,
        client: &ClientRecord,
        form: &HashMap<String, String>,
    ) -> Result<TokenResponse, OAuthError> {
        let token = form
            .get("refresh_token")
            .ok_or_else(|| OAuthError::InvalidRequest("refresh_token is missing".into()))?;
        let key = refresh_key(token);
        // Two tries: losing a race for the same token shows up as reuse on the second.
        for _ in 0..2 {
            let Some(item) = self.store.get(&key, "RT").await? else {
                return Err(OAuthError::InvalidGrant(
                    "the refresh token is invalid or expired",
                ));
            };
            let mut record: RefreshRecord = serde_json::from_slice(&item.body)?;
            if record.client_id != client.client_id {
                return Err(OAuthError::InvalidGrant(
                    "the refresh token was issued to another client",
                ));
            }
            let now = self.clock.unix();
            let Some((mut grant, grant_version)) = self.grants.get(&record.grant_id).await? else {
                return Err(OAuthError::InvalidGrant("the grant has ended"));
            };
            if !grant.is_active(now) {
                return Err(OAuthError::InvalidGrant("the grant was revoked"));
            }
            if record.rotated_at.is_some() {
                self.grants
                    .revoke(&record.grant_id, None, "refresh token reused")
                    .await?;
                return Err(OAuthError::InvalidGrant(
                    "the refresh token was already used; the grant is revoked",
                ));
            }
            if record.expires <= now {
                return Err(OAuthError::InvalidGrant(
                    "the refresh token is invalid or expired",
                ));
            }
            let scope = match form.get("scope") {
                Some(s) => {
                    let asked = super::parse_scope(Some(s), grant.scope)?;
                    if !grant.scope.allows(asked) {
                        return Err(OAuthError::InvalidScope(format!(
                            "the grant allows at most {}",
                            scope_string(grant.scope)
                        )));
                    }
                    asked
                }
                None => grant.scope,
            };
            self.check_resource(form)?;
            record.rotated_at = Some(now);
            grant.last_issued_at = now;
            grant.expires_at = now + self.config.refresh_ttl_secs + self.config.access_ttl_secs;
            let (refresh_token, next) = self.new_refresh(&grant);
            let (access_token, expires_in) = self.access_token(&grant, scope).await?;
            let writes = vec![
                Write::put(
                    refresh_item(key.clone(), &record, item.version + 1),
                    Cond::Version(item.version),
                ),
                Write::put(
                    refresh_item(refresh_key(&refresh_token), &next, 1),
                    Cond::NotExists,
                ),
                Write::put(
                    grant_item(&grant, grant_version + 1),
                    Cond::Version(grant_version),
                ),
            ];
            match self.store.transact(writes).await {
                Ok(()) => {
                    return Ok(TokenResponse {
                        access_token,
                        expires_in,
                        refresh_token,
                        scope,
                    });
                }
                Err(StoreError::ConditionFailed { .. } | StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(OAuthError::Internal("refresh kept conflicting"))
    }

    /// RFC 7009: revokes the grant of a refresh or access token the client holds. Unknown,
    /// expired and foreign tokens are not errors (the answer is the same).
    pub async fn revoke_token(
        &self,
        form: &HashMap<String, String>,
        basic: Option<(String, String)>,
    ) -> Result<(), OAuthError> {
        let client = self.authenticate_client(form, basic).await?;
        let token = form
            .get("token")
            .ok_or_else(|| OAuthError::InvalidRequest("token is missing".into()))?;
        let grant_id = if Verifier::looks_like_jwt(token) {
            self.verifier
                .claims(token)
                .ok()
                .filter(|c| c.client_id == client.client_id)
                .map(|c| c.gid)
        } else {
            match self.store.get(&refresh_key(token), "RT").await? {
                Some(item) => serde_json::from_slice::<RefreshRecord>(&item.body)
                    .ok()
                    .filter(|r| r.client_id == client.client_id)
                    .map(|r| r.grant_id),
                None => None,
            }
        };
        if let Some(id) = grant_id {
            self.grants
                .revoke(&id, None, "token revoked by the client")
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXK",
            challenge
        ));
        assert!(!pkce_matches("short", challenge));
    }

    #[test]
    fn basic_credentials_are_form_decoded() {
        let header = format!("Basic {}", STANDARD.encode("my%3Aid:s%2Bcret"));
        let (id, secret) = basic_credentials(&header).unwrap().unwrap();
        assert_eq!((id.as_str(), secret.as_str()), ("my:id", "s+cret"));
        assert!(basic_credentials("Bearer x").is_none());
        assert!(basic_credentials("Basic !!!").unwrap().is_err());
    }

    #[test]
    fn duplicate_form_fields_are_refused() {
        assert!(form_fields(url::form_urlencoded::parse(b"code=a&code=b")).is_err());
        assert_eq!(
            form_fields(url::form_urlencoded::parse(b"code=a&x=b"))
                .unwrap()
                .len(),
            2
        );
    }
}
