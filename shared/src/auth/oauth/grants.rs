//! Grants: what a user approved for one client (scope and resource), created when the client
//! first exchanges its authorization code. Every access token and refresh token names its grant,
//! so revoking the grant ends them all: the MCP endpoint checks it on every request (one read),
//! and the token endpoint before every refresh.
//!
//! Item `GRANT#{id}` / `GRANT`, in the user's `U#{user}#GRANTS` index partition. It expires by
//! TTL when its last refresh token would have (plus an access token's lifetime), so abandoned
//! grants go away on their own; a revoked grant stays listed until then.
//!
//! A replayed authorization code revokes the grant its first exchange creates, and that
//! exchange may still be in flight: the grant may not exist yet. Then the revocation writes the
//! grant itself, already revoked ([`Grants::revoke_or_forestall`]), so the first exchange's
//! create-if-absent fails and it issues nothing.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::OAuthError;
use crate::auth::Scope;
use crate::domain::UserId;
use crate::ports::{Clock, Cond, Item, Query, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRecord {
    pub grant_id: String,
    pub user: UserId,
    pub client_id: String,
    pub client_name: String,
    pub scope: Scope,
    pub resource: String,
    pub created_at: i64,
    /// When a token was last issued under the grant (code exchange or refresh).
    pub last_issued_at: i64,
    pub revoked_at: Option<i64>,
    pub revoked_reason: Option<String>,
    /// Unix seconds after which the grant is forgotten.
    pub expires_at: i64,
    /// The `host[:port]` of the redirect URI the grant's code went to, for the owner's list of
    /// connections (grants made before it was kept have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_host: Option<String>,
    /// Whether the operator vouches for the client's name (a pre-registered client), as the
    /// consent page said; false for grants made before it was kept.
    #[serde(default)]
    pub name_verified: bool,
}

impl GrantRecord {
    pub fn is_active(&self, now: i64) -> bool {
        self.revoked_at.is_none() && self.expires_at > now
    }
}

/// The partition-key prefix of grants: `GRANT#{grant_id}`.
pub const GRANT_PREFIX: &str = "GRANT#";

pub(crate) fn grant_pk(grant_id: &str) -> String {
    format!("{GRANT_PREFIX}{grant_id}")
}

pub(crate) fn user_grants_partition(user: &UserId) -> String {
    format!("U#{user}#GRANTS")
}

pub(crate) fn grant_item(record: &GrantRecord, version: u64) -> Item {
    Item {
        pk: grant_pk(&record.grant_id),
        sk: "GRANT".into(),
        gsi1: Some((
            user_grants_partition(&record.user),
            format!("{:012}#{}", record.created_at, record.grant_id),
        )),
        version,
        expires_at: Some(record.expires_at),
        body: serde_json::to_vec(record).expect("grant record serializes"),
    }
}

#[derive(Clone)]
pub struct Grants {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
}

impl Grants {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Grants { store, clock }
    }

    /// The grant and its item version; `None` when unknown or expired.
    pub async fn get(&self, grant_id: &str) -> Result<Option<(GrantRecord, u64)>, OAuthError> {
        match self.store.get(&grant_pk(grant_id), "GRANT").await? {
            Some(item) => Ok(Some((serde_json::from_slice(&item.body)?, item.version))),
            None => Ok(None),
        }
    }

    /// True when the grant exists, belongs to `user` and is neither revoked nor expired.
    pub async fn is_active(&self, grant_id: &str, user: &UserId) -> Result<bool, StoreError> {
        Ok(self.active_client(grant_id, user).await?.is_some())
    }

    /// The client name of the grant when it exists, belongs to `user` and is neither revoked
    /// nor expired (for the access record); `None` otherwise.
    pub async fn active_client(
        &self,
        grant_id: &str,
        user: &UserId,
    ) -> Result<Option<String>, StoreError> {
        let Some(item) = self.store.get(&grant_pk(grant_id), "GRANT").await? else {
            return Ok(None);
        };
        Ok(serde_json::from_slice::<GrantRecord>(&item.body)
            .ok()
            .filter(|g| &g.user == user && g.is_active(self.clock.unix()))
            .map(|g| g.client_name))
    }

    /// The user's grants, oldest first (revoked ones too, until they expire).
    pub async fn list(&self, user: &UserId) -> Result<Vec<GrantRecord>, OAuthError> {
        let items = self
            .store
            .query_all(Query::gsi1(user_grants_partition(user), ""));
        Ok(items
            .await?
            .iter()
            .map(|item| serde_json::from_slice(&item.body))
            .collect::<Result<_, _>>()?)
    }

    /// Revokes a grant (and so every token issued under it). When `user` is given, only that
    /// user's grant. `None` when there is no such grant; revoking twice keeps the first time.
    pub async fn revoke(
        &self,
        grant_id: &str,
        user: Option<&UserId>,
        reason: &str,
    ) -> Result<Option<GrantRecord>, OAuthError> {
        self.revoke_with(grant_id, user, reason, None).await
    }

    /// Revokes the grant `pending` describes; when it does not exist (yet), stores `pending`
    /// already revoked, so that whoever was about to create it (the first exchange of a
    /// replayed code) finds it taken and fails. `pending.expires_at` must outlast that
    /// creator. Returns the revoked grant.
    pub async fn revoke_or_forestall(
        &self,
        pending: GrantRecord,
        reason: &str,
    ) -> Result<GrantRecord, OAuthError> {
        let grant_id = pending.grant_id.clone();
        match self
            .revoke_with(&grant_id, None, reason, Some(pending))
            .await?
        {
            Some(record) => Ok(record),
            None => Err(OAuthError::Internal("a forestalled grant was not written")),
        }
    }

    async fn revoke_with(
        &self,
        grant_id: &str,
        user: Option<&UserId>,
        reason: &str,
        mut pending: Option<GrantRecord>,
    ) -> Result<Option<GrantRecord>, OAuthError> {
        // A few tries: a concurrent refresh may bump the version between our read and write,
        // and the grant may appear between our read and a forestalling write.
        for _ in 0..5 {
            let Some((mut record, version)) = self.get(grant_id).await? else {
                let Some(mut placeholder) = pending.take() else {
                    return Ok(None);
                };
                placeholder.revoked_at = Some(self.clock.unix());
                placeholder.revoked_reason = Some(reason.to_owned());
                match self
                    .store
                    .put(grant_item(&placeholder, 1), Cond::NotExists)
                    .await
                {
                    Ok(()) => {
                        tracing::info!(grant_id, reason, "grant revoked before it was created");
                        return Ok(Some(placeholder));
                    }
                    Err(StoreError::ConditionFailed { .. }) | Err(StoreError::Conflict) => {
                        // Created meanwhile: revoke what is there now.
                        pending = Some(placeholder);
                        continue;
                    }
                    Err(e) => return Err(e.into()),
                }
            };
            if user.is_some_and(|u| u != &record.user) {
                return Ok(None);
            }
            if record.revoked_at.is_some() {
                return Ok(Some(record));
            }
            record.revoked_at = Some(self.clock.unix());
            record.revoked_reason = Some(reason.to_owned());
            match self
                .store
                .put(grant_item(&record, version + 1), Cond::Version(version))
                .await
            {
                Ok(()) => {
                    tracing::info!(grant_id, reason, "grant revoked");
                    return Ok(Some(record));
                }
                Err(StoreError::ConditionFailed { .. }) | Err(StoreError::Conflict) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(OAuthError::Internal("grant revocation kept conflicting"))
    }
}
