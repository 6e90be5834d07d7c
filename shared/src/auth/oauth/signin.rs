//! The sign-in form of page links (`/oauth/signin`): how a person who follows a page link
//! (`{public_url}/pages/{page_id}`, the `url` a ChatGPT citation opens, days later) signs in
//! with the consent page's password. Signing in creates a browser session in the store
//! (`crate::auth::web_sessions`), which the pages check and sign-out ends.
//!
//! The form carries a CSRF token bound to a random cookie and to the page it returns to, like
//! the consent form's.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::Mac;

use super::OAuth;

/// How long a sign-in form may be sent after it was shown.
const SIGNIN_CSRF_TTL_SECS: i64 = 30 * 60;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

impl OAuth {
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
    use crate::auth::oauth::jwt::LocalSigner;
    use crate::ports::SystemClock;

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
