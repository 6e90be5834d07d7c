//! What became of a browser upload on AWS: the ingest function imports it out of the
//! browser's sight, so it leaves one small item per uploaded file name that the web app's
//! upload status reads (`upload_result`, an app operation run by the pages function).
//!
//! The item is `U#{user}` / `UPLOAD#{blind(name)}`: the name is the user's and is stored only
//! as its blind hash; a refusal's reason may quote the file (a front-matter date) and is
//! sealed. It says when the upload it describes was made (the object's `LastModified`), so
//! the status can tell this upload's result from an earlier upload of the same name, and it
//! expires after [`UPLOAD_RESULT_TTL_SECS`] (the uploads themselves live 7 days).

use serde::{Deserialize, Serialize};

use super::records::{b64, decode, encode, open, seal, user_pk};
use super::{Notebook, NotebookError};
use crate::domain::{PageId, UserId};
use crate::ports::{Cond, Item};

/// How long an upload's result is kept: a day covers any browser still waiting for it.
pub const UPLOAD_RESULT_TTL_SECS: i64 = 24 * 3600;

fn upload_sk(blind: &str) -> String {
    format!("UPLOAD#{blind}")
}

/// What became of one upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadResult {
    /// When the upload was made (its object's `LastModified`), unix milliseconds.
    pub uploaded_at: i64,
    /// `new`, `updated`, `unchanged` or `refused` (the web app's outcomes).
    pub outcome: String,
    /// The (first) page it made or changed.
    pub page_id: Option<PageId>,
    /// Why it was refused.
    pub reason: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct UploadRecord {
    uploaded_at: i64,
    outcome: String,
    page_id: Option<PageId>,
    #[serde(with = "b64::opt", default)]
    reason: Option<Vec<u8>>,
}

impl Notebook {
    /// Records what became of the upload `name` (replacing an earlier upload's result).
    pub async fn record_upload_result(
        &self,
        user: &UserId,
        name: &str,
        result: &UploadResult,
    ) -> Result<(), NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let sk = upload_sk(&keys.blind("upload", name));
        let reason = result
            .reason
            .as_ref()
            .map(|r| seal(&keys, user, &pk, &sk, "reason", r.as_bytes()));
        let body = encode(&UploadRecord {
            uploaded_at: result.uploaded_at,
            outcome: result.outcome.clone(),
            page_id: result.page_id.clone(),
            reason,
        });
        self.store
            .put(
                Item {
                    pk,
                    sk,
                    gsi1: None,
                    version: 1,
                    expires_at: Some(self.clock.unix() + UPLOAD_RESULT_TTL_SECS),
                    body,
                },
                Cond::None,
            )
            .await?;
        Ok(())
    }

    /// The result of the latest upload of `name`, if one was recorded and has not expired.
    pub async fn upload_result(
        &self,
        user: &UserId,
        name: &str,
    ) -> Result<Option<UploadResult>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let sk = upload_sk(&keys.blind("upload", name));
        let Some(item) = self.store.get(&pk, &sk).await? else {
            return Ok(None);
        };
        let record: UploadRecord = decode("upload result", &item.body)?;
        let reason = match &record.reason {
            Some(sealed) => Some(
                String::from_utf8_lossy(&open(&keys, user, &pk, &sk, "reason", sealed)?)
                    .into_owned(),
            ),
            None => None,
        };
        Ok(Some(UploadResult {
            uploaded_at: record.uploaded_at,
            outcome: record.outcome,
            page_id: record.page_id,
            reason,
        }))
    }
}
