//! Access-token signing on AWS: [`KmsSigner`], and the keys each function builds its
//! authorization server from.
//!
//! The deployment's signing key is a KMS asymmetric key (ECC_NIST_P256, SIGN_VERIFY,
//! `infra/kms.tf`): the private half never leaves KMS, and only the oauth function may
//! `kms:Sign` with it (`ECDSA_SHA_256`). One token is one `Sign` call with the JWT signing
//! input as a raw message (KMS hashes it). KMS answers with a DER ECDSA signature, which JWS
//! wants as raw r||s; S is made low on the way.
//!
//! The public half comes from configuration (`NIB_SIGNING_PUBLIC_KEY`, which Terraform reads at
//! deploy time) or, without it, from one `GetPublicKey` at start. Every signature is checked
//! against it before a token leaves, so a configured public key of another key fails the token
//! request instead of issuing tokens that the front refuses.
//!
//! - oauth: [`OAuthKeys::load`] gives the signer ([`KmsSigner`] when `NIB_SIGNING_KEY_ID` is
//!   set) and the consent form's CSRF key (from the KMS-wrapped `SECRET#oauth`).
//! - mcp: [`verify_only`] gives the public key alone; it has no KMS permission and makes no
//!   AWS call for it.

use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_kms::Client;
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};
use p256::PublicKey;
use zeroize::Zeroizing;

use super::AwsClients;
use super::kms::SecretError;
use crate::auth::oauth::csrf_key;
use crate::auth::oauth::jwt::{
    LocalSigner, SignError, TokenSigner, VerifyOnly, es256_from_der, kid_of, public_key_from_der,
    verifies,
};
use crate::config::{AwsConfig, ConfigError};
use crate::ports::Store;

/// Signs access tokens with a KMS asymmetric key (`kms:Sign`, ECDSA_SHA_256).
pub struct KmsSigner {
    client: Client,
    key_id: String,
    public: PublicKey,
    kid: String,
}

impl std::fmt::Debug for KmsSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KmsSigner")
            .field("key_id", &self.key_id)
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> SignError {
    SignError::Unavailable(Box::new(e))
}

impl KmsSigner {
    /// A signer with the KMS key `key_id` (id, ARN or alias). `public` is its public half when
    /// configured; `None` asks KMS for it (one `GetPublicKey`, which needs that permission).
    pub async fn new(
        client: Client,
        key_id: impl Into<String>,
        public: Option<PublicKey>,
    ) -> Result<KmsSigner, SignError> {
        let key_id = key_id.into();
        let public = match public {
            Some(public) => public,
            None => {
                let der = client
                    .get_public_key()
                    .key_id(&key_id)
                    .send()
                    .await
                    .map_err(unavailable)?
                    .public_key
                    .ok_or(SignError::Malformed("public key"))?;
                // Anything but a P-256 key (RSA, another curve) does not parse.
                public_key_from_der(der.as_ref()).map_err(|_| SignError::Malformed("public key"))?
            }
        };
        Ok(KmsSigner {
            client,
            key_id,
            kid: kid_of(&public),
            public,
        })
    }
}

#[async_trait]
impl TokenSigner for KmsSigner {
    fn kid(&self) -> &str {
        &self.kid
    }

    fn public_key(&self) -> &PublicKey {
        &self.public
    }

    async fn sign(&self, signing_input: &[u8]) -> Result<[u8; 64], SignError> {
        let der = self
            .client
            .sign()
            .key_id(&self.key_id)
            .message(Blob::new(signing_input))
            .message_type(MessageType::Raw)
            .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(unavailable)?
            .signature
            .ok_or(SignError::Malformed("signature"))?;
        let signature = es256_from_der(der.as_ref())?;
        if !verifies(&self.public, signing_input, &signature) {
            return Err(SignError::KeyMismatch);
        }
        Ok(signature)
    }
}

/// What the authorization server signs and MACs with on AWS.
pub struct OAuthKeys {
    /// Signs access tokens: [`KmsSigner`] when `NIB_SIGNING_KEY_ID` is set, else a
    /// [`LocalSigner`] derived from the OAuth secret.
    pub signer: Arc<dyn TokenSigner>,
    /// The consent form's CSRF key, derived from the OAuth secret.
    pub csrf_key: Zeroizing<[u8; 32]>,
}

#[derive(Debug, thiserror::Error)]
pub enum OAuthKeysError {
    #[error("cannot load the OAuth server secret")]
    Secret(#[from] SecretError),
    #[error("cannot use the access-token signing key")]
    Signer(#[from] SignError),
    #[error("invalid configuration")]
    Config(#[from] ConfigError),
}

impl OAuthKeys {
    /// The oauth function's keys: the KMS-wrapped server secret `SECRET#oauth` (one `GetItem`
    /// and one `Decrypt`; on the table's first start `GenerateDataKey` and `PutItem`) for the
    /// CSRF key, and the signer. With `NIB_SIGNING_KEY_ID` that is KMS (no call at start when
    /// `NIB_SIGNING_PUBLIC_KEY` is set, else one `GetPublicKey`); without it (an emulator,
    /// `nib serve --backend aws`) a P-256 key derived from the same secret, with a warning: that
    /// key sits in the process's memory, which the deployment avoids.
    pub async fn load(
        config: &AwsConfig,
        clients: &AwsClients,
        store: &dyn Store,
    ) -> Result<OAuthKeys, OAuthKeysError> {
        let secret = clients.keys(config).server_secret(store, "oauth").await?;
        let signer: Arc<dyn TokenSigner> = match &config.signing_key_id {
            Some(key_id) => Arc::new(
                KmsSigner::new(clients.kms.clone(), key_id, config.signing_public_key()?).await?,
            ),
            None => {
                tracing::warn!(
                    "NIB_SIGNING_KEY_ID is not set: access tokens are signed with a key derived \
                     from the OAuth server secret, held in memory, instead of a KMS signing key"
                );
                Arc::new(LocalSigner::from_oauth_secret(&secret))
            }
        };
        Ok(OAuthKeys {
            signer,
            csrf_key: csrf_key(&secret),
        })
    }
}

/// The mcp front's verification key: `NIB_SIGNING_PUBLIC_KEY` alone (no AWS call). Missing is
/// an error: without it the front could accept no access token.
pub fn verify_only(config: &AwsConfig) -> Result<VerifyOnly, ConfigError> {
    config
        .signing_public_key()?
        .map(VerifyOnly::new)
        .ok_or(ConfigError::Missing("NIB_SIGNING_PUBLIC_KEY"))
}
