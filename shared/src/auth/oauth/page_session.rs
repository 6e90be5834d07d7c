//! Page sessions: how a person who follows a page link (`{public_url}/pages/{page_id}`, the
//! `url` a ChatGPT citation opens, days later) gets to see the page in a browser.
//!
//! The owner signs in once on `/oauth/signin` (the same password as the consent page); the
//! authorization server then sets a cookie holding a short JWT, signed with the access-token key
//! but of its own `typ` and audience, so neither can stand in for the other. Whoever serves
//! `/pages/{id}` (the mcp front on AWS, `nib serve` locally) verifies it offline with the public
//! key, as it verifies access tokens: no KMS call, no store read. The session is read-only (it
//! runs `get_page` with the read scope) and lasts [`PAGE_SESSION_TTL_SECS`]; signing out is
//! deleting the cookie.
//!
//! The sign-in form carries a CSRF token bound to a random cookie and to the page it returns
//! to, like the consent form's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::Mac;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use serde::{Deserialize, Serialize};

use super::OAuth;
use super::jwt::{ALGORITHM, SignError};
use crate::domain::UserId;

/// The JWT `typ` of a page session (never accepted as an access token, nor the reverse).
pub const PAGE_SESSION_TYP: &str = "nib-page-session+jwt";
/// How long a page session lasts.
pub const PAGE_SESSION_TTL_SECS: i64 = 8 * 3600;
/// The cookie that holds it (sent only to `/pages/`).
pub const PAGE_SESSION_COOKIE: &str = "nib_pages";
/// How long a sign-in form may be sent after it was shown.
const SIGNIN_CSRF_TTL_SECS: i64 = 30 * 60;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

#[derive(Debug, Serialize, Deserialize)]
struct SessionClaims {
    iss: String,
    sub: String,
    aud: String,
    iat: i64,
    exp: i64,
}

impl OAuth {
    /// The audience of page sessions: the pages' URL prefix.
    fn pages_audience(&self) -> String {
        format!("{}/pages", self.config.issuer.trim_end_matches('/'))
    }

    /// A page session for `user` (one signature: a `kms:Sign` on AWS).
    pub async fn sign_page_session(&self, user: &UserId) -> Result<String, SignError> {
        let now = self.clock.unix();
        let claims = SessionClaims {
            iss: self.config.issuer.clone(),
            sub: user.as_str().to_owned(),
            aud: self.pages_audience(),
            iat: now,
            exp: now + PAGE_SESSION_TTL_SECS,
        };
        let header = serde_json::json!({
            "alg": ALGORITHM,
            "typ": PAGE_SESSION_TYP,
            "kid": self.signer.kid(),
        });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).expect("claims serialize"))
        );
        let signature = self.signer.sign(input.as_bytes()).await?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }

    /// The user of a valid, unexpired page session; `None` for anything else (an access token
    /// included).
    pub fn verify_page_session(&self, token: &str) -> Option<UserId> {
        let header = jsonwebtoken::decode_header(token).ok()?;
        if header.alg != Algorithm::ES256 || header.typ.as_deref() != Some(PAGE_SESSION_TYP) {
            return None;
        }
        let key =
            DecodingKey::from_ec_der(self.signer.public_key().to_encoded_point(false).as_bytes());
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[self.pages_audience()]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = 0;
        let c = jsonwebtoken::decode::<SessionClaims>(token, &key, &validation)
            .ok()?
            .claims;
        let now = self.clock.unix();
        if c.exp <= now || c.iat > now + 60 || c.exp - c.iat > PAGE_SESSION_TTL_SECS {
            return None;
        }
        UserId::parse(&c.sub).ok()
    }

    fn signin_mac(&self, cookie: &str, next: &str, expires: i64) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.csrf_key[..]).expect("any key length");
        mac.update(b"signin\x1f");
        mac.update(cookie.as_bytes());
        mac.update(b"\x1f");
        mac.update(next.as_bytes());
        mac.update(&expires.to_be_bytes());
        mac
    }

    /// The sign-in form's token for this CSRF cookie and this return path.
    pub fn signin_csrf_token(&self, cookie: &str, next: &str) -> String {
        let expires = self.clock.unix() + SIGNIN_CSRF_TTL_SECS;
        let tag = self
            .signin_mac(cookie, next, expires)
            .finalize()
            .into_bytes();
        format!("{expires}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// True when `token` was made by [`Self::signin_csrf_token`] for this cookie and path and
    /// has not expired.
    pub fn check_signin_csrf(&self, cookie: Option<&str>, token: Option<&str>, next: &str) -> bool {
        let (Some(cookie), Some(token)) = (cookie, token) else {
            return false;
        };
        let Some((expires, tag)) = token.split_once('.') else {
            return false;
        };
        let (Ok(expires), Ok(tag)) = (expires.parse::<i64>(), URL_SAFE_NO_PAD.decode(tag)) else {
            return false;
        };
        cookie.len() >= 16
            && expires > self.clock.unix()
            && self
                .signin_mac(cookie, next, expires)
                .verify_slice(&tag)
                .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::adapters::embedded::EmbeddedStore;
    use crate::auth::oauth::OAuthConfig;
    use crate::auth::oauth::jwt::{AccessClaims, LocalSigner};
    use crate::ports::{Clock, SystemClock};

    fn oauth(dir: &std::path::Path, seed: u8) -> OAuth {
        let store = Arc::new(EmbeddedStore::open(&dir.join(format!("s{seed}.redb"))).unwrap());
        OAuth::new(
            OAuthConfig::new("http://127.0.0.1:1"),
            store,
            Arc::new(SystemClock),
            Arc::new(LocalSigner::from_seed(&[seed; 32])),
            zeroize::Zeroizing::new([seed; 32]),
        )
    }

    #[tokio::test]
    async fn a_page_session_verifies_only_with_its_key_and_is_no_access_token() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (oauth(dir.path(), 1), oauth(dir.path(), 2));
        let user = UserId::parse("default").unwrap();
        let session = a.sign_page_session(&user).await.unwrap();
        assert_eq!(a.verify_page_session(&session), Some(user.clone()));
        assert_eq!(b.verify_page_session(&session), None, "another key");
        assert!(a.verifier.claims(&session).is_err(), "not an access token");
        let now = SystemClock.unix();
        let access = a
            .sign_access_token(&AccessClaims {
                iss: a.config.issuer.clone(),
                sub: "default".into(),
                aud: a.config.resource.clone(),
                exp: now + 600,
                iat: now,
                jti: "j".into(),
                scope: "read".into(),
                client_id: "c".into(),
                gid: "g".into(),
            })
            .await
            .unwrap();
        assert_eq!(a.verify_page_session(&access), None, "an access token");
        let mut tampered = session.clone();
        tampered.push('A');
        assert_eq!(a.verify_page_session(&tampered), None);
        assert!(!a.signer.kid().is_empty());
    }

    #[test]
    fn the_signin_token_binds_cookie_and_return_path() {
        let dir = tempfile::tempdir().unwrap();
        let a = oauth(dir.path(), 1);
        let cookie = "c".repeat(24);
        let t = a.signin_csrf_token(&cookie, "/pages/x");
        assert!(a.check_signin_csrf(Some(&cookie), Some(&t), "/pages/x"));
        assert!(!a.check_signin_csrf(Some(&cookie), Some(&t), "/pages/y"));
        assert!(!a.check_signin_csrf(Some(&"d".repeat(24)), Some(&t), "/pages/x"));
        assert!(!a.check_signin_csrf(None, Some(&t), "/pages/x"));
    }
}
