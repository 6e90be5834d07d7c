//! Access tokens: JWTs in the RFC 9068 shape (`typ: at+jwt`), signed with Ed25519 (`EdDSA`).
//!
//! The signing key is derived from the server's OAuth secret (never stored, never configured);
//! the `kid` is a hash of the public key, so a new secret is a new `kid`. Verification needs only
//! the public key, plus one read of the grant to honour revocation. It accepts exactly `EdDSA`:
//! `alg: none`, HMAC algorithms keyed with the public key, and every other algorithm are
//! refused before any signature check, and expiry is judged on our own [`Clock`].

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::grants::Grants;
use super::{MAX_ACCESS_TTL_SECS, OAuthConfig};
use crate::auth::tokens::TokenError;
use crate::auth::{Principal, Scope};
use crate::domain::UserId;
use crate::ports::Clock;

/// The JWT `typ` of access tokens (RFC 9068).
pub const ACCESS_TOKEN_TYP: &str = "at+jwt";
/// How far in the future an `iat` may be (clock skew between functions).
const MAX_SKEW_SECS: i64 = 60;

/// The claims of an access token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub exp: i64,
    pub iat: i64,
    pub jti: String,
    /// Space-separated scopes (`read write`).
    pub scope: String,
    pub client_id: String,
    /// The grant the token was issued under (for revocation and per-grant rate limits).
    pub gid: String,
}

/// Signs access tokens.
pub struct Signer {
    key: EncodingKey,
    public: [u8; 32],
    kid: String,
}

impl Signer {
    /// The Ed25519 key whose 32-byte seed is `seed`.
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        let signing = SigningKey::from_bytes(seed);
        let der = signing
            .to_pkcs8_der()
            .expect("an Ed25519 key encodes as PKCS#8");
        let public = signing.verifying_key().to_bytes();
        let kid = URL_SAFE_NO_PAD.encode(&Sha256::digest(public)[..12]);
        Signer {
            key: EncodingKey::from_ed_der(der.as_bytes()),
            public,
            kid,
        }
    }

    pub fn sign(&self, claims: &AccessClaims) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.typ = Some(ACCESS_TOKEN_TYP.into());
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.key).expect("EdDSA signing cannot fail")
    }

    /// The public key as a JWK Set.
    pub fn jwks(&self) -> serde_json::Value {
        serde_json::json!({
            "keys": [{
                "kty": "OKP",
                "crv": "Ed25519",
                "x": URL_SAFE_NO_PAD.encode(self.public),
                "kid": self.kid,
                "alg": "EdDSA",
                "use": "sig",
            }]
        })
    }

    /// A verifier for this key.
    pub fn verifier(
        &self,
        config: &OAuthConfig,
        grants: Grants,
        clock: Arc<dyn Clock>,
    ) -> Verifier {
        Verifier::new(&self.public, config, grants, clock)
    }
}

/// Verifies access tokens: signature, `typ`, `iss`, `aud`, lifetime, then the grant.
pub struct Verifier {
    key: DecodingKey,
    validation: Validation,
    grants: Grants,
    clock: Arc<dyn Clock>,
}

impl Verifier {
    pub fn new(
        public: &[u8; 32],
        config: &OAuthConfig,
        grants: Grants,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.resource]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        // Time is judged below on our own clock (tests pin it), not the library's.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = 0;
        Verifier {
            key: DecodingKey::from_ed_der(public),
            validation,
            grants,
            clock,
        }
    }

    /// True when the token has the shape of a JWT (three base64url parts), so it is ours to
    /// judge rather than an API token's.
    pub fn looks_like_jwt(token: &str) -> bool {
        let parts: Vec<&str> = token.split('.').collect();
        parts.len() == 3
            && parts[..2].iter().all(|p| {
                !p.is_empty()
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
    }

    /// The verified claims, or `Invalid` for anything wrong (before the grant check).
    pub fn claims(&self, token: &str) -> Result<AccessClaims, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Invalid)?;
        if header.alg != Algorithm::EdDSA || header.typ.as_deref() != Some(ACCESS_TOKEN_TYP) {
            return Err(TokenError::Invalid);
        }
        let data = jsonwebtoken::decode::<AccessClaims>(token, &self.key, &self.validation)
            .map_err(|_| TokenError::Invalid)?;
        let c = data.claims;
        let now = self.clock.unix();
        if c.exp <= now || c.iat > now + MAX_SKEW_SECS || c.exp - c.iat > MAX_ACCESS_TTL_SECS {
            return Err(TokenError::Invalid);
        }
        Ok(c)
    }

    /// The caller of a valid access token whose grant is still active.
    pub async fn verify(&self, token: &str) -> Result<Principal, TokenError> {
        let c = self.claims(token)?;
        let user = UserId::parse(&c.sub).map_err(|_| TokenError::Invalid)?;
        let scope = c
            .scope
            .split(' ')
            .filter_map(Scope::parse)
            .max()
            .ok_or(TokenError::Invalid)?;
        if !self.grants.is_active(&c.gid, &user).await? {
            return Err(TokenError::Invalid);
        }
        Ok(Principal {
            user,
            scope,
            credential_id: format!("grant_{}", c.gid),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::embedded::EmbeddedStore;
    use crate::ports::SystemClock;

    fn claims(now: i64) -> AccessClaims {
        AccessClaims {
            iss: "http://127.0.0.1:1".into(),
            sub: "default".into(),
            aud: "http://127.0.0.1:1/mcp".into(),
            exp: now + 600,
            iat: now,
            jti: "j".into(),
            scope: "read".into(),
            client_id: "c".into(),
            gid: "g".into(),
        }
    }

    #[test]
    fn forged_and_foreign_tokens_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let config = OAuthConfig::new("http://127.0.0.1:1");
        let signer = Signer::from_seed(&[7; 32]);
        let verifier = signer.verifier(&config, Grants::new(store, clock.clone()), clock.clone());
        let now = clock.unix();

        let good = signer.sign(&claims(now));
        assert!(Verifier::looks_like_jwt(&good));
        assert_eq!(verifier.claims(&good).unwrap(), claims(now));

        // Another key.
        let other = Signer::from_seed(&[8; 32]).sign(&claims(now));
        assert!(verifier.claims(&other).is_err());
        // Another audience or issuer.
        let mut c = claims(now);
        c.aud = "http://127.0.0.1:2/mcp".into();
        assert!(verifier.claims(&signer.sign(&c)).is_err());
        let mut c = claims(now);
        c.iss = "http://evil".into();
        assert!(verifier.claims(&signer.sign(&c)).is_err());
        // Expired, or living longer than an hour.
        let mut c = claims(now);
        c.exp = now;
        assert!(verifier.claims(&signer.sign(&c)).is_err());
        let mut c = claims(now);
        c.exp = now + MAX_ACCESS_TTL_SECS + 10;
        assert!(verifier.claims(&signer.sign(&c)).is_err());
        // Tampered payload, same signature.
        let parts: Vec<&str> = good.split('.').collect();
        let mut payload: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        payload["scope"] = "admin".into();
        let tampered = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(payload.to_string()),
            parts[2]
        );
        assert!(verifier.claims(&tampered).is_err());
        // alg none.
        let none_header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"at+jwt"}"#);
        assert!(
            verifier
                .claims(&format!("{none_header}.{}.", parts[1]))
                .is_err()
        );
        // HS256 keyed with the public key (the classic algorithm confusion).
        let mut header = Header::new(Algorithm::HS256);
        header.typ = Some(ACCESS_TOKEN_TYP.into());
        let public = SigningKey::from_bytes(&[7; 32]).verifying_key().to_bytes();
        let hs = jsonwebtoken::encode(&header, &claims(now), &EncodingKey::from_secret(&public))
            .unwrap();
        assert!(verifier.claims(&hs).is_err());
    }
}
