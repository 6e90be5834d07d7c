//! Wiring for local mode: the embedded store, the local key file and the local asset folder in
//! one data directory, and the services over them. The CLI and the tests build the system here.
//!
//! Data directory layout: `nib.redb` (the store), `master.key` (0600, plays KMS's role),
//! `assets/` (page images, encrypted at rest).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::embedded::EmbeddedStore;
use crate::adapters::local_assets::LocalAssets;
use crate::adapters::local_keys::LocalKeys;
use crate::auth::Scope;
use crate::auth::sessions::SessionSigner;
use crate::auth::tokens::{NewToken, Tokens};
use crate::crypto::Vault;
use crate::domain::UserId;
use crate::http::{HttpConfig, HttpState};
use crate::mcp::NibMcp;
use crate::notebook::{Notebook, NotebookConfig};
use crate::ports::{Clock, Cond, Item, Store, StoreError, SystemClock};
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
}

/// The local system over one data directory.
pub struct App {
    pub data_dir: PathBuf,
    pub store: Arc<dyn Store>,
    pub keys: Arc<LocalKeys>,
    pub vault: Arc<Vault>,
    pub notebook: Arc<Notebook>,
    pub tokens: Arc<Tokens>,
    pub assets: Arc<LocalAssets>,
    pub clock: Arc<dyn Clock>,
}

/// The settings of a local system.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    /// The base URL links are built on (`http://127.0.0.1:8787`).
    pub public_url: String,
    pub asset_ttl_seconds: u64,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            public_url: "http://127.0.0.1".into(),
            asset_ttl_seconds: 3600,
        }
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
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&data_dir.join("nib.redb"))?);
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
        let notebook = Arc::new(Notebook::new(
            store.clone(),
            vault.clone(),
            assets.clone(),
            clock.clone(),
            NotebookConfig {
                asset_ttl_seconds: options.asset_ttl_seconds,
            },
        ));
        let tokens = Arc::new(Tokens::new(store.clone(), clock.clone()));
        Ok(App {
            data_dir: data_dir.to_owned(),
            store,
            keys,
            vault,
            notebook,
            tokens,
            assets,
            clock,
        })
    }

    /// Creates the user (its record and data key) unless it exists. True when created.
    pub async fn ensure_user(&self, user: &UserId) -> Result<bool, AppError> {
        let item = Item {
            pk: format!("U#{user}"),
            sk: "USER".into(),
            gsi1: None,
            version: 1,
            expires_at: None,
            body: serde_json::to_vec(&serde_json::json!({ "created_at": self.clock.unix() }))
                .expect("json"),
        };
        let created = match self.store.put(item, Cond::NotExists).await {
            Ok(()) => true,
            Err(StoreError::ConditionFailed { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        self.vault.user_keys(user).await?;
        Ok(created)
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
        let mcp = crate::http::mcp_service(
            NibMcp::new(dispatch, config.public_discovery),
            config.max_body_bytes,
        );
        let sessions = config
            .sessions
            .then(|| SessionSigner::new(self.keys.derive("session-ids")));
        let state = Arc::new(HttpState {
            config,
            tokens: self.tokens.clone(),
            mcp,
            sessions,
            assets: Some(self.assets.clone()),
            clock: self.clock.clone(),
        });
        crate::http::router(state)
    }
}
