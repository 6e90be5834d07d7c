//! `KmsKeys`: the `Keys` port over AWS KMS (docs/design.md §6).
//!
//! A user's data key is a `GenerateDataKey` (AES_256) under the configured KMS key, with the
//! encryption context `{"user_id": user}`; `Decrypt` passes the same context and the same key
//! id, so a wrapped key moved to another user's items, or wrapped under another KMS key, does
//! not open. The plaintext arrives in an SDK `Blob`; it is moved into zeroizing memory at once
//! and the copy handed to the `Vault` is a `DataKey`, zeroed on drop.
//!
//! Caching is not done here: `crypto::Vault` keeps unwrapped keyrings for a bounded number of
//! users and time (`NIB_KEY_CACHE_SIZE`, `NIB_KEY_CACHE_SECONDS`), so a warm process calls
//! KMS about once per user per lifetime. Key rotation is the Vault's too: a new `KEY#` version
//! is one more `GenerateDataKey`, and older versions still `Decrypt`.
//!
//! [`KmsKeys::server_secret`] gives a server process its own long-lived secrets (used by
//! `Services::open_aws` for the session-id and OAuth keys, and by the oauth function for its CSRF
//! key) the same way: generated once by KMS with the encryption context
//! `{"nib_server_secret": purpose}`, stored wrapped in the table, unwrapped at start. The
//! deployment's data-key policy (`infra/kms.tf`) allows the `user_id` context, and
//! `{"nib_server_secret": "oauth"}` for the oauth role only, so any other purpose needs a key
//! whose policy allows it (the emulator's does).

use async_trait::async_trait;
use aws_sdk_kms::Client;
use aws_sdk_kms::error::SdkError;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::domain::UserId;
use crate::ports::{Cond, DataKey, Item, Keys, KeysError, Store, StoreError, WrappedKey};

/// The encryption-context entry that binds a data key to its user.
pub const USER_CONTEXT: &str = "user_id";
/// The encryption-context entry that binds a server secret to its purpose.
const PURPOSE_CONTEXT: &str = "nib_server_secret";

/// KMS behind the `Keys` port.
#[derive(Debug, Clone)]
pub struct KmsKeys {
    client: Client,
    key_id: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("key service failed")]
    Keys(#[from] KeysError),
    #[error("store failed")]
    Store(#[from] StoreError),
    #[error("the stored server secret {0} is malformed")]
    Malformed(String),
}

/// The body of a server-secret item.
#[derive(Serialize, Deserialize)]
struct SecretRecord {
    wrapped: String,
}

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> KeysError {
    KeysError::Unavailable(Box::new(e))
}

/// 32 bytes of plaintext key from a KMS answer, never left in an unzeroized buffer.
fn key_bytes(plaintext: Option<Blob>) -> Option<Zeroizing<[u8; 32]>> {
    let plaintext = Zeroizing::new(plaintext?.into_inner());
    let key: [u8; 32] = plaintext[..].try_into().ok()?;
    Some(Zeroizing::new(key))
}

impl KmsKeys {
    /// Data keys under `key_id` (a key id, key ARN, alias name or alias ARN).
    pub fn new(client: Client, key_id: impl Into<String>) -> KmsKeys {
        KmsKeys {
            client,
            key_id: key_id.into(),
        }
    }

    async fn generate_with(
        &self,
        context: (&str, &str),
    ) -> Result<(Zeroizing<[u8; 32]>, Vec<u8>), KeysError> {
        let mut out = self
            .client
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .encryption_context(context.0, context.1)
            .send()
            .await
            .map_err(unavailable)?;
        let key = key_bytes(out.plaintext.take()).ok_or_else(|| {
            KeysError::Unavailable("KMS returned no 32-byte plaintext data key".into())
        })?;
        let wrapped = out
            .ciphertext_blob
            .take()
            .map(Blob::into_inner)
            .ok_or_else(|| KeysError::Unavailable("KMS returned no wrapped data key".into()))?;
        Ok((key, wrapped))
    }

    async fn decrypt_with(
        &self,
        context: (&str, &str),
        wrapped: &[u8],
    ) -> Result<Zeroizing<[u8; 32]>, KeysError> {
        use aws_sdk_kms::operation::decrypt::DecryptError as E;
        let mut out = match self
            .client
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(wrapped))
            .encryption_context(context.0, context.1)
            .send()
            .await
        {
            Ok(out) => out,
            // Wrong context, tampered blob, or a blob of another KMS key: it does not open.
            Err(SdkError::ServiceError(e))
                if matches!(
                    e.err(),
                    E::InvalidCiphertextException(_) | E::IncorrectKeyException(_)
                ) =>
            {
                return Err(KeysError::Unwrap);
            }
            Err(e) => return Err(unavailable(e)),
        };
        key_bytes(out.plaintext.take()).ok_or(KeysError::Unwrap)
    }

    /// A 32-byte secret of the server's own for `purpose` (e.g. "session-ids"): generated by
    /// KMS on first use and stored wrapped under `SECRET#{purpose}` / `SECRET`, the same for
    /// every process that uses the table. One `GetItem` and one `Decrypt` per process start.
    pub async fn server_secret(
        &self,
        store: &dyn Store,
        purpose: &str,
    ) -> Result<Zeroizing<[u8; 32]>, SecretError> {
        let (pk, sk) = (format!("SECRET#{purpose}"), "SECRET");
        let context = (PURPOSE_CONTEXT, purpose);
        if let Some(item) = store.get(&pk, sk).await? {
            return self.open_secret(context, &item.body, purpose).await;
        }
        let (secret, wrapped) = self.generate_with(context).await?;
        let body = serde_json::to_vec(&SecretRecord {
            wrapped: BASE64.encode(&wrapped),
        })
        .expect("a struct of one string serializes");
        let item = Item {
            pk: pk.clone(),
            sk: sk.into(),
            gsi1: None,
            version: 1,
            expires_at: None,
            body,
        };
        match store.put(item, Cond::NotExists).await {
            Ok(()) => Ok(secret),
            // Another process created it at the same moment: use theirs.
            Err(StoreError::ConditionFailed { .. }) => {
                let item = store
                    .get(&pk, sk)
                    .await?
                    .ok_or_else(|| SecretError::Malformed(purpose.to_owned()))?;
                self.open_secret(context, &item.body, purpose).await
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn open_secret(
        &self,
        context: (&str, &str),
        body: &[u8],
        purpose: &str,
    ) -> Result<Zeroizing<[u8; 32]>, SecretError> {
        let malformed = || SecretError::Malformed(purpose.to_owned());
        let record: SecretRecord = serde_json::from_slice(body).map_err(|_| malformed())?;
        let wrapped = BASE64.decode(record.wrapped).map_err(|_| malformed())?;
        Ok(self.decrypt_with(context, &wrapped).await?)
    }
}

#[async_trait]
impl Keys for KmsKeys {
    async fn generate(&self, user: &UserId) -> Result<(DataKey, WrappedKey), KeysError> {
        let (key, wrapped) = self.generate_with((USER_CONTEXT, user.as_str())).await?;
        Ok((DataKey(key), WrappedKey(wrapped)))
    }

    async fn unwrap(&self, user: &UserId, wrapped: &WrappedKey) -> Result<DataKey, KeysError> {
        let key = self
            .decrypt_with((USER_CONTEXT, user.as_str()), &wrapped.0)
            .await?;
        Ok(DataKey(key))
    }
}
