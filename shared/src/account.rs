//! Accounts: the user index behind `nib user list`, and account deletion by key destruction
//! (`nib user delete`), over any `Store` and `Assets`.
//!
//! **The index.** Every user has a profile item `U#{user}` / `USER` (`Services::ensure_user`, which
//! every admin command naming a user and `nib serve`'s first start run). It carries the index
//! key `gsi1` = (`USERS`, `{user}`), so one index query lists the users. A profile written
//! before the index has no index key: `ensure` adds it the next time anything ensures that user
//! (there is no Scan to find the others; see docs/operator-guide.md, "Users and deleting an
//! account").
//!
//! **Deletion**, in this order, each step idempotent so that running it again after a crash
//! anywhere finishes the job:
//!
//! 1. the marker `USER#{user}` / `DELETING` (index key `{user}#DELETING`): the account is being
//!    deleted; `ensure` refuses the user from here on, and a re-run knows the user; then the
//!    tombstone `U#{user}` / `GONE` (`notebook::guard`): from here every notebook write to the
//!    user's partitions is refused in its own transaction, so a call in flight lands nothing;
//! 2. the credentials: the password, API tokens, OAuth grants and refresh tokens, browser
//!    sessions and the user's approvals of OAuth clients (found through the user's index
//!    partitions), so nobody signs in or uses a token or a session from here on;
//! 3. the assets: every object under the user's prefixes (`u/{user}/`, `uploads/{user}/`).
//!    They go before the key because they are not sealed with it (the local asset key, S3's
//!    storage-key SSE), so after step 4 nothing of the user can be opened;
//! 4. the key: each `KEY#` item's wrapped data key is overwritten by a tombstone (one
//!    transaction). From here every sealed field and blind hash of the user is noise; the
//!    tombstone keeps the vault from minting a new key for the user while items remain;
//! 5. the items, enumerated, not listed by kind: the postings partitions named by any item's
//!    `terms`, then every item of the `U#{user}` partition (pages, tasks, dedup keys, stems,
//!    statistics, Notion, whatever kind comes later), the tombstones last, then the rest of
//!    `USER#{user}`, and the marker;
//! 6. the second sweep, once the longest request that may have started before the marker
//!    ([`REQUEST_BOUND`]) is over: the assets and the partition again (what an in-flight call
//!    wrote outside the guard: a page image stored before its refused commit, a data key minted
//!    for it). The tombstone stays: the partition's one item.
//!
//! **Creating a user** (`ensure`) over a partition that holds anything but a tombstone and
//! live data keys is refused ([`AccountError::NotEmpty`]): a user never inherits another's
//! items. Over a tombstone alone, the new profile replaces it.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::auth::oauth::grants::GrantRecord;
use crate::auth::tokens::TokenRecord;
use crate::crypto::Vault;
use crate::domain::UserId;
use crate::ports::{
    Assets, AssetsError, Clock, Cond, Item, MAX_TRANSACTION_ITEMS, Query, Store, StoreError, Write,
    counter_value,
};

/// The index partition of users (`gsi1`).
pub const USERS_PARTITION: &str = "USERS";
/// The sort key of a user's profile in `U#{user}`.
pub const PROFILE_SK: &str = "USER";
/// The sort key of the deletion marker in `USER#{user}`.
pub const MARKER_SK: &str = "DELETING";
/// How long a request may run (the mcp front's 29 s, API Gateway's limit; the class functions'
/// 25 s): a deletion sweeps again this long after its marker.
pub const REQUEST_BOUND: std::time::Duration = std::time::Duration::from_secs(30);
use crate::notebook::guard::GONE_SK;
const MARKER_SUFFIX: &str = "#DELETING";
const KEY_PREFIX: &str = "KEY#";

/// The index partitions of a user that hold items kept outside `U#{user}` (tokens, grants,
/// refresh tokens, browser sessions, the user's approvals of OAuth clients). A new kind of
/// item that lives outside the user's partition must be indexed in one of these (or a new one
/// added here), or deletion cannot find it.
pub fn credential_partitions(user: &UserId) -> [String; 5] {
    [
        format!("U#{user}#TOKENS"),
        format!("U#{user}#GRANTS"),
        format!("U#{user}#RT"),
        crate::auth::web_sessions::sessions_partition(user),
        crate::auth::oauth::clients::approvals_partition(user),
    ]
}

fn user_pk(user: &UserId) -> String {
    format!("U#{user}")
}

fn sign_in_pk(user: &UserId) -> String {
    format!("USER#{user}")
}

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("there is no user {0}")]
    Unknown(UserId),
    #[error("user {0} is being deleted; finish it with `nib user delete {0}`")]
    Deleting(UserId),
    #[error(
        "user {0} cannot be created: its partition still holds items; remove them with `nib user delete {0}`"
    )]
    NotEmpty(UserId),
    #[error("store failure")]
    Store(#[from] StoreError),
    #[error("cannot delete the user's page images")]
    Assets(#[from] AssetsError),
    #[error("cannot open the user's data key")]
    Keys(#[from] crate::crypto::CryptoError),
    #[error("a stored record does not parse")]
    Corrupt(#[from] serde_json::Error),
    #[error("password hashing failed")]
    Hash,
}

/// The body of a profile item.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Profile {
    created_at: i64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    owner: bool,
}

/// The body of a deletion marker.
#[derive(Debug, Serialize, Deserialize)]
struct Marker {
    started_at: i64,
}

/// What `nib user list` shows of one user. Counts are cheap: one index query per kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserSummary {
    pub user: UserId,
    /// When the profile was written (absent for a user seen only by its deletion marker).
    pub created_at: Option<i64>,
    pub owner: bool,
    pub has_password: bool,
    /// Being deleted (a marker): `nib user delete` again finishes it.
    pub deleting: bool,
    pub pages: u64,
    /// Tokens not revoked.
    pub tokens: usize,
    /// Grants neither revoked nor expired.
    pub grants: usize,
}

/// What one deletion run removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deletion {
    pub credentials: usize,
    pub assets: u64,
    pub keys: usize,
    pub items: usize,
}

/// A step of a deletion, for progress lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Marker,
    Credentials,
    Assets,
    Key,
    Items,
    Done,
}

impl Step {
    pub fn describe(self) -> &'static str {
        match self {
            Step::Marker => "marked the account as being deleted",
            Step::Credentials => "removed the password, API tokens, OAuth grants and sessions",
            Step::Assets => "deleted the page images and uploads",
            Step::Key => "destroyed the data key",
            Step::Items => "removed the notebook's items",
            Step::Done => "done",
        }
    }
}

pub struct Accounts {
    store: Arc<dyn Store>,
    assets: Arc<dyn Assets>,
    vault: Arc<Vault>,
    clock: Arc<dyn Clock>,
    /// How long after its marker a deletion sweeps again ([`REQUEST_BOUND`]).
    settle: std::time::Duration,
}

fn profile_item(user: &UserId, profile: &Profile, version: u64) -> Item {
    Item {
        pk: user_pk(user),
        sk: PROFILE_SK.into(),
        gsi1: Some((USERS_PARTITION.into(), user.to_string())),
        version,
        expires_at: None,
        body: serde_json::to_vec(profile).expect("profile serializes"),
    }
}

/// Deletes the keys, `MAX_TRANSACTION_ITEMS` per transaction (deleting an absent item is a
/// no-op, so a chunk that ran before a crash runs again harmlessly).
async fn delete_keys(store: &dyn Store, keys: Vec<(String, String)>) -> Result<usize, StoreError> {
    let n = keys.len();
    let mut writes: Vec<Write> = keys
        .into_iter()
        .map(|(pk, sk)| Write::delete(pk, sk, Cond::None))
        .collect();
    while !writes.is_empty() {
        let rest = writes.split_off(writes.len().min(MAX_TRANSACTION_ITEMS));
        store.transact(std::mem::replace(&mut writes, rest)).await?;
    }
    Ok(n)
}

impl Accounts {
    /// Whether `password` is the user's (a deletion asked for in a browser is confirmed with
    /// it: a session left open is not enough to erase an account); an unknown user is
    /// [`AccountError::Unknown`]. Here rather than in the front because on AWS only the
    /// account and oauth roles reach `USER#`.
    pub async fn password_matches(
        &self,
        user: &UserId,
        password: &str,
    ) -> Result<bool, AccountError> {
        // An unknown user is not found, as the deletion would answer, not a wrong password.
        if !self.known(user).await? {
            return Err(AccountError::Unknown(user.clone()));
        }
        let users = crate::auth::users::Users::new(self.store.clone(), self.clock.clone());
        match users.check(user.as_str(), password).await {
            Ok(found) => Ok(found.as_ref() == Some(user)),
            Err(crate::auth::users::UserError::Store(e)) => Err(AccountError::Store(e)),
            Err(_) => Err(AccountError::Hash),
        }
    }

    pub fn new(
        store: Arc<dyn Store>,
        assets: Arc<dyn Assets>,
        vault: Arc<Vault>,
        clock: Arc<dyn Clock>,
    ) -> Accounts {
        Accounts {
            store,
            assets,
            vault,
            clock,
            settle: REQUEST_BOUND,
        }
    }

    /// Sweeps again `settle` after the marker instead of [`REQUEST_BOUND`] (tests that make no
    /// request meanwhile).
    pub fn with_settle(mut self, settle: std::time::Duration) -> Self {
        self.settle = settle;
        self
    }

    /// Whether the user's partition holds an item a new user must not inherit: anything but
    /// the tombstone, the profile and live (wrapped) data keys.
    async fn partition_in_use(&self, user: &UserId) -> Result<bool, StoreError> {
        let mut q = Query::table(user_pk(user), "");
        q.limit = 8;
        loop {
            let page = self.store.query(&q).await?;
            if page.items.iter().any(|i| {
                i.sk != GONE_SK
                    && i.sk != PROFILE_SK
                    && !(i.sk.starts_with(KEY_PREFIX) && is_wrapped_key(i))
            }) {
                return Ok(true);
            }
            match page.next {
                Some(next) => q.after = Some(next),
                None => return Ok(false),
            }
        }
    }

    async fn marker(&self, user: &UserId) -> Result<Option<Item>, StoreError> {
        self.store.get(&sign_in_pk(user), MARKER_SK).await
    }

    /// Creates the user's profile (and data key) unless it exists; adds the index key to a
    /// profile written before the index. True when created. Refuses a user being deleted.
    pub async fn ensure(&self, user: &UserId) -> Result<bool, AccountError> {
        if self.marker(user).await?.is_some() {
            return Err(AccountError::Deleting(user.clone()));
        }
        let profile = Profile {
            created_at: self.clock.unix(),
            owner: false,
        };
        let exists = self.store.get(&user_pk(user), PROFILE_SK).await?.is_some();
        if !exists && self.partition_in_use(user).await? {
            return Err(AccountError::NotEmpty(user.clone()));
        }
        // Over a deleted account's tombstone: the profile replaces it.
        let created = match self
            .store
            .transact(vec![
                Write::put(profile_item(user, &profile, 1), Cond::NotExists),
                Write::delete(user_pk(user), GONE_SK, Cond::None),
            ])
            .await
        {
            Ok(()) => true,
            Err(StoreError::ConditionFailed { .. }) => {
                self.backfill(user).await?;
                false
            }
            Err(e) => return Err(e.into()),
        };
        self.vault.user_keys(user).await?;
        Ok(created)
    }

    /// Adds the index key to a profile that lacks it (written before the index).
    async fn backfill(&self, user: &UserId) -> Result<(), AccountError> {
        let Some(item) = self.store.get(&user_pk(user), PROFILE_SK).await? else {
            return Ok(());
        };
        if item.gsi1.is_some() {
            return Ok(());
        }
        let profile: Profile = serde_json::from_slice(&item.body).unwrap_or_default();
        match self
            .store
            .put(
                profile_item(user, &profile, item.version + 1),
                Cond::Version(item.version),
            )
            .await
        {
            // Another writer changed it meanwhile: theirs has the key.
            Ok(()) | Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Marks the user as the deployment's owner (`nib user ensure-owner`); a no-op when it is.
    pub async fn set_owner(&self, user: &UserId) -> Result<(), AccountError> {
        for _ in 0..3 {
            let Some(item) = self.store.get(&user_pk(user), PROFILE_SK).await? else {
                return Err(AccountError::Unknown(user.clone()));
            };
            let mut profile: Profile = serde_json::from_slice(&item.body)?;
            if profile.owner && item.gsi1.is_some() {
                return Ok(());
            }
            profile.owner = true;
            match self
                .store
                .put(
                    profile_item(user, &profile, item.version + 1),
                    Cond::Version(item.version),
                )
                .await
            {
                Ok(()) => return Ok(()),
                Err(StoreError::ConditionFailed { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(StoreError::Conflict.into())
    }

    /// Every indexed user, by name.
    pub async fn list(&self) -> Result<Vec<UserSummary>, AccountError> {
        let index = self
            .store
            .query_all(Query::gsi1(USERS_PARTITION, ""))
            .await?;
        let mut users: BTreeMap<String, UserSummary> = BTreeMap::new();
        for item in index {
            let Some((_, sk)) = &item.gsi1 else { continue };
            let (name, deleting) = match sk.strip_suffix(MARKER_SUFFIX) {
                Some(name) => (name, true),
                None => (sk.as_str(), false),
            };
            let Ok(user) = UserId::parse(name) else {
                continue;
            };
            let entry = users.entry(name.to_owned()).or_insert(UserSummary {
                user,
                created_at: None,
                owner: false,
                has_password: false,
                deleting: false,
                pages: 0,
                tokens: 0,
                grants: 0,
            });
            if deleting {
                entry.deleting = true;
            } else {
                let profile: Profile = serde_json::from_slice(&item.body)?;
                entry.created_at = Some(profile.created_at);
                entry.owner = profile.owner;
            }
        }
        let now = self.clock.unix();
        let mut out = Vec::with_capacity(users.len());
        for (_, mut summary) in users {
            let user = summary.user.clone();
            let pk = user_pk(&user);
            let got = self
                .store
                .batch_get(&[
                    (sign_in_pk(&user), "PASSWORD".into()),
                    (pk.clone(), "STATS#PAGES".into()),
                    (pk.clone(), "STATS".into()),
                ])
                .await?;
            summary.has_password = got[0].is_some();
            #[derive(Deserialize)]
            struct LegacyStats {
                #[serde(default)]
                pages: u64,
            }
            let counted = got[1].as_ref().and_then(counter_value).unwrap_or(0);
            let legacy = got[2]
                .as_ref()
                .and_then(|i| serde_json::from_slice::<LegacyStats>(&i.body).ok())
                .map_or(0, |s| s.pages);
            summary.pages = counted + legacy;
            let [tokens, grants, ..] = credential_partitions(&user);
            summary.tokens = self
                .store
                .query_all(Query::gsi1(tokens, ""))
                .await?
                .iter()
                .filter_map(|i| serde_json::from_slice::<TokenRecord>(&i.body).ok())
                .filter(|t| t.revoked_at.is_none())
                .count();
            summary.grants = self
                .store
                .query_all(Query::gsi1(grants, ""))
                .await?
                .iter()
                .filter_map(|i| serde_json::from_slice::<GrantRecord>(&i.body).ok())
                .filter(|g| g.is_active(now))
                .count();
            out.push(summary);
        }
        Ok(out)
    }

    /// Whether anything says the user exists: a profile, a data key, a password, a marker.
    async fn known(&self, user: &UserId) -> Result<bool, StoreError> {
        let got = self
            .store
            .batch_get(&[
                (user_pk(user), PROFILE_SK.into()),
                (sign_in_pk(user), "PASSWORD".into()),
                (sign_in_pk(user), MARKER_SK.into()),
            ])
            .await?;
        if got.iter().any(Option::is_some) {
            return Ok(true);
        }
        // A deleted account's tombstone alone is no user.
        let mut any = Query::table(user_pk(user), "");
        any.limit = 2;
        Ok(self
            .store
            .query(&any)
            .await?
            .items
            .iter()
            .any(|i| i.sk != GONE_SK))
    }

    /// Deletes the user's account: see the module documentation for the steps. `progress` is
    /// told each step as it completes. Running it again after a failure anywhere finishes the
    /// job; an unknown user (nothing stored, no marker) is [`AccountError::Unknown`].
    pub async fn delete(
        &self,
        user: &UserId,
        mut progress: impl FnMut(Step),
    ) -> Result<Deletion, AccountError> {
        if !self.known(user).await? {
            return Err(AccountError::Unknown(user.clone()));
        }
        let mut done = Deletion::default();
        // 1. The marker.
        let marker = Item {
            pk: sign_in_pk(user),
            sk: MARKER_SK.into(),
            gsi1: Some((USERS_PARTITION.into(), format!("{user}{MARKER_SUFFIX}"))),
            version: 1,
            expires_at: None,
            body: serde_json::to_vec(&Marker {
                started_at: self.clock.unix(),
            })?,
        };
        let started_at = match self.store.put(marker, Cond::NotExists).await {
            Ok(()) => self.clock.unix(),
            Err(StoreError::ConditionFailed { .. }) => match self.marker(user).await? {
                Some(item) => serde_json::from_slice::<Marker>(&item.body)?.started_at,
                None => self.clock.unix(),
            },
            Err(e) => return Err(e.into()),
        };
        // The tombstone: every notebook write to the user's partitions is refused from here.
        let tombstone = Item {
            pk: user_pk(user),
            sk: GONE_SK.into(),
            gsi1: None,
            version: 1,
            expires_at: None,
            body: serde_json::to_vec(&serde_json::json!({ "deleted_at": started_at }))?,
        };
        self.store.put(tombstone, Cond::None).await?;
        progress(Step::Marker);

        // 2. The credentials.
        let mut credentials = vec![(sign_in_pk(user), "PASSWORD".to_owned())];
        for partition in credential_partitions(user) {
            for item in self.store.query_all(Query::gsi1(partition, "")).await? {
                credentials.push((item.pk, item.sk));
            }
        }
        done.credentials = delete_keys(self.store.as_ref(), credentials).await?;
        progress(Step::Credentials);

        // 3. The assets.
        done.assets = self.assets.delete_user(user).await?;
        progress(Step::Assets);

        // 4. The key: tombstones over every wrapped data key, in one transaction.
        let pk = user_pk(user);
        let keys = self.store.query_all(Query::table(&pk, KEY_PREFIX)).await?;
        let now = self.clock.unix();
        let tombstone = serde_json::to_vec(&serde_json::json!({ "destroyed_at": now }))?;
        let mut writes: Vec<Write> = keys
            .iter()
            .filter(|k| is_wrapped_key(k))
            .map(|k| {
                Write::put(
                    Item {
                        body: tombstone.clone(),
                        version: k.version + 1,
                        ..k.clone()
                    },
                    Cond::Version(k.version),
                )
            })
            .collect();
        done.keys = writes.len();
        while !writes.is_empty() {
            let rest = writes.split_off(writes.len().min(MAX_TRANSACTION_ITEMS));
            self.store
                .transact(std::mem::replace(&mut writes, rest))
                .await?;
        }
        self.vault.forget(user);
        progress(Step::Key);

        // 5. The items: postings (named by the items' `terms`), the user's partition (keys
        // last), the rest of the sign-in partition, the marker.
        done.items += self.sweep(user).await?;
        let sign_in = self
            .store
            .query_all(Query::table(sign_in_pk(user), ""))
            .await?;
        done.items += delete_keys(
            self.store.as_ref(),
            sign_in
                .into_iter()
                .filter(|i| i.sk != MARKER_SK)
                .map(|i| (i.pk, i.sk))
                .collect(),
        )
        .await?;
        progress(Step::Items);

        // 6. Again once every request that may have started before the marker is over: what
        // such a call wrote outside the guard (an asset, a key).
        let until =
            started_at.saturating_add(i64::try_from(self.settle.as_secs()).unwrap_or(i64::MAX));
        let left = until - self.clock.unix();
        if left > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(left.unsigned_abs())).await;
        }
        done.assets += self.assets.delete_user(user).await?;
        done.items += self.sweep(user).await?;
        self.store
            .transact(vec![Write::delete(sign_in_pk(user), MARKER_SK, Cond::None)])
            .await?;
        self.vault.forget(user);
        progress(Step::Done);
        Ok(done)
    }

    /// Deletes the user's postings (named by the items' `terms`) and every item of the user's
    /// partition but the tombstone, data keys last. How many it deleted.
    async fn sweep(&self, user: &UserId) -> Result<usize, AccountError> {
        let pk = user_pk(user);
        let mut deleted = 0;
        let items: Vec<Item> = self
            .store
            .query_all(Query::table(&pk, ""))
            .await?
            .into_iter()
            .filter(|i| i.sk != GONE_SK)
            .collect();
        let mut terms = BTreeSet::new();
        for item in &items {
            #[derive(Deserialize)]
            struct Terms {
                #[serde(default)]
                terms: Vec<String>,
            }
            if let Ok(t) = serde_json::from_slice::<Terms>(&item.body) {
                terms.extend(t.terms);
            }
        }
        for term in terms {
            let partition = format!("U#{user}#T#{term}");
            let postings = self.store.query_all(Query::table(partition, "")).await?;
            deleted += delete_keys(
                self.store.as_ref(),
                postings.into_iter().map(|i| (i.pk, i.sk)).collect(),
            )
            .await?;
        }
        let (keys, rest): (Vec<Item>, Vec<Item>) = items
            .into_iter()
            .partition(|i| i.sk.starts_with(KEY_PREFIX));
        deleted += delete_keys(
            self.store.as_ref(),
            rest.into_iter().map(|i| (i.pk, i.sk)).collect(),
        )
        .await?;
        deleted += delete_keys(
            self.store.as_ref(),
            keys.into_iter().map(|i| (i.pk, i.sk)).collect(),
        )
        .await?;
        Ok(deleted)
    }
}

/// A `KEY#` item that still holds a wrapped key (not a tombstone).
fn is_wrapped_key(item: &Item) -> bool {
    serde_json::from_slice::<serde_json::Value>(&item.body)
        .is_ok_and(|v| v.get("wrapped").is_some())
}
