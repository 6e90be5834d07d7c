//! Wiring: the same services over either back end. The CLI and the tests build the system here.
//!
//! - [`App::open_local`]: the embedded store, the local key file and the local asset folder in
//!   one data directory. Layout: `nib.redb` (the store), `master.key` (0600, plays KMS's role),
//!   `assets/` (page images, encrypted at rest, served at `/assets`).
//! - [`App::open_aws`]: DynamoDB, S3 and KMS from an [`AwsConfig`]. Page-image URLs are S3
//!   presigned URLs, so the router has no `/assets` route; the session-id and OAuth keys are
//!   KMS-wrapped secrets kept in the table (`KmsKeys::server_secret`), and access tokens are
//!   signed by the KMS key `NIB_SIGNING_KEY_ID` when set (`adapters::aws::signing`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use zeroize::Zeroizing;

use crate::account::Accounts;
use crate::adapters::aws::{AwsClients, CallCounter};
use crate::adapters::embedded::EmbeddedStore;
use crate::adapters::local_assets::LocalAssets;
use crate::adapters::local_keys::LocalKeys;
use crate::adapters::rate_limit::{InMemoryRateLimiter, StoreRateLimiter};
use crate::auth::Scope;
use crate::auth::oauth::jwt::{LocalSigner, TokenSigner};
use crate::auth::oauth::{Gates, OAuth};
use crate::auth::sessions::SessionSigner;
use crate::auth::tokens::{NewToken, Tokens};
use crate::auth::users::{UserError, Users};
use crate::config::{AwsConfig, ConfigError};
use crate::crypto::Vault;
use crate::domain::UserId;
use crate::http::{HttpConfig, HttpState};
use crate::mcp::NibMcp;
use crate::notebook::{Notebook, NotebookConfig};
use crate::ports::{Assets, Clock, Keys, RateLimiter, Store, StoreError, SystemClock};
use crate::tools::InProcess;

/// The user a fresh data directory starts with.
pub const DEFAULT_USER: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot create the data directory {path}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the store")]
    Store(#[from] crate::adapters::embedded::EmbeddedError),
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
    #[error("cannot load a server secret")]
    Secret(#[from] crate::adapters::aws::kms::SecretError),
    #[error("user failure")]
    Users(#[from] UserError),
    #[error(transparent)]
    Account(#[from] crate::account::AccountError),
    #[error("cannot load the OAuth keys")]
    OAuthKeys(#[from] crate::adapters::aws::signing::OAuthKeysError),
    #[error(
        "cannot start the OCR engine ({choice}); choose another with --ocr or NIB_OCR, or `off`"
    )]
    Ocr {
        choice: crate::config::OcrChoice,
        source: crate::ports::OcrError,
    },
}

/// Which back end a system runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackEnd {
    /// One data directory: the embedded store, the key file, the asset folder.
    Local,
    /// DynamoDB, S3 and KMS.
    Aws,
}

/// The system over one back end.
pub struct App {
    /// Which back end it runs on (ask this rather than inferring it from the parts).
    pub back_end: BackEnd,
    /// The data directory (local back end only).
    pub data_dir: Option<PathBuf>,
    pub store: Arc<dyn Store>,
    pub keys: Arc<dyn Keys>,
    pub vault: Arc<Vault>,
    pub notebook: Arc<Notebook>,
    pub tokens: Arc<Tokens>,
    pub assets: Arc<dyn Assets>,
    /// The asset folder the router serves at `/assets` (local back end only; S3 serves its own).
    pub local_assets: Option<Arc<LocalAssets>>,
    pub clock: Arc<dyn Clock>,
    /// The AWS requests this process sent, per operation (AWS back end only).
    pub aws_calls: Option<CallCounter>,
    /// Where signed page images are served from when not from this server (AWS: the bucket).
    pub asset_origin: Option<String>,
    /// Signs session ids (`--sessions`).
    session_key: Zeroizing<[u8; 32]>,
    /// Signs access tokens: a key derived from `master.key` locally, KMS on AWS.
    token_signer: Arc<dyn TokenSigner>,
    /// The consent form's CSRF key (derived from the OAuth secret).
    csrf_key: Zeroizing<[u8; 32]>,
    /// Request counters: in memory locally, counter items in the table on AWS (tests may swap
    /// it before building the router).
    pub limiter: Arc<dyn RateLimiter>,
    /// The caps on the authorization server's costly work (sign-ins, metadata fetches), shared
    /// by every [`OAuth`] this system builds (tests may swap them before building the router).
    pub oauth_gates: Gates,
}

/// The settings of a local system.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// The base URL links are built on (`http://127.0.0.1:8787`).
    pub public_url: String,
    pub asset_ttl_seconds: u64,
    /// The engine that reads ink-only pages (off by default; `nib` turns it on).
    pub ocr: crate::config::OcrChoice,
    /// Notion's API base URL (`NIB_NOTION_API_URL`, else Notion's).
    pub notion_api_url: String,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            public_url: "http://127.0.0.1".into(),
            asset_ttl_seconds: 3600,
            ocr: crate::config::OcrChoice::Off,
            notion_api_url: crate::adapters::notion::api_url_from_env(),
        }
    }
}

/// The OCR engine of `choice`, or a clear error when it cannot run here.
pub fn ocr_engine(
    choice: crate::config::OcrChoice,
) -> Result<Option<Arc<dyn crate::ports::Ocr>>, AppError> {
    use crate::config::OcrChoice;
    use crate::ports::OcrError;
    let unavailable = |reason: &str| AppError::Ocr {
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
                .map_err(|source| AppError::Ocr { choice, source })
        }
        #[cfg(not(feature = "ocr-local"))]
        OcrChoice::Local => Err(unavailable(
            "this build of nib has no local engine (feature ocr-local)",
        )),
        OcrChoice::Textract => Err(unavailable(
            "Textract runs in the AWS ingest function; use --ocr local here",
        )),
    }
}

impl App {
    pub fn open_local(data_dir: &Path, options: LocalOptions) -> Result<App, AppError> {
        std::fs::create_dir_all(data_dir).map_err(|source| AppError::DataDir {
            path: data_dir.to_owned(),
            source,
        })?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let keys = Arc::new(
            LocalKeys::open_or_create(&data_dir.join("master.key")).map_err(AppError::Keys)?,
        );
        let store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(&data_dir.join("nib.redb"))?.with_clock(clock.clone()));
        let vault = Arc::new(Vault::new(
            store.clone(),
            keys.clone(),
            1024,
            Duration::from_secs(3600),
        ));
        let assets = Arc::new(
            LocalAssets::new(
                data_dir.join("assets"),
                options.public_url.clone(),
                keys.derive("asset-url-signing"),
                keys.derive("asset-file-encryption"),
            )
            .with_clock(clock.clone()),
        );
        let mut notebook = Notebook::new(
            store.clone(),
            vault.clone(),
            assets.clone(),
            clock.clone(),
            NotebookConfig {
                asset_ttl_seconds: options.asset_ttl_seconds,
                public_url: options.public_url.trim_end_matches('/').to_owned(),
            },
        );
        notebook = with_notion_api(notebook, &options.notion_api_url);
        if let Some(engine) = ocr_engine(options.ocr)? {
            notebook = notebook.with_ocr(engine);
        }
        let notebook = Arc::new(notebook);
        let tokens = Arc::new(Tokens::new(store.clone(), clock.clone()));
        let oauth_secret = Zeroizing::new(keys.derive("oauth"));
        Ok(App {
            back_end: BackEnd::Local,
            data_dir: Some(data_dir.to_owned()),
            store,
            session_key: Zeroizing::new(keys.derive("session-ids")),
            token_signer: Arc::new(LocalSigner::from_oauth_secret(&oauth_secret)),
            csrf_key: crate::auth::oauth::csrf_key(&oauth_secret),
            limiter: Arc::new(InMemoryRateLimiter::new(clock.clone())),
            oauth_gates: Gates::default(),
            keys,
            vault,
            notebook,
            tokens,
            assets: assets.clone(),
            local_assets: Some(assets),
            clock,
            asset_origin: None,
            aws_calls: None,
        })
    }

    /// The same services over DynamoDB, S3 and KMS. Builds the SDK clients, then loads (or
    /// creates, on the very first start) the server's secrets: a `GetItem` and a KMS call each.
    pub async fn open_aws(config: AwsConfig) -> Result<App, AppError> {
        config.validate()?;
        let clients = AwsClients::connect(&config).await;
        Self::open_aws_with(config, clients).await
    }

    /// [`App::open_aws`] over clients built by the caller (tests add interceptors to them).
    pub async fn open_aws_with(config: AwsConfig, clients: AwsClients) -> Result<App, AppError> {
        config.validate()?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let store: Arc<dyn Store> = Arc::new(clients.store(&config).with_clock(clock.clone()));
        let kms = clients.keys(&config);
        let session_key = kms.server_secret(store.as_ref(), "session-ids").await?;
        let oauth_keys =
            crate::adapters::aws::signing::OAuthKeys::load(&config, &clients, store.as_ref())
                .await?;
        let keys: Arc<dyn Keys> = Arc::new(kms);
        let (vault, assets, notebook) = aws_notebook(&config, &clients, &store, &keys, &clock);
        let notebook = Arc::new(with_notion_api(notebook, &config.notion_api_url));
        let tokens = Arc::new(Tokens::new(store.clone(), clock.clone()));
        let limiter: Arc<dyn RateLimiter> =
            Arc::new(StoreRateLimiter::new(store.clone(), clock.clone()));
        Ok(App {
            back_end: BackEnd::Aws,
            data_dir: None,
            store,
            keys,
            vault,
            notebook,
            tokens,
            assets,
            local_assets: None,
            clock,
            asset_origin: Some(config.asset_origin()),
            aws_calls: Some(clients.calls),
            session_key,
            token_signer: oauth_keys.signer,
            csrf_key: oauth_keys.csrf_key,
            limiter,
            oauth_gates: Gates::default(),
        })
    }

    /// The services an operator's admin command uses over DynamoDB, S3 and KMS (`nib user`,
    /// `token`, `grant`, `client`, `import`, `ocr`, `notion` with `--backend aws`): the
    /// notebook, tokens, users, clients and grants, with `ocr` reading ink-only pages.
    ///
    /// It loads no server secret (`SECRET#session-ids`, `SECRET#oauth`) and no signing key, so
    /// an operator's role needs neither those contexts of the data key nor the signing key: the
    /// keys that would sign sessions, CSRF forms and access tokens are random and die with the
    /// process. Nothing it builds serves clients: never call [`App::router`] on it.
    pub async fn open_aws_admin(
        config: AwsConfig,
        ocr: crate::config::OcrChoice,
    ) -> Result<App, AppError> {
        config.validate()?;
        let clients = AwsClients::connect(&config).await;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let store: Arc<dyn Store> = Arc::new(clients.store(&config).with_clock(clock.clone()));
        let keys: Arc<dyn Keys> = Arc::new(clients.keys(&config));
        let (vault, assets, notebook) = aws_notebook(&config, &clients, &store, &keys, &clock);
        let mut notebook = with_notion_api(notebook, &config.notion_api_url);
        if let Some(engine) = ocr_engine(ocr)? {
            notebook = notebook.with_ocr(engine);
        }
        let throwaway = || {
            let mut bytes = Zeroizing::new([0u8; 32]);
            rand::Rng::fill(&mut rand::rng(), &mut bytes[..]);
            bytes
        };
        let oauth_secret = throwaway();
        Ok(App {
            back_end: BackEnd::Aws,
            data_dir: None,
            tokens: Arc::new(Tokens::new(store.clone(), clock.clone())),
            limiter: Arc::new(StoreRateLimiter::new(store.clone(), clock.clone())),
            store,
            keys,
            vault,
            notebook: Arc::new(notebook),
            assets,
            local_assets: None,
            clock,
            aws_calls: Some(clients.calls),
            session_key: throwaway(),
            token_signer: Arc::new(LocalSigner::from_oauth_secret(&oauth_secret)),
            csrf_key: crate::auth::oauth::csrf_key(&oauth_secret),
            oauth_gates: Gates::default(),
            asset_origin: Some(config.asset_origin()),
        })
    }

    /// Creates the user (its profile, indexed for `nib user list`, and data key) unless it
    /// exists. True when created. Refuses a user being deleted (`nib user delete`).
    pub async fn ensure_user(&self, user: &UserId) -> Result<bool, AppError> {
        Ok(self.accounts().ensure(user).await?)
    }

    /// The user index and account deletion (`nib user list`, `nib user delete`).
    pub fn accounts(&self) -> Accounts {
        Accounts::new(
            self.store.clone(),
            self.assets.clone(),
            self.vault.clone(),
            self.clock.clone(),
        )
    }

    /// On first start: creates the default user and, while it has no live token (a fresh data
    /// directory, or one that only saw `nib import`), an admin token to print.
    pub async fn first_start(&self) -> Result<Option<NewToken>, AppError> {
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
    pub fn router(&self, config: HttpConfig) -> axum::Router {
        let dispatch = Arc::new(InProcess {
            notebook: self.notebook.clone(),
        });
        let mcp = NibMcp::new(dispatch.clone())
            .with_image_origin(self.asset_origin.as_deref().unwrap_or(&config.public_url));
        let sessions = config
            .sessions
            .then(|| SessionSigner::new(*self.session_key));
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
            self.token_signer.clone(),
            self.csrf_key.clone(),
            self.oauth_gates.clone(),
        )
    }

    /// The users' sign-in passwords.
    pub fn users(&self) -> Users {
        Users::new(self.store.clone(), self.clock.clone())
    }

    /// On first start, when the default user has no password yet: sets a random one and
    /// returns it, to print once (like the first token), so the OAuth sign-in page works right
    /// away. `nib user passwd` changes it.
    pub async fn first_password(&self) -> Result<Option<String>, AppError> {
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

/// The vault, assets and notebook over AWS, as `nib serve --backend aws`, the admin commands
/// and the Lambda functions build them (one place, so all see the same configuration). Without
/// a Notion client: who pushes to Notion adds it ([`with_notion_api`]).
pub(crate) fn aws_notebook(
    config: &AwsConfig,
    clients: &AwsClients,
    store: &Arc<dyn Store>,
    keys: &Arc<dyn Keys>,
    clock: &Arc<dyn Clock>,
) -> (Arc<Vault>, Arc<dyn Assets>, Notebook) {
    let vault = Arc::new(Vault::new(
        store.clone(),
        keys.clone(),
        config.key_cache_size,
        config.key_cache_ttl,
    ));
    let assets: Arc<dyn Assets> = Arc::new(clients.assets(config));
    let notebook = Notebook::new(
        store.clone(),
        vault.clone(),
        assets.clone(),
        clock.clone(),
        NotebookConfig {
            asset_ttl_seconds: config.asset_ttl_seconds,
            public_url: config.public_url.clone().unwrap_or_default(),
        },
    );
    (vault, assets, notebook)
}

/// The notebook, pushing tasks to Notion through the API at `api_url`.
pub(crate) fn with_notion_api(notebook: Notebook, api_url: &str) -> Notebook {
    notebook.with_notion(crate::adapters::notion::NotionApi::new(api_url))
}
