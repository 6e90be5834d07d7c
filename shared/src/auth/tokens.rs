//! API tokens: `nib_live_<32 random base62><6 base62 checksum>`.
//!
//! The checksum lets a secret scanner (and our own verifier, before any lookup) recognise a
//! well-formed token. Only the SHA-256 of a token is stored (item `TOK#{sha256}` / `TOK`), with
//! its id, user, scope, label and revocation time; the secret is shown once, at creation.
//!
//! Over the embedded store a verified token is kept in memory (its hash and record), and used
//! again while no `TOK#` item has been written since (`Store::write_counter`): a revocation,
//! an account's deletion or a token's `last_used_at` empties what was kept, so the next call
//! reads the store. DynamoDB offers no such counter (other processes write the table), so
//! there every call reads the item.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rand::Rng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Principal, Scope};
use crate::domain::UserId;
use crate::ports::{Clock, Cond, Item, Query, Store, StoreError};

pub const PREFIX: &str = "nib_live_";
const RANDOM_LEN: usize = 32;
const CHECKSUM_LEN: usize = 6;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// How stale `last_used_at` may get before a request writes it again: one write per token per
/// hour at most, not one per request.
const LAST_USED_GRANULARITY_SECS: i64 = 3600;
/// The key prefix of token items, whose writes [`Known`] watches.
const TOKEN_PREFIX: &str = "TOK#";
/// At most this many tokens kept in memory; past it, what was kept is dropped.
const KNOWN_MAX: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Malformed, unknown or revoked: the client learns nothing more.
    #[error("invalid token")]
    Invalid,
    #[error("no token with id {0}")]
    UnknownId(String),
    #[error("token store unavailable")]
    Store(#[from] StoreError),
    #[error("token record is corrupt")]
    Corrupt(#[source] serde_json::Error),
}

/// What is stored for a token (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub token_id: String,
    pub user: UserId,
    pub scope: Scope,
    pub label: Option<String>,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

/// A token just created: the secret is in `token`, shown to the user once.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub token: String,
    pub record: TokenRecord,
}

pub struct Tokens {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Tokens verified before (embedded store only).
    known: Option<Known>,
}

/// Verified tokens by hash, each with the store's count of `TOK#` writes when it was read:
/// valid while that count has not moved.
struct Known {
    writes: Arc<AtomicU64>,
    records: RwLock<HashMap<String, (u64, TokenRecord)>>,
}

impl Known {
    fn get(&self, hash: &str, writes: u64) -> Option<TokenRecord> {
        let records = self.records.read().unwrap_or_else(|e| e.into_inner());
        records
            .get(hash)
            .filter(|(seen, _)| *seen == writes)
            .map(|(_, record)| record.clone())
    }

    fn keep(&self, hash: String, writes: u64, record: TokenRecord) {
        let mut records = self.records.write().unwrap_or_else(|e| e.into_inner());
        if records.len() >= KNOWN_MAX {
            records.clear();
        }
        records.insert(hash, (writes, record));
    }
}

fn checksum(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    let mut n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let mut out = [0u8; CHECKSUM_LEN];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    String::from_utf8(out.to_vec()).expect("ascii")
}

/// True when `token` has our prefix, length, alphabet and a matching checksum.
pub fn well_formed(token: &str) -> bool {
    let Some(rest) = token.strip_prefix(PREFIX) else {
        return false;
    };
    if rest.len() != RANDOM_LEN + CHECKSUM_LEN || !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let (body, sum) = rest.split_at(RANDOM_LEN);
    checksum(body) == sum
}

fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn token_pk(hash: &str) -> String {
    format!("{TOKEN_PREFIX}{hash}")
}

pub(crate) fn user_tokens_partition(user: &UserId) -> String {
    format!("U#{user}#TOKENS")
}

impl Tokens {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let known = store.write_counter(TOKEN_PREFIX).map(|writes| Known {
            writes,
            records: RwLock::new(HashMap::new()),
        });
        Tokens {
            store,
            clock,
            known,
        }
    }

    pub async fn create(
        &self,
        user: &UserId,
        scope: Scope,
        label: Option<String>,
    ) -> Result<NewToken, TokenError> {
        // The thread's generator is not `Send`: it must be gone before the first await.
        let body: String = {
            let mut rng = rand::rng();
            (0..RANDOM_LEN)
                .map(|_| BASE62[rng.random_range(0..62)] as char)
                .collect()
        };
        let token = format!("{PREFIX}{body}{}", checksum(&body));
        let hash = hash(&token);
        let now = self.clock.unix();
        let record = TokenRecord {
            token_id: format!("tok_{}", &hash[..12]),
            user: user.clone(),
            scope,
            label,
            created_at: now,
            last_used_at: None,
            revoked_at: None,
        };
        self.store
            .put(self.item(&hash, &record, 1), Cond::NotExists)
            .await?;
        Ok(NewToken { token, record })
    }

    fn item(&self, hash: &str, record: &TokenRecord, version: u64) -> Item {
        Item {
            pk: token_pk(hash),
            sk: "TOK".into(),
            gsi1: Some((
                user_tokens_partition(&record.user),
                format!("{:012}#{}", record.created_at, record.token_id),
            )),
            version,
            expires_at: None,
            body: serde_json::to_vec(record).expect("token record serializes"),
        }
    }

    /// Verifies a presented token: well formed, known, not revoked.
    pub async fn verify(&self, token: &str) -> Result<Principal, TokenError> {
        if !well_formed(token) {
            return Err(TokenError::Invalid);
        }
        let hash = hash(token);
        let now = self.clock.unix();
        let stale = |record: &TokenRecord| {
            record
                .last_used_at
                .is_none_or(|t| now - t >= LAST_USED_GRANULARITY_SECS)
        };
        // Read before the item: a write after this makes what is kept now stale.
        let writes = self
            .known
            .as_ref()
            .map(|known| known.writes.load(Ordering::Acquire));
        if let (Some(known), Some(writes)) = (&self.known, writes)
            && let Some(record) = known.get(&hash, writes)
            && !stale(&record)
        {
            return Ok(principal(record));
        }
        let item = self
            .store
            .get(&token_pk(&hash), "TOK")
            .await?
            .ok_or(TokenError::Invalid)?;
        let mut record: TokenRecord =
            serde_json::from_slice(&item.body).map_err(TokenError::Corrupt)?;
        if record.revoked_at.is_some() {
            return Err(TokenError::Invalid);
        }
        if stale(&record) {
            record.last_used_at = Some(now);
            // Best effort: losing a race here only loses a timestamp.
            if let Err(e) = self
                .store
                .put(
                    self.item(&hash, &record, item.version + 1),
                    Cond::Version(item.version),
                )
                .await
                && !matches!(e, StoreError::ConditionFailed { .. })
            {
                tracing::warn!(error = %e, token_id = %record.token_id, "could not record token use");
            }
        } else if let (Some(known), Some(writes)) = (&self.known, writes) {
            // (Not after writing `last_used_at`: that write moved the count; the next call
            // reads the item again and keeps it.)
            known.keep(hash, writes, record.clone());
        }
        Ok(principal(record))
    }

    /// The user's tokens, oldest first.
    pub async fn list(&self, user: &UserId) -> Result<Vec<TokenRecord>, TokenError> {
        let items = self
            .store
            .query_all(Query::gsi1(user_tokens_partition(user), ""));
        items
            .await?
            .iter()
            .map(|item| serde_json::from_slice(&item.body).map_err(TokenError::Corrupt))
            .collect()
    }

    /// Revokes a token by its id. Revoking twice is not an error.
    pub async fn revoke(&self, user: &UserId, token_id: &str) -> Result<TokenRecord, TokenError> {
        let mut query = Query::gsi1(user_tokens_partition(user), "");
        loop {
            let page = self.store.query(&query).await?;
            for item in page.items {
                let mut record: TokenRecord =
                    serde_json::from_slice(&item.body).map_err(TokenError::Corrupt)?;
                if record.token_id == token_id {
                    if record.revoked_at.is_none() {
                        record.revoked_at = Some(self.clock.unix());
                        let hash = item.pk.trim_start_matches("TOK#").to_owned();
                        self.store
                            .put(
                                self.item(&hash, &record, item.version + 1),
                                Cond::Version(item.version),
                            )
                            .await?;
                    }
                    return Ok(record);
                }
            }
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Err(TokenError::UnknownId(token_id.to_owned())),
            }
        }
    }
}

fn principal(record: TokenRecord) -> Principal {
    Principal {
        user: record.user,
        scope: record.scope,
        credential_id: record.token_id,
        client: record.label,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_catch_typos() {
        let body = "a".repeat(RANDOM_LEN);
        let token = format!("{PREFIX}{body}{}", checksum(&body));
        assert!(well_formed(&token));
        let typo = token.replacen('a', "b", 1);
        assert!(!well_formed(&typo));
        assert!(!well_formed("nib_live_short"));
        assert!(!well_formed(&token.replace(PREFIX, "nib_test_")));
    }

    /// The embedded store, counting the token reads that reach it; `counted_writes` decides
    /// whether it offers its write counter (it does; DynamoDB does not).
    struct Counting {
        inner: crate::adapters::embedded::EmbeddedStore,
        gets: AtomicU64,
        counted_writes: bool,
    }

    #[async_trait::async_trait]
    impl Store for Counting {
        async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
            self.gets.fetch_add(1, Ordering::SeqCst);
            self.inner.get(pk, sk).await
        }
        async fn batch_get(
            &self,
            keys: &[(String, String)],
        ) -> Result<Vec<Option<Item>>, StoreError> {
            self.inner.batch_get(keys).await
        }
        async fn query(&self, query: &Query) -> Result<crate::ports::QueryPage, StoreError> {
            self.inner.query(query).await
        }
        async fn transact(&self, writes: Vec<crate::ports::Write>) -> Result<(), StoreError> {
            self.inner.transact(writes).await
        }
        async fn increment(
            &self,
            pk: &str,
            sk: &str,
            by: u64,
            expires_at: i64,
        ) -> Result<u64, StoreError> {
            self.inner.increment(pk, sk, by, expires_at).await
        }
        fn write_counter(&self, prefix: &'static str) -> Option<Arc<AtomicU64>> {
            self.counted_writes
                .then(|| self.inner.write_counter(prefix))
                .flatten()
        }
    }

    struct TestClock(std::sync::atomic::AtomicI64);

    impl Clock for TestClock {
        fn now(&self) -> std::time::SystemTime {
            std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
        }
    }

    fn tokens(counted_writes: bool) -> (Tokens, Arc<Counting>, Arc<TestClock>) {
        let store = Arc::new(Counting {
            inner: crate::adapters::embedded::EmbeddedStore::in_memory(),
            gets: AtomicU64::new(0),
            counted_writes,
        });
        let clock = Arc::new(TestClock(1_900_000_000.into()));
        (Tokens::new(store.clone(), clock.clone()), store, clock)
    }

    fn gets(store: &Counting) -> u64 {
        store.gets.load(Ordering::SeqCst)
    }

    #[tokio::test]
    async fn a_verified_token_is_kept_until_a_token_item_is_written() {
        let (tokens, store, clock) = tokens(true);
        let alice = UserId::parse("alice").unwrap();
        let new = tokens.create(&alice, Scope::Read, None).await.unwrap();
        // The first call reads the item and records the use (a write, which moves the count).
        assert_eq!(tokens.verify(&new.token).await.unwrap().user, alice);
        // The second reads it again and keeps it; the calls after read nothing.
        tokens.verify(&new.token).await.unwrap();
        let read = gets(&store);
        for _ in 0..3 {
            let principal = tokens.verify(&new.token).await.unwrap();
            assert_eq!(principal.credential_id, new.record.token_id);
            assert_eq!(principal.scope, Scope::Read);
        }
        assert_eq!(gets(&store), read, "kept: no read");

        // Another token created is a write: the next call reads again, then keeps it again.
        let other = tokens.create(&alice, Scope::Write, None).await.unwrap();
        tokens.verify(&new.token).await.unwrap();
        assert_eq!(gets(&store), read + 1);
        tokens.verify(&new.token).await.unwrap();
        assert_eq!(gets(&store), read + 1);

        // Revoked: the very next call is refused.
        tokens.revoke(&alice, &new.record.token_id).await.unwrap();
        assert!(matches!(
            tokens.verify(&new.token).await,
            Err(TokenError::Invalid)
        ));

        // An item deleted behind the tokens' back (as an account's deletion does): refused.
        tokens.verify(&other.token).await.unwrap();
        tokens.verify(&other.token).await.unwrap();
        let hash = hash(&other.token);
        store
            .transact(vec![crate::ports::Write::Delete {
                pk: token_pk(&hash),
                sk: "TOK".into(),
                cond: Cond::Exists,
            }])
            .await
            .unwrap();
        assert!(matches!(
            tokens.verify(&other.token).await,
            Err(TokenError::Invalid)
        ));

        // An hour on, a kept token's use is recorded again in the store.
        let third = tokens.create(&alice, Scope::Read, None).await.unwrap();
        tokens.verify(&third.token).await.unwrap();
        tokens.verify(&third.token).await.unwrap();
        clock
            .0
            .fetch_add(LAST_USED_GRANULARITY_SECS, Ordering::SeqCst);
        tokens.verify(&third.token).await.unwrap();
        let listed = tokens.list(&alice).await.unwrap();
        let used = listed.iter().find(|r| r.token_id == third.record.token_id);
        assert_eq!(
            used.and_then(|r| r.last_used_at),
            Some(clock.unix()),
            "the use an hour on is stored"
        );
    }

    #[tokio::test]
    async fn without_a_write_counter_every_call_reads_the_store() {
        let (tokens, store, _) = tokens(false);
        let alice = UserId::parse("alice").unwrap();
        let new = tokens.create(&alice, Scope::Read, None).await.unwrap();
        for n in 1..=4 {
            tokens.verify(&new.token).await.unwrap();
            assert_eq!(gets(&store), n);
        }
    }
}
