//! A local AWS for tests: moto's server, started from the project's `.venv` (`make
//! tools-python` installs it), listening on 127.0.0.1 on a port the kernel picks.
//!
//! moto is run by `testkit/emulator.py` with the same WSGI application as `moto_server`, but
//! served by one thread: DynamoDB applies each request atomically, and a single-threaded
//! server is how moto does that too (its threaded server may interleave two conditional
//! writes). Port 0 avoids racing other processes for a free port, and the server exits when
//! the pipe or socket it was started over closes, so it never outlives the process that
//! started it, even one that is killed.
//!
//! With `NIB_MOTO_ZYGOTE` set to the Unix socket of `emulator.py zygote` (`make test` starts
//! one around nextest: tests/lib/with-emulator.sh), a server is forked from that process, which
//! has imported moto once, instead of started as a new Python process that imports it: the
//! same server, without half a CPU second of imports per test process.
//!
//! [`Emulator::shared`] is one server per process (one per test binary, or per test under
//! nextest); [`Emulator::fresh`] provisions a new table and bucket with random names on it, so
//! tests stay isolated. [`provision_table`] creates the table exactly as the deployment must:
//! `pk`/`sk`, the `gsi1` index (projection ALL) and TTL on `expires_at`.

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use tokio::sync::OnceCell;

use nib::adapters::aws::AwsClients;
use nib::adapters::aws::dynamo::GSI1;
use nib::config::{AwsConfig, Secret, StaticCredentials};

#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("moto is not installed ({0} is missing): run `make tools-python`")]
    NotInstalled(PathBuf),
    #[error("cannot start moto's server")]
    Spawn(#[source] std::io::Error),
    #[error("moto's server did not start ({0}); run `make tools-python` to reinstall it")]
    Startup(String),
    #[error("cannot reach the emulator zygote at {path} (NIB_MOTO_ZYGOTE)")]
    Zygote {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the emulator's {what}")]
    Provision {
        what: &'static str,
        #[source]
        source: Box<dyn Error + Send + Sync>,
    },
}

fn provision_error(
    what: &'static str,
) -> impl FnOnce(Box<dyn Error + Send + Sync>) -> EmulatorError {
    move |source| EmulatorError::Provision { what, source }
}

/// A running moto server, and a KMS key on it that [`Emulator::fresh`] configs share.
pub struct Emulator {
    endpoint: String,
    kms_key_id: String,
    process: Mutex<Option<Server>>,
}

/// How [`Emulator::start_with`] starts a server.
#[derive(Debug, Clone)]
pub enum Launch {
    /// `emulator.py serve`: a Python process of its own, which imports moto.
    Process,
    /// Forked by `emulator.py zygote` listening on this Unix socket.
    Zygote(PathBuf),
}

/// How the server was started, which is how it is stopped.
enum Server {
    /// A Python process of its own; it exits when its stdin closes.
    Process(Child, ChildStdout),
    /// Forked by the zygote; it exits when this connection closes.
    Forked(UnixStream),
}

impl Server {
    /// Stops the server and returns once it no longer accepts connections.
    fn stop(self) {
        match self {
            Server::Process(mut child, _stdout) => {
                let _ = child.kill();
                let _ = child.wait();
            }
            Server::Forked(mut stream) => {
                // The server closes its listening socket, then exits: the end of this stream.
                let _ = stream.write_all(b"stop\n");
                let _ = std::io::copy(&mut stream, &mut std::io::sink());
            }
        }
    }
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The project's Python virtual environment: `$NIB_VENV`, else `.venv` at the top of the
/// repository this crate was built from.
pub fn venv_dir() -> PathBuf {
    std::env::var_os("NIB_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv")))
}

/// A random name for a table or bucket (lowercase, so it suits both).
fn random_name() -> String {
    format!("nib-{}", hex::encode(rand::random::<[u8; 8]>()))
}

static SHARED: OnceCell<Emulator> = OnceCell::const_new();

impl Emulator {
    /// Starts a new server (and its KMS key); it stops when this value is dropped. Forked from
    /// the zygote at `NIB_MOTO_ZYGOTE` when that is set, else a process of its own.
    pub async fn start() -> Result<Emulator, EmulatorError> {
        let launch = match std::env::var_os("NIB_MOTO_ZYGOTE") {
            Some(path) => Launch::Zygote(PathBuf::from(path)),
            None => Launch::Process,
        };
        Emulator::start_with(launch).await
    }

    /// Starts a new server the given way (and its KMS key).
    pub async fn start_with(launch: Launch) -> Result<Emulator, EmulatorError> {
        let venv = venv_dir();
        let marker = venv.join("bin/moto_server");
        if !marker.exists() {
            return Err(EmulatorError::NotInstalled(marker));
        }
        // moto takes a second or two to import, a zygote a moment to fork: off the async threads.
        let (port, server) = tokio::task::spawn_blocking(move || match launch {
            Launch::Zygote(path) => fork(path),
            Launch::Process => spawn(&venv),
        })
        .await
        .map_err(|e| EmulatorError::Startup(e.to_string()))??;
        let mut emulator = Emulator {
            endpoint: format!("http://127.0.0.1:{port}"),
            kms_key_id: String::new(),
            process: Mutex::new(Some(server)),
        };
        emulator.kms_key_id = emulator.create_key().await?;
        Ok(emulator)
    }

    /// One server for the whole process, started on first use.
    pub async fn shared() -> Result<&'static Emulator, EmulatorError> {
        SHARED.get_or_try_init(Emulator::start).await
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The KMS key that [`Emulator::fresh`] configs use.
    pub fn kms_key_id(&self) -> &str {
        &self.kms_key_id
    }

    /// A configuration pointing at this server, with its fixed test credentials.
    pub fn config(&self, table: &str, bucket: &str, kms_key_id: &str) -> AwsConfig {
        AwsConfig {
            table: table.into(),
            bucket: bucket.into(),
            kms_key_id: kms_key_id.into(),
            asset_ttl_seconds: 3600,
            key_cache_size: 1024,
            key_cache_ttl: std::time::Duration::from_secs(900),
            endpoint_url: Some(self.endpoint.clone()),
            lambda_endpoint_url: None,
            textract_endpoint_url: None,
            region: Some("us-east-1".into()),
            credentials: Some(StaticCredentials {
                access_key_id: "testing".into(),
                secret_access_key: Secret::new("testing"),
            }),
            signing_key_id: None,
            signing_public_key_pem: None,
            public_url: None,
            notion_api_url: nib::adapters::notion::DEFAULT_API_URL.into(),
            upload_role_arn: None,
        }
    }

    /// A new, empty table and bucket (random names), with the shared KMS key.
    pub async fn fresh(&self) -> Result<AwsConfig, EmulatorError> {
        let config = self.config(&random_name(), &random_name(), &self.kms_key_id);
        let clients = AwsClients::connect(&config).await;
        provision_table(&clients.dynamodb, &config.table).await?;
        provision_bucket(&clients.s3, &config.bucket).await?;
        Ok(config)
    }

    /// Like [`Emulator::fresh`], with a KMS key of its own (to disable it, say).
    pub async fn fresh_with_own_key(&self) -> Result<AwsConfig, EmulatorError> {
        let mut config = self.fresh().await?;
        config.kms_key_id = self.create_key().await?;
        Ok(config)
    }

    /// A new symmetric KMS key; returns its id.
    pub async fn create_key(&self) -> Result<String, EmulatorError> {
        let config = self.config("unused", "unused", "unused");
        let clients = AwsClients::connect(&config).await;
        let out = clients
            .kms
            .create_key()
            .description("nib test key")
            .send()
            .await
            .map_err(|e| provision_error("KMS key")(Box::new(e)))?;
        out.key_metadata
            .map(|m| m.key_id)
            .ok_or_else(|| provision_error("KMS key")("no key metadata".into()))
    }

    /// A new asymmetric KMS key like the deployment's access-token signing key (ECC_NIST_P256,
    /// SIGN_VERIFY); returns its ARN and its public key as PEM, which is what Terraform passes
    /// as `NIB_SIGNING_KEY_ID` and `NIB_SIGNING_PUBLIC_KEY`.
    pub async fn create_signing_key(&self) -> Result<(String, String), EmulatorError> {
        use aws_sdk_kms::types::{KeySpec, KeyUsageType};
        use p256::pkcs8::{EncodePublicKey, LineEnding};
        let fail = |e: Box<dyn Error + Send + Sync>| provision_error("KMS signing key")(e);
        let config = self.config("unused", "unused", "unused");
        let clients = AwsClients::connect(&config).await;
        let arn = clients
            .kms
            .create_key()
            .description("nib test signing key")
            .key_spec(KeySpec::EccNistP256)
            .key_usage(KeyUsageType::SignVerify)
            .send()
            .await
            .map_err(|e| fail(Box::new(e)))?
            .key_metadata
            .and_then(|m| m.arn)
            .ok_or_else(|| fail("no key metadata".into()))?;
        let der = clients
            .kms
            .get_public_key()
            .key_id(&arn)
            .send()
            .await
            .map_err(|e| fail(Box::new(e)))?
            .public_key
            .ok_or_else(|| fail("no public key".into()))?;
        let pem = nib::auth::oauth::jwt::public_key_from_der(der.as_ref())
            .map_err(|e| fail(Box::new(e)))?
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| fail(e.to_string().into()))?;
        Ok((arn, pem))
    }

    /// A new Secrets Manager secret named `name` whose `SecretString` is `value` (a remote OCR
    /// provider's key, as an operator stores it); returns its ARN, which is what Terraform
    /// passes as `NIB_OCR_*_API_KEY_SECRET`.
    pub async fn create_secret(&self, name: &str, value: &str) -> Result<String, EmulatorError> {
        let config = self.config("unused", "unused", "unused");
        let clients = AwsClients::connect(&config).await;
        let out = clients
            .secretsmanager
            .create_secret()
            .name(name)
            .secret_string(value)
            .send()
            .await
            .map_err(|e| provision_error("secret")(Box::new(e)))?;
        out.arn
            .ok_or_else(|| provision_error("secret")("no ARN in the answer".into()))
    }

    /// Stops the server now (tests of failures); later requests fail to connect.
    pub fn stop(&self) {
        let server = self
            .process
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(server) = server {
            server.stop();
        }
    }
}

/// `testkit/emulator.py`, next to this crate's sources.
pub fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/emulator.py"))
}

/// The port a server announced on its first line.
fn announced_port(read: std::io::Result<usize>, line: &str) -> Result<u16, EmulatorError> {
    read.ok()
        .and_then(|_| line.trim().parse().ok())
        .ok_or_else(|| {
            EmulatorError::Startup(format!("it printed {:?} instead of its port", line.trim()))
        })
}

/// A server in a Python process of its own.
fn spawn(venv: &std::path::Path) -> Result<(u16, Server), EmulatorError> {
    let mut child = Command::new(venv.join("bin/python"))
        .arg(script())
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(EmulatorError::Spawn)?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    let read = reader.read_line(&mut line);
    match announced_port(read, &line) {
        Ok(port) => Ok((port, Server::Process(child, reader.into_inner()))),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// A server forked by the zygote listening on `path`.
fn fork(path: PathBuf) -> Result<(u16, Server), EmulatorError> {
    let stream = UnixStream::connect(&path).map_err(|source| EmulatorError::Zygote {
        path: path.clone(),
        source,
    })?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let read = reader.read_line(&mut line);
    let port = announced_port(read, &line)?;
    Ok((port, Server::Forked(reader.into_inner())))
}

/// Creates the table of docs/design.md §5: string keys `pk`/`sk`, the index `gsi1` on
/// `gsi1pk`/`gsi1sk` with every attribute projected, on-demand capacity, and TTL on
/// `expires_at`. The deployment's infrastructure must define the same.
pub async fn provision_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<(), EmulatorError> {
    let fail = |e: Box<dyn Error + Send + Sync>| provision_error("table")(e);
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(|e| fail(Box::new(e)))
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .map_err(|e| fail(Box::new(e)))
    };
    let index = GlobalSecondaryIndex::builder()
        .index_name(GSI1)
        .key_schema(key("gsi1pk", KeyType::Hash)?)
        .key_schema(key("gsi1sk", KeyType::Range)?)
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(|e| fail(Box::new(e)))?;
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk")?)
        .attribute_definitions(attr("sk")?)
        .attribute_definitions(attr("gsi1pk")?)
        .attribute_definitions(attr("gsi1sk")?)
        .key_schema(key("pk", KeyType::Hash)?)
        .key_schema(key("sk", KeyType::Range)?)
        .global_secondary_indexes(index)
        .send()
        .await
        .map_err(|e| fail(Box::new(e)))?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("expires_at")
                .build()
                .map_err(|e| fail(Box::new(e)))?,
        )
        .send()
        .await
        .map_err(|e| fail(Box::new(e)))?;
    Ok(())
}

/// Creates a bucket (in us-east-1, which takes no location constraint).
pub async fn provision_bucket(
    client: &aws_sdk_s3::Client,
    bucket: &str,
) -> Result<(), EmulatorError> {
    client
        .create_bucket()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| provision_error("bucket")(Box::new(e)))?;
    Ok(())
}

/// The bucket settings infra/s3.tf adds to a bucket (`nib doctor` checks them): every public
/// access blocked, SSE-KMS with `kms_key_id`, and objects created under `uploads/` notifying
/// the function `ingest_arn`.
pub async fn provision_bucket_like_infra(
    client: &aws_sdk_s3::Client,
    bucket: &str,
    kms_key_id: &str,
    ingest_arn: &str,
) -> Result<(), EmulatorError> {
    use aws_sdk_s3::types::{
        Event, FilterRule, FilterRuleName, LambdaFunctionConfiguration, NotificationConfiguration,
        NotificationConfigurationFilter, PublicAccessBlockConfiguration, S3KeyFilter,
        ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration,
        ServerSideEncryptionRule,
    };
    let fail = |e: Box<dyn Error + Send + Sync>| provision_error("bucket")(e);
    client
        .put_public_access_block()
        .bucket(bucket)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .ignore_public_acls(true)
                .block_public_policy(true)
                .restrict_public_buckets(true)
                .build(),
        )
        .send()
        .await
        .map_err(|e| fail(Box::new(e)))?;
    let by_default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::AwsKms)
        .kms_master_key_id(kms_key_id)
        .build()
        .map_err(|e| fail(Box::new(e)))?;
    client
        .put_bucket_encryption()
        .bucket(bucket)
        .server_side_encryption_configuration(
            ServerSideEncryptionConfiguration::builder()
                .rules(
                    ServerSideEncryptionRule::builder()
                        .apply_server_side_encryption_by_default(by_default)
                        .bucket_key_enabled(true)
                        .build(),
                )
                .build()
                .map_err(|e| fail(Box::new(e)))?,
        )
        .send()
        .await
        .map_err(|e| fail(Box::new(e)))?;
    let to_ingest = LambdaFunctionConfiguration::builder()
        .lambda_function_arn(ingest_arn)
        .events(Event::from("s3:ObjectCreated:*"))
        .filter(
            NotificationConfigurationFilter::builder()
                .key(
                    S3KeyFilter::builder()
                        .filter_rules(
                            FilterRule::builder()
                                .name(FilterRuleName::Prefix)
                                .value("uploads/")
                                .build(),
                        )
                        .build(),
                )
                .build(),
        )
        .build()
        .map_err(|e| fail(Box::new(e)))?;
    client
        .put_bucket_notification_configuration()
        .bucket(bucket)
        .notification_configuration(
            NotificationConfiguration::builder()
                .lambda_function_configurations(to_ingest)
                .build(),
        )
        .send()
        .await
        .map_err(|e| fail(Box::new(e)))?;
    Ok(())
}

type Action = Arc<dyn Fn() -> Result<(), BoxError> + Send + Sync>;

/// Fault injection for tests: an interceptor that runs an action just before a request of a
/// given operation is sent. An action that returns an error fails the request there (nothing
/// reaches the service); one that kills the emulator makes the request meet a dead server.
#[derive(Clone, Default)]
pub struct Faults {
    rules: Arc<Mutex<Vec<(String, String, Action)>>>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").finish_non_exhaustive()
    }
}

impl Faults {
    pub fn new() -> Faults {
        Faults::default()
    }

    /// Runs `action` before every attempt of `service`'s `operation` (e.g. "DynamoDB",
    /// "TransactWriteItems").
    pub fn on(
        &self,
        service: &str,
        operation: &str,
        action: impl Fn() -> Result<(), BoxError> + Send + Sync + 'static,
    ) {
        self.lock()
            .push((service.into(), operation.into(), Arc::new(action)));
    }

    /// Fails every request of `service`'s `operation` before it is sent.
    pub fn fail(&self, service: &str, operation: &str) {
        self.on(service, operation, || Err("injected fault".into()));
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn interceptor(&self) -> SharedInterceptor {
        SharedInterceptor::new(self.clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, String, Action)>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Intercept for Faults {
    fn name(&self) -> &'static str {
        "nib_testkit::Faults"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(meta) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        let actions: Vec<Action> = self
            .lock()
            .iter()
            .filter(|(s, o, _)| s == meta.service() && o == meta.name())
            .map(|(_, _, a)| a.clone())
            .collect();
        for action in actions {
            action()?;
        }
        Ok(())
    }
}
