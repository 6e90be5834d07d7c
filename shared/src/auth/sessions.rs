//! Signed session ids: self-contained, bound to the user, and checked without any lookup
//! (serverless instances share nothing). A forged, expired or foreign id is refused and the
//! HTTP layer answers 404, as the protocol asks. An id also seals what the client declared at
//! `initialize` that later requests of the eras with sessions do not repeat: whether it can
//! answer `elicitation/create` ([`Session::elicits`]).

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

    /// A new session id for the user: `{user}.{expires}.{nonce}.{flags}.{mac}`, base64url-wrapped
    /// (`flags`: `e` when the client can elicit, else `-`).
    pub fn issue(&self, user: &UserId, session: Session, now: i64) -> String {
        let nonce: u64 = rand::random();
        let flags = if session.elicits { "e" } else { "-" };
        let payload = format!("{user}.{}.{nonce:016x}.{flags}", now + SESSION_TTL_SECS);
        let tag = URL_SAFE_NO_PAD.encode(self.mac(&payload).finalize().into_bytes());
        URL_SAFE_NO_PAD.encode(format!("{payload}.{tag}"))
    }

    /// The session, when the id was issued by us, for this user, and has not expired.
    pub fn check(&self, id: &str, user: &UserId, now: i64) -> Option<Session> {
        let decoded = URL_SAFE_NO_PAD
            .decode(id)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())?;
        let (payload, tag) = decoded.rsplit_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.mac(payload).verify_slice(&tag).ok()?;
        let mut parts = payload.split('.');
        let (owner, expires, _nonce, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        (owner == user.as_str() && expires.parse::<i64>().is_ok_and(|e| e > now)).then(|| Session {
            elicits: flags.contains('e'),
        })
    }
}

/// What a session id seals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Session {
    /// The client declared the `elicitation` capability (2025-06-18 or later) at `initialize`.
    pub elicits: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_bind_user_and_expiry_and_resist_forgery() {
        let signer = SessionSigner::new([7; 32]);
        let alice = UserId::parse("alice").unwrap();
        let bob = UserId::parse("bob").unwrap();
        let plain = Session::default();
        let id = signer.issue(&alice, plain, 1000);
        assert_eq!(signer.check(&id, &alice, 1001), Some(plain));
        assert_eq!(signer.check(&id, &bob, 1001), None);
        assert_eq!(signer.check(&id, &alice, 1000 + SESSION_TTL_SECS + 1), None);
        assert_eq!(SessionSigner::new([8; 32]).check(&id, &alice, 1001), None);
        assert_eq!(signer.check("garbage", &alice, 1001), None);
        let mut forged = id.clone().into_bytes();
        forged[3] ^= 1;
        assert_eq!(
            signer.check(&String::from_utf8_lossy(&forged), &alice, 1001),
            None
        );
    }

    /// The capability is sealed: it reads back as issued, and flipping it breaks the id.
    #[test]
    fn ids_seal_whether_the_client_elicits() {
        let signer = SessionSigner::new([7; 32]);
        let alice = UserId::parse("alice").unwrap();
        let asks = Session { elicits: true };
        let id = signer.issue(&alice, asks, 1000);
        assert_eq!(signer.check(&id, &alice, 1001), Some(asks));
        let decoded = String::from_utf8(URL_SAFE_NO_PAD.decode(&id).unwrap()).unwrap();
        let flipped = URL_SAFE_NO_PAD.encode(decoded.replace(".e.", ".-."));
        assert_eq!(signer.check(&flipped, &alice, 1001), None);
        let plain = signer.issue(&alice, Session::default(), 1000);
        assert_eq!(
            signer.check(&plain, &alice, 1001),
            Some(Session { elicits: false })
        );
    }
}
