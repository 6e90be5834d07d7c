//! Browser sessions, kept in the store: who is signed in on a browser that follows a page link
//! (`/pages/{id}`), and whose approval of an OAuth client may vouch for it at
//! `/oauth/authorize`. Built as the general session store of nib's pages for people (the
//! owner's web app builds on it).
//!
//! A session is a random id of 32 bytes (base64url) in the cookie [`SESSION_COOKIE`]; the store
//! keeps only its SHA-256, at `SESSION#{sha256}` / `SESSION`, indexed per user in `gsi1`
//! (`U#{user}#SESSIONS`), so "end every session of a user" is one index query (a password
//! change, `nib user passwd`; account deletion finds them through
//! `account::credential_partitions`). Ending a session deletes its item, so a stolen or
//! remembered cookie stops working at once, unlike the signed 8-hour token this replaced.
//!
//! A session expires after [`IDLE_SECS`] without use, and at the latest [`ABSOLUTE_SECS`]
//! after sign-in. The idle expiry slides: a check that finds the last refresh older than
//! [`REFRESH_AFTER_SECS`] writes the item again with a later expiry (conditional on its
//! version, so a refresh never brings back a session ended meanwhile), so a page view is a
//! write at most every few minutes. The item carries its expiry as `expires_at`, so the
//! table's TTL forgets it.
//!
//! Forms posted with a session (sign-out) carry [`WebSessions::csrf_token`], an HMAC keyed by
//! the session id: whoever renders the form (the mcp front on AWS) and whoever receives it (the
//! authorization server) need no shared key, and a page on another site cannot compute it.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::UserId;
use crate::ports::{Clock, Cond, Item, MAX_TRANSACTION_ITEMS, Query, Store, StoreError, Write};

/// The cookie that holds the session id (`Path=/`: the pages and the authorization server
/// both read it).
pub const SESSION_COOKIE: &str = "nib_session";
/// A session ends after this long without use.
pub const IDLE_SECS: i64 = 8 * 3600;
/// A session ends this long after sign-in, however much it is used.
pub const ABSOLUTE_SECS: i64 = 7 * 24 * 3600;
/// A check writes a later idle expiry only when the last one is at least this old.
pub const REFRESH_AFTER_SECS: i64 = 5 * 60;
/// The partition-key prefix of session items: `SESSION#{sha256(id)}` (in the mcp and oauth
/// roles' `dynamodb:LeadingKeys`, `crate::functions::PARTITIONS`).
pub const SESSION_PREFIX: &str = "SESSION#";
const SESSION_SK: &str = "SESSION";
/// Bytes of randomness in a session id (256 bits).
const ID_BYTES: usize = 32;

/// The index partition of a user's sessions.
pub fn sessions_partition(user: &UserId) -> String {
    format!("U#{user}#SESSIONS")
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("session store unavailable")]
    Store(#[from] StoreError),
    #[error("a stored session does not parse")]
    Corrupt(#[from] serde_json::Error),
}

/// What is stored of a session (never its id).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SessionRecord {
    user: UserId,
    created_at: i64,
    /// When the idle expiry was last moved.
    refreshed_at: i64,
}

/// A live session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    pub user: UserId,
    pub created_at: i64,
    /// When it ends unless used again (never later than `created_at + ABSOLUTE_SECS`).
    pub expires_at: i64,
}

/// A session just created: its id goes into the cookie, once; it is never stored.
pub struct NewSession {
    pub id: zeroize::Zeroizing<String>,
    pub session: WebSession,
}

impl std::fmt::Debug for NewSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSession")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// The session store.
#[derive(Clone)]
pub struct WebSessions {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

fn session_pk(id: &str) -> String {
    format!(
        "{SESSION_PREFIX}{}",
        hex::encode(Sha256::digest(id.as_bytes()))
    )
}

/// True when `id` has the shape of our ids (43 base64url characters), so nothing else costs a
/// store read.
fn well_formed(id: &str) -> bool {
    id.len() == 43
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn session_item(record: &SessionRecord, pk: String, version: u64, expires_at: i64) -> Item {
    Item {
        gsi1: Some((sessions_partition(&record.user), pk.clone())),
        pk,
        sk: SESSION_SK.into(),
        version,
        expires_at: Some(expires_at),
        body: serde_json::to_vec(record).expect("session record serializes"),
    }
}

impl WebSessions {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        WebSessions { store, clock }
    }

    /// The idle expiry of a session created at `created_at`, used at `now`.
    fn expiry(created_at: i64, now: i64) -> i64 {
        (now + IDLE_SECS).min(created_at + ABSOLUTE_SECS)
    }

    /// Signs `user` in: a new session (one put).
    pub async fn create(&self, user: &UserId) -> Result<NewSession, SessionError> {
        let mut bytes = [0u8; ID_BYTES];
        rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
        let id = zeroize::Zeroizing::new(URL_SAFE_NO_PAD.encode(bytes));
        let now = self.clock.unix();
        let record = SessionRecord {
            user: user.clone(),
            created_at: now,
            refreshed_at: now,
        };
        let expires_at = Self::expiry(now, now);
        self.store
            .put(
                session_item(&record, session_pk(&id), 1, expires_at),
                Cond::NotExists,
            )
            .await?;
        Ok(NewSession {
            id,
            session: WebSession {
                user: user.clone(),
                created_at: now,
                expires_at,
            },
        })
    }

    /// The live session of `id`, its idle expiry moved on when due; `None` for anything else
    /// (ended, expired, never issued, malformed).
    pub async fn check(&self, id: &str) -> Result<Option<WebSession>, SessionError> {
        if !well_formed(id) {
            return Ok(None);
        }
        let pk = session_pk(id);
        let Some(item) = self.store.get(&pk, SESSION_SK).await? else {
            return Ok(None);
        };
        let now = self.clock.unix();
        // Judged on our clock too: the store's may differ (tests move ours).
        let expires_at = item.expires_at.unwrap_or(i64::MIN);
        if expires_at <= now {
            return Ok(None);
        }
        let mut record: SessionRecord = serde_json::from_slice(&item.body)?;
        let mut session = WebSession {
            user: record.user.clone(),
            created_at: record.created_at,
            expires_at,
        };
        let later = Self::expiry(record.created_at, now);
        if now - record.refreshed_at >= REFRESH_AFTER_SECS && later > expires_at {
            record.refreshed_at = now;
            let refreshed = session_item(&record, pk, item.version + 1, later);
            match self.store.put(refreshed, Cond::Version(item.version)).await {
                Ok(()) => session.expires_at = later,
                // Another request refreshed it (it lives on), or it was ended (the next
                // request finds no item): either way this view was allowed when it was read.
                Err(StoreError::ConditionFailed { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(session))
    }

    /// Ends the session of `id` (sign-out); a no-op when there is none.
    pub async fn end(&self, id: &str) -> Result<(), SessionError> {
        if !well_formed(id) {
            return Ok(());
        }
        self.store
            .transact(vec![Write::delete(session_pk(id), SESSION_SK, Cond::None)])
            .await?;
        Ok(())
    }

    /// Ends every session of `user` (a password change, account deletion). Returns how many
    /// there were.
    pub async fn end_all(&self, user: &UserId) -> Result<usize, SessionError> {
        let sessions = self
            .store
            .query_all(Query::gsi1(sessions_partition(user), ""));
        let keys: Vec<(String, String)> =
            sessions.await?.into_iter().map(|i| (i.pk, i.sk)).collect();
        let n = keys.len();
        for chunk in keys.chunks(MAX_TRANSACTION_ITEMS) {
            let writes = chunk
                .iter()
                .map(|(pk, sk)| Write::delete(pk.clone(), sk.clone(), Cond::None))
                .collect();
            self.store.transact(writes).await?;
        }
        Ok(n)
    }

    /// The token a form posted with the session `id` carries (sign-out): an HMAC keyed by the
    /// id, so only a page that knows the cookie can make it.
    pub fn csrf_token(id: &str, purpose: &str) -> String {
        URL_SAFE_NO_PAD.encode(Self::csrf_mac(id, purpose).finalize().into_bytes())
    }

    /// True when `token` is [`Self::csrf_token`] of this id and purpose (constant time).
    pub fn check_csrf(id: &str, purpose: &str, token: &str) -> bool {
        URL_SAFE_NO_PAD
            .decode(token)
            .is_ok_and(|tag| Self::csrf_mac(id, purpose).verify_slice(&tag).is_ok())
    }

    fn csrf_mac(id: &str, purpose: &str) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(id.as_bytes()).expect("any key length");
        mac.update(b"nib/session-form\x1f");
        mac.update(purpose.as_bytes());
        mac
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;
    use crate::adapters::embedded::EmbeddedStore;

    /// A clock the test moves, from the moment it was made (the store's own expiry is judged
    /// by the system clock, so it starts from now). It stands still unless moved: when it ran
    /// on with the system clock, a second boundary crossed between the create and the check
    /// turned the 299 s the test moved into 300, a refresh, about once in a hundred runs.
    struct Moved(std::time::SystemTime, AtomicI64);

    impl Clock for Moved {
        fn now(&self) -> std::time::SystemTime {
            self.0 + std::time::Duration::from_secs(self.1.load(Ordering::SeqCst) as u64)
        }
    }

    fn sessions(dir: &std::path::Path) -> (WebSessions, Arc<Moved>, Arc<dyn Store>) {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&dir.join("s.redb")).unwrap());
        let clock = Arc::new(Moved(std::time::SystemTime::now(), AtomicI64::new(0)));
        (WebSessions::new(store.clone(), clock.clone()), clock, store)
    }

    #[tokio::test]
    async fn only_the_hash_is_stored_and_the_idle_expiry_slides_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let (s, clock, store) = sessions(dir.path());
        let user = UserId::parse("default").unwrap();
        let new = s.create(&user).await.unwrap();
        assert!(new.id.len() >= 22, "at least 128 bits");
        let stored = store
            .query(&Query::gsi1(sessions_partition(&user), ""))
            .await
            .unwrap()
            .items;
        assert_eq!(stored.len(), 1);
        let raw = format!("{:?}", stored[0]);
        assert!(!raw.contains(new.id.as_str()), "the id is never stored");
        // A view within the refresh interval writes nothing.
        clock.1.store(REFRESH_AFTER_SECS - 1, Ordering::SeqCst);
        let seen = s.check(&new.id).await.unwrap().unwrap();
        assert_eq!(seen.expires_at, new.session.expires_at);
        // Used every 7 hours, it lives on until the cap.
        let mut at = 0;
        while at + 7 * 3600 < ABSOLUTE_SECS {
            at += 7 * 3600;
            clock.1.store(at, Ordering::SeqCst);
            assert!(s.check(&new.id).await.unwrap().is_some(), "at {at}");
        }
        clock.1.store(ABSOLUTE_SECS, Ordering::SeqCst);
        assert_eq!(s.check(&new.id).await.unwrap(), None, "the absolute cap");
    }

    #[tokio::test]
    async fn ending_one_or_all_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _, _) = sessions(dir.path());
        let (a, b) = (
            UserId::parse("alice").unwrap(),
            UserId::parse("bob").unwrap(),
        );
        let a1 = s.create(&a).await.unwrap();
        let a2 = s.create(&a).await.unwrap();
        let b1 = s.create(&b).await.unwrap();
        s.end(&a1.id).await.unwrap();
        assert_eq!(s.check(&a1.id).await.unwrap(), None);
        assert!(s.check(&a2.id).await.unwrap().is_some());
        assert_eq!(s.end_all(&a).await.unwrap(), 1);
        assert_eq!(s.check(&a2.id).await.unwrap(), None);
        assert_eq!(s.check(&b1.id).await.unwrap().unwrap().user, b);
        assert_eq!(s.check("not-an-id").await.unwrap(), None);
    }

    #[test]
    fn form_tokens_bind_the_session_and_purpose() {
        let t = WebSessions::csrf_token("id-one", "sign-out");
        assert!(WebSessions::check_csrf("id-one", "sign-out", &t));
        assert!(!WebSessions::check_csrf("id-two", "sign-out", &t));
        assert!(!WebSessions::check_csrf("id-one", "other", &t));
        assert!(!WebSessions::check_csrf("id-one", "sign-out", "x"));
    }
}
