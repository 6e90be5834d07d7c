//! Notebook writes refused once the user's account is being deleted (issue 48, item 6).
//!
//! `Accounts::delete` first writes the tombstone `U#{user}` / [`GONE_SK`]. [`GuardedStore`],
//! the store every notebook service writes through, adds to each transaction that puts or
//! adds under a user's partitions (`U#{user}`, `U#{user}#...`) a [`Write::Check`] that the
//! user's tombstone does not exist: a condition expression on DynamoDB
//! (`ConditionCheck ... attribute_not_exists`), the same check inside the embedded store's
//! transaction. A call already in flight when the account is deleted can then no longer land
//! a write after the deletion's sweep (sealed under the destroyed key, inherited by a user later
//! created with the same name): it fails with [`StoreError::Deleted`] and writes nothing.
//! Transactions of deletes only are not checked (removing something is harmless).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use async_trait::async_trait;

use crate::ports::{Cond, Item, MAX_TRANSACTION_ITEMS, Query, QueryPage, Store, StoreError, Write};

/// The sort key of the tombstone in `U#{user}`: written first by an account deletion, kept
/// after it (the partition's one item then).
pub const GONE_SK: &str = "GONE";

/// The user of a key under a user's partitions (`U#{user}` or `U#{user}#...`), as its
/// partition `U#{user}`; `None` for other keys and for index-style partitions such as
/// `U#NOTION#DUE` (upper case: no user's).
fn user_partition(pk: &str) -> Option<&str> {
    let rest = pk.strip_prefix("U#")?;
    let user = rest.split('#').next()?;
    let ok = !user.is_empty()
        && user
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    ok.then(|| &pk[..2 + user.len()])
}

/// The access record's one put at the end of a read (`notebook::access`) is left unchecked:
/// it is the most frequent write (every call that opens the notebook), and a check makes a
/// PutItem a two-item transaction, four times its write cost on DynamoDB. A record in flight
/// lands within the longest request, before the deletion's second sweep, which removes it; a
/// later one would leave the partition non-empty, and a user is not created over it.
fn is_access_record(w: &Write) -> bool {
    matches!(w, Write::Put { .. }) && w.key().1.starts_with(super::access::ACCESS_PREFIX)
}

/// The store of the notebook services: every write that adds to a user's partitions is
/// conditional on the user not being deleted.
pub struct GuardedStore {
    inner: Arc<dyn Store>,
}

impl GuardedStore {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        GuardedStore { inner }
    }
}

#[async_trait]
impl Store for GuardedStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.inner.get(pk, sk).await
    }

    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError> {
        self.inner.batch_get(keys).await
    }

    async fn batch_get_each(
        &self,
        keys: &[(String, String)],
        each: &mut (dyn FnMut(usize, Item) + Send),
    ) -> Result<(), StoreError> {
        self.inner.batch_get_each(keys, each).await
    }

    async fn query(&self, query: &Query) -> Result<QueryPage, StoreError> {
        self.inner.query(query).await
    }

    async fn transact(&self, mut writes: Vec<Write>) -> Result<(), StoreError> {
        let mut users: Vec<String> = Vec::new();
        for w in &writes {
            if matches!(w, Write::Put { .. } | Write::Add { .. })
                && !is_access_record(w)
                && let Some(user) = user_partition(w.key().0)
                && !users.iter().any(|u| u == user)
            {
                users.push(user.to_owned());
            }
        }
        if users.is_empty() {
            return self.inner.transact(writes).await;
        }
        let first_check = writes.len();
        if first_check + users.len() > MAX_TRANSACTION_ITEMS {
            // No room for the checks in the transaction: the tombstone is read just before
            // (a narrower window than none; the deletion's second sweep covers it).
            for user in &users {
                if self.inner.get(user, GONE_SK).await?.is_some() {
                    return Err(StoreError::Deleted);
                }
            }
            return self.inner.transact(writes).await;
        }
        for user in users {
            writes.push(Write::Check {
                pk: user,
                sk: GONE_SK.into(),
                cond: Cond::NotExists,
            });
        }
        match self.inner.transact(writes).await {
            Err(StoreError::ConditionFailed { index }) if index >= first_check => {
                Err(StoreError::Deleted)
            }
            other => other,
        }
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

    async fn put(&self, item: Item, cond: Cond) -> Result<(), StoreError> {
        self.transact(vec![Write::put(item, cond)]).await
    }

    fn write_counter(&self, prefix: &'static str) -> Option<Arc<AtomicU64>> {
        self.inner.write_counter(prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::user_partition;

    #[test]
    fn user_partitions_are_told_from_other_keys() {
        assert_eq!(user_partition("U#alice"), Some("U#alice"));
        assert_eq!(user_partition("U#alice#T#word"), Some("U#alice"));
        assert_eq!(user_partition("U#NOTION#DUE"), None);
        assert_eq!(user_partition("USER#alice"), None);
        assert_eq!(user_partition("TOK#x"), None);
    }
}
