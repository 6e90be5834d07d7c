//! The AWS adapters: the ports over DynamoDB, S3 and KMS (docs/design.md §5-§7), and the SDK clients
//! they share.
//!
//! # Layout
//!
//! - [`dynamo`]: `DynamoStore`, the `Store` port over one table.
//! - [`s3`]: `S3Assets`, page images with presigned GET and PUT URLs, and presigned POST
//!   uploads signed by [`presigned_post`] (the SDK has no presigned POST).
//! - [`kms`]: `KmsKeys`, envelope keys with the user id as encryption context.
//! - [`signing`]: `KmsSigner` (ES256 access tokens signed by KMS), the oauth function's
//!   `OAuthKeys` and the mcp front's verify-only key.
//! - [`textract`] (feature `textract`): `TextractOcr`, the `Ocr` port over Amazon Textract's
//!   `DetectDocumentText`, one page image per call (the ingest function's engine).
//! - [`secrets`]: a remote OCR provider's key read from AWS Secrets Manager at start.
//! - [`calls`]: `CallCounter`, the SDK interceptor that counts requests per operation.
//!
//! The emulator the tests run these adapters on (moto), the Textract stand-in and the
//! adapters' tests are in the `nib-testkit` crate (`testkit/`): nothing of them ships.
//!
//! # Clients
//!
//! [`AwsClients::connect`] builds the three clients once per process (at cold start on Lambda)
//! from [`AwsConfig`]: the SDK's credential and region chains unless the config fixes them,
//! the standard retry mode (3 attempts, throttling and 5xx retried with backoff), bounded
//! timeouts (per attempt and per operation on AWS; per operation only on an emulator, which
//! queues a burst of requests behind one thread), and one HTTPS client on rustls with *ring* (the SDK's default client would
//! build aws-lc-rs, a C library, on every clean build). With `AWS_ENDPOINT_URL` set every
//! service goes to that endpoint and S3 uses path-style addressing, as emulators need.
//! `AWS_ENDPOINT_URL_LAMBDA` and `AWS_ENDPOINT_URL_TEXTRACT` move one service elsewhere
//! ([`AwsConfig`] reads them: once the shared endpoint is set in code, the SDK no longer looks
//! at a service's own variable).
//!
//! The Textract client (feature `textract`, the ingest function only) has timeouts of its
//! own: recognising a page takes seconds, not the milliseconds of a table read.

pub mod calls;
pub mod dynamo;
pub mod kms;
pub mod lambda;
pub mod presigned_post;
pub mod s3;
pub mod secrets;
pub mod signing;
#[cfg(feature = "textract")]
pub mod textract;

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::timeout::TimeoutConfig;
use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::client::interceptors::SharedInterceptor;

pub use calls::{CallCounter, CallCounts};
pub use dynamo::DynamoStore;
pub use kms::KmsKeys;
pub use lambda::{ClassFunctions, LambdaDispatch};
pub use s3::S3Assets;
#[cfg(feature = "textract")]
pub use textract::TextractOcr;

use crate::config::AwsConfig;

/// The region used with an endpoint URL when none is configured (emulators ignore it, but
/// request signing needs one).
const EMULATOR_REGION: &str = "us-east-1";

/// The SDK clients of one process, and the counter of the requests they send.
#[derive(Debug, Clone)]
pub struct AwsClients {
    pub dynamodb: aws_sdk_dynamodb::Client,
    pub s3: aws_sdk_s3::Client,
    /// Signs S3 URLs only. It has no interceptors: presigning sends nothing, so it must not
    /// count (or fail) like a request.
    pub s3_presigner: aws_sdk_s3::Client,
    pub kms: aws_sdk_kms::Client,
    /// Invokes the class functions (the `mcp` front only); `AWS_ENDPOINT_URL_LAMBDA` points it
    /// elsewhere than the other services.
    pub lambda: aws_sdk_lambda::Client,
    /// Assumes the uploads role for each presigned POST (the `mcp` front,
    /// `AwsConfig::upload_role_arn`).
    pub sts: aws_sdk_sts::Client,
    /// Reads a remote OCR provider's key at start (`NIB_OCR_*_API_KEY_SECRET`, the ingest
    /// function: [`secrets::read_key`]).
    pub secretsmanager: aws_sdk_secretsmanager::Client,
    /// Reads page images (the ingest function: [`TextractOcr`]); `AWS_ENDPOINT_URL_TEXTRACT`
    /// points it elsewhere than the other services.
    #[cfg(feature = "textract")]
    pub textract: aws_sdk_textract::Client,
    /// Requests sent by `dynamodb`, `s3`, `kms`, `lambda`, `sts`, `secretsmanager` (and
    /// `textract`).
    pub calls: CallCounter,
    /// The credentials provider and region the clients sign with. Presigned POST uploads
    /// ([`S3Assets::presigned_post`]) are signed by our code, and an SDK client's config does
    /// not expose them (its `credentials_provider()` always answers `None`).
    pub credentials: Option<aws_credential_types::provider::SharedCredentialsProvider>,
    pub region: Option<String>,
}

impl AwsClients {
    pub async fn connect(config: &AwsConfig) -> AwsClients {
        Self::connect_with(config, Vec::new()).await
    }

    /// Like [`AwsClients::connect`], with more interceptors on the request-sending clients
    /// (tests inject faults this way).
    pub async fn connect_with(config: &AwsConfig, extra: Vec<SharedInterceptor>) -> AwsClients {
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let timeouts = if config.endpoint_url.is_none() {
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_attempt_timeout(Duration::from_secs(10))
                // Below API Gateway's 30 s limit on a whole request.
                .operation_timeout(Duration::from_secs(25))
                .build()
        } else {
            // An emulator on this machine serves one request at a time: under a burst its
            // queue, not a fault, makes requests slow, so only the whole operation is bounded.
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_timeout(Duration::from_secs(120))
                .build()
        };
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http_client)
            .timeout_config(timeouts);
        if let Some(url) = &config.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        let region = config
            .region
            .clone()
            .or_else(|| config.endpoint_url.as_ref().map(|_| EMULATOR_REGION.into()));
        if let Some(region) = region {
            loader = loader.region(aws_config::Region::new(region));
        }
        if let Some(creds) = &config.credentials {
            loader = loader.credentials_provider(aws_credential_types::Credentials::new(
                &creds.access_key_id,
                creds.secret_access_key.expose(),
                None,
                None,
                "nib-static",
            ));
        }
        let sdk = loader.load().await;
        let credentials = sdk.credentials_provider();
        let region = sdk.region().map(|r| r.as_ref().to_owned());
        let calls = CallCounter::new();
        let interceptors: Vec<SharedInterceptor> =
            std::iter::once(SharedInterceptor::new(calls.clone()))
                .chain(extra)
                .collect();

        let mut dynamodb = aws_sdk_dynamodb::config::Builder::from(&sdk);
        let mut s3 = aws_sdk_s3::config::Builder::from(&sdk);
        let mut kms = aws_sdk_kms::config::Builder::from(&sdk);
        let mut lambda = aws_sdk_lambda::config::Builder::from(&sdk);
        let mut sts = aws_sdk_sts::config::Builder::from(&sdk);
        let mut secretsmanager = aws_sdk_secretsmanager::config::Builder::from(&sdk);
        if let Some(url) = &config.lambda_endpoint_url {
            lambda = lambda.endpoint_url(url);
        }
        for interceptor in &interceptors {
            dynamodb.push_interceptor(interceptor.clone());
            s3.push_interceptor(interceptor.clone());
            kms.push_interceptor(interceptor.clone());
            lambda.push_interceptor(interceptor.clone());
            sts.push_interceptor(interceptor.clone());
            secretsmanager.push_interceptor(interceptor.clone());
        }
        #[cfg(feature = "textract")]
        let textract = {
            let mut textract =
                aws_sdk_textract::config::Builder::from(&sdk).timeout_config(textract_timeouts(
                    config.endpoint_url.is_some() || config.textract_endpoint_url.is_some(),
                ));
            if let Some(url) = &config.textract_endpoint_url {
                textract = textract.endpoint_url(url);
            }
            for interceptor in &interceptors {
                textract.push_interceptor(interceptor.clone());
            }
            aws_sdk_textract::Client::from_conf(textract.build())
        };
        let path_style = config.endpoint_url.is_some();
        let presigner = aws_sdk_s3::config::Builder::from(&sdk).force_path_style(path_style);
        AwsClients {
            dynamodb: aws_sdk_dynamodb::Client::from_conf(dynamodb.build()),
            s3: aws_sdk_s3::Client::from_conf(s3.force_path_style(path_style).build()),
            s3_presigner: aws_sdk_s3::Client::from_conf(presigner.build()),
            kms: aws_sdk_kms::Client::from_conf(kms.build()),
            lambda: aws_sdk_lambda::Client::from_conf(lambda.build()),
            sts: aws_sdk_sts::Client::from_conf(sts.build()),
            secretsmanager: aws_sdk_secretsmanager::Client::from_conf(secretsmanager.build()),
            #[cfg(feature = "textract")]
            textract,
            calls,
            credentials,
            region,
        }
    }

    /// Amazon Textract behind the `Ocr` port, on this process's Textract client.
    #[cfg(feature = "textract")]
    pub fn ocr(&self) -> TextractOcr {
        TextractOcr::new(self.textract.clone())
    }

    pub fn store(&self, config: &AwsConfig) -> DynamoStore {
        DynamoStore::new(self.dynamodb.clone(), &config.table)
    }

    /// The bucket's assets; they sign presigned POST uploads when a region is known (a POST
    /// goes to the bucket's URL in it, path-style to an endpoint URL as emulators need), as
    /// the uploads role when one is configured.
    pub fn assets(&self, config: &AwsConfig) -> S3Assets {
        let assets = S3Assets::new(self.s3.clone(), self.s3_presigner.clone(), &config.bucket);
        match &self.region {
            Some(region) => assets.with_post_signing(s3::PostSigning {
                credentials: self.credentials.clone(),
                region: region.clone(),
                bucket_url: presigned_post::bucket_url(
                    &config.bucket,
                    region,
                    config.endpoint_url.as_deref(),
                ),
                upload_role: config.upload_role_arn.as_ref().map(|arn| s3::UploadRole {
                    sts: self.sts.clone(),
                    role_arn: arn.clone(),
                }),
            }),
            None => assets,
        }
    }

    pub fn keys(&self, config: &AwsConfig) -> KmsKeys {
        KmsKeys::new(self.kms.clone(), &config.kms_key_id)
    }
}

/// Textract's timeouts. A page takes Textract a few seconds (longer for a dense one), so an
/// attempt may take 30 s and the whole call, with the standard retry's three attempts and
/// their backoff, 100 s: far inside the ingest function's 15 minutes even for several pages
/// in a row. On a stand-in or emulator only the whole call is bounded, as for the others.
#[cfg(feature = "textract")]
fn textract_timeouts(local: bool) -> TimeoutConfig {
    let builder = TimeoutConfig::builder().connect_timeout(Duration::from_secs(3));
    if local {
        builder.operation_timeout(Duration::from_secs(120)).build()
    } else {
        builder
            .operation_attempt_timeout(Duration::from_secs(30))
            .operation_timeout(Duration::from_secs(100))
            .build()
    }
}
