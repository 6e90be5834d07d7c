//! Typed configuration of the AWS back end, read once from the environment at start-up.
//!
//! Every variable is read and checked here, so a process with a missing or malformed one stops
//! before serving anything, with a message naming the variable. Credentials are not ours to
//! read: the SDK's default chain finds them (environment, profile, the Lambda or ECS role). Only
//! tests and the emulator set static credentials, and their secret never prints: `Debug` shows
//! `[redacted]` in its place.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `NIB_TABLE` | the DynamoDB table (docs/design.md §5) | required |
//! | `NIB_BUCKET` | the S3 bucket of page images (docs/design.md §7) | required |
//! | `NIB_KMS_KEY_ID` | the KMS key that wraps users' data keys (id, ARN or alias) | required |
//! | `NIB_ASSET_TTL_SECONDS` | lifetime of presigned page-image URLs | 3600 |
//! | `NIB_KEY_CACHE_SIZE` | how many users' unwrapped keys a process keeps | 1024 |
//! | `NIB_KEY_CACHE_SECONDS` | how long an unwrapped key is kept before KMS is asked again | 900 |
//! | `NIB_SIGNING_KEY_ID` | the KMS key (ECC_NIST_P256, SIGN_VERIFY) that signs access tokens with `kms:Sign` (ES256); unset: a key derived from the KMS-wrapped OAuth secret, with a warning | unset |
//! | `NIB_SIGNING_PUBLIC_KEY` | that key's public half, PEM (SubjectPublicKeyInfo): the mcp front verifies tokens with it alone; oauth skips its `GetPublicKey` | unset |
//! | `AWS_ENDPOINT_URL` | one endpoint for every service (the emulator) | AWS's own |
//! | `AWS_ENDPOINT_URL_LAMBDA` | Lambda's endpoint alone (`cargo lambda watch` in tests) | `AWS_ENDPOINT_URL` |
//! | `AWS_REGION` | the region | the SDK's chain; `us-east-1` with an endpoint URL |

use std::fmt;
use std::time::Duration;

/// S3 refuses SigV4 presigned URLs that live longer than seven days.
pub const MAX_ASSET_TTL_SECONDS: u64 = 7 * 24 * 3600;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error(
        "the environment variable {0} must be set (see docs/operator-guide.md, \"Running against AWS or the emulator\")"
    )]
    Missing(&'static str),
    #[error("the environment variable {name} is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

/// A string that never prints.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Fixed credentials, for the emulator and tests; production uses the SDK's default chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
}

/// Everything the AWS back end needs to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsConfig {
    pub table: String,
    pub bucket: String,
    pub kms_key_id: String,
    /// Lifetime of presigned GET URLs, returned as `signed_url_ttl_seconds`.
    pub asset_ttl_seconds: u64,
    /// Most users whose unwrapped data keys the `Vault` keeps in memory.
    pub key_cache_size: usize,
    /// How long the `Vault` keeps an unwrapped key before asking KMS again.
    pub key_cache_ttl: Duration,
    /// One endpoint for DynamoDB, S3 and KMS (the emulator); `None` on AWS.
    pub endpoint_url: Option<String>,
    /// Lambda's own endpoint, when it is not `endpoint_url` (the front invokes the class
    /// functions under `cargo lambda watch` while the rest runs on moto).
    pub lambda_endpoint_url: Option<String>,
    /// Textract's own endpoint (`AWS_ENDPOINT_URL_TEXTRACT`), when it is not `endpoint_url`:
    /// tests point Textract at a stand-in while DynamoDB, S3 and KMS run on moto. Read here
    /// because the SDK ignores a service's own variable once `endpoint_url` is set in code.
    pub textract_endpoint_url: Option<String>,
    /// `None`: the SDK's region chain (`AWS_REGION`, the profile, the Lambda environment).
    pub region: Option<String>,
    /// `None`: the SDK's default credential chain.
    pub credentials: Option<StaticCredentials>,
    /// The KMS asymmetric key (ECC_NIST_P256) that signs access tokens (`kms:Sign`, ES256):
    /// id, ARN or alias. `None` (an emulator, `nib serve --backend aws`): tokens are signed with
    /// a P-256 key derived from the KMS-wrapped OAuth secret instead.
    pub signing_key_id: Option<String>,
    /// The PEM (SubjectPublicKeyInfo) of that key's public half. The mcp front verifies access
    /// tokens with it alone (no KMS permission); the oauth function uses it instead of asking
    /// KMS (`GetPublicKey`) at start. Checked by [`AwsConfig::validate`].
    pub signing_public_key_pem: Option<String>,
    /// The connector's public base URL (`NIB_PUBLIC_URL`, no trailing slash): page links
    /// (`{public_url}/pages/{id}`) are built on it. `None` in tests that make no links.
    pub public_url: Option<String>,
    /// Notion's API base URL (`NIB_NOTION_API_URL`, else `https://api.notion.com`): the tasks
    /// function pushes tasks there (`notebook::notion`).
    pub notion_api_url: String,
    /// The role the web app's uploads are signed with (`NIB_UPLOAD_ROLE_ARN`, the mcp front
    /// on AWS): each presigned POST is signed with credentials of this role assumed for that
    /// upload alone, a session policy narrowing them to the upload's own keys
    /// (`adapters::aws::presigned_post::upload_session_policy`). `None`: signed with the
    /// process's own credentials (an emulator, an operator's).
    pub upload_role_arn: Option<String>,
}

impl AwsConfig {
    /// Reads the process environment.
    pub fn from_env() -> Result<AwsConfig, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads variables through `lookup` (the environment, or a map in tests). Empty values
    /// count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<AwsConfig, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let required = |name: &'static str| get(name).ok_or(ConfigError::Missing(name));
        let config = AwsConfig {
            table: required("NIB_TABLE")?,
            bucket: required("NIB_BUCKET")?,
            kms_key_id: required("NIB_KMS_KEY_ID")?,
            asset_ttl_seconds: number(get("NIB_ASSET_TTL_SECONDS"), "NIB_ASSET_TTL_SECONDS", 3600)?,
            key_cache_size: number(get("NIB_KEY_CACHE_SIZE"), "NIB_KEY_CACHE_SIZE", 1024)?,
            key_cache_ttl: Duration::from_secs(number(
                get("NIB_KEY_CACHE_SECONDS"),
                "NIB_KEY_CACHE_SECONDS",
                900,
            )?),
            endpoint_url: get("AWS_ENDPOINT_URL"),
            lambda_endpoint_url: get("AWS_ENDPOINT_URL_LAMBDA"),
            textract_endpoint_url: get("AWS_ENDPOINT_URL_TEXTRACT"),
            region: get("AWS_REGION"),
            credentials: None,
            signing_key_id: get("NIB_SIGNING_KEY_ID"),
            signing_public_key_pem: get("NIB_SIGNING_PUBLIC_KEY"),
            public_url: get("NIB_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_owned()),
            notion_api_url: get("NIB_NOTION_API_URL")
                .unwrap_or_else(|| crate::adapters::notion::DEFAULT_API_URL.to_owned()),
            upload_role_arn: get("NIB_UPLOAD_ROLE_ARN"),
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks the values that have limits, naming the variable of the first one out of range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_ASSET_TTL_SECONDS).contains(&self.asset_ttl_seconds) {
            return Err(ConfigError::Invalid {
                name: "NIB_ASSET_TTL_SECONDS",
                reason: format!(
                    "{} is outside 1..={MAX_ASSET_TTL_SECONDS} (S3 presigned URLs live at most 7 days)",
                    self.asset_ttl_seconds
                ),
            });
        }
        if self.key_cache_size == 0 {
            return Err(ConfigError::Invalid {
                name: "NIB_KEY_CACHE_SIZE",
                reason: "must be at least 1".into(),
            });
        }
        if self.key_cache_ttl.is_zero() {
            return Err(ConfigError::Invalid {
                name: "NIB_KEY_CACHE_SECONDS",
                reason: "must be at least 1".into(),
            });
        }
        if let Some(url) = &self.endpoint_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(ConfigError::Invalid {
                name: "AWS_ENDPOINT_URL",
                reason: "must start with http:// or https://".into(),
            });
        }
        if let Some(arn) = &self.upload_role_arn
            && crate::uploads::role_arn_partition(arn).is_none()
        {
            return Err(ConfigError::Invalid {
                name: "NIB_UPLOAD_ROLE_ARN",
                reason: "must be an IAM role ARN (arn:{partition}:iam::{account}:role/{name})"
                    .into(),
            });
        }
        self.signing_public_key()?;
        Ok(())
    }

    /// The access-token verification key of `NIB_SIGNING_PUBLIC_KEY`, if set. Line breaks may
    /// be written as `\n` (env files keep a value on one line).
    pub fn signing_public_key(&self) -> Result<Option<p256::PublicKey>, ConfigError> {
        self.signing_public_key_pem
            .as_deref()
            .map(|pem| {
                let pem = pem.replace("\\n", "\n");
                crate::auth::oauth::jwt::public_key_from_pem(&pem).map_err(|e| {
                    ConfigError::Invalid {
                        name: "NIB_SIGNING_PUBLIC_KEY",
                        reason: e.to_string(),
                    }
                })
            })
            .transpose()
    }
}

fn number<T: std::str::FromStr>(
    value: Option<String>,
    name: &'static str,
    default: T,
) -> Result<T, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
            name,
            reason: format!("{v:?} is not a whole number"),
        }),
    }
}

impl AwsConfig {
    /// The origin presigned S3 URLs of page images have: the endpoint URL's (path-style) when
    /// one is set, else the bucket's virtual-hosted endpoint in the region.
    pub fn asset_origin(&self) -> String {
        match &self.endpoint_url {
            Some(url) => crate::mcp::viewer::origin_of(url),
            None => format!(
                "https://{}.s3.{}.amazonaws.com",
                self.bucket,
                self.region.as_deref().unwrap_or("us-east-1")
            ),
        }
    }
}

/// The outputs of infra/ (`terraform output -json`) and the variables they stand for: an
/// operator's `nib --from-terraform` reads its settings from them instead of the environment.
pub const TERRAFORM_OUTPUTS: [(&str, &str); 5] = [
    ("table_name", "NIB_TABLE"),
    ("bucket_name", "NIB_BUCKET"),
    ("data_key_arn", "NIB_KMS_KEY_ID"),
    ("region", "AWS_REGION"),
    ("public_url", "NIB_PUBLIC_URL"),
];

/// The settings in the JSON of `terraform output -json` (`{"name": {"value": ..}, ..}`), keyed
/// by the variable each stands for ([`TERRAFORM_OUTPUTS`]). Every one of them must be there
/// and a non-empty string: a missing one means infra/ was not applied (or is older).
pub fn terraform_settings(
    json: &str,
) -> Result<std::collections::BTreeMap<&'static str, String>, ConfigError> {
    let invalid = |reason: String| ConfigError::Invalid {
        name: "NIB_TERRAFORM_DIR",
        reason,
    };
    let outputs: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| invalid(format!("`terraform output -json` printed no JSON ({e})")))?;
    if outputs.as_object().is_some_and(|o| o.is_empty()) {
        return Err(invalid(
            "terraform has no outputs there: run `make deploy` (terraform apply) first".into(),
        ));
    }
    TERRAFORM_OUTPUTS
        .iter()
        .map(|&(output, variable)| {
            outputs
                .get(output)
                .and_then(|o| o.get("value"))
                .and_then(|v| v.as_str())
                .filter(|v| !v.trim().is_empty())
                .map(|v| (variable, v.to_owned()))
                .ok_or_else(|| {
                    invalid(format!(
                        "terraform has no output {output:?} (for {variable}): apply the current infra/"
                    ))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        let map: HashMap<&str, &str> = vars.iter().copied().collect();
        move |name| map.get(name).map(|v| (*v).to_owned())
    }

    const REQUIRED: [(&str, &str); 3] = [
        ("NIB_TABLE", "nib"),
        ("NIB_BUCKET", "nib-pages"),
        ("NIB_KMS_KEY_ID", "alias/nib"),
    ];

    #[test]
    fn terraform_outputs_give_the_settings() {
        let json = include_str!("../../tests/fixtures/terraform-output.json");
        let settings = terraform_settings(json).unwrap();
        assert_eq!(settings["NIB_TABLE"], "nib");
        assert_eq!(settings["NIB_BUCKET"], "nib-pages-123456789012-eu-west-1");
        assert!(settings["NIB_KMS_KEY_ID"].starts_with("arn:aws:kms:eu-west-1:"));
        assert_eq!(settings["AWS_REGION"], "eu-west-1");
        assert_eq!(
            settings["NIB_PUBLIC_URL"],
            "https://abc123.execute-api.eu-west-1.amazonaws.com"
        );
        let config = AwsConfig::from_lookup(|n| settings.get(n).cloned()).unwrap();
        assert_eq!(config.region.as_deref(), Some("eu-west-1"));
    }

    #[test]
    fn terraform_outputs_missing_one_name_it() {
        let mut json: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/terraform-output.json"))
                .unwrap();
        json.as_object_mut().unwrap().remove("region");
        let e = terraform_settings(&json.to_string()).unwrap_err();
        assert!(e.to_string().contains("\"region\""), "{e}");
        let e = terraform_settings("{}").unwrap_err();
        assert!(e.to_string().contains("make deploy"), "{e}");
        assert!(terraform_settings("not json").is_err());
    }

    #[test]
    fn defaults_apply_when_only_the_required_variables_are_set() {
        let config = AwsConfig::from_lookup(lookup(&REQUIRED)).unwrap();
        assert_eq!(config.table, "nib");
        assert_eq!(config.bucket, "nib-pages");
        assert_eq!(config.kms_key_id, "alias/nib");
        assert_eq!(config.asset_ttl_seconds, 3600);
        assert_eq!(config.key_cache_size, 1024);
        assert_eq!(config.key_cache_ttl, Duration::from_secs(900));
        assert_eq!(config.endpoint_url, None);
        assert_eq!(config.credentials, None);
        assert_eq!(config.signing_key_id, None);
        assert_eq!(config.signing_public_key_pem, None);
        assert_eq!(config.signing_public_key(), Ok(None));
    }

    /// A P-256 public key in PEM, as Terraform passes it (`aws_kms_public_key.public_key_pem`).
    fn public_pem() -> String {
        use p256::pkcs8::{EncodePublicKey, LineEnding};
        let key = p256::SecretKey::from_slice(&[5; 32]).unwrap().public_key();
        key.to_public_key_pem(LineEnding::LF).unwrap()
    }

    #[test]
    fn every_variable_is_read() {
        let mut vars = REQUIRED.to_vec();
        vars.extend([
            ("NIB_ASSET_TTL_SECONDS", "60"),
            ("NIB_KEY_CACHE_SIZE", "7"),
            ("NIB_KEY_CACHE_SECONDS", "30"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
            ("AWS_ENDPOINT_URL_TEXTRACT", "http://127.0.0.1:5001"),
            ("AWS_REGION", "eu-west-1"),
            ("NIB_SIGNING_KEY_ID", "arn:aws:kms:eu-west-1:1:key/k"),
        ]);
        let pem = public_pem();
        vars.push(("NIB_SIGNING_PUBLIC_KEY", pem.as_str()));
        let config = AwsConfig::from_lookup(lookup(&vars)).unwrap();
        assert_eq!(config.asset_ttl_seconds, 60);
        assert_eq!(config.key_cache_size, 7);
        assert_eq!(config.key_cache_ttl, Duration::from_secs(30));
        assert_eq!(
            config.endpoint_url.as_deref(),
            Some("http://127.0.0.1:5000")
        );
        assert_eq!(
            config.textract_endpoint_url.as_deref(),
            Some("http://127.0.0.1:5001")
        );
        assert_eq!(config.region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            config.signing_key_id.as_deref(),
            Some("arn:aws:kms:eu-west-1:1:key/k")
        );
        assert_eq!(config.signing_public_key_pem.as_deref(), Some(pem.as_str()));
        let key = config.signing_public_key().unwrap().unwrap();
        // The same key written on one line, as an env file holds it.
        let one_line = AwsConfig {
            signing_public_key_pem: Some(pem.replace('\n', "\\n")),
            ..config
        };
        assert!(
            !one_line
                .signing_public_key_pem
                .as_ref()
                .unwrap()
                .contains('\n')
        );
        assert_eq!(one_line.signing_public_key().unwrap(), Some(key));
    }

    #[test]
    fn a_missing_variable_is_named() {
        for (i, (name, _)) in REQUIRED.iter().enumerate() {
            let mut vars = REQUIRED.to_vec();
            vars.remove(i);
            let err = AwsConfig::from_lookup(lookup(&vars)).unwrap_err();
            assert_eq!(err, ConfigError::Missing(name));
            assert!(err.to_string().contains(name), "{err}");
            // Set but empty is missing too.
            vars.push((name, " "));
            assert_eq!(
                AwsConfig::from_lookup(lookup(&vars)).unwrap_err(),
                ConfigError::Missing(name)
            );
        }
    }

    #[test]
    fn malformed_values_are_named() {
        for (name, value) in [
            ("NIB_ASSET_TTL_SECONDS", "an hour"),
            ("NIB_ASSET_TTL_SECONDS", "0"),
            ("NIB_ASSET_TTL_SECONDS", "604801"),
            ("NIB_KEY_CACHE_SIZE", "-1"),
            ("NIB_KEY_CACHE_SIZE", "0"),
            ("NIB_KEY_CACHE_SECONDS", "0"),
            ("AWS_ENDPOINT_URL", "127.0.0.1:5000"),
            ("NIB_SIGNING_PUBLIC_KEY", "arn:aws:kms:eu-west-1:1:key/k"),
            (
                "NIB_SIGNING_PUBLIC_KEY",
                "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
            ),
        ] {
            let mut vars = REQUIRED.to_vec();
            vars.push((name, value));
            match AwsConfig::from_lookup(lookup(&vars)) {
                Err(e @ ConfigError::Invalid { name: n, .. }) if n == name => {
                    assert!(e.to_string().contains(name), "{e}");
                }
                other => panic!("{name}={value}: {other:?}"),
            }
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let mut config = AwsConfig::from_lookup(lookup(&REQUIRED)).unwrap();
        config.credentials = Some(StaticCredentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: Secret::new("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        });
        let shown = format!("{config:?} {config:#?}");
        assert!(!shown.contains("wJalrXUtnFEMI"), "{shown}");
        assert!(shown.contains("[redacted]"));
        assert!(shown.contains("AKIDEXAMPLE"));
    }
}

/// Which OCR engine reads pages that arrive as ink alone (`NIB_OCR`, `--ocr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OcrChoice {
    /// Ink-only pages are stored without text (the library's default).
    #[default]
    Off,
    /// The local PP-OCR engine (`nib serve`, `nib import`; `make tools-ocr` installs it).
    Local,
    /// Amazon Textract (the ingest function).
    Textract,
    /// An OpenAI-compatible chat-completions endpoint with image input, the operator's own
    /// (Ollama, llama.cpp, vLLM or a cloud API): [`OpenAiOcrConfig`].
    OpenAi,
    /// Google Cloud Vision `DOCUMENT_TEXT_DETECTION` with an API key: [`GoogleVisionConfig`].
    GoogleVision,
}

impl OcrChoice {
    pub fn parse(value: &str) -> Result<OcrChoice, ConfigError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "off" | "none" => Ok(OcrChoice::Off),
            "local" => Ok(OcrChoice::Local),
            "textract" => Ok(OcrChoice::Textract),
            "openai" => Ok(OcrChoice::OpenAi),
            "google-vision" => Ok(OcrChoice::GoogleVision),
            other => Err(ConfigError::Invalid {
                name: "NIB_OCR",
                reason: format!(
                    "{other:?} is not one of local, textract, openai, google-vision, off"
                ),
            }),
        }
    }

    /// `NIB_OCR`, when set.
    pub fn from_env() -> Result<Option<OcrChoice>, ConfigError> {
        std::env::var("NIB_OCR")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| OcrChoice::parse(&v))
            .transpose()
    }
}

impl std::fmt::Display for OcrChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OcrChoice::Off => "off",
            OcrChoice::Local => "local",
            OcrChoice::Textract => "textract",
            OcrChoice::OpenAi => "openai",
            OcrChoice::GoogleVision => "google-vision",
        })
    }
}

/// How a remote OCR provider is called: how long one request may take, how many times a page
/// is tried, and the first pause between tries (doubled each time; a `Retry-After` the
/// provider sends is followed, up to [`MAX_RETRY_AFTER`]).
///
/// | variable | meaning | default |
/// |---|---|---|
/// | `NIB_OCR_TIMEOUT_SECONDS` | one request, connection to last byte | 120 |
/// | `NIB_OCR_ATTEMPTS` | tries per page on 429, 5xx, timeouts (1-10) | 4 |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteCallPolicy {
    pub timeout: Duration,
    pub attempts: u32,
    pub backoff: Duration,
}

/// The longest `Retry-After` a remote OCR provider is obeyed for: past it the page is given up
/// (stored unread) rather than holding an import for minutes.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

impl Default for RemoteCallPolicy {
    fn default() -> Self {
        RemoteCallPolicy {
            // A vision-language model on a CPU can take a minute for a page.
            timeout: Duration::from_secs(120),
            attempts: 4,
            backoff: Duration::from_millis(500),
        }
    }
}

impl RemoteCallPolicy {
    fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let d = RemoteCallPolicy::default();
        let timeout = number(
            get("NIB_OCR_TIMEOUT_SECONDS"),
            "NIB_OCR_TIMEOUT_SECONDS",
            d.timeout.as_secs(),
        )?;
        if !(1..=900).contains(&timeout) {
            return Err(ConfigError::Invalid {
                name: "NIB_OCR_TIMEOUT_SECONDS",
                reason: "must be 1 to 900".into(),
            });
        }
        let attempts = number(get("NIB_OCR_ATTEMPTS"), "NIB_OCR_ATTEMPTS", d.attempts)?;
        if !(1..=10).contains(&attempts) {
            return Err(ConfigError::Invalid {
                name: "NIB_OCR_ATTEMPTS",
                reason: "must be 1 to 10".into(),
            });
        }
        Ok(RemoteCallPolicy {
            timeout: Duration::from_secs(timeout),
            attempts,
            backoff: d.backoff,
        })
    }
}

/// The variables that may give one remote OCR provider's key. At most one is set: which one
/// would win is a guess, so more than one is refused, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyVariables {
    /// The key itself.
    pub key: &'static str,
    /// A file holding it (a mounted secret, a systemd credential).
    pub file: &'static str,
    /// The name or ARN of an AWS Secrets Manager secret whose `SecretString` is the key. Read
    /// once at start on the AWS back end (`Ports::aws`), so that a Lambda function's key is in
    /// no configuration that `lambda:GetFunctionConfiguration` or Terraform's state shows.
    pub aws_secret: &'static str,
}

/// `NIB_OCR=openai`'s key.
pub const OPENAI_KEY_VARIABLES: KeyVariables = KeyVariables {
    key: "NIB_OCR_OPENAI_API_KEY",
    file: "NIB_OCR_OPENAI_API_KEY_FILE",
    aws_secret: "NIB_OCR_OPENAI_API_KEY_SECRET",
};

/// `NIB_OCR=google-vision`'s key.
pub const GOOGLE_KEY_VARIABLES: KeyVariables = KeyVariables {
    key: "NIB_OCR_GOOGLE_API_KEY",
    file: "NIB_OCR_GOOGLE_API_KEY_FILE",
    aws_secret: "NIB_OCR_GOOGLE_API_KEY_SECRET",
};

impl KeyVariables {
    /// The variables of the engine `choice`, when it is a provider that takes a key.
    pub fn of(choice: OcrChoice) -> Option<KeyVariables> {
        match choice {
            OcrChoice::OpenAi => Some(OPENAI_KEY_VARIABLES),
            OcrChoice::GoogleVision => Some(GOOGLE_KEY_VARIABLES),
            OcrChoice::Off | OcrChoice::Local | OcrChoice::Textract => None,
        }
    }

    /// The id of the Secrets Manager secret that holds the key, when that is where it is
    /// (read from the process environment). More than one of the three variables set is
    /// refused here, before any secret is read.
    pub fn aws_secret_id(&self) -> Result<Option<String>, ConfigError> {
        self.aws_secret_id_in(|n| std::env::var(n).ok())
    }

    /// [`KeyVariables::aws_secret_id`] over `lookup` (the environment, or a map in tests).
    pub fn aws_secret_id_in(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<String>, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        self.only_one(&get)?;
        Ok(get(self.aws_secret).map(|id| id.trim().to_owned()))
    }

    /// Refuses more than one of the variables set, naming them (never a value).
    fn only_one(&self, get: &impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let set: Vec<&'static str> = [self.key, self.file, self.aws_secret]
            .into_iter()
            .filter(|name| get(name).is_some())
            .collect();
        if set.len() > 1 {
            return Err(ConfigError::Invalid {
                name: set[set.len() - 1],
                reason: format!(
                    "{} are set; set only one of {}, {} or {}",
                    set.join(" and "),
                    self.key,
                    self.file,
                    self.aws_secret
                ),
            });
        }
        Ok(())
    }

    /// The key, trimmed: from the variable, the file, or (`from_aws_secret`) the Secrets
    /// Manager secret the caller read; `None` when none of the three is set.
    fn read(
        &self,
        get: &impl Fn(&str) -> Option<String>,
        from_aws_secret: Option<Secret>,
    ) -> Result<Option<Secret>, ConfigError> {
        self.only_one(get)?;
        if let Some(key) = get(self.key) {
            return Ok(Some(Secret::new(key.trim())));
        }
        if let Some(path) = get(self.file) {
            let name = self.file;
            let key = std::fs::read_to_string(path.trim()).map_err(|e| ConfigError::Invalid {
                name,
                // The path is the operator's own setting; the file's content never shows.
                reason: format!("cannot read {:?}: {}", path.trim(), e.kind()),
            })?;
            let key = key.trim();
            if key.is_empty() {
                return Err(ConfigError::Invalid {
                    name,
                    reason: "the file is empty".into(),
                });
            }
            return Ok(Some(Secret::new(key)));
        }
        if get(self.aws_secret).is_some() {
            // Read by `Ports::aws` (it is I/O); a local back end has no AWS client to read it.
            return from_aws_secret.map(Some).ok_or(ConfigError::Invalid {
                name: self.aws_secret,
                reason: format!(
                    "an AWS Secrets Manager secret is read on the AWS back end only (the \
                     functions, --backend aws); set {} or {} here",
                    self.key, self.file
                ),
            });
        }
        Ok(None)
    }
}

fn http_url(get: &impl Fn(&str) -> Option<String>, name: &'static str) -> Option<String> {
    get(name).map(|u| u.trim().trim_end_matches('/').to_owned())
}

fn check_http_url(url: &str, name: &'static str) -> Result<(), ConfigError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            name,
            reason: format!("{url:?} is not an http(s) URL"),
        })
    }
}

/// `NIB_OCR=openai`: an OpenAI-compatible chat-completions endpoint that takes images.
/// `Debug` shows the key as `[redacted]`.
///
/// | variable | meaning | default |
/// |---|---|---|
/// | `NIB_OCR_OPENAI_BASE_URL` | the API's base, `/chat/completions` is added (`http://127.0.0.1:11434/v1` for Ollama) | required |
/// | `NIB_OCR_OPENAI_MODEL` | the model, one that reads images | required |
/// | `NIB_OCR_OPENAI_API_KEY` | sent as `Authorization: Bearer`; local servers need none | unset |
/// | `NIB_OCR_OPENAI_API_KEY_FILE` | a file holding the key instead | unset |
/// | `NIB_OCR_OPENAI_API_KEY_SECRET` | an AWS Secrets Manager secret (name or ARN) holding it instead, read at start on the AWS back end | unset |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiOcrConfig {
    pub base_url: String,
    pub model: String,
    pub api_key: Option<Secret>,
    pub policy: RemoteCallPolicy,
}

impl OpenAiOcrConfig {
    /// Reads the process environment; `from_aws_secret` is the key when
    /// `NIB_OCR_OPENAI_API_KEY_SECRET` names where it is (read by the caller).
    pub fn from_env(from_aws_secret: Option<Secret>) -> Result<Self, ConfigError> {
        Self::from_lookup_with(|n| std::env::var(n).ok(), from_aws_secret)
    }

    /// Reads variables through `lookup`, with no key from Secrets Manager.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_lookup_with(lookup, None)
    }

    /// Reads variables through `lookup`, the key from Secrets Manager being `from_aws_secret`.
    pub fn from_lookup_with(
        lookup: impl Fn(&str) -> Option<String>,
        from_aws_secret: Option<Secret>,
    ) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let base_url = http_url(&get, "NIB_OCR_OPENAI_BASE_URL")
            .ok_or(ConfigError::Missing("NIB_OCR_OPENAI_BASE_URL"))?;
        check_http_url(&base_url, "NIB_OCR_OPENAI_BASE_URL")?;
        Ok(OpenAiOcrConfig {
            base_url,
            model: get("NIB_OCR_OPENAI_MODEL")
                .map(|m| m.trim().to_owned())
                .ok_or(ConfigError::Missing("NIB_OCR_OPENAI_MODEL"))?,
            api_key: OPENAI_KEY_VARIABLES.read(&get, from_aws_secret)?,
            policy: RemoteCallPolicy::from_lookup(&get)?,
        })
    }
}

/// `NIB_OCR=google-vision`: Google Cloud Vision's `images:annotate` with an API key (sent in
/// the `X-Goog-Api-Key` header, not the URL, so no URL that is logged anywhere carries it).
/// `Debug` shows the key as `[redacted]`.
///
/// | variable | meaning | default |
/// |---|---|---|
/// | `NIB_OCR_GOOGLE_API_KEY` | the API key (restrict it to the Vision API) | required, or the file |
/// | `NIB_OCR_GOOGLE_API_KEY_FILE` | a file holding the key instead | unset |
/// | `NIB_OCR_GOOGLE_API_KEY_SECRET` | an AWS Secrets Manager secret (name or ARN) holding it instead, read at start on the AWS back end | unset |
/// | `NIB_OCR_GOOGLE_VISION_URL` | the API's base (tests point it at the stand-in) | `https://vision.googleapis.com` |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoogleVisionConfig {
    pub base_url: String,
    pub api_key: Secret,
    pub policy: RemoteCallPolicy,
}

/// Google Cloud Vision's own endpoint.
pub const GOOGLE_VISION_URL: &str = "https://vision.googleapis.com";

impl GoogleVisionConfig {
    /// Reads the process environment; `from_aws_secret` is the key when
    /// `NIB_OCR_GOOGLE_API_KEY_SECRET` names where it is (read by the caller).
    pub fn from_env(from_aws_secret: Option<Secret>) -> Result<Self, ConfigError> {
        Self::from_lookup_with(|n| std::env::var(n).ok(), from_aws_secret)
    }

    /// Reads variables through `lookup`, with no key from Secrets Manager.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::from_lookup_with(lookup, None)
    }

    /// Reads variables through `lookup`, the key from Secrets Manager being `from_aws_secret`.
    pub fn from_lookup_with(
        lookup: impl Fn(&str) -> Option<String>,
        from_aws_secret: Option<Secret>,
    ) -> Result<Self, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let base_url = http_url(&get, "NIB_OCR_GOOGLE_VISION_URL")
            .unwrap_or_else(|| GOOGLE_VISION_URL.to_owned());
        check_http_url(&base_url, "NIB_OCR_GOOGLE_VISION_URL")?;
        Ok(GoogleVisionConfig {
            base_url,
            api_key: GOOGLE_KEY_VARIABLES
                .read(&get, from_aws_secret)?
                .ok_or(ConfigError::Missing("NIB_OCR_GOOGLE_API_KEY"))?,
            policy: RemoteCallPolicy::from_lookup(&get)?,
        })
    }
}

#[cfg(test)]
mod ocr_config_tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn provider_names_parse_and_print_back() {
        for choice in [
            OcrChoice::Off,
            OcrChoice::Local,
            OcrChoice::Textract,
            OcrChoice::OpenAi,
            OcrChoice::GoogleVision,
        ] {
            assert_eq!(OcrChoice::parse(&choice.to_string()), Ok(choice));
        }
        assert!(OcrChoice::parse("gpt").is_err());
    }

    #[test]
    fn openai_settings_are_read_and_the_key_never_prints() {
        let config = OpenAiOcrConfig::from_lookup(lookup(&[
            ("NIB_OCR_OPENAI_BASE_URL", "http://127.0.0.1:11434/v1/"),
            ("NIB_OCR_OPENAI_MODEL", "qwen2.5vl:7b"),
            ("NIB_OCR_OPENAI_API_KEY", "sk-very-secret"),
            ("NIB_OCR_ATTEMPTS", "2"),
        ]))
        .unwrap();
        assert_eq!(config.base_url, "http://127.0.0.1:11434/v1");
        assert_eq!(config.model, "qwen2.5vl:7b");
        assert_eq!(config.api_key.as_ref().unwrap().expose(), "sk-very-secret");
        assert_eq!(config.policy.attempts, 2);
        let shown = format!("{config:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        // No key is fine (a local server), no model or URL is not.
        let no_key = OpenAiOcrConfig::from_lookup(lookup(&[
            ("NIB_OCR_OPENAI_BASE_URL", "http://h/v1"),
            ("NIB_OCR_OPENAI_MODEL", "m"),
        ]))
        .unwrap();
        assert_eq!(no_key.api_key, None);
        assert_eq!(
            OpenAiOcrConfig::from_lookup(lookup(&[("NIB_OCR_OPENAI_BASE_URL", "http://h")])),
            Err(ConfigError::Missing("NIB_OCR_OPENAI_MODEL"))
        );
        assert!(matches!(
            OpenAiOcrConfig::from_lookup(lookup(&[
                ("NIB_OCR_OPENAI_BASE_URL", "h:11434"),
                ("NIB_OCR_OPENAI_MODEL", "m"),
            ])),
            Err(ConfigError::Invalid {
                name: "NIB_OCR_OPENAI_BASE_URL",
                ..
            })
        ));
    }

    #[test]
    fn a_key_comes_from_one_of_the_variable_the_file_and_an_aws_secret() {
        const ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:nib/ocr-AbCdEf";
        let openai = |extra: &[(&'static str, &'static str)], from_secret: Option<&str>| {
            let mut vars = vec![
                ("NIB_OCR_OPENAI_BASE_URL", "https://api.openai.com/v1"),
                ("NIB_OCR_OPENAI_MODEL", "gpt-4o-mini"),
            ];
            vars.extend_from_slice(extra);
            OpenAiOcrConfig::from_lookup_with(lookup(&vars), from_secret.map(Secret::new))
        };
        // The secret's id is found (trimmed) before anything is read; the key it holds comes
        // back from the caller.
        let secret_only = [(
            "NIB_OCR_OPENAI_API_KEY_SECRET",
            " arn:aws:secretsmanager:eu-west-1:123456789012:secret:nib/ocr-AbCdEf\n",
        )];
        assert_eq!(
            OPENAI_KEY_VARIABLES.aws_secret_id_in(lookup(&secret_only)),
            Ok(Some(ARN.to_owned()))
        );
        let config = openai(&secret_only, Some("sk-from-the-secret")).unwrap();
        assert_eq!(
            config.api_key.as_ref().map(Secret::expose),
            Some("sk-from-the-secret")
        );
        assert!(!format!("{config:?}").contains("sk-from-the-secret"));
        // Where no secret can be read (the local back end), the variable is named.
        assert!(matches!(
            openai(&secret_only, None),
            Err(ConfigError::Invalid {
                name: "NIB_OCR_OPENAI_API_KEY_SECRET",
                ..
            })
        ));
        // Nothing set: no key (a local server needs none), and no secret to read.
        assert_eq!(OPENAI_KEY_VARIABLES.aws_secret_id_in(lookup(&[])), Ok(None));
        assert_eq!(openai(&[], None).unwrap().api_key, None);

        // Two of the three: refused before any secret is read, naming the variables, never
        // a value.
        for both in [
            [
                ("NIB_OCR_OPENAI_API_KEY", "sk-very-secret"),
                ("NIB_OCR_OPENAI_API_KEY_SECRET", ARN),
            ],
            [
                ("NIB_OCR_OPENAI_API_KEY_FILE", "/run/secrets/openai"),
                ("NIB_OCR_OPENAI_API_KEY_SECRET", ARN),
            ],
            [
                ("NIB_OCR_OPENAI_API_KEY", "sk-very-secret"),
                ("NIB_OCR_OPENAI_API_KEY_FILE", "/run/secrets/openai"),
            ],
        ] {
            let Err(e) = OPENAI_KEY_VARIABLES.aws_secret_id_in(lookup(&both)) else {
                panic!("{both:?} accepted");
            };
            let shown = e.to_string();
            assert!(
                shown.contains(both[0].0) && shown.contains(both[1].0),
                "{shown}"
            );
            assert!(
                !shown.contains("sk-very-secret") && !shown.contains(ARN),
                "{shown}"
            );
            assert!(
                matches!(openai(&both, Some("sk-from-the-secret")), Err(ConfigError::Invalid { name, .. }) if name == both[1].0)
            );
        }

        // Google's key likewise; it is required, from any of the three.
        let config = GoogleVisionConfig::from_lookup_with(
            lookup(&[("NIB_OCR_GOOGLE_API_KEY_SECRET", "nib/vision")]),
            Some(Secret::new("AIza-from-the-secret")),
        )
        .unwrap();
        assert_eq!(config.api_key.expose(), "AIza-from-the-secret");
        assert_eq!(
            GOOGLE_KEY_VARIABLES
                .aws_secret_id_in(lookup(&[("NIB_OCR_GOOGLE_API_KEY_SECRET", "nib/vision")])),
            Ok(Some("nib/vision".to_owned()))
        );
        assert!(matches!(
            GoogleVisionConfig::from_lookup_with(
                lookup(&[
                    ("NIB_OCR_GOOGLE_API_KEY", "AIza-inline"),
                    ("NIB_OCR_GOOGLE_API_KEY_SECRET", "nib/vision"),
                ]),
                Some(Secret::new("AIza-from-the-secret")),
            ),
            Err(ConfigError::Invalid {
                name: "NIB_OCR_GOOGLE_API_KEY_SECRET",
                ..
            })
        ));
        assert_eq!(
            KeyVariables::of(OcrChoice::OpenAi),
            Some(OPENAI_KEY_VARIABLES)
        );
        assert_eq!(
            KeyVariables::of(OcrChoice::GoogleVision),
            Some(GOOGLE_KEY_VARIABLES)
        );
        assert_eq!(KeyVariables::of(OcrChoice::Textract), None);
    }

    #[test]
    fn a_key_comes_from_the_file_the_operator_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("vision.key");
        std::fs::write(&file, "AIza-from-file\n").unwrap();
        let path = file.to_str().unwrap();
        let config =
            GoogleVisionConfig::from_lookup(lookup(&[("NIB_OCR_GOOGLE_API_KEY_FILE", path)]))
                .unwrap();
        assert_eq!(config.api_key.expose(), "AIza-from-file");
        assert_eq!(config.base_url, GOOGLE_VISION_URL);
        assert!(!format!("{config:?}").contains("AIza"));
        assert_eq!(
            GoogleVisionConfig::from_lookup(lookup(&[])),
            Err(ConfigError::Missing("NIB_OCR_GOOGLE_API_KEY"))
        );
        assert!(matches!(
            GoogleVisionConfig::from_lookup(lookup(&[
                ("NIB_OCR_GOOGLE_API_KEY", "k"),
                ("NIB_OCR_GOOGLE_API_KEY_FILE", path),
            ])),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            GoogleVisionConfig::from_lookup(lookup(&[
                ("NIB_OCR_GOOGLE_API_KEY", "k"),
                ("NIB_OCR_ATTEMPTS", "0"),
            ])),
            Err(ConfigError::Invalid {
                name: "NIB_OCR_ATTEMPTS",
                ..
            })
        ));
    }
}
