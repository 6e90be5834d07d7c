//! Signed session ids for the opt-in `--sessions` mode: self-contained, bound to the user, and
//! checked without any lookup (serverless instances share nothing). A forged, expired or
//! foreign id is refused and the HTTP layer answers 404, as the protocol asks.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::domain::UserId;

type HmacSha256 = Hmac<Sha256>;

/// How long a session id stays valid.
pub const SESSION_TTL_SECS: i64 = 24 * 3600;

#[derive(Clone)]
pub struct SessionSigner {
    key: [u8; 32],
}

impl std::fmt::Debug for SessionSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSigner(..)")
    }
}

impl SessionSigner {
    pub fn new(key: [u8; 32]) -> Self {
        SessionSigner { key }
    }

    fn mac(&self, payload: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("any key length");
        mac.update(payload.as_bytes());
        mac
    }

    /// A new session id for the user: `{user}.{expires}.{nonce}.{mac}`, base64url-wrapped.
    pub fn issue(&self, user: &UserId, now: i64) -> String {
        let nonce: u64 = rand::random();
        let payload = format!("{user}.{}.{nonce:016x}", now + SESSION_TTL_SECS);
        let tag = URL_SAFE_NO_PAD.encode(self.mac(&payload).finalize().into_bytes());
        URL_SAFE_NO_PAD.encode(format!("{payload}.{tag}"))
    }

    /// True when the id was issued by us, for this user, and has not expired.
    pub fn check(&self, id: &str, user: &UserId, now: i64) -> bool {
        let Some(decoded) = URL_SAFE_NO_PAD
            .decode(id)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
        else {
            return false;
        };
        let Some((payload, tag)) = decoded.rsplit_once('.') else {
            return false;
        };
        let Ok(tag) = URL_SAFE_NO_PAD.decode(tag) else {
            return false;
        };
        if self.mac(payload).verify_slice(&tag).is_err() {
            return false;
        }
        let mut parts = payload.split('.');
        let (Some(owner), Some(expires)) = (parts.next(), parts.next()) else {
            return false;
        };
        owner == user.as_str() && expires.parse::<i64>().is_ok_and(|e| e > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_bind_user_and_expiry_and_resist_forgery() {
        let signer = SessionSigner::new([7; 32]);
        let alice = UserId::parse("alice").unwrap();
        let bob = UserId::parse("bob").unwrap();
        let id = signer.issue(&alice, 1000);
        assert!(signer.check(&id, &alice, 1001));
        assert!(!signer.check(&id, &bob, 1001));
        assert!(!signer.check(&id, &alice, 1000 + SESSION_TTL_SECS + 1));
        assert!(!SessionSigner::new([8; 32]).check(&id, &alice, 1001));
        assert!(!signer.check("garbage", &alice, 1001));
        let mut forged = id.clone().into_bytes();
        forged[3] ^= 1;
        assert!(!signer.check(&String::from_utf8_lossy(&forged), &alice, 1001));
    }
}
