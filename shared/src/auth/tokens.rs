//! API tokens: `nib_live_<32 random base62><6 base62 checksum>`.
//!
//! The checksum lets a secret scanner (and our own verifier, before any lookup) recognise a
//! well-formed token. Only the SHA-256 of a token is stored (item `TOK#{sha256}` / `TOK`), with
//! its id, user, scope, label and revocation time; the secret is shown once, at creation.

use std::sync::Arc;

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
    format!("TOK#{hash}")
}

pub(crate) fn user_tokens_partition(user: &UserId) -> String {
    format!("U#{user}#TOKENS")
}

impl Tokens {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Tokens { store, clock }
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
        let now = self.clock.unix();
        if record
            .last_used_at
            .is_none_or(|t| now - t >= LAST_USED_GRANULARITY_SECS)
        {
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
        }
        Ok(Principal {
            user: record.user,
            scope: record.scope,
            credential_id: record.token_id,
            client: record.label,
        })
    }

    /// The user's tokens, oldest first.
    pub async fn list(&self, user: &UserId) -> Result<Vec<TokenRecord>, TokenError> {
        let mut out = Vec::new();
        let mut query = Query::gsi1(user_tokens_partition(user), "");
        loop {
            let page = self.store.query(&query).await?;
            for item in page.items {
                out.push(serde_json::from_slice(&item.body).map_err(TokenError::Corrupt)?);
            }
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(out),
            }
        }
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
}
