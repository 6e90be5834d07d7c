//! Keys the operator keeps in AWS Secrets Manager: a remote OCR provider's API key, named by
//! `NIB_OCR_OPENAI_API_KEY_SECRET` or `NIB_OCR_GOOGLE_API_KEY_SECRET` (`config::KeyVariables`).
//!
//! [`read_key`] is one `GetSecretValue` at start (`Ports::aws`, for a role that reads ink);
//! the key then lives in the process as a `config::Secret`, whose `Debug` is `[redacted]`.
//! Why a secret rather than the key in the function's environment: Lambda shows a function's
//! variables to anyone allowed `lambda:GetFunctionConfiguration` (and Terraform would keep
//! them in its state), while a secret is read only by the role granted `GetSecretValue` on
//! that one ARN (`infra/iam.tf`).
//!
//! Errors name the variable and what went wrong by kind (Secrets Manager's error code, or the
//! SDK's failure: a timeout, no connection), never the secret's value, nor the service's
//! message (which may quote the id).

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_secretsmanager::operation::get_secret_value::GetSecretValueError;

use crate::config::Secret;

/// Why a key could not be read from Secrets Manager. `variable` is the setting that named
/// the secret, so the operator knows which one to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeySecretError {
    #[error("cannot read the AWS Secrets Manager secret that {variable} names: {kind}")]
    Read {
        variable: &'static str,
        /// Secrets Manager's error code (`ResourceNotFoundException`,
        /// `AccessDeniedException`, `DecryptionFailure`, ...) or the SDK's kind of failure.
        kind: String,
    },
    #[error(
        "the AWS Secrets Manager secret that {variable} names holds no text (SecretString); \
         store the key as a plain-text secret"
    )]
    NotText { variable: &'static str },
    #[error("the AWS Secrets Manager secret that {variable} names is empty")]
    Empty { variable: &'static str },
}

/// The key in the secret `id` (a name or an ARN) names, trimmed: its current version's
/// `SecretString`. `variable` is the setting that named it, for errors.
pub async fn read_key(
    client: &Client,
    variable: &'static str,
    id: &str,
) -> Result<Secret, KeySecretError> {
    let out = client
        .get_secret_value()
        .secret_id(id)
        .send()
        .await
        .map_err(|e| KeySecretError::Read {
            variable,
            kind: error_kind(&e),
        })?;
    let Some(text) = out.secret_string() else {
        return Err(KeySecretError::NotText { variable });
    };
    let key = text.trim();
    if key.is_empty() {
        return Err(KeySecretError::Empty { variable });
    }
    Ok(Secret::new(key))
}

/// What went wrong, by kind only.
fn error_kind(e: &SdkError<GetSecretValueError>) -> String {
    match e {
        SdkError::ServiceError(s) => s.err().code().unwrap_or("an unnamed service error").into(),
        SdkError::TimeoutError(_) => "timed out".into(),
        SdkError::DispatchFailure(d) if d.is_timeout() => "timed out".into(),
        SdkError::DispatchFailure(_) => "cannot connect".into(),
        SdkError::ResponseError(_) => "an answer that could not be read".into(),
        SdkError::ConstructionFailure(_) => "the request could not be built".into(),
        _ => "an unknown failure".into(),
    }
}
