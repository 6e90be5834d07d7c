//! Wiring: the same services over either back end, built one way by every process.
//!
//! A process parses its [`Settings`] once at start (the back end and its configuration, the
//! [`Role`] it plays, the OCR engine, a function's variables), opens its [`Ports`] (the outside
//! world: store, keys, assets, clock, and the server secrets its role needs) and calls
//! [`Services::build`], which assembles the rest without I/O. `nib serve`, every CLI command,
//! every Lambda function and the tests go through these three steps; only the settings and the
//! role differ.
//!
//! - Local back end: the embedded store, the local key file and the local asset folder in one
//!   data directory. Layout: `nib.redb` (the store), `master.key` (0600, plays KMS's role),
//!   `assets/` (page images, encrypted at rest, served at `/assets`). Its secrets are derived
//!   from `master.key`, whatever the role.
//! - AWS back end: DynamoDB, S3 and KMS from an [`AwsConfig`]. Page-image URLs are S3
//!   presigned URLs, so the router has no `/assets` route; the session-id and OAuth keys are
//!   KMS-wrapped secrets kept in the table (`KmsKeys::server_secret`), loaded only by the roles
//!   that sign with them, and access tokens are signed by the KMS key `NIB_SIGNING_KEY_ID`
//!   when set (`adapters::aws::signing`). A remote OCR provider's key may be an AWS Secrets
//!   Manager secret (`NIB_OCR_*_API_KEY_SECRET`), read with the ports by a role that reads ink.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::account::Accounts;
#[cfg(feature = "aws")]
use crate::adapters::aws::{AwsClients, CallCounter};
#[cfg(any(test, feature = "local"))]
use crate::adapters::embedded::EmbeddedStore;
use crate::adapters::local_assets::LocalAssets;
#[cfg(any(test, feature = "local"))]
use crate::adapters::local_keys::LocalKeys;
use crate::adapters::rate_limit::{InMemoryRateLimiter, StoreRateLimiter};
use crate::auth::Scope;
use crate::auth::oauth::jwt::TokenSigner;
use crate::auth::oauth::{Gates, OAuth};
use crate::auth::sessions::SessionSigner;
use crate::auth::tokens::{NewToken, Tokens};
use crate::auth::users::{UserError, Users};
use crate::config::{AwsConfig, ConfigError, OcrChoice, Secret};
use crate::crypto::Vault;
use crate::domain::UserId;
use crate::functions::FunctionEnv;
use crate::http::{HttpConfig, HttpState};
use crate::mcp::NibMcp;
use crate::notebook::{Notebook, NotebookConfig};
use crate::ports::{Assets, Clock, Keys, RateLimiter, Store, StoreError};
use crate::tools::{InProcess, ToolClass};

/// The user a fresh data directory starts with.
pub const DEFAULT_USER: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum ServicesError {
    #[error("cannot create the data directory {path}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[cfg(any(test, feature = "local"))]
    #[error("cannot open the store")]
    Store(#[from] crate::adapters::embedded::EmbeddedError),
    #[error("cannot open the access journal in {path}")]
    AccessJournal {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the key file")]
    Keys(#[source] std::io::Error),
    #[error("store failure")]
    StoreOp(#[from] StoreError),
    #[error("token failure")]
    Tokens(#[from] crate::auth::tokens::TokenError),
    #[error("key failure")]
    Crypto(#[from] crate::crypto::CryptoError),
    #[error("invalid configuration")]
    Config(#[from] ConfigError),
    #[cfg(feature = "aws")]
    #[error("cannot load a server secret")]
    Secret(#[from] crate::adapters::aws::kms::SecretError),
    #[error("user failure")]
    Users(#[from] UserError),
    #[error(transparent)]
    Account(#[from] crate::account::AccountError),
    #[cfg(feature = "aws")]
    #[error("cannot load the OAuth keys")]
    OAuthKeys(#[from] crate::adapters::aws::signing::OAuthKeysError),
    #[cfg(feature = "aws")]
    #[error("cannot load the OCR provider's key")]
    OcrKey(#[from] crate::adapters::aws::secrets::KeySecretError),
    #[error(
        "cannot start the OCR engine ({choice}); choose another with --ocr or NIB_OCR, or `off`"
    )]
    Ocr {
        choice: OcrChoice,
        source: crate::ports::OcrError,
    },
    /// `--backend aws` asked of a `nib` built without it (`make run`'s: `--no-default-features`).
    #[error(
        "this nib was built without the AWS back end (make run builds the local server alone); \
         build the operator's nib with `cargo build --release -p nib-cli` for --backend aws"
    )]
    NoAws,
    /// A data directory asked of a build without the embedded store (the Lambda functions').
    #[error("this build has no local back end (nib-shared's `local` feature)")]
    NoLocal,
}

/// Which back end a system runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackEnd {
    /// One data directory: the embedded store, the key file, the asset folder.
    Local,
    /// DynamoDB, S3 and KMS.
    Aws,
}

/// What a process does, which decides what it builds (and, on AWS, what its IAM role lets it
/// reach: `functions::PARTITIONS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `nib serve`: everything; on AWS the server's secrets are loaded from the table.
    Server,
    /// An operator's command (`nib user`, `token`, `grant`, `client`, `import`, `ocr`,
    /// `notion`, `doctor`): the notebook, tokens, users, clients and grants. On AWS it loads no
    /// server secret and no signing key, so an operator's role needs neither: the keys that
    /// would sign sessions, CSRF forms and access tokens are random and die with the process.
    /// Nothing it builds serves clients: never call [`Services::router`] on it.
    Admin,
    /// The `mcp` front function: tokens, rate limits, an OAuth that only verifies (the
    /// signing key's public half); tool calls go to the class functions. No notebook.
    Front,
    /// The `oauth` function: the authorization server (the OAuth secret and signing key). No
    /// notebook.
    OAuth,
    /// A class function: the notebook (the tasks function's also pushes tasks to Notion; the
    /// account function's only deletes accounts with it).
    Class(ToolClass),
    /// The `ingest` function: the notebook, reading ink with the configured engine.
    Ingest,
}

impl Role {
    /// Whether it builds a notebook.
    pub fn has_notebook(self) -> bool {
        !matches!(self, Role::Front | Role::OAuth)
    }

    /// Whether its notebook pushes tasks to Notion.
    fn pushes_to_notion(self) -> bool {
        matches!(
            self,
            Role::Server | Role::Admin | Role::Class(ToolClass::Tasks)
        )
    }
}

/// The settings of a local system.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// The base URL links are built on (`http://127.0.0.1:8787`).
    pub public_url: String,
    pub asset_ttl_seconds: u64,
    /// The engine that reads ink-only pages (off by default; `nib` turns it on).
    pub ocr: OcrChoice,
    /// Notion's API base URL (`NIB_NOTION_API_URL`, else Notion's).
    pub notion_api_url: String,
    /// A bulk writer's store (`EmbeddedStore::open_bulk`: a large page cache, commits synced
    /// once a second and when it closes), for the commands that write a whole notebook in a
    /// process of their own and exit; a server keeps the small cache and syncs every commit.
    pub bulk: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            public_url: "http://127.0.0.1".into(),
            asset_ttl_seconds: 3600,
            ocr: OcrChoice::Off,
            notion_api_url: crate::adapters::notion::api_url_from_env(),
            bulk: false,
        }
    }
}

/// Where the data lives, with that back end's configuration.
#[derive(Debug, Clone)]
pub enum BackEndSettings {
    /// A data directory.
    Local {
        data_dir: PathBuf,
        /// Links' base URL, image URLs' lifetime, Notion's API.
        options: LocalOptions,
    },
    /// DynamoDB, S3 and KMS (its public URL, URL lifetime and Notion API are in it).
    Aws(Box<AwsConfig>),
}

/// Everything a process needs to build its services, parsed once at start. `Debug` prints no
/// secret (`AwsConfig`'s static credentials show as `[redacted]`).
#[derive(Debug, Clone)]
pub struct Settings {
    pub back_end: BackEndSettings,
    pub role: Role,
    /// The engine that reads ink-only pages.
    pub ocr: OcrChoice,
    /// A function's own variables (the class functions' names, `/mcp`'s rate limits); the
    /// defaults elsewhere.
    pub function: FunctionEnv,
}

impl Settings {
    /// A data directory, for `role`.
    pub fn local(data_dir: &Path, options: LocalOptions, role: Role) -> Settings {
        Settings {
            ocr: options.ocr,
            back_end: BackEndSettings::Local {
                data_dir: data_dir.to_owned(),
                options,
            },
            role,
            function: FunctionEnv::default(),
        }
    }

    /// An AWS deployment, for `role`.
    pub fn aws(config: AwsConfig, role: Role, ocr: OcrChoice) -> Settings {
        Settings {
            back_end: BackEndSettings::Aws(Box::new(config)),
            role,
            ocr,
            function: FunctionEnv::default(),
        }
    }

    /// A Lambda function's settings from its environment: [`AwsConfig`], `NIB_OCR` and
    /// [`FunctionEnv`]. A missing or malformed variable stops the cold start, named.
    pub fn function_from_env(role: Role) -> Result<Settings, ConfigError> {
        Ok(Settings {
            back_end: BackEndSettings::Aws(Box::new(AwsConfig::from_env()?)),
            role,
            ocr: OcrChoice::from_env()?.unwrap_or_default(),
            function: FunctionEnv::from_env()?,
        })
    }

    /// The AWS configuration, when on AWS.
    pub fn aws_config(&self) -> Option<&AwsConfig> {
        match &self.back_end {
            BackEndSettings::Aws(config) => Some(config),
            BackEndSettings::Local { .. } => None,
        }
    }

    fn notebook_config(&self) -> NotebookConfig {
        match &self.back_end {
            BackEndSettings::Local { options, .. } => NotebookConfig {
                asset_ttl_seconds: options.asset_ttl_seconds,
                public_url: options.public_url.trim_end_matches('/').to_owned(),
            },
            BackEndSettings::Aws(config) => NotebookConfig {
                asset_ttl_seconds: config.asset_ttl_seconds,
                public_url: config.public_url.clone().unwrap_or_default(),
            },
        }
    }

    fn notion_api_url(&self) -> &str {
        match &self.back_end {
            BackEndSettings::Local { options, .. } => &options.notion_api_url,
            BackEndSettings::Aws(config) => &config.notion_api_url,
        }
    }
}

/// The keys a process signs with: session ids, access tokens, the consent form's CSRF tokens.
struct Secrets {
    session_key: Zeroizing<[u8; 32]>,
    token_signer: Arc<dyn TokenSigner>,
    csrf_key: Zeroizing<[u8; 32]>,
}

impl Secrets {
    /// Derived from the local key file.
    #[cfg(any(test, feature = "local"))]
    fn derived(keys: &LocalKeys) -> Secrets {
        let oauth_secret = Zeroizing::new(keys.derive("oauth"));
        Secrets {
            session_key: Zeroizing::new(keys.derive("session-ids")),
            token_signer: Arc::new(crate::auth::oauth::jwt::LocalSigner::from_oauth_secret(
                &oauth_secret,
            )),
            csrf_key: crate::auth::oauth::csrf_key(&oauth_secret),
        }
    }

    /// Random, dying with the process (a role that signs nothing).
    #[cfg(feature = "aws")]
    fn throwaway() -> Secrets {
        let random = || {
            let mut bytes = Zeroizing::new([0u8; 32]);
            rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
            bytes
        };
        let oauth_secret = random();
        Secrets {
            session_key: random(),
            token_signer: Arc::new(crate::auth::oauth::jwt::LocalSigner::from_oauth_secret(
                &oauth_secret,
            )),
            csrf_key: crate::auth::oauth::csrf_key(&oauth_secret),
        }
    }
}

/// The outside world a process works with: the store, the keys, the page images, the clock,
/// the AWS clients (AWS back end), and the secrets its role signs with. Opening them is the
/// only I/O of building a system.
pub struct Ports {
    pub back_end: BackEnd,
    pub store: Arc<dyn Store>,
    pub keys: Arc<dyn Keys>,
    pub assets: Arc<dyn Assets>,
    /// The asset folder the router serves at `/assets` (local back end only).
    pub local_assets: Option<Arc<LocalAssets>>,
    pub clock: Arc<dyn Clock>,
    /// The SDK clients (AWS back end only).
    #[cfg(feature = "aws")]
    pub aws: Option<AwsClients>,
    secrets: Secrets,
    /// The remote OCR provider's key when an AWS Secrets Manager secret holds it
    /// (`NIB_OCR_*_API_KEY_SECRET`): read by [`Ports::aws`], so that [`Services::build`]
    /// makes the engine without I/O. `None` otherwise (the key, if any, is in the
    /// environment or a file, read when the engine is made).
    ocr_key: Option<Secret>,
}

impl Ports {
    /// Opens what `settings` name: the data directory, or the AWS clients (the SDK's
    /// configuration) and then the secrets the role needs (a `GetItem` and a KMS call each).
    pub async fn open(settings: &Settings) -> Result<Ports, ServicesError> {
        match &settings.back_end {
            #[cfg(any(test, feature = "local"))]
            BackEndSettings::Local { data_dir, options } => Ports::local(data_dir, options),
            #[cfg(not(any(test, feature = "local")))]
            BackEndSettings::Local { .. } => Err(ServicesError::NoLocal),
            #[cfg(feature = "aws")]
            BackEndSettings::Aws(config) => {
                config.validate()?;
                let clients = AwsClients::connect(config).await;
                Ports::aws(config, clients, settings.role, settings.ocr).await
            }
            #[cfg(not(feature = "aws"))]
            BackEndSettings::Aws(_) => Err(ServicesError::NoAws),
        }
    }

    /// A data directory (created if absent).
    #[cfg(any(test, feature = "local"))]
    pub fn local(data_dir: &Path, options: &LocalOptions) -> Result<Ports, ServicesError> {
        std::fs::create_dir_all(data_dir).map_err(|source| ServicesError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        let clock: Arc<dyn Clock> = Arc::new(crate::ports::SystemClock);
        let keys = Arc::new(
            LocalKeys::open_or_create(&data_dir.join("master.key")).map_err(ServicesError::Keys)?,
        );
        let path = data_dir.join("nib.redb");
        let store = if options.bulk {
            EmbeddedStore::open_bulk(&path)?
        } else {
            EmbeddedStore::open(&path)?
        };
        let store: Arc<dyn Store> = Arc::new(store.with_clock(clock.clone()));
        let assets = Arc::new(
            LocalAssets::new(
                data_dir.join("assets"),
                options.public_url.clone(),
                keys.derive("asset-url-signing"),
                keys.derive("asset-file-encryption"),
            )
            .with_clock(clock.clone()),
        );
        Ok(Ports {
            back_end: BackEnd::Local,
            store,
            secrets: Secrets::derived(&keys),
            keys,
            assets: assets.clone(),
            local_assets: Some(assets),
            clock,
            #[cfg(feature = "aws")]
            aws: None,
            ocr_key: None,
        })
    }

    /// AWS over clients built by the caller (tests add interceptors to them), with the secrets
    /// `role` signs with: the server's session and OAuth keys ([`Role::Server`]), the OAuth
    /// keys ([`Role::OAuth`]), the signing key's public half ([`Role::Front`]), none otherwise;
    /// and, for a role that reads ink with the remote provider `ocr`, its key when a Secrets
    /// Manager secret holds it (one `GetSecretValue`).
    #[cfg(feature = "aws")]
    pub async fn aws(
        config: &AwsConfig,
        clients: AwsClients,
        role: Role,
        ocr: OcrChoice,
    ) -> Result<Ports, ServicesError> {
        use crate::adapters::aws::signing::{self, OAuthKeys};
        config.validate()?;
        let clock: Arc<dyn Clock> = Arc::new(crate::ports::SystemClock);
        let store: Arc<dyn Store> = Arc::new(clients.store(config).with_clock(clock.clone()));
        let kms = clients.keys(config);
        let secrets = match role {
            Role::Server => {
                let session_key = kms.server_secret(store.as_ref(), "session-ids").await?;
                let oauth = OAuthKeys::load(config, &clients, store.as_ref()).await?;
                Secrets {
                    session_key,
                    token_signer: oauth.signer,
                    csrf_key: oauth.csrf_key,
                }
            }
            Role::OAuth => {
                let oauth = OAuthKeys::load(config, &clients, store.as_ref()).await?;
                Secrets {
                    token_signer: oauth.signer,
                    csrf_key: oauth.csrf_key,
                    ..Secrets::throwaway()
                }
            }
            Role::Front => Secrets {
                token_signer: Arc::new(signing::verify_only(config)?),
                ..Secrets::throwaway()
            },
            Role::Admin | Role::Class(_) | Role::Ingest => Secrets::throwaway(),
        };
        let ocr_key = if role.has_notebook() {
            ocr_key_from_aws_secret(ocr, &clients).await?
        } else {
            None
        };
        Ok(Ports {
            back_end: BackEnd::Aws,
            store,
            keys: Arc::new(kms),
            assets: Arc::new(clients.assets(config)),
            local_assets: None,
            clock,
            aws: Some(clients),
            secrets,
            ocr_key,
        })
    }
}

/// The key of the remote provider `ocr` when `NIB_OCR_*_API_KEY_SECRET` names a Secrets
/// Manager secret that holds it; `None` for any other engine or key. Once per process, at
/// start: a secret that cannot be read stops the start, naming the variable.
#[cfg(feature = "aws")]
async fn ocr_key_from_aws_secret(
    ocr: OcrChoice,
    clients: &AwsClients,
) -> Result<Option<Secret>, ServicesError> {
    // Without the OCR pipeline no remote engine can be made: `ocr_engine` says so, and no
    // secret is read for nothing.
    if !cfg!(feature = "ocr") {
        return Ok(None);
    }
    let Some(variables) = crate::config::KeyVariables::of(ocr) else {
        return Ok(None);
    };
    let Some(id) = variables.aws_secret_id()? else {
        return Ok(None);
    };
    let key =
        crate::adapters::aws::secrets::read_key(&clients.secretsmanager, variables.aws_secret, &id)
            .await?;
    tracing::info!(
        variable = variables.aws_secret,
        "the OCR provider's key was read from AWS Secrets Manager"
    );
    Ok(Some(key))
}

/// The system over one back end, as one role builds it.
pub struct Services {
    /// Which back end it runs on (ask this rather than inferring it from the parts).
    pub back_end: BackEnd,
    /// What this process does.
    pub role: Role,
    pub store: Arc<dyn Store>,
    pub keys: Arc<dyn Keys>,
    pub tokens: Arc<Tokens>,
    pub assets: Arc<dyn Assets>,
    /// The asset folder the router serves at `/assets` (local back end only; S3 serves its own).
    pub local_assets: Option<Arc<LocalAssets>>,
    pub clock: Arc<dyn Clock>,
    /// The SDK clients (AWS back end only).
    #[cfg(feature = "aws")]
    pub aws: Option<AwsClients>,
    /// Request counters: in memory locally, counter items in the table on AWS (tests may swap
    /// it before building the router).
    pub limiter: Arc<dyn RateLimiter>,
    /// The caps on the authorization server's costly work (sign-ins, metadata fetches), shared
    /// by every [`OAuth`] this system builds (tests may swap them before building the router).
    pub oauth_gates: Gates,
    /// What it was built from.
    pub settings: Settings,
    /// The vault and the notebook, for the roles that have one ([`Role::has_notebook`]).
    vault: Option<Arc<Vault>>,
    notebook: Option<Arc<Notebook>>,
    secrets: Secrets,
}

/// The OCR engine of `choice` over these ports, or a clear error when it cannot run here.
fn ocr_engine_for(
    choice: OcrChoice,
    ports: &Ports,
) -> Result<Option<Arc<dyn crate::ports::Ocr>>, ServicesError> {
    #[cfg(feature = "textract")]
    if let (OcrChoice::Textract, Some(clients)) = (choice, &ports.aws) {
        return Ok(Some(Arc::new(clients.ocr())));
    }
    ocr_engine(choice, ports.ocr_key.clone())
}

/// The OCR engine of `choice` in this process, or a clear error when it cannot run here;
/// `from_aws_secret` is a remote provider's key read from Secrets Manager by [`Ports::aws`].
fn ocr_engine(
    choice: OcrChoice,
    from_aws_secret: Option<Secret>,
) -> Result<Option<Arc<dyn crate::ports::Ocr>>, ServicesError> {
    use crate::ports::OcrError;
    let unavailable = |reason: &str| ServicesError::Ocr {
        choice,
        source: OcrError::Unavailable(reason.into()),
    };
    match choice {
        OcrChoice::Off => Ok(None),
        #[cfg(feature = "ocr-local")]
        OcrChoice::Local => {
            let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
            crate::ocr::paddle::PaddleOcr::open(&crate::ocr::paddle::default_dir(), workers)
                .map(|e| Some(Arc::new(e) as Arc<dyn crate::ports::Ocr>))
                .map_err(|source| ServicesError::Ocr { choice, source })
        }
        #[cfg(not(feature = "ocr-local"))]
        OcrChoice::Local => Err(unavailable(
            "this build of nib has no local engine (feature ocr-local)",
        )),
        OcrChoice::Textract => Err(unavailable(
            "Textract runs in the AWS ingest function (a build with feature textract); use \
             --ocr local here",
        )),
        // The providers' settings are read here, once, when the engine is made: only a
        // process that chose the provider needs them, and a missing one is named.
        #[cfg(feature = "ocr")]
        OcrChoice::OpenAi => {
            let config = crate::config::OpenAiOcrConfig::from_env(from_aws_secret)?;
            Ok(Some(Arc::new(
                crate::adapters::remote_ocr::openai::OpenAiOcr::new(&config),
            )))
        }
        #[cfg(feature = "ocr")]
        OcrChoice::GoogleVision => {
            let config = crate::config::GoogleVisionConfig::from_env(from_aws_secret)?;
            Ok(Some(Arc::new(
                crate::adapters::remote_ocr::google_vision::GoogleVisionOcr::new(&config),
            )))
        }
        #[cfg(not(feature = "ocr"))]
        OcrChoice::OpenAi | OcrChoice::GoogleVision => {
            drop(from_aws_secret);
            Err(unavailable(
                "this build of nib has no OCR pipeline (feature ocr)",
            ))
        }
    }
}

impl Services {
    /// The services `settings` describe over `ports`: no I/O, except starting the OCR engine
    /// the settings choose. The one place a vault, a notebook, tokens and limits are made.
    pub fn build(ports: Ports, settings: &Settings) -> Result<Services, ServicesError> {
        let role = settings.role;
        let ocr = if role.has_notebook() {
            ocr_engine_for(settings.ocr, &ports)?
        } else {
            None
        };
        let Ports {
            back_end,
            store,
            keys,
            assets,
            local_assets,
            clock,
            #[cfg(feature = "aws")]
            aws,
            secrets,
            // The engine made above holds its own copy; none stays in the services.
            ocr_key: _,
        } = ports;
        let (vault, notebook) = if role.has_notebook() {
            let (cache_size, cache_ttl) = match settings.aws_config() {
                Some(config) => (config.key_cache_size, config.key_cache_ttl),
                None => (1024, Duration::from_secs(3600)),
            };
            let vault = Arc::new(Vault::new(
                store.clone(),
                keys.clone(),
                cache_size,
                cache_ttl,
            ));
            let mut notebook = Notebook::new(
                store.clone(),
                vault.clone(),
                assets.clone(),
                clock.clone(),
                settings.notebook_config(),
            );
            if role.pushes_to_notion() {
                notebook = notebook.with_notion(crate::adapters::notion::NotionApi::new(
                    settings.notion_api_url(),
                ));
            }
            if let Some(engine) = ocr {
                notebook = notebook.with_ocr(engine);
            }
            if matches!(role, Role::Class(_)) {
                // Records are written before each reply (`invocation::serve`), never in the
                // background: a function may be frozen once it has answered.
                notebook.access_log().flush_per_call();
            }
            if let BackEndSettings::Local { data_dir, .. } = &settings.back_end {
                // The data directory is this process's alone (the store's lock): its journal
                // keeps the records a kill would take from memory.
                notebook
                    .access_log()
                    .keep_journal(data_dir)
                    .map_err(|source| ServicesError::AccessJournal {
                        path: data_dir.clone(),
                        source,
                    })?;
            }
            (Some(vault), Some(Arc::new(notebook)))
        } else {
            (None, None)
        };
        let limiter: Arc<dyn RateLimiter> = match back_end {
            BackEnd::Local => Arc::new(InMemoryRateLimiter::new(clock.clone())),
            BackEnd::Aws => Arc::new(StoreRateLimiter::new(store.clone(), clock.clone())),
        };
        Ok(Services {
            back_end,
            role,
            tokens: Arc::new(Tokens::new(store.clone(), clock.clone())),
            limiter,
            oauth_gates: Gates::default(),
            settings: settings.clone(),
            store,
            keys,
            assets,
            local_assets,
            clock,
            #[cfg(feature = "aws")]
            aws,
            vault,
            notebook,
            secrets,
        })
    }

    /// Opens the ports `settings` name and builds the services over them.
    pub async fn open(settings: &Settings) -> Result<Services, ServicesError> {
        Services::build(Ports::open(settings).await?, settings)
    }

    /// A data directory as `nib serve` uses it (and the tests).
    #[cfg(any(test, feature = "local"))]
    pub fn open_local(data_dir: &Path, options: LocalOptions) -> Result<Services, ServicesError> {
        let ports = Ports::local(data_dir, &options)?;
        Services::build(ports, &Settings::local(data_dir, options, Role::Server))
    }

    /// DynamoDB, S3 and KMS as `nib serve --backend aws` uses them. Builds the SDK clients,
    /// then loads (or creates, on the very first start) the server's secrets.
    #[cfg(feature = "aws")]
    pub async fn open_aws(config: AwsConfig) -> Result<Services, ServicesError> {
        Services::open(&Settings::aws(config, Role::Server, OcrChoice::Off)).await
    }

    /// [`Services::open_aws`] over clients built by the caller (tests add interceptors).
    #[cfg(feature = "aws")]
    pub async fn open_aws_with(
        config: AwsConfig,
        clients: AwsClients,
    ) -> Result<Services, ServicesError> {
        let ports = Ports::aws(&config, clients, Role::Server, OcrChoice::Off).await?;
        Services::build(ports, &Settings::aws(config, Role::Server, OcrChoice::Off))
    }

    /// An operator's command over DynamoDB, S3 and KMS ([`Role::Admin`]).
    #[cfg(feature = "aws")]
    pub async fn open_aws_admin(
        config: AwsConfig,
        ocr: OcrChoice,
    ) -> Result<Services, ServicesError> {
        Services::open(&Settings::aws(config, Role::Admin, ocr)).await
    }

    /// The data directory (local back end only).
    pub fn data_dir(&self) -> Option<&Path> {
        match &self.settings.back_end {
            BackEndSettings::Local { data_dir, .. } => Some(data_dir),
            BackEndSettings::Aws(_) => None,
        }
    }

    /// The AWS requests this process sent, per operation (AWS back end only).
    #[cfg(feature = "aws")]
    pub fn aws_calls(&self) -> Option<&CallCounter> {
        self.aws.as_ref().map(|clients| &clients.calls)
    }

    /// Where signed page images are served from when not from this server (AWS: the bucket).
    pub fn asset_origin(&self) -> Option<String> {
        self.settings.aws_config().map(AwsConfig::asset_origin)
    }

    /// The bucket, for signing the web app's presigned POST uploads (`S3Assets`, the
    /// [`crate::ports::UploadSigner`] port); AWS back end only: `None` locally, where the server
    /// imports uploads itself. Any role on AWS has it, the mcp front (which serves `/app`)
    /// included; only the roles whose IAM policy grants `s3:PutObject` on `uploads/*` (mcp)
    /// sign uploads S3 accepts.
    pub fn upload_signer(&self) -> Option<Arc<dyn crate::ports::UploadSigner>> {
        #[cfg(feature = "aws")]
        if let (Some(config), Some(clients)) = (self.settings.aws_config(), &self.aws) {
            return Some(Arc::new(clients.assets(config)));
        }
        None
    }

    /// The notebook (every role but the front and the oauth function has one).
    ///
    /// # Panics
    /// On a role without one: a wiring mistake, found by the tests of that role.
    pub fn notebook(&self) -> &Arc<Notebook> {
        self.notebook
            .as_ref()
            .unwrap_or_else(|| panic!("the {:?} role builds no notebook", self.role))
    }

    /// Puts `notebook` in the place of the one built (tests rewire it: a clock of theirs, a
    /// Notion stand-in). Before the router is built, which takes the notebook it finds.
    pub fn replace_notebook(&mut self, notebook: Notebook) {
        self.notebook = Some(Arc::new(notebook));
    }

    /// The vault of users' data keys (the roles with a notebook).
    ///
    /// # Panics
    /// As [`Services::notebook`].
    pub fn vault(&self) -> &Arc<Vault> {
        self.vault
            .as_ref()
            .unwrap_or_else(|| panic!("the {:?} role builds no vault", self.role))
    }

    /// Creates the user (its profile, indexed for `nib user list`, and data key) unless it
    /// exists. True when created. Refuses a user being deleted (`nib user delete`).
    pub async fn ensure_user(&self, user: &UserId) -> Result<bool, ServicesError> {
        Ok(self.accounts().ensure(user).await?)
    }

    /// The user index and account deletion (`nib user list`, `nib user delete`).
    pub fn accounts(&self) -> Accounts {
        Accounts::new(
            self.store.clone(),
            self.assets.clone(),
            self.vault().clone(),
            self.clock.clone(),
        )
    }

    /// On first start: creates the default user and, while it has no live token (a fresh data
    /// directory, or one that only saw `nib import`), an admin token to print.
    pub async fn first_start(&self) -> Result<Option<NewToken>, ServicesError> {
        let user = UserId::parse(DEFAULT_USER).expect("valid");
        self.ensure_user(&user).await?;
        if self
            .tokens
            .list(&user)
            .await?
            .iter()
            .any(|t| t.revoked_at.is_none())
        {
            return Ok(None);
        }
        Ok(Some(
            self.tokens
                .create(&user, Scope::Admin, Some("created on first start".into()))
                .await?,
        ))
    }

    /// The HTTP router of the local server.
    pub fn router(&self, mut config: HttpConfig) -> axum::Router {
        if config.asset_origin.is_none() {
            config.asset_origin = self.asset_origin();
        }
        let dispatch = Arc::new(InProcess {
            notebook: self.notebook().clone(),
        });
        let mcp = NibMcp::new(dispatch.clone())
            .with_image_origin(self.asset_origin().as_deref().unwrap_or(&config.public_url));
        // A call can wait here for its client's answer, so sessions exist even when they are
        // not required: a client that can be asked gets one.
        let sessions = Some(crate::http::Sessions::new(
            SessionSigner::new(*self.secrets.session_key),
            config.sessions,
        ));
        let oauth = config.oauth.clone().map(|c| Arc::new(self.oauth(c)));
        let state = Arc::new(HttpState {
            config,
            tokens: self.tokens.clone(),
            mcp: Some(mcp),
            sessions,
            assets: self.local_assets.clone(),
            clock: self.clock.clone(),
            oauth,
            limiter: self.limiter.clone(),
            dispatch: Some(dispatch),
            web_sessions: self.web_sessions(),
            notebook: Some(self.notebook().clone()),
            upload_signer: self.upload_signer(),
        });
        crate::http::router(state)
    }

    /// The authorization server over this system's store (the router builds one; the CLI
    /// uses one for `nib client` and `nib grant`).
    pub fn oauth(&self, config: crate::auth::oauth::OAuthConfig) -> OAuth {
        OAuth::with_gates(
            config,
            self.store.clone(),
            self.clock.clone(),
            self.secrets.token_signer.clone(),
            self.secrets.csrf_key.clone(),
            self.oauth_gates.clone(),
        )
    }

    /// Browser sessions (page links; `auth::web_sessions`).
    pub fn web_sessions(&self) -> crate::auth::web_sessions::WebSessions {
        crate::auth::web_sessions::WebSessions::new(self.store.clone(), self.clock.clone())
    }

    /// The users' sign-in passwords.
    pub fn users(&self) -> Users {
        Users::new(self.store.clone(), self.clock.clone())
    }

    /// On first start, when the default user has no password yet: sets a random one and
    /// returns it, to print once (like the first token), so the OAuth sign-in page works right
    /// away. `nib user passwd` changes it.
    pub async fn first_password(&self) -> Result<Option<String>, ServicesError> {
        let user = UserId::parse(DEFAULT_USER).expect("valid");
        self.ensure_user(&user).await?;
        let users = self.users();
        if users.has_password(&user).await? {
            return Ok(None);
        }
        let password = crate::auth::oauth::random_password();
        match users.set_password(&user, &password, true).await {
            Ok(()) => Ok(Some(password)),
            Err(UserError::Exists(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StaticCredentials;

    #[test]
    fn settings_print_no_secret() {
        let config = AwsConfig::from_lookup(|name| match name {
            "NIB_TABLE" => Some("nib".into()),
            "NIB_BUCKET" => Some("ink".into()),
            "NIB_KMS_KEY_ID" => Some("alias/nib".into()),
            _ => None,
        })
        .unwrap();
        let mut settings = Settings::aws(config, Role::Server, OcrChoice::Off);
        if let BackEndSettings::Aws(config) = &mut settings.back_end {
            config.credentials = Some(StaticCredentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: crate::config::Secret::new("wJalrXUtnFEMIsecret"),
            });
        }
        let shown = format!("{settings:?} {settings:#?}");
        assert!(!shown.contains("wJalrXUtnFEMIsecret"), "{shown}");
        assert!(shown.contains("[redacted]") && shown.contains("AKIDEXAMPLE"));
    }

    #[tokio::test]
    async fn each_role_builds_what_it_uses() {
        let dir = tempfile::tempdir().unwrap();
        let open = |role| {
            let settings = Settings::local(dir.path(), LocalOptions::default(), role);
            async move { Services::open(&settings).await.unwrap() }
        };
        let server = open(Role::Server).await;
        assert_eq!(server.back_end, BackEnd::Local);
        assert_eq!(server.data_dir(), Some(dir.path()));
        assert!(server.local_assets.is_some());
        #[cfg(feature = "aws")]
        assert!(server.aws.is_none());
        assert_eq!(server.notebook().config().public_url, "http://127.0.0.1");
        drop(server);
        for role in [Role::Front, Role::OAuth] {
            let services = open(role).await;
            assert!(!role.has_notebook());
            let asked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                services.notebook().clone()
            }));
            assert!(asked.is_err(), "{role:?} has no notebook");
            drop(services);
        }
        for role in [
            Role::Admin,
            Role::Class(ToolClass::Pages),
            Role::Class(ToolClass::Tasks),
            Role::Class(ToolClass::Account),
            Role::Ingest,
        ] {
            let services = open(role).await;
            assert_eq!(services.role, role);
            let _ = services.notebook();
            let _ = services.vault();
        }
        assert!(Role::Class(ToolClass::Tasks).pushes_to_notion());
        assert!(!Role::Class(ToolClass::Pages).pushes_to_notion());
        assert!(!Role::Class(ToolClass::Account).pushes_to_notion());
        assert!(!Role::Ingest.pushes_to_notion());
    }

    #[test]
    fn an_engine_that_cannot_run_here_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let options = LocalOptions {
            ocr: OcrChoice::Textract,
            ..LocalOptions::default()
        };
        let ports = Ports::local(dir.path(), &options).unwrap();
        let settings = Settings::local(dir.path(), options, Role::Admin);
        let Err(e) = Services::build(ports, &settings) else {
            panic!("Textract on the local back end");
        };
        assert!(matches!(
            e,
            ServicesError::Ocr {
                choice: OcrChoice::Textract,
                ..
            }
        ));
    }
}
