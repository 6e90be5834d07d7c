//! Wiring of the Lambda functions (docs/design.md §3). The crates in `functions/` are entry points only:
//! each builds its [`Services`] once at cold start ([`Settings::function_from_env`] with its
//! [`Role`], then `Services::open`), calls one function here over them, and hands each event to
//! what it built. A role builds only what its function's IAM role allows it to use
//! (infra/iam.tf), so a wiring mistake fails in tests against the emulator rather than with
//! AccessDenied on AWS:
//!
//! | function | builds | reaches |
//! |---|---|---|
//! | `mcp` | the HTTP router over [`LambdaDispatch`], tokens, store-backed rate limits, a verify-only OAuth, browser sessions (page views, the web app), the web app's upload signer | `TOK#`, `RL#`, `GRANT#`, `SESSION#` items; the index partitions `U#*#GRANTS`, `U#*#TOKENS` (Query only); Invoke of pages, tasks and account; assumes the uploads role (per upload, narrowed to its keys) to sign POSTs to `uploads/`; no S3 permission of its own |
//! | `pages`, `tasks` | a notebook and the in-process handlers of their [`ToolClass`] (tasks: with the Notion client) | `U#` items, the data key (user context), S3 (pages only); tasks: HTTPS to Notion |
//! | `ingest` | a notebook and [`ingest::Ingest`] | `U#` items, the data key, `uploads/` and `u/` in S3 |
//! | `account` | a notebook and the in-process handler of [`ToolClass::Account`] (the web app's `delete_account`) | `U#`, `USER#`, `TOK#`, `GRANT#`, `RT#`, `SESSION#`, `CLIENT#` items (a deletion removes the user's items in each; puts only in `U#` and `USER#`); the user's index partitions of credentials (Query only); S3 list and delete under `u/`, `uploads/`, `exports/`; no KMS key of its own |
//! | `oauth` | the HTTP router with the authorization server | `CLIENT#`, `CODE#`, `RT#`, `GRANT#`, `USER#`, `SESSION#`, `SECRET#oauth`, `RL#login#`, `RL#oauth-register#`, `RL#oauth-addr#`; the index partition `U#*#SESSIONS` (Query only, sign out everywhere); kms:Sign |
//!
//! The "reaches" column is [`PARTITIONS`], and each role's `dynamodb:LeadingKeys` in
//! `infra/iam.tf` must be exactly it (`tests::every_role_reaches_exactly_its_partitions`):
//! DynamoDB refuses a key outside them with AccessDenied, which the emulator does not enforce.
//!
//! Configuration is the `AwsConfig`, `NIB_OCR` and [`FunctionEnv`] (the public URL, the class
//! functions' names, `/mcp`'s limits), all in [`Settings`].

#[cfg(test)]
mod iam_policy;
#[cfg(feature = "aws")]
pub mod ingest;

#[cfg(feature = "aws")]
use std::sync::Arc;

#[cfg(feature = "aws")]
use crate::adapters::aws::{ClassFunctions, LambdaDispatch};
use crate::adapters::rate_limit::COUNTER_PREFIX;
use crate::auth::oauth::authorize::CODE_PREFIX;
use crate::auth::oauth::clients::CLIENT_PREFIX;
use crate::auth::oauth::grants::GRANT_PREFIX;
use crate::auth::oauth::token::REFRESH_KEY_PREFIX;
use crate::auth::web_sessions::SESSION_PREFIX;
use crate::config::ConfigError;
use crate::http::{RateLimits, url_authority};
#[cfg(feature = "aws")]
use crate::{
    http::{HttpConfig, HttpState},
    mcp::NibMcp,
    services::{Role, Services, ServicesError, Settings},
    tools::invocation::{ToolInvocation, ToolReply},
    tools::{InProcess, ToolClass},
};

/// Items whose partition key (`pk`) a function reaches: every key with a prefix, or one key.
/// As a `dynamodb:LeadingKeys` pattern: `{prefix}*`, or the key itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    Prefix(&'static str),
    Exact(&'static str),
}

impl Partition {
    /// True when `pk` is one of these items.
    pub fn contains(&self, pk: &str) -> bool {
        match self {
            Partition::Prefix(prefix) => pk.starts_with(prefix),
            Partition::Exact(key) => pk == *key,
        }
    }

    /// The `dynamodb:LeadingKeys` value (`StringLike`) that allows exactly these items.
    pub fn leading_key(&self) -> String {
        match self {
            Partition::Prefix(prefix) => format!("{prefix}*"),
            Partition::Exact(key) => (*key).to_owned(),
        }
    }
}

/// What the oauth function reads and writes: clients (and users' approval marks), codes,
/// refresh tokens, grants, sign-in passwords (`USER#`, `auth::users`), browser sessions
/// (`SESSION#`: created at sign-in, read at `/oauth/authorize`, deleted at sign-out), its one
/// server secret (`SECRET#oauth`, `KmsKeys::server_secret`), and the counters of its rate
/// limits (sign-ins per user name, registrations, everything per client address:
/// `http::oauth`). Table only, no index (it writes index keys, which `LeadingKeys` does not
/// govern, but never queries the index).
pub const OAUTH_PARTITIONS: &[Partition] = &[
    Partition::Prefix(CLIENT_PREFIX),
    Partition::Prefix(CODE_PREFIX),
    Partition::Prefix(REFRESH_KEY_PREFIX),
    Partition::Prefix(GRANT_PREFIX),
    Partition::Prefix("USER#"),
    Partition::Prefix(SESSION_PREFIX),
    Partition::Exact("SECRET#oauth"),
    Partition::Prefix("RL#login#"),
    Partition::Prefix("RL#oauth-register#"),
    Partition::Prefix("RL#oauth-addr#"),
];

/// The partitions each function's code reaches, by function name (`infra/locals.tf`): the one
/// list its IAM role must match. mcp: API tokens, the counters of per-credential limits (any
/// key: token ids and grant ids), grants (revocation checks), browser sessions (read and
/// refreshed by a page view; no delete); the class functions and ingest:
/// users' partitions (the access records the class functions write are `U#{user}` items, and
/// the grant's client name comes with the principal, so they reach no `GRANT#`). account: what
/// [`crate::account::Accounts::delete`] removes: the user's partitions and postings (`U#`), the
/// sign-in partition (`USER#`: password, deletion marker), and the credentials kept outside
/// them, found through the user's index partitions ([`INDEX_PARTITIONS`]): tokens, grants,
/// refresh tokens, browser sessions and approvals of clients (`CLIENT#{client}` items).
pub const PARTITIONS: [(&str, &[Partition]); 6] = [
    (
        "mcp",
        &[
            Partition::Prefix("TOK#"),
            Partition::Prefix(COUNTER_PREFIX),
            Partition::Prefix(GRANT_PREFIX),
            Partition::Prefix(SESSION_PREFIX),
        ],
    ),
    ("pages", &[Partition::Prefix("U#")]),
    ("tasks", &[Partition::Prefix("U#")]),
    ("ingest", &[Partition::Prefix("U#")]),
    ("oauth", OAUTH_PARTITIONS),
    ("account", ACCOUNT_PARTITIONS),
];

/// The account function's partitions (see [`PARTITIONS`]).
pub const ACCOUNT_PARTITIONS: &[Partition] = &[
    Partition::Prefix("U#"),
    Partition::Prefix("USER#"),
    Partition::Prefix("TOK#"),
    Partition::Prefix(GRANT_PREFIX),
    Partition::Prefix(REFRESH_KEY_PREFIX),
    Partition::Prefix(SESSION_PREFIX),
    Partition::Prefix(CLIENT_PREFIX),
];

/// Where the account function puts items: only the deletion marker (`USER#{user}`) and the
/// data key's tombstones (`U#{user}`). Everything else of [`ACCOUNT_PARTITIONS`] it reads and
/// deletes, never writes; its role's PutItem statement names only these (`infra/iam.tf`).
pub const ACCOUNT_PUT_PARTITIONS: &[Partition] =
    &[Partition::Prefix("U#"), Partition::Prefix("USER#")];

/// The index partitions (`gsi1pk`) a function queries beyond [`PARTITIONS`], as
/// `dynamodb:LeadingKeys` patterns of an index-only statement: the mcp front lists a user's
/// grants and tokens for the web app's connections screen, the oauth function finds a user's
/// sessions for "sign out everywhere", the account function every credential partition of the
/// user ([`crate::account::credential_partitions`]). No other index partition (a user's
/// notebook) is in reach.
pub const INDEX_PARTITIONS: [(&str, &[&str]); 3] = [
    ("mcp", &["U#*#GRANTS", "U#*#TOKENS"]),
    ("oauth", &["U#*#SESSIONS"]),
    (
        "account",
        &[
            "U#*#TOKENS",
            "U#*#GRANTS",
            "U#*#RT",
            "U#*#SESSIONS",
            "U#*#APPROVED",
        ],
    ),
];

/// The variables of the functions beyond [`AwsConfig`].
///
/// | variable | meaning | needed by |
/// |---|---|---|
/// | `NIB_PUBLIC_URL` | the connector's base URL (OAuth issuer; `/mcp` is the resource) | mcp, oauth |
/// | `NIB_PAGES_FUNCTION` | name or ARN of the pages function | mcp |
/// | `NIB_TASKS_FUNCTION` | name or ARN of the tasks function | mcp |
/// | `NIB_ACCOUNT_FUNCTION` | name or ARN of the account function | mcp |
/// | `NIB_UPLOAD_ROLE_ARN` | the uploads role the web app's presigned POSTs are signed as (`AwsConfig::upload_role_arn`) | mcp |
/// | `NIB_RATE_PER_MINUTE`, `NIB_RATE_PER_HOUR`, `NIB_WRITE_RATE_PER_MINUTE`, `NIB_WRITE_RATE_PER_HOUR` | per-credential limits on `/mcp`, 0 = off (as `nib serve`'s flags) | mcp (60, 1000, 0, 0) |
/// Parsed once at cold start (part of [`Settings`]): a bad value stops the function there,
/// naming the variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionEnv {
    /// Checked when set; [`FunctionEnv::public_url`] asks for it where a function needs it.
    pub public_url: Option<String>,
    pub pages_function: Option<String>,
    pub tasks_function: Option<String>,
    pub account_function: Option<String>,
    pub rate_limits: RateLimits,
}

impl Default for FunctionEnv {
    /// No function names, no public URL, `/mcp`'s default limits (what `nib serve` needs of it:
    /// nothing).
    fn default() -> Self {
        FunctionEnv {
            public_url: None,
            pages_function: None,
            tasks_function: None,
            account_function: None,
            rate_limits: RateLimits::DEFAULT,
        }
    }
}

impl FunctionEnv {
    pub fn from_env() -> Result<FunctionEnv, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<FunctionEnv, ConfigError> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let limit = |name: &'static str, default: u64| match get(name) {
            None => Ok(default),
            Some(v) => v.trim().parse::<u64>().map_err(|_| ConfigError::Invalid {
                name,
                reason: format!("'{v}' is not a whole number"),
            }),
        };
        let rate_limits = RateLimits {
            per_minute: limit("NIB_RATE_PER_MINUTE", RateLimits::DEFAULT.per_minute)?,
            per_hour: limit("NIB_RATE_PER_HOUR", RateLimits::DEFAULT.per_hour)?,
            writes_per_minute: limit("NIB_WRITE_RATE_PER_MINUTE", 0)?,
            writes_per_hour: limit("NIB_WRITE_RATE_PER_HOUR", 0)?,
        };
        let public_url = get("NIB_PUBLIC_URL").map(|u| u.trim_end_matches('/').to_owned());
        if let Some(url) = &public_url {
            let http = url.starts_with("https://") || url.starts_with("http://");
            if !http || url_authority(url).is_none() {
                return Err(ConfigError::Invalid {
                    name: "NIB_PUBLIC_URL",
                    reason: "must be an http:// or https:// URL with a host".into(),
                });
            }
        }
        Ok(FunctionEnv {
            public_url,
            pages_function: get("NIB_PAGES_FUNCTION"),
            tasks_function: get("NIB_TASKS_FUNCTION"),
            account_function: get("NIB_ACCOUNT_FUNCTION"),
            rate_limits,
        })
    }

    pub fn public_url(&self) -> Result<&str, ConfigError> {
        self.public_url
            .as_deref()
            .ok_or(ConfigError::Missing("NIB_PUBLIC_URL"))
    }
}

/// The `mcp` front over [`Services`] built for [`Role::Front`]: authenticates, limits,
/// answers lifecycle and discovery itself, and forwards `tools/call` to the class functions.
#[cfg(feature = "aws")]
pub fn front(services: &Services) -> Result<axum::Router, ServicesError> {
    let env = &services.settings.function;
    let public_url = env.public_url()?;
    let named = |name: &Option<String>, variable: &'static str| {
        name.clone().ok_or(ConfigError::Missing(variable))
    };
    let functions = ClassFunctions {
        pages: named(&env.pages_function, "NIB_PAGES_FUNCTION")?,
        tasks: named(&env.tasks_function, "NIB_TASKS_FUNCTION")?,
        account: named(&env.account_function, "NIB_ACCOUNT_FUNCTION")?,
    };
    let lambda = services
        .aws
        .as_ref()
        .map(|clients| clients.lambda.clone())
        .ok_or(ConfigError::Missing("NIB_TABLE"))?;
    let dispatch = Arc::new(LambdaDispatch::new(lambda, functions));
    let mut http = HttpConfig::deployed(public_url, env.rate_limits);
    http.asset_origin = services.asset_origin();
    let mut mcp = NibMcp::new(dispatch.clone());
    if let Some(origin) = &services.asset_origin() {
        mcp = mcp.with_image_origin(origin);
    }
    let state = http_state(services, http, Some((mcp, dispatch)))?;
    Ok(crate::http::front_router(state))
}

/// The HTTP state of a deployed function: store-backed tokens and rate limits, no sessions,
/// no local assets, the OAuth its role has (verify-only on the front). The front has the MCP
/// service and the dispatch its tool calls and page views go through.
#[cfg(feature = "aws")]
fn http_state(
    services: &Services,
    config: HttpConfig,
    front: Option<(NibMcp, Arc<LambdaDispatch>)>,
) -> Result<Arc<HttpState>, ServicesError> {
    let oauth_config = config
        .oauth
        .clone()
        .ok_or(ConfigError::Missing("NIB_PUBLIC_URL"))?;
    // The front signs the web app's uploads; the oauth function serves no app.
    let upload_signer = front.as_ref().and_then(|_| services.upload_signer());
    let (mcp, dispatch) = front.unzip();
    Ok(Arc::new(HttpState {
        notebook: None,
        upload_signer,
        tokens: services.tokens.clone(),
        mcp,
        dispatch: dispatch.map(|d| d as Arc<dyn crate::tools::Dispatch>),
        sessions: None,
        assets: None,
        oauth: Some(Arc::new(services.oauth(oauth_config))),
        limiter: services.limiter.clone(),
        clock: services.clock.clone(),
        web_sessions: services.web_sessions(),
        config,
    }))
}

/// A function's cold start, the same for all six: logging, then the services of `role` from the
/// environment ([`Settings::function_from_env`]), then what `build` makes of them. A failure is
/// logged once here (its whole chain: Lambda shows only the error's top line) before the
/// runtime reports it.
#[cfg(feature = "aws")]
async fn cold_start<T>(
    role: Role,
    build: impl FnOnce(&Services) -> Result<T, ServicesError>,
) -> Result<T, ServicesError> {
    crate::telemetry::init();
    let built = match Settings::function_from_env(role) {
        Ok(settings) => Services::open(&settings).await.and_then(|s| build(&s)),
        Err(e) => Err(e.into()),
    };
    built.inspect_err(|e| tracing::error!(error = %crate::telemetry::chain(e), "cold start failed"))
}

/// The `mcp` front from the environment.
#[cfg(feature = "aws")]
pub async fn front_from_env() -> Result<axum::Router, ServicesError> {
    cold_start(Role::Front, front).await
}

/// The `oauth` function over [`Services`] built for [`Role::OAuth`]: the authorization server
/// and the well-known documents; no `/mcp`. Its CSRF key derives from the KMS-wrapped
/// `SECRET#oauth` secret.
#[cfg(feature = "aws")]
pub fn oauth(services: &Services) -> Result<axum::Router, ServicesError> {
    let public_url = services.settings.function.public_url()?;
    let http = HttpConfig::deployed(public_url, RateLimits::DEFAULT);
    let state = http_state(services, http, None)?;
    Ok(crate::http::authorization_router(state))
}

/// The `oauth` function from the environment.
#[cfg(feature = "aws")]
pub async fn oauth_from_env() -> Result<axum::Router, ServicesError> {
    cold_start(Role::OAuth, oauth).await
}

/// The `ingest` function from the environment. `NIB_OCR=textract` reads ink-only uploads with
/// Amazon Textract (a build without the `textract` feature refuses it at cold start).
#[cfg(feature = "aws")]
pub async fn ingest_from_env() -> Result<ingest::Ingest, ServicesError> {
    cold_start(Role::Ingest, ingest).await
}

/// The `ingest` function over [`Services`] built for [`Role::Ingest`].
#[cfg(feature = "aws")]
pub fn ingest(services: &Services) -> Result<ingest::Ingest, ServicesError> {
    let (Some(clients), Some(config)) = (&services.aws, services.settings.aws_config()) else {
        return Err(ConfigError::Missing("NIB_BUCKET").into());
    };
    Ok(ingest::Ingest::new(
        services.notebook().clone(),
        clients.s3.clone(),
        config.bucket.clone(),
    ))
}

/// A class function: runs the tools of one [`ToolClass`] for the front.
#[cfg(feature = "aws")]
pub struct ClassFunction {
    class: ToolClass,
    dispatch: InProcess,
}

#[cfg(feature = "aws")]
impl ClassFunction {
    /// Over [`Services`] built for [`Role::Class`] (its notebook writes access records before
    /// each reply, never in the background).
    pub fn new(services: &Services) -> Result<Self, ServicesError> {
        let Role::Class(class) = services.role else {
            return Err(ConfigError::Invalid {
                name: "role",
                reason: format!("{:?} is not a class function", services.role),
            }
            .into());
        };
        Ok(ClassFunction {
            class,
            dispatch: InProcess {
                notebook: services.notebook().clone(),
            },
        })
    }

    /// The class function `class` from the environment.
    pub async fn from_env(class: ToolClass) -> Result<ClassFunction, ServicesError> {
        cold_start(Role::Class(class), ClassFunction::new).await
    }

    /// One invocation: the payload the front sent, the reply it reads.
    pub async fn handle(&self, invocation: ToolInvocation) -> ToolReply {
        crate::tools::invocation::serve(&self.dispatch, self.class, invocation).await
    }

    /// One invocation of the tasks function: a tool call from the front, or the Notion outbox
    /// timer (`infra/schedule.tf`), which pushes every user's due outbox items within
    /// [`NOTION_OUTBOX_PASS`] (the function's timeout is 25 s).
    pub async fn handle_tasks_event(&self, event: TasksEvent) -> TasksReply {
        match event {
            TasksEvent::Tool(invocation) => TasksReply::Tool(self.handle(invocation).await),
            TasksEvent::NotionOutbox { .. } => {
                let notebook = &self.dispatch.notebook;
                match notebook.notion_drain_due(NOTION_OUTBOX_PASS).await {
                    Ok(r) => {
                        tracing::info!(
                            users = r.users,
                            created = r.created,
                            updated = r.updated,
                            failed = r.failed,
                            deferred = r.deferred,
                            "notion outbox pass"
                        );
                        TasksReply::NotionOutbox {
                            users: r.users,
                            created: r.created,
                            updated: r.updated,
                            failed: r.failed,
                        }
                    }
                    Err(e) => {
                        tracing::error!(error = %crate::telemetry::chain(&e), "notion outbox pass failed");
                        TasksReply::NotionOutbox {
                            users: 0,
                            created: 0,
                            updated: 0,
                            failed: 0,
                        }
                    }
                }
            }
        }
    }
}

/// How long the tasks function's outbox pass starts new users' drains (each waits at most
/// about 5 s on Notion, plus a request's 10 s timeout), inside the function's 25 s.
#[cfg(feature = "aws")]
pub const NOTION_OUTBOX_PASS: std::time::Duration = std::time::Duration::from_secs(8);

/// What the tasks function is invoked with: the front's tool call, or the schedule's fixed
/// input `{"notion_outbox": "drain"}` (`infra/schedule.tf`).
#[cfg(feature = "aws")]
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum TasksEvent {
    Tool(ToolInvocation),
    NotionOutbox { notion_outbox: OutboxCommand },
}

/// The only thing the schedule asks.
#[cfg(feature = "aws")]
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutboxCommand {
    Drain,
}

/// The tasks function's answer: the tool's reply as the front reads it, or what a pass did.
#[cfg(feature = "aws")]
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum TasksReply {
    Tool(ToolReply),
    NotionOutbox {
        users: usize,
        created: usize,
        updated: usize,
        failed: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IAM's `StringLike`: `*` is any run of characters.
    fn like(pattern: &str, value: &str) -> bool {
        match pattern.split_once('*') {
            None => pattern == value,
            Some((head, tail)) => {
                value.starts_with(head)
                    && (head.len()..=value.len())
                        .any(|i| value.is_char_boundary(i) && like(tail, &value[i..]))
            }
        }
    }

    /// The index patterns name exactly the partitions the code queries: each user's grants and
    /// tokens (mcp), sessions (oauth) and every credential partition (account), never the
    /// user's notebook partition nor the user index.
    #[test]
    fn index_partitions_are_the_ones_the_code_queries() {
        let alice = crate::domain::UserId::parse("alice").unwrap();
        let keys = |f: &str| {
            INDEX_PARTITIONS
                .iter()
                .find(|(name, _)| *name == f)
                .map(|(_, k)| *k)
                .unwrap_or_default()
        };
        let reaches = |f: &str, pk: &str| keys(f).iter().any(|k| like(k, pk));
        assert!(reaches(
            "mcp",
            &crate::auth::oauth::grants::user_grants_partition(&alice)
        ));
        assert!(reaches(
            "mcp",
            &crate::auth::tokens::user_tokens_partition(&alice)
        ));
        assert!(reaches(
            "oauth",
            &crate::auth::web_sessions::sessions_partition(&alice)
        ));
        // Every partition a deletion queries for the user's credentials, and no other.
        for partition in crate::account::credential_partitions(&alice) {
            assert!(reaches("account", &partition), "{partition}");
        }
        for f in ["mcp", "oauth", "account"] {
            assert!(!reaches(f, "U#alice"), "{f}");
            assert!(!reaches(f, "U#alice#PAGES"), "{f}");
            assert!(!reaches(f, crate::account::USERS_PARTITION), "{f}");
        }
        assert!(!reaches("mcp", "U#alice#SESSIONS"));
    }

    #[test]
    fn the_public_url_sets_the_accepted_host_and_origin() {
        let env = FunctionEnv::from_lookup(|name| {
            (name == "NIB_PUBLIC_URL").then(|| "https://nib.example.com/".to_owned())
        })
        .unwrap();
        let url = env.public_url().unwrap();
        assert_eq!(url, "https://nib.example.com");
        let http = crate::http::HttpConfig::deployed(url, env.rate_limits);
        assert_eq!(http.allowed_hosts, vec!["nib.example.com"]);
        assert_eq!(http.allowed_origins, vec!["https://nib.example.com"]);
        assert!(!http.sessions);
        assert_eq!(http.rate_limits, RateLimits::DEFAULT);
        assert_eq!(env.rate_limits, RateLimits::DEFAULT);
        let off = FunctionEnv::from_lookup(|name| name.starts_with("NIB_RATE").then(|| "0".into()));
        assert_eq!(off.unwrap().rate_limits.all(), vec![]);
    }

    #[test]
    fn a_missing_or_bad_variable_is_named_at_cold_start() {
        let env = FunctionEnv::from_lookup(|_| None).unwrap();
        assert_eq!(
            env.public_url().unwrap_err(),
            ConfigError::Missing("NIB_PUBLIC_URL")
        );
        let bad_url = FunctionEnv::from_lookup(|name| {
            (name == "NIB_PUBLIC_URL").then(|| "nib.example.com".into())
        });
        assert!(matches!(
            bad_url,
            Err(ConfigError::Invalid {
                name: "NIB_PUBLIC_URL",
                ..
            })
        ));
        let bad_limit =
            FunctionEnv::from_lookup(|name| (name == "NIB_RATE_PER_MINUTE").then(|| "lots".into()));
        assert!(matches!(
            bad_limit,
            Err(ConfigError::Invalid {
                name: "NIB_RATE_PER_MINUTE",
                ..
            })
        ));
    }
}
