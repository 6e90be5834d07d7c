//! Access tokens: JWTs in the RFC 9068 shape (`typ: at+jwt`), signed with ECDSA P-256 (`ES256`).
//!
//! Signing is behind [`TokenSigner`], because on AWS the private key never leaves KMS
//! (`adapters::aws::signing::KmsSigner`, one `kms:Sign` per token). Locally [`LocalSigner`]
//! holds a P-256 key derived from the server's OAuth secret (never stored, never configured, the
//! same after a restart). [`VerifyOnly`] is the public key alone: the mcp front verifies with
//! it and cannot sign. The `kid` is a hash of the public key, whichever signer holds it.
//!
//! Verification needs only the public key, plus one read of the grant to honour revocation. It
//! accepts exactly `ES256` with `typ: at+jwt`: `alg: none`, HMAC algorithms keyed with the public
//! key, `EdDSA` and every other algorithm are refused before any signature check, and expiry is
//! judged on our own [`Clock`].

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use p256::PublicKey;
use p256::ecdsa::{Signature, SigningKey};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::pkcs8::DecodePublicKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::grants::Grants;
use super::{MAX_ACCESS_TTL_SECS, OAuthConfig};
use crate::auth::tokens::TokenError;
use crate::auth::{Principal, Scope};
use crate::domain::UserId;
use crate::ports::Clock;

/// The JWT `typ` of access tokens (RFC 9068).
pub const ACCESS_TOKEN_TYP: &str = "at+jwt";
/// The one JWS algorithm we sign and accept.
pub const ALGORITHM: &str = "ES256";
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

/// Why a token could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The signing service failed or could not be reached (KMS).
    #[error("the signing service failed")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The signing service answered with something that is not what was asked for.
    #[error("the signing service returned a malformed {0}")]
    Malformed(&'static str),
    /// The signature does not verify with the public key we publish (a configured public key
    /// of another key): issuing it would hand out tokens that nobody accepts.
    #[error("the signature does not verify with the configured public key")]
    KeyMismatch,
    /// A verify-only key (the mcp front's) was asked to sign.
    #[error("this process holds only the public key; it cannot sign")]
    NotASigner,
}

/// Signs access tokens with a P-256 key (ES256).
#[async_trait]
pub trait TokenSigner: Send + Sync {
    /// The JWT `kid`.
    fn kid(&self) -> &str;
    /// The P-256 public key (the verifier and the JWKS are built from it).
    fn public_key(&self) -> &PublicKey;
    /// An ES256 signature (raw r||s, 64 bytes, low S) over the JWT signing input.
    async fn sign(&self, signing_input: &[u8]) -> Result<[u8; 64], SignError>;
}

/// A public key that is not P-256 in PEM (SubjectPublicKeyInfo).
#[derive(Debug, thiserror::Error)]
#[error("not a P-256 public key in PEM (SubjectPublicKeyInfo): {0}")]
pub struct PublicKeyError(String);

/// A P-256 public key from its PEM (`-----BEGIN PUBLIC KEY-----`, what KMS `GetPublicKey` and
/// Terraform's `aws_kms_public_key` give). Any other curve or algorithm is refused.
pub fn public_key_from_pem(pem: &str) -> Result<PublicKey, PublicKeyError> {
    PublicKey::from_public_key_pem(pem.trim()).map_err(|e| PublicKeyError(e.to_string()))
}

/// A P-256 public key from its DER SubjectPublicKeyInfo (KMS `GetPublicKey`).
pub fn public_key_from_der(der: &[u8]) -> Result<PublicKey, PublicKeyError> {
    PublicKey::from_public_key_der(der).map_err(|e| PublicKeyError(e.to_string()))
}

/// The `kid` of a public key: base64url of the first 12 bytes of the SHA-256 of its SEC1
/// uncompressed encoding. A new key is a new `kid`.
pub fn kid_of(public: &PublicKey) -> String {
    let point = public.to_encoded_point(false);
    URL_SAFE_NO_PAD.encode(&Sha256::digest(point.as_bytes())[..12])
}

/// A raw ES256 signature (r||s) from a DER ECDSA signature (what KMS returns), with S made low:
/// both forms verify, but one token then has one signature.
pub fn es256_from_der(der: &[u8]) -> Result<[u8; 64], SignError> {
    let signature = Signature::from_der(der).map_err(|_| SignError::Malformed("signature"))?;
    Ok(low_s(signature))
}

fn low_s(signature: Signature) -> [u8; 64] {
    signature
        .normalize_s()
        .unwrap_or(signature)
        .to_bytes()
        .into()
}

/// Checks that `signature` over `message` verifies with `public`.
#[cfg(any(feature = "aws", test))]
pub(crate) fn verifies(public: &PublicKey, message: &[u8], signature: &[u8; 64]) -> bool {
    use p256::ecdsa::signature::Verifier as _;
    Signature::from_slice(signature).is_ok_and(|s| {
        p256::ecdsa::VerifyingKey::from(public)
            .verify(message, &s)
            .is_ok()
    })
}

/// Signs `claims` as an access token: `base64url(header).base64url(claims)`, then the signer's
/// signature over that.
pub async fn sign_token(
    signer: &dyn TokenSigner,
    claims: &AccessClaims,
) -> Result<String, SignError> {
    let header = serde_json::json!({
        "alg": ALGORITHM,
        "typ": ACCESS_TOKEN_TYP,
        "kid": signer.kid(),
    });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims serialize"))
    );
    let signature = signer.sign(input.as_bytes()).await?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// The public key as a JWK Set (RFC 7517, 7518 §6.2).
pub fn jwks(signer: &dyn TokenSigner) -> serde_json::Value {
    let point = signer.public_key().to_encoded_point(false);
    let coordinate = |c: Option<&p256::FieldBytes>| {
        URL_SAFE_NO_PAD.encode(c.expect("an uncompressed point has both coordinates"))
    };
    serde_json::json!({
        "keys": [{
            "kty": "EC",
            "crv": "P-256",
            "x": coordinate(point.x()),
            "y": coordinate(point.y()),
            "kid": signer.kid(),
            "alg": ALGORITHM,
            "use": "sig",
        }]
    })
}

/// A P-256 key held in memory, derived from a 32-byte seed: the local server's signer.
pub struct LocalSigner {
    key: SigningKey,
    public: PublicKey,
    kid: String,
}

impl LocalSigner {
    /// The key whose secret scalar is `seed` (or, in the rare case that `seed` is not a valid
    /// scalar, the first valid one of its repeated SHA-256): the same seed is the same key.
    pub fn from_seed(seed: &[u8; 32]) -> LocalSigner {
        let mut bytes = Zeroizing::new(*seed);
        let key = loop {
            if let Ok(key) = SigningKey::from_slice(&bytes[..]) {
                break key;
            }
            *bytes = Sha256::digest(&bytes[..]).into();
        };
        let public = PublicKey::from(key.verifying_key());
        LocalSigner {
            kid: kid_of(&public),
            key,
            public,
        }
    }

    /// The key derived from the server's 32-byte OAuth secret.
    pub fn from_oauth_secret(secret: &[u8; 32]) -> LocalSigner {
        LocalSigner::from_seed(&super::derive(secret, "jwt-es256/v1"))
    }
}

#[async_trait]
impl TokenSigner for LocalSigner {
    fn kid(&self) -> &str {
        &self.kid
    }

    fn public_key(&self) -> &PublicKey {
        &self.public
    }

    async fn sign(&self, signing_input: &[u8]) -> Result<[u8; 64], SignError> {
        use p256::ecdsa::signature::Signer as _;
        Ok(low_s(self.key.sign(signing_input)))
    }
}

/// A public key alone: verifies, publishes, and refuses to sign (the mcp front).
#[derive(Debug, Clone)]
pub struct VerifyOnly {
    public: PublicKey,
    kid: String,
}

impl VerifyOnly {
    pub fn new(public: PublicKey) -> VerifyOnly {
        VerifyOnly {
            kid: kid_of(&public),
            public,
        }
    }

    /// From the PEM of the signing key's public half (`NIB_SIGNING_PUBLIC_KEY`).
    pub fn from_pem(pem: &str) -> Result<VerifyOnly, PublicKeyError> {
        Ok(VerifyOnly::new(public_key_from_pem(pem)?))
    }
}

#[async_trait]
impl TokenSigner for VerifyOnly {
    fn kid(&self) -> &str {
        &self.kid
    }

    fn public_key(&self) -> &PublicKey {
        &self.public
    }

    async fn sign(&self, _signing_input: &[u8]) -> Result<[u8; 64], SignError> {
        Err(SignError::NotASigner)
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
    /// A verifier of tokens signed by `public`'s private half, for the issuer and resource of
    /// `config`.
    pub fn new(
        public: &PublicKey,
        config: &OAuthConfig,
        grants: Grants,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[&config.issuer]);
        validation.set_audience(&[&config.resource]);
        validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
        // Time is judged below on our own clock (tests pin it), not the library's.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = 0;
        Verifier {
            // The uncompressed SEC1 point, which is what the library's ES256 key expects.
            key: DecodingKey::from_ec_der(public.to_encoded_point(false).as_bytes()),
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
        if header.alg != Algorithm::ES256 || header.typ.as_deref() != Some(ACCESS_TOKEN_TYP) {
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
        let Some(client) = self.grants.active_client(&c.gid, &user).await? else {
            return Err(TokenError::Invalid);
        };
        Ok(Principal {
            user,
            scope,
            credential_id: format!("grant_{}", c.gid),
            client: Some(client),
        })
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header};
    use p256::pkcs8::{EncodePublicKey, LineEnding};

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

    /// A verifier over a throwaway store, for `public`.
    fn verifier_for(dir: &tempfile::TempDir, public: &PublicKey) -> Verifier {
        let store = Arc::new(EmbeddedStore::open(&dir.path().join("s.redb")).unwrap());
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let config = OAuthConfig::new("http://127.0.0.1:1");
        Verifier::new(public, &config, Grants::new(store, clock.clone()), clock)
    }

    fn parts(token: &str) -> Vec<String> {
        token.split('.').map(str::to_owned).collect()
    }

    fn b64(value: &str) -> String {
        URL_SAFE_NO_PAD.encode(value)
    }

    #[tokio::test]
    async fn a_local_token_verifies_and_its_header_is_es256() {
        let dir = tempfile::tempdir().unwrap();
        let signer = LocalSigner::from_seed(&[7; 32]);
        let verifier = verifier_for(&dir, signer.public_key());
        let now = SystemClock.unix();

        let good = sign_token(&signer, &claims(now)).await.unwrap();
        assert!(Verifier::looks_like_jwt(&good));
        assert_eq!(verifier.claims(&good).unwrap(), claims(now));
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts(&good)[0]).unwrap()).unwrap();
        assert_eq!(
            header,
            serde_json::json!({ "alg": "ES256", "typ": "at+jwt", "kid": signer.kid() })
        );
        // The signature is raw r||s with a low S.
        let signature = URL_SAFE_NO_PAD.decode(&parts(&good)[2]).unwrap();
        let signature = Signature::from_slice(&signature).unwrap();
        assert!(signature.normalize_s().is_none());

        // A verifier built from the PEM alone (what the mcp front has) accepts it too.
        let pem = signer
            .public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        let front = VerifyOnly::from_pem(&pem).unwrap();
        assert_eq!(front.kid(), signer.kid());
        let other_dir = tempfile::tempdir().unwrap();
        let front_verifier = verifier_for(&other_dir, front.public_key());
        assert_eq!(front_verifier.claims(&good).unwrap(), claims(now));
        assert!(matches!(front.sign(b"x").await, Err(SignError::NotASigner)));
    }

    #[test]
    fn a_local_key_is_the_same_after_a_restart() {
        let a = LocalSigner::from_oauth_secret(&[1; 32]);
        let b = LocalSigner::from_oauth_secret(&[1; 32]);
        let c = LocalSigner::from_oauth_secret(&[2; 32]);
        assert_eq!(a.public_key(), b.public_key());
        assert_eq!(a.kid(), b.kid());
        assert_ne!(a.public_key(), c.public_key());
        assert_ne!(a.kid(), c.kid());
        // The seed is not used raw: the key is derived for this one purpose.
        assert_ne!(
            a.public_key(),
            LocalSigner::from_seed(&[1; 32]).public_key()
        );
    }

    #[test]
    fn a_seed_above_the_group_order_still_makes_a_key() {
        let key = LocalSigner::from_seed(&[0xff; 32]);
        assert_eq!(
            key.public_key(),
            LocalSigner::from_seed(&[0xff; 32]).public_key()
        );
    }

    #[tokio::test]
    async fn forged_and_foreign_tokens_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let signer = LocalSigner::from_seed(&[7; 32]);
        let verifier = verifier_for(&dir, signer.public_key());
        let now = SystemClock.unix();
        let sign = |c: AccessClaims| {
            let signer = &signer;
            async move { sign_token(signer, &c).await.unwrap() }
        };
        let good = sign(claims(now)).await;

        // Another key.
        let other = sign_token(&LocalSigner::from_seed(&[8; 32]), &claims(now))
            .await
            .unwrap();
        assert!(verifier.claims(&other).is_err());
        // Another audience or issuer.
        let mut c = claims(now);
        c.aud = "http://127.0.0.1:2/mcp".into();
        assert!(verifier.claims(&sign(c).await).is_err());
        let mut c = claims(now);
        c.iss = "http://evil".into();
        assert!(verifier.claims(&sign(c).await).is_err());
        // Expired, or living longer than an hour.
        let mut c = claims(now);
        c.exp = now;
        assert!(verifier.claims(&sign(c).await).is_err());
        let mut c = claims(now);
        c.exp = now + MAX_ACCESS_TTL_SECS + 10;
        assert!(verifier.claims(&sign(c).await).is_err());

        // Tampered payload, same signature.
        let p = parts(&good);
        let mut payload: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&p[1]).unwrap()).unwrap();
        payload["scope"] = "admin".into();
        let tampered = format!("{}.{}.{}", p[0], b64(&payload.to_string()), p[2]);
        assert!(verifier.claims(&tampered).is_err());

        // A genuine signature under another header: alg none, EdDSA, ES384, no typ, typ JWT.
        for header in [
            r#"{"alg":"none","typ":"at+jwt"}"#,
            r#"{"alg":"EdDSA","typ":"at+jwt"}"#,
            r#"{"alg":"ES384","typ":"at+jwt"}"#,
            r#"{"alg":"ES256"}"#,
            r#"{"alg":"ES256","typ":"JWT"}"#,
        ] {
            let h = b64(header);
            assert!(
                verifier.claims(&format!("{h}.{}.", p[1])).is_err(),
                "{header}"
            );
            assert!(
                verifier.claims(&format!("{h}.{}.{}", p[1], p[2])).is_err(),
                "{header}"
            );
            // Even re-signed by our own key: the header decides before the signature.
            let input = format!("{h}.{}", p[1]);
            let signature = signer.sign(input.as_bytes()).await.unwrap();
            let resigned = format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature));
            assert!(verifier.claims(&resigned).is_err(), "{header}");
        }

        // HS256 keyed with the public key (the classic algorithm confusion), in each of the
        // forms an attacker might guess: the SEC1 point, its DER and its PEM.
        let public = signer.public_key();
        let point = public.to_encoded_point(false);
        let der = public.to_public_key_der().unwrap();
        let pem = public.to_public_key_pem(LineEnding::LF).unwrap();
        let mut header = Header::new(Algorithm::HS256);
        header.typ = Some(ACCESS_TOKEN_TYP.into());
        for key in [point.as_bytes(), der.as_bytes(), pem.as_bytes()] {
            let hs = jsonwebtoken::encode(&header, &claims(now), &EncodingKey::from_secret(key))
                .unwrap();
            assert!(verifier.claims(&hs).is_err());
        }
    }

    #[tokio::test]
    async fn a_high_s_signature_is_made_low() {
        let signer = LocalSigner::from_seed(&[9; 32]);
        let message = b"header.payload";
        let low = Signature::from_slice(&signer.sign(message).await.unwrap()).unwrap();
        assert!(low.normalize_s().is_none(), "the local signer signs low S");
        // The same signature with S replaced by n - S: valid too, and what KMS may return.
        let high = Signature::from_scalars(low.r(), -*low.s()).unwrap();
        assert!(high.normalize_s().is_some(), "this one is high");
        assert!(verifies(
            signer.public_key(),
            message,
            &high.to_bytes().into()
        ));

        let raw = es256_from_der(high.to_der().as_bytes()).unwrap();
        assert_eq!(raw, <[u8; 64]>::from(low.to_bytes()));
        assert!(verifies(signer.public_key(), message, &raw));
        // A low one passes through unchanged.
        assert_eq!(
            es256_from_der(low.to_der().as_bytes()).unwrap(),
            <[u8; 64]>::from(low.to_bytes())
        );
        assert!(matches!(
            es256_from_der(b"\x30\x02\x00\x00"),
            Err(SignError::Malformed(_))
        ));
    }

    #[test]
    fn pem_must_be_a_p256_public_key() {
        let pem = LocalSigner::from_seed(&[3; 32])
            .public_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap();
        assert!(public_key_from_pem(&format!("\n{pem}\n")).is_ok());
        assert!(public_key_from_pem("not a key").is_err());
        assert!(public_key_from_pem(&pem.replace("PUBLIC KEY", "PRIVATE KEY")).is_err());
        // An Ed25519 key (SPKI) is not P-256.
        let ed25519 = "-----BEGIN PUBLIC KEY-----\n\
            MCowBQYDK2VwAyEAGb9ECWmEzf6FQbrBZ9w7lshQhqowtrbLDFw4rXAxZuE=\n\
            -----END PUBLIC KEY-----\n";
        assert!(public_key_from_pem(ed25519).is_err());
    }

    #[test]
    fn the_jwks_is_the_public_point() {
        let signer = LocalSigner::from_seed(&[4; 32]);
        let jwks = jwks(&signer);
        let key = &jwks["keys"][0];
        assert_eq!(key["kty"], "EC");
        assert_eq!(key["crv"], "P-256");
        assert_eq!(key["alg"], "ES256");
        assert_eq!(key["use"], "sig");
        assert_eq!(key["kid"], signer.kid());
        let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(key[name].as_str().unwrap()).unwrap();
        let mut sec1 = vec![4u8];
        sec1.extend(coordinate("x"));
        sec1.extend(coordinate("y"));
        assert_eq!(
            &PublicKey::from_sec1_bytes(&sec1).unwrap(),
            signer.public_key()
        );
    }
}
