//! Passwords for the OAuth sign-in page: `nib user create` / `nib user passwd` set them, the
//! consent page checks them. Setting a password ends every browser session of the user
//! ([`super::web_sessions`]), wherever it is set from. Stored as argon2id PHC strings in `USER#{user}` / `PASSWORD`,
//! outside the user's `U#` partition, so the OAuth function that checks passwords needs no
//! access to notebook items; never the password itself. Hashing runs on the blocking pool:
//! it is deliberately slow.

use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use serde::{Deserialize, Serialize};

use super::web_sessions::{SessionError, WebSessions};
use crate::domain::UserId;
use crate::ports::{Clock, Cond, Item, Store, StoreError};

/// The shortest password accepted.
pub const MIN_PASSWORD_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("the password must be at least {MIN_PASSWORD_LEN} characters")]
    WeakPassword,
    #[error("user {0} already has a password (change it with `nib user passwd`)")]
    Exists(UserId),
    #[error("user {0} has no password yet (set one with `nib user create`)")]
    NoPassword(UserId),
    #[error("user store unavailable")]
    Store(#[from] StoreError),
    #[error("password hashing failed")]
    Hash,
    #[error("cannot end the user's sessions")]
    Sessions(#[from] SessionError),
}

#[derive(Serialize, Deserialize)]
struct PasswordRecord {
    /// argon2id PHC string: algorithm, parameters, salt and hash.
    hash: String,
    updated_at: i64,
}

pub struct Users {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

fn password_key(user: &UserId) -> (String, &'static str) {
    (format!("USER#{user}"), "PASSWORD")
}

fn hash_password(password: &str) -> Result<String, UserError> {
    let salt_bytes: [u8; 16] = rand::random();
    let salt = SaltString::encode_b64(&salt_bytes).map_err(|_| UserError::Hash)?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|_| UserError::Hash)
}

/// A hash of a password nobody knows, so an unknown user name costs as much time as a known one.
fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash_password("no user has this password").unwrap_or_default())
}

fn verify_hash(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

impl Users {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Users { store, clock }
    }

    /// Sets the user's password: `create` refuses a user who has one, otherwise the user must
    /// have one already (`passwd`).
    pub async fn set_password(
        &self,
        user: &UserId,
        password: &str,
        create: bool,
    ) -> Result<(), UserError> {
        if password.chars().count() < MIN_PASSWORD_LEN {
            return Err(UserError::WeakPassword);
        }
        let owned = password.to_owned();
        let hash = tokio::task::spawn_blocking(move || hash_password(&owned))
            .await
            .map_err(|_| UserError::Hash)??;
        let (pk, sk) = password_key(user);
        let existing = self.store.get(&pk, sk).await?;
        let cond = match (&existing, create) {
            (Some(_), true) => return Err(UserError::Exists(user.clone())),
            (None, false) => return Err(UserError::NoPassword(user.clone())),
            (None, true) => Cond::NotExists,
            (Some(item), false) => Cond::Version(item.version),
        };
        let record = PasswordRecord {
            hash,
            updated_at: self.clock.unix(),
        };
        let item = Item {
            pk,
            sk: sk.into(),
            gsi1: None,
            version: existing.map_or(1, |i| i.version + 1),
            expires_at: None,
            body: serde_json::to_vec(&record).expect("password record serializes"),
        };
        match self.store.put(item, cond).await {
            Err(StoreError::ConditionFailed { .. }) if create => {
                return Err(UserError::Exists(user.clone()));
            }
            other => other?,
        }
        // Whoever knew the old password may be signed in with it: those sessions end here (a
        // new user has none; the query is cheap either way).
        WebSessions::new(self.store.clone(), self.clock.clone())
            .end_all(user)
            .await?;
        Ok(())
    }

    /// True when the user has a password.
    pub async fn has_password(&self, user: &UserId) -> Result<bool, UserError> {
        let (pk, sk) = password_key(user);
        Ok(self.store.get(&pk, sk).await?.is_some())
    }

    /// The user, when `name` and `password` match; `None` otherwise, in about the same time
    /// whether or not the user exists.
    pub async fn check(&self, name: &str, password: &str) -> Result<Option<UserId>, UserError> {
        let user = UserId::parse(name.trim()).ok();
        let stored = match &user {
            Some(u) => {
                let (pk, sk) = password_key(u);
                self.store
                    .get(&pk, sk)
                    .await?
                    .and_then(|i| serde_json::from_slice::<PasswordRecord>(&i.body).ok())
                    .map(|r| r.hash)
            }
            None => None,
        };
        let known = stored.is_some();
        let hash = stored.unwrap_or_else(|| dummy_hash().to_owned());
        let password = password.to_owned();
        let ok = tokio::task::spawn_blocking(move || verify_hash(&hash, &password))
            .await
            .map_err(|_| UserError::Hash)?;
        Ok(if ok && known { user } else { None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_only_their_password() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_hash(&h, "correct horse"));
        assert!(!verify_hash(&h, "correct horsE"));
        assert!(!verify_hash("garbage", "correct horse"));
    }
}
