//! `nib`: the server, import, and the admin commands, over either back end (`--backend`).
//!
//! Locally the embedded store is one file that one process opens at a time: `nib import` and
//! `nib token` work on a data directory while no `nib serve` runs on it (they say so clearly
//! when one does). With `--backend aws` every command works on the deployed table, bucket and
//! keys (settings from the `NIB_*` variables, or `--from-terraform`), alongside the functions.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use nib::auth::Scope;
use nib::auth::oauth::clients::{ClientKind, RegistrationRequest};
use nib::auth::oauth::{MAX_ACCESS_TTL_SECS, OAuthConfig, scope_string};
use nib::config::AwsConfig;
use nib::domain::UserId;
use nib::http::{HttpConfig, RateLimits};
use nib::services::{DEFAULT_USER, LocalOptions, Role, Services, Settings};

mod idle;
mod outbox;
mod watch;

#[derive(Parser)]
#[command(
    name = "nib",
    version,
    about = "Your notebook, served to AI assistants over MCP"
)]
struct Cli {
    /// The data directory (store, key file, page images).
    #[arg(long, global = true, env = "NIB_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where the notebook lives: `local` (the data directory) or `aws` (DynamoDB, S3 and KMS,
    /// from NIB_TABLE, NIB_BUCKET, NIB_KMS_KEY_ID and the usual AWS_* variables; set
    /// AWS_ENDPOINT_URL for an emulator).
    #[arg(long, global = true, value_enum, default_value_t = Backend::Local, env = "NIB_BACKEND")]
    backend: Backend,
    /// Read the AWS settings (table, bucket, data key, region, public URL) from
    /// `terraform -chdir=DIR output -json`: `--from-terraform` alone reads infra,
    /// `--from-terraform=DIR` another folder; implies --backend aws.
    #[arg(long, global = true, env = "NIB_TERRAFORM_DIR", num_args = 0..=1, require_equals = true, default_missing_value = "infra", value_name = "DIR")]
    from_terraform: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the notebook over MCP (Streamable HTTP, POST /mcp).
    Serve(ServeArgs),
    /// Import pages from a folder: STEM.pdf / STEM.png (ink) with STEM.md / STEM.txt (OCR).
    Import {
        #[arg(required_unless_present = "bundle", conflicts_with = "bundle")]
        dir: Option<PathBuf>,
        /// Import a bundle written by `nib export` instead (into an empty notebook; again
        /// changes nothing).
        #[arg(long, value_name = "BUNDLE.zip")]
        bundle: Option<PathBuf>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        /// The engine that reads pages that come as ink alone: local (PP-OCR, `make tools-ocr`
        /// installs it), openai or google-vision (NIB_OCR_* settings; README, "Choosing an
        /// OCR provider"), or off.
        #[arg(long, env = "NIB_OCR", default_value = DEFAULT_OCR)]
        ocr: String,
        /// Read the ink again even where the page has text of its own or was read before.
        #[arg(long)]
        force_ocr: bool,
        /// AWS only: put the files under uploads/{user}/ in the bucket, for the ingest
        /// function to import (and Textract to read), instead of writing the pages here.
        #[arg(long, conflicts_with = "watch")]
        via_upload: bool,
        /// Keep watching the folder (a tablet's sync folder): import each new or changed page
        /// once its files stop changing, one line per file; a restart imports nothing twice.
        #[arg(long, conflicts_with = "bundle")]
        watch: bool,
        /// With --watch: how long a page's files must be left alone before they are imported.
        #[arg(long, default_value_t = 2000, value_name = "MS", requires = "watch")]
        settle_ms: u64,
    },
    /// Read pages' stored ink again with the OCR engine (task ids and statuses stay).
    Ocr {
        /// The page imported under this file stem (e.g. 2026-06-19).
        #[arg(long, conflicts_with = "all", required_unless_present = "all")]
        stem: Option<String>,
        /// Every page with ink.
        #[arg(long)]
        all: bool,
        /// Also pages whose text came from a file, and ink read before.
        #[arg(long)]
        force: bool,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        #[arg(long, env = "NIB_OCR", default_value = DEFAULT_OCR)]
        ocr: String,
    },
    /// Rebuild a user's search vectors: pages without them, with stale ones, or with another
    /// embedding model's (after an upgrade that changed the model) are embedded again.
    Reindex {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Export a user's notebook: a bundle `nib import --bundle` reads back, or Markdown.
    Export {
        /// The ZIP file to write (replaced if it exists).
        out: PathBuf,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        #[arg(long, value_enum, default_value = "bundle")]
        format: ExportFormat,
    },
    /// Create, list and revoke API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Users' sign-in passwords (the OAuth consent page asks for them).
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Pre-register, list and remove OAuth clients.
    Client {
        #[command(subcommand)]
        command: ClientCommand,
    },
    /// List and revoke what users approved on the consent page (OAuth grants).
    Grant {
        #[command(subcommand)]
        command: GrantCommand,
    },
    /// The MCP tools this nib serves, in tools/list order: one line each, `name<TAB>scope<TAB>title`
    /// (the scope a token needs to list and call it).
    Tools,
    /// Check a deployment: the table, the bucket, the data key, a probe item, the connector.
    /// One line per check, `ok` or `FAIL: <cause> -> <fix>`; exit code 1 on any failure.
    Doctor,
    /// A read-only end-to-end check of a live connector URL (ending in /mcp), as a client sees
    /// it: the OAuth metadata chain; with a read token also each protocol era, the tools and a
    /// signed page image. One line per check; exit code 1 on any failure.
    Smoke {
        url: String,
        /// A read token (nib token create --scope read); NIB_SMOKE_TOKEN.
        #[arg(long, env = "NIB_SMOKE_TOKEN")]
        token: Option<String>,
    },
    /// Push tasks to a Notion database: connect one, see how pushing goes, push what waits.
    Notion {
        #[command(subcommand)]
        command: NotionCommand,
    },
    /// Who opened a user's notebook: the access record (kept 90 days).
    Access {
        #[command(subcommand)]
        command: AccessCommand,
    },
    /// One task: its pages and status history; link two tasks that are the same work.
    Task {
        #[command(subcommand)]
        command: TaskCommand,
    },
    /// Typed notes: add one to a day's page, list them, list their tags.
    Notes {
        #[command(subcommand)]
        command: NotesCommand,
    },
}

#[derive(Subcommand)]
enum TaskCommand {
    /// A task's text, status, every line it is written on, and who changed its status when
    /// (the get_task tool's answer).
    Show {
        task_link_id: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        /// The get_task tool's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make task B the same task as A (link_tasks: one task, one status across their pages).
    Link {
        a: String,
        b: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Undo `nib task link A B` (unlink_tasks).
    Unlink {
        a: String,
        b: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

#[derive(Subcommand)]
enum NotesCommand {
    /// Add a typed note to the page of a day (today in the user's time zone by default), as
    /// add_note does.
    Add {
        text: String,
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// A tag (repeat for more).
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[arg(long)]
        source_url: Option<String>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// List notes, newest first: date, tags, text.
    List {
        #[arg(long)]
        tag: Option<String>,
        #[arg(long, value_name = "YYYY-MM-DD")]
        from: Option<String>,
        #[arg(long, value_name = "YYYY-MM-DD")]
        to: Option<String>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Every tag with how many notes carry it.
    Tags {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

#[derive(Subcommand)]
enum AccessCommand {
    /// List the access record, newest first: when, which tool, which token or client, and the
    /// ids of the pages and tasks opened.
    List {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        /// Only records from this day on (YYYY-MM-DD, UTC).
        #[arg(long, value_name = "YYYY-MM-DD")]
        since: Option<String>,
        /// One JSON object per line (the fields of the list_access tool).
        #[arg(long)]
        json: bool,
    },
}

/// Which user a `nib notion` command works on (the back end is the global `--backend`).
#[derive(clap::Args)]
struct NotionTarget {
    #[arg(long, default_value = DEFAULT_USER)]
    user: String,
}

#[derive(Subcommand)]
enum NotionCommand {
    /// Connect a database: reads its schema and maps the task fields onto it. The integration
    /// token comes from NIB_NOTION_TOKEN or stdin (one line), never from an argument.
    Connect {
        /// The database id (32 hex digits, dashes optional), as in its Notion link.
        #[arg(long)]
        database: String,
        #[command(flatten)]
        target: NotionTarget,
    },
    /// The connected database, its mapping, the last error and what waits in the outbox.
    Status {
        #[command(flatten)]
        target: NotionTarget,
    },
    /// Forget the connection (and the outbox); pushed tasks keep their Notion links.
    Disconnect {
        #[command(flatten)]
        target: NotionTarget,
    },
    /// Push what waits in the outbox now (never before a Retry-After Notion asked for).
    Sync {
        #[command(flatten)]
        target: NotionTarget,
    },
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user with a password (asked twice, or one line on stdin with --password-stdin).
    Create {
        name: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// Change a user's password.
    Passwd {
        name: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// List the users: name, created, owner, password, pages, active tokens and grants.
    List,
    /// Delete a user's account: its data key first (what remains cannot be opened), then its
    /// password, tokens, grants, pages, tasks and page images. Cannot be undone; running it
    /// again after an interruption finishes the job.
    Delete {
        name: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Show a user's time zone, or set it: an IANA name such as Europe/Berlin (default UTC).
    /// It decides which day is today for the user's notes (`add_note`, `nib notes add`).
    Timezone { name: String, zone: Option<String> },
    /// The first owner of a deployment (`make deploy` runs it): creates the user with a
    /// password unless it has one, then prints the connector URL and where to paste it.
    /// Re-running it changes nothing.
    EnsureOwner {
        #[arg(default_value = DEFAULT_USER)]
        name: String,
        /// The password on one line of stdin; without it a terminal is asked twice, and
        /// without a terminal a password is generated and printed once.
        #[arg(long)]
        password_stdin: bool,
    },
}

#[derive(Subcommand)]
enum ClientCommand {
    /// Register a client by hand (for apps that cannot register themselves); prints its id.
    Add {
        /// The name the consent page shows.
        #[arg(long)]
        name: String,
        /// An allowed redirect URI (repeat for more); loopback http URIs may vary the port.
        #[arg(long = "redirect-uri", required = true)]
        redirect_uris: Vec<String>,
        /// Issue a client secret (printed once); without it the client is public (PKCE only).
        #[arg(long)]
        confidential: bool,
        /// `native` for desktop apps with private-use URI schemes.
        #[arg(long, default_value = "web", value_parser = ["web", "native"])]
        application_type: String,
    },
    /// List the stored clients.
    List,
    /// Forget a client.
    Remove { client_id: String },
}

#[derive(Subcommand)]
enum GrantCommand {
    /// List a user's grants.
    List {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Revoke a grant: its access and refresh tokens stop working at once.
    Revoke {
        grant_id: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:8787", env = "NIB_BIND")]
    bind: SocketAddr,
    /// The public base URL clients reach this server at (defaults to http://BIND).
    #[arg(long, env = "NIB_PUBLIC_URL")]
    public_url: Option<String>,
    /// Answer initialize, ping, server/discover and tools/list without a token.
    #[arg(long, env = "NIB_PUBLIC_DISCOVERY", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    public_discovery: bool,
    /// Issue signed Mcp-Session-Id headers and require them (protocol eras before 2026-07-28).
    #[arg(long)]
    sessions: bool,
    /// Extra accepted Host values (name or name:port); loopback names are always accepted.
    #[arg(long = "allowed-host")]
    allowed_hosts: Vec<String>,
    /// Extra accepted Origin values (scheme://host[:port]).
    #[arg(long = "allowed-origin")]
    allowed_origins: Vec<String>,
    /// Lifetime of signed page-image URLs, in seconds.
    #[arg(long, default_value_t = 3600, env = "NIB_ASSET_TTL_SECONDS")]
    asset_ttl_seconds: u64,
    #[command(flatten)]
    limits: RateLimitArgs,
    #[command(flatten)]
    oauth: OAuthArgs,
    /// Also watch this folder (a tablet's sync folder) and import its pages while serving, as
    /// `nib import --watch` does.
    #[arg(long, value_name = "DIR")]
    watch: Option<PathBuf>,
    /// The engine that reads pages that come as ink alone (uploads and the watched folder):
    /// local (PP-OCR, `make tools-ocr` installs it), openai or google-vision (NIB_OCR_*
    /// settings; README, "Choosing an OCR provider"), or off. Without the local engine's
    /// files the server still starts, and says that ink is stored unread.
    #[arg(long, env = "NIB_OCR", default_value = DEFAULT_OCR)]
    ocr: String,
    /// With --watch: how long a page's files must be left alone before they are imported.
    #[arg(long, default_value_t = 2000, value_name = "MS", requires = "watch")]
    settle_ms: u64,
}

/// Requests per credential (API token or OAuth grant) on /mcp; 0 turns a limit off.
#[derive(clap::Args)]
struct RateLimitArgs {
    /// Requests per minute.
    #[arg(long, default_value_t = 60, env = "NIB_RATE_PER_MINUTE")]
    rate_per_minute: u64,
    /// Requests per hour.
    #[arg(long, default_value_t = 1000, env = "NIB_RATE_PER_HOUR")]
    rate_per_hour: u64,
    /// Write tool calls per minute, counted apart (0: only the limits above).
    #[arg(long, default_value_t = 0, env = "NIB_WRITE_RATE_PER_MINUTE")]
    write_rate_per_minute: u64,
    /// Write tool calls per hour, counted apart.
    #[arg(long, default_value_t = 0, env = "NIB_WRITE_RATE_PER_HOUR")]
    write_rate_per_hour: u64,
}

#[derive(clap::Args)]
struct OAuthArgs {
    /// Run without the OAuth authorization server (API tokens only).
    #[arg(long, env = "NIB_NO_OAUTH", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    no_oauth: bool,
    /// Access token lifetime in seconds (at most 3600).
    #[arg(long, default_value_t = 3600, env = "NIB_ACCESS_TOKEN_TTL_SECONDS")]
    access_token_ttl_seconds: i64,
    /// Refresh token lifetime in seconds (each refresh starts a new one).
    #[arg(long, default_value_t = 30 * 24 * 3600, env = "NIB_REFRESH_TOKEN_TTL_SECONDS")]
    refresh_token_ttl_seconds: i64,
    /// Development only: accept client ID metadata documents at http://127.0.0.1 or
    /// http://localhost URLs (the specification requires https).
    #[arg(long, env = "NIB_DEV_HTTP_CLIENT_IDS", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    dev_http_client_ids: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// `nib-bundle` version 1 (README, "Export and import"): everything, re-importable.
    Bundle,
    /// One `.md` per page with front matter, its image beside it.
    Markdown,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum Backend {
    Local,
    Aws,
}

/// Where a command works: the back end, the data directory (local) and where the AWS
/// settings come from (the environment, or Terraform's outputs).
struct Target {
    backend: Backend,
    data_dir: PathBuf,
    terraform_dir: Option<PathBuf>,
}

impl Target {
    /// The AWS settings: Terraform's outputs when `--from-terraform` is given (the
    /// environment fills in the rest: credentials, an endpoint), else the environment alone.
    fn aws_config(&self) -> anyhow::Result<AwsConfig> {
        let Some(dir) = &self.terraform_dir else {
            return AwsConfig::from_env().context("cannot configure the AWS back end");
        };
        let out = std::process::Command::new("terraform")
            .arg(format!("-chdir={}", dir.display()))
            .args(["output", "-json"])
            .stdin(std::process::Stdio::null())
            .output()
            .context("cannot run terraform (is it on PATH?)")?;
        anyhow::ensure!(
            out.status.success(),
            "`terraform -chdir={} output -json` failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        let settings = nib::config::terraform_settings(&String::from_utf8_lossy(&out.stdout))
            .with_context(|| format!("cannot read the outputs of {}", dir.display()))?;
        AwsConfig::from_lookup(|name| {
            settings
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
        })
        .context("cannot configure the AWS back end")
    }

    /// The settings of a command playing `role` (`ocr` reads ink-only pages).
    fn settings(&self, role: Role, options: LocalOptions) -> anyhow::Result<Settings> {
        Ok(match self.backend {
            Backend::Local => Settings::local(&self.data_dir, options, role),
            Backend::Aws => {
                let mut config = self.aws_config()?;
                if role == Role::Server {
                    config.asset_ttl_seconds = options.asset_ttl_seconds;
                    config.public_url = Some(options.public_url.clone());
                }
                Settings::aws(config, role, options.ocr)
            }
        })
    }

    /// The services `settings` describe.
    async fn build(&self, settings: &Settings) -> anyhow::Result<Services> {
        Services::open(settings)
            .await
            .with_context(|| self.open_failure())
    }

    /// What a failure to open the back end is said as.
    fn open_failure(&self) -> String {
        match self.backend {
            Backend::Local => format!("cannot open the data directory {}", self.data_dir.display()),
            Backend::Aws => "cannot open the AWS back end".to_owned(),
        }
    }

    /// The system an operator's command works on (`ocr` reads ink-only pages).
    async fn open(&self, ocr: nib::config::OcrChoice) -> anyhow::Result<Services> {
        self.open_admin(ocr, false).await
    }

    /// [`Target::open`] for a command that writes a whole notebook and exits (import,
    /// reindex): locally, the store with a large page cache.
    async fn open_bulk(&self, ocr: nib::config::OcrChoice) -> anyhow::Result<Services> {
        self.open_admin(ocr, true).await
    }

    async fn open_admin(
        &self,
        ocr: nib::config::OcrChoice,
        bulk: bool,
    ) -> anyhow::Result<Services> {
        let options = LocalOptions {
            ocr,
            bulk,
            ..LocalOptions::default()
        };
        self.build(&self.settings(Role::Admin, options)?).await
    }
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print it (it is shown only this once).
    Create {
        /// read; edit (read and write, no deletes); write; admin.
        #[arg(long, value_parser = ["read", "edit", "write", "admin"])]
        scope: String,
        #[arg(long)]
        label: Option<String>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// List a user's tokens (never the secrets).
    List {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Revoke a token by its id (from `nib token list`).
    Revoke {
        token_id: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("nib");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/nib"),
        None => PathBuf::from(".nib"),
    }
}

fn user_id(s: &str) -> anyhow::Result<UserId> {
    UserId::parse(s).map_err(|e| anyhow::anyhow!("--user '{s}' {e}"))
}

/// glibc's malloc gives a thread that meets contention a heap of its own (up to 8 per core),
/// and each heap keeps what was freed in it: at 16 concurrent searches a 10,000-page server
/// held ~4 MB more than with one heap per core, at the same speed (BENCHMARKS.md, "A search
/// server under 60 MiB"). So one heap per core, set before any other thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn limit_malloc_heaps() {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let heaps = i32::try_from(cores).unwrap_or(i32::MAX);
    // SAFETY: `mallopt` sets one of the allocator's tuning parameters and nothing else; any
    // positive M_ARENA_MAX is valid, and no other thread exists yet to race the change.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, heaps);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_heaps() {}

fn main() -> ExitCode {
    limit_malloc_heaps();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => runtime.block_on(run_main()),
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run_main() -> ExitCode {
    // Written when `main` returns (every command returns through here).
    let _log = nib::telemetry::init_batched();
    let cli = Cli::parse();
    let target = Target {
        backend: if cli.from_terraform.is_some() {
            Backend::Aws
        } else {
            cli.backend
        },
        data_dir: cli.data_dir.clone().unwrap_or_else(default_data_dir),
        terraform_dir: cli.from_terraform.clone(),
    };
    match run(cli.command, &target).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, target: &Target) -> anyhow::Result<ExitCode> {
    // A nib built without the AWS back end (`make run`'s) says so before reading any setting.
    if target.backend == Backend::Aws && !cfg!(feature = "aws") {
        return Err(nib::services::ServicesError::NoAws.into());
    }
    match command {
        Command::Serve(args) => serve(args, target).await,
        Command::Import {
            dir,
            bundle,
            user,
            ocr,
            force_ocr,
            via_upload,
            watch,
            settle_ms,
        } => {
            let ocr = nib::config::OcrChoice::parse(&ocr)?;
            match (dir, bundle) {
                (_, Some(bundle)) => import_bundle(&bundle, &user_id(&user)?, target).await,
                (Some(dir), None) if watch => {
                    let app = target.open(ocr).await?;
                    let user = user_id(&user)?;
                    app.ensure_user(&user).await?;
                    watch::Watch {
                        app: &app,
                        dir: &dir,
                        data_dir: &target.data_dir,
                        user: &user,
                        force_ocr,
                        settle: std::time::Duration::from_millis(settle_ms),
                    }
                    .run(shutdown())
                    .await?;
                    Ok(ExitCode::SUCCESS)
                }
                #[cfg(feature = "aws")]
                (Some(dir), None) if via_upload => upload(&dir, &user_id(&user)?, target).await,
                #[cfg(not(feature = "aws"))]
                (Some(_), None) if via_upload => Err(nib::services::ServicesError::NoAws.into()),
                (Some(dir), None) => import(&dir, &user_id(&user)?, target, ocr, force_ocr).await,
                (None, None) => unreachable!("clap requires a folder or --bundle"),
            }
        }
        Command::Reindex { user } => reindex(&user_id(&user)?, target).await,
        Command::Access {
            command: AccessCommand::List { user, since, json },
        } => access_list(&user_id(&user)?, since.as_deref(), json, target).await,
        Command::Notes { command } => notes(command, target).await,
        Command::Export { out, user, format } => {
            export(&out, &user_id(&user)?, format, target).await
        }
        Command::Ocr {
            stem,
            all: _,
            force,
            user,
            ocr,
        } => {
            let ocr = nib::config::OcrChoice::parse(&ocr)?;
            #[cfg(feature = "ocr-local")]
            let done = reread(stem.as_deref(), force, &user_id(&user)?, target, ocr).await;
            #[cfg(not(feature = "ocr-local"))]
            let done = {
                let _ = (stem, force, user, ocr);
                Err(anyhow::anyhow!("this build of nib has no OCR engine"))
            };
            done
        }
        Command::Token { command } => token(command, target).await,
        Command::User { command } => user(command, target).await,
        Command::Client { command } => client(command, target).await,
        Command::Grant { command } => grant(command, target).await,
        Command::Notion { command } => notion(command, target).await,
        Command::Task { command } => task(command, target).await,
        Command::Tools => {
            for t in nib::tools::catalog() {
                println!("{}\t{}\t{}", t.name, t.scope, t.title);
            }
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "aws")]
        Command::Doctor => doctor(target).await,
        #[cfg(not(feature = "aws"))]
        Command::Doctor => Err(nib::services::ServicesError::NoAws.into()),
        Command::Smoke { url, token } => {
            let checks = nib::smoke::smoke(&url, token.as_deref()).await;
            let mut failed = false;
            for check in &checks {
                println!("{}", check.line());
                failed |= check.outcome.is_err();
            }
            if token.is_none() {
                println!("(no --token: the tools and page images were not checked)");
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

async fn serve(args: ServeArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let data_dir = target.data_dir.as_path();
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let addr = listener.local_addr()?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"))
        .trim_end_matches('/')
        .to_owned();
    // Every way ink arrives (uploads, the watched folder) is read with the configured engine.
    let ocr = nib::config::OcrChoice::parse(&args.ocr)?;
    let options = |ocr| LocalOptions {
        public_url: public_url.clone(),
        asset_ttl_seconds: args.asset_ttl_seconds,
        ocr,
        ..LocalOptions::default()
    };
    let settings = target.settings(Role::Server, options(ocr))?;
    let data_place = match settings.aws_config() {
        Some(config) => format!("the DynamoDB table {}", config.table),
        None => data_dir.display().to_string(),
    };
    // A local engine whose files are not installed does not stop the server (`make run` serves
    // while the models are still being made): the ink is stored unread, and it is said once.
    let mut unread_ink = None;
    let app = match Services::open(&settings).await {
        Ok(app) => app,
        Err(nib::services::ServicesError::Ocr {
            choice: nib::config::OcrChoice::Local,
            source,
        }) => {
            tracing::warn!(error = %source, "no OCR engine: ink is stored unread");
            unread_ink = Some(format!(
                "nib: ink is stored unread ({source}); `make tools-ocr` installs the OCR engine, \
                 then `nib ocr --all` reads the stored ink"
            ));
            let settings = target.settings(Role::Server, options(nib::config::OcrChoice::Off))?;
            target.build(&settings).await?
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context(target.open_failure()));
        }
    };
    let first = app.first_start().await?;
    let mut config = HttpConfig::local(public_url.clone());
    config.public_discovery = args.public_discovery;
    config.sessions = args.sessions;
    config.allowed_hosts.extend(args.allowed_hosts);
    config.allowed_origins.extend(args.allowed_origins);
    config.rate_limits = RateLimits {
        per_minute: args.limits.rate_per_minute,
        per_hour: args.limits.rate_per_hour,
        writes_per_minute: args.limits.write_rate_per_minute,
        writes_per_hour: args.limits.write_rate_per_hour,
    };
    if args.oauth.no_oauth {
        config.oauth = None;
    }
    if let Some(oauth) = &mut config.oauth {
        anyhow::ensure!(
            (1..=MAX_ACCESS_TTL_SECS).contains(&args.oauth.access_token_ttl_seconds),
            "--access-token-ttl-seconds must be between 1 and {MAX_ACCESS_TTL_SECS}"
        );
        anyhow::ensure!(
            args.oauth.refresh_token_ttl_seconds > 0,
            "--refresh-token-ttl-seconds must be positive"
        );
        oauth.access_ttl_secs = args.oauth.access_token_ttl_seconds;
        oauth.refresh_ttl_secs = args.oauth.refresh_token_ttl_seconds;
        oauth.allow_http_loopback_client_ids = args.oauth.dev_http_client_ids;
    }
    let password = if config.oauth.is_some() {
        app.first_password().await?
    } else {
        None
    };
    if let Some(host) = nib::http::url_authority(&public_url) {
        config.allowed_hosts.push(host.to_owned());
    }
    // The web app needs the authorization server's sign-in.
    let serves_app = config.oauth.is_some();
    // Every request counts as activity: an idle server drops its caches (idle.rs).
    let activity = idle::Activity::default();
    let seen = activity.clone();
    let router = app.router(config).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            seen.saw_request();
            next.run(req)
        },
    ));
    let idle_watch = tokio::spawn(idle::run(activity, app.notebook().clone()));
    // Pushes what waits in the Notion outboxes once it is due (outbox.rs).
    let outbox_timer = tokio::spawn(outbox::run(app.notebook().clone()));

    // Tests and scripts read these lines: keep their shape. Written so that a reader that
    // closed the pipe (`nib serve | head -1`) cannot stop the server: println! would panic.
    let mut lines = vec![format!("nib: serving {public_url}/mcp")];
    lines.push(match first {
        Some(t) => format!("nib: token for user {} ({}): {}", t.record.user, t.record.scope, t.token),
        None if target.backend == Backend::Aws => format!("nib: data in {data_place}; its first start printed a token"),
        None => format!(
            "nib: data in {data_place}; create a token with `nib token create --scope read` (while the server is stopped)"
        ),
    });
    if let Some(p) = password {
        lines.push(format!(
            "nib: password for user {DEFAULT_USER} (OAuth sign-in page): {p}  (change it with `nib user passwd {DEFAULT_USER}`)"
        ));
    }
    lines.extend(unread_ink);
    if serves_app {
        lines.push(format!(
            "nib: your notebook in a browser: {public_url}{}",
            nib::http::APP_PATH
        ));
    }
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }
    tracing::info!(%addr, data = %data_place, "listening");
    // With the peer address: the authorization server limits sign-ins and metadata fetches
    // per client address (never taken from a header).
    let server = async {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown())
        .await
        .context("server failed")
    };
    match &args.watch {
        None => server.await?,
        Some(dir) => {
            let inbox = watch::Watch {
                app: &app,
                dir,
                data_dir,
                user: &UserId::parse(DEFAULT_USER)?,
                force_ocr: false,
                settle: std::time::Duration::from_millis(args.settle_ms),
            };
            // A watcher that fails (its folder cannot be read) stops the server too.
            tokio::try_join!(server, inbox.run(shutdown()))?;
        }
    }
    idle_watch.abort();
    outbox_timer.abort();
    // The access records still waiting in memory (the flusher writes them every 0.5 s).
    match app.notebook().access_log().flush().await {
        Ok(n) => tracing::info!(records = n, "access records written at shutdown"),
        Err(e) => {
            tracing::error!(error = %nib::telemetry::chain(&e), "could not write the last access records")
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Pages `nib import` reads, parses and commits at once, when some carry ink: each holds its
/// files' bytes until written, and waits its turn for the OCR engine.
const IMPORT_CONCURRENCY: usize = 16;
/// The same when every page is text (Markdown or plain text): more commits share each of the
/// store's group commits (at most 64), so fewer fsyncs and fewer rewritten pages per page
/// written (10,000 pages: 1.33x the pages/s of 16; BENCHMARKS.md, "Footprint, continued").
const TEXT_IMPORT_CONCURRENCY: usize = 64;

/// A bar of `len` pages: done, pages/s and the time left.
fn progress_bar(verb: &str, len: usize) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!(
            "{{spinner}} {verb} [{{bar:30}}] {{pos}}/{{len}} pages {{per_sec}} ETA {{eta}} {{msg}}"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

/// `nib export`: the bundle or the Markdown ZIP, written to a temporary file beside `out` and
/// renamed at the end, so a failed export leaves no half archive under the name.
async fn reindex(user: &UserId, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open_bulk(nib::config::OcrChoice::Off).await?;
    let report = app
        .notebook()
        .reindex(user)
        .await
        .context("cannot rebuild the search vectors")?;
    println!(
        "reindexed {user}: {} pages, {} embedded again, {} vector blocks written (model {})",
        report.pages,
        report.embedded,
        report.blocks,
        nib::embed::model()?.id()
    );
    Ok(ExitCode::SUCCESS)
}

async fn export(
    out: &Path,
    user: &UserId,
    format: ExportFormat,
    target: &Target,
) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let total = app.notebook().page_count(user).await?;
    let bar = progress_bar("exporting", usize::try_from(total).unwrap_or(usize::MAX));
    let partial = out.with_extension("zip.partial");
    let file = std::io::BufWriter::new(
        std::fs::File::create(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))?,
    );
    let tick = || bar.inc(1);
    let result = match format {
        ExportFormat::Bundle => app.notebook().export_bundle(user, file, &tick).await,
        ExportFormat::Markdown => app.notebook().export_markdown(user, file, &tick).await,
    };
    bar.finish_and_clear();
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(anyhow::Error::new(e).context("cannot export the notebook"));
        }
    };
    std::fs::rename(&partial, out).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "exported {} pages, {} tasks and {} ink files of {user} to {}",
        report.pages,
        report.tasks,
        report.ink_files,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `nib import --bundle`: checks the whole bundle, then writes it.
async fn import_bundle(bundle: &Path, user: &UserId, target: &Target) -> anyhow::Result<ExitCode> {
    let file = std::io::BufReader::new(
        std::fs::File::open(bundle).with_context(|| format!("cannot open {}", bundle.display()))?,
    );
    let app = target.open_bulk(nib::config::OcrChoice::Off).await?;
    app.ensure_user(user).await?;
    let bar = progress_bar("importing", 0);
    let tick = || {
        bar.inc_length(1);
        bar.inc(1)
    };
    let result = app.notebook().import_bundle(user, file, &tick).await;
    bar.finish_and_clear();
    let r = result.with_context(|| format!("cannot import {}", bundle.display()))?;
    println!(
        "imported {} pages and {} tasks into {user}; {} pages and {} tasks were there already",
        r.pages, r.tasks, r.pages_present, r.tasks_present
    );
    Ok(ExitCode::SUCCESS)
}

/// The engine `nib import` reads ink-only pages with, unless told otherwise.
#[cfg(feature = "ocr-local")]
const DEFAULT_OCR: &str = "local";
#[cfg(not(feature = "ocr-local"))]
const DEFAULT_OCR: &str = "off";

async fn import(
    dir: &Path,
    user: &UserId,
    target: &Target,
    ocr: nib::config::OcrChoice,
    force_ocr: bool,
) -> anyhow::Result<ExitCode> {
    let (pages, skipped) = nib::notebook::group_dir(dir)
        .with_context(|| format!("cannot read the folder {}", dir.display()))?;
    let app = target.open_bulk(ocr).await?;
    app.ensure_user(user).await?;
    let bar = progress_bar("importing", pages.len());
    let started = std::time::Instant::now();
    let (mut created, mut updated, mut failed) = (0usize, 0usize, 0usize);
    // Without a terminal there is no bar: say how far we got now and then instead.
    let plain_progress = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    // Several pages in flight, so the store commits their transactions together (one fsync
    // for the group); the statistics are counters, so page commits do not contend on them.
    // Pages of nearby dates share tasks (a task copied forward day to day), and concurrent
    // commits of one task retry, so the pages in flight are far apart: each of
    // the workers takes one contiguous run of dates, in order. Each worker is
    // its own task, so their parsing, embedding and sealing run on every core (polled
    // together from this task, they had one).
    // Each page's vectors are left pending (one small item, nothing read) and folded into
    // their blocks once at the end: rewriting a page's whole block at each commit made the
    // import slower as the notebook grew. Search reads pending entries meanwhile, and a
    // crash before the fold loses nothing (the next import or `nib reindex` folds them).
    app.notebook().defer_vectors(true);
    let text_only = pages
        .iter()
        .all(|p| p.pdf.is_none() && p.png.is_none() && p.jpg.is_none());
    let workers_wanted = if text_only {
        TEXT_IMPORT_CONCURRENCY
    } else {
        IMPORT_CONCURRENCY
    };
    let chunk = pages.len().div_ceil(workers_wanted).max(1);
    let (tx, mut results) = tokio::sync::mpsc::unbounded_channel();
    let mut workers = tokio::task::JoinSet::new();
    for run in pages.chunks(chunk) {
        let (run, notebook, user, tx) = (
            run.to_vec(),
            app.notebook().clone(),
            user.clone(),
            tx.clone(),
        );
        workers.spawn(async move {
            for page in &run {
                let result = notebook.import_files_read(&user, page, force_ocr).await;
                if tx.send(result).is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let mut done = 0;
    while let Some(result) = results.recv().await {
        if plain_progress && done > 0 && done % 50 == 0 {
            eprintln!("progress: {done}/{}", pages.len());
        }
        done += 1;
        match result {
            Ok(saved) => {
                for page in saved {
                    if page.created {
                        created += 1;
                    } else {
                        updated += 1;
                    }
                }
            }
            Err(failure) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: {failure}"));
            }
        }
        bar.inc(1);
    }
    // A worker that stopped early (it panicked) is a failure, not a short import.
    while let Some(joined) = workers.join_next().await {
        joined.context("an import worker failed")?;
    }
    app.notebook().defer_vectors(false);
    bar.set_message("folding search vectors");
    app.notebook()
        .fold_vectors(user)
        .await
        .context("cannot fold the imported pages' search vectors into their blocks")?;
    bar.finish_and_clear();
    for path in &skipped {
        eprintln!(
            "skipped: {} (not a .pdf, .png, .jpg, .md or .txt page file)",
            path.display()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "imported {} pages ({created} new, {updated} updated) in {secs:.2}s ({:.1} pages/s); {failed} failed",
        created + updated,
        (created + updated) as f64 / secs.max(1e-9)
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `nib ocr`: the page of `stem`, or every page with ink, read again.
#[cfg(feature = "ocr-local")]
async fn reread(
    stem: Option<&str>,
    force: bool,
    user: &UserId,
    target: &Target,
    ocr: nib::config::OcrChoice,
) -> anyhow::Result<ExitCode> {
    if ocr == nib::config::OcrChoice::Off {
        anyhow::bail!("nib ocr needs an engine: --ocr local, openai or google-vision");
    }
    let app = target.open(ocr).await?;
    let mut ids = Vec::new();
    match stem {
        Some(stem) => match app.notebook().page_of_stem(user, stem).await? {
            Some(id) => ids.push(id),
            None => anyhow::bail!("no page was imported under the stem {stem:?}"),
        },
        None => {
            let mut after = None;
            loop {
                let (pages, more) = app
                    .notebook()
                    .list_pages_after(
                        user,
                        None,
                        None,
                        after.as_ref().map(|(d, p): &(_, _)| (*d, p)),
                        200,
                    )
                    .await?;
                after = pages.last().map(|p| (p.date, p.page_id.clone()));
                ids.extend(pages.into_iter().filter(|p| p.has_ink).map(|p| p.page_id));
                if !more {
                    break;
                }
            }
        }
    }
    let bar = progress_bar("reading", ids.len());
    let (mut read, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    for id in &ids {
        match app.notebook().reread_page(user, id, force).await {
            Ok(Some(_)) => read += 1,
            Ok(None) => skipped += 1,
            Err(e) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: page {id}: {}", nib::telemetry::chain(&e)));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "read {read} pages again; {skipped} skipped (text of their own, or ink read before; --force reads them); {failed} failed"
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn token(command: TokenCommand, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    match command {
        TokenCommand::Create { scope, label, user } => {
            let user = user_id(&user)?;
            app.ensure_user(&user).await?;
            let scope = Scope::parse(&scope).expect("clap checked the scope");
            let t = app.tokens.create(&user, scope, label).await?;
            println!("{}", t.token);
            eprintln!(
                "token {} for user {} with scope {} (shown only once)",
                t.record.token_id, user, scope
            );
        }
        TokenCommand::List { user } => {
            let user = user_id(&user)?;
            println!(
                "{:<18} {:<6} {:<8} {:<20} LABEL",
                "ID", "SCOPE", "STATE", "CREATED"
            );
            for t in app.tokens.list(&user).await? {
                let created = time::OffsetDateTime::from_unix_timestamp(t.created_at)
                    .map(|d| d.date().to_string())
                    .unwrap_or_default();
                let state = if t.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!(
                    "{:<18} {:<6} {:<8} {:<20} {}",
                    t.token_id,
                    t.scope,
                    state,
                    created,
                    t.label.unwrap_or_default()
                );
            }
        }
        TokenCommand::Revoke { token_id, user } => {
            let user = user_id(&user)?;
            let t = app.tokens.revoke(&user, &token_id).await?;
            println!("revoked {}", t.token_id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A new password: one line on stdin, or typed twice at a prompt that does not echo.
fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    if from_stdin {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the password from stdin")?;
        return Ok(line.trim_end_matches(['\n', '\r']).to_owned());
    }
    let first = rpassword::prompt_password("New password: ").context("cannot read the password")?;
    let again = rpassword::prompt_password("Again: ").context("cannot read the password")?;
    anyhow::ensure!(first == again, "the passwords differ");
    Ok(first)
}

async fn user(command: UserCommand, target: &Target) -> anyhow::Result<ExitCode> {
    let (name, from_stdin, create) = match command {
        UserCommand::EnsureOwner {
            name,
            password_stdin,
        } => return ensure_owner(&user_id(&name)?, password_stdin, target).await,
        UserCommand::Create {
            name,
            password_stdin,
        } => (name, password_stdin, true),
        UserCommand::Passwd {
            name,
            password_stdin,
        } => (name, password_stdin, false),
        UserCommand::List => return user_list(target).await,
        UserCommand::Timezone { name, zone } => {
            return user_timezone(&user_id(&name)?, zone.as_deref(), target).await;
        }
        UserCommand::Delete { name, yes } => {
            return user_delete(&user_id(&name)?, yes, target).await;
        }
    };
    let user = user_id(&name)?;
    let app = target.open(nib::config::OcrChoice::Off).await?;
    if create {
        app.ensure_user(&user).await?;
    }
    let password = read_password(from_stdin)?;
    app.users().set_password(&user, &password, create).await?;
    eprintln!(
        "{} the password of user {user}",
        if create { "set" } else { "changed" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `nib user timezone NAME [ZONE]`: prints the user's time zone, after setting it when a zone
/// is given. A name that is not a zone fails and changes nothing.
async fn user_timezone(
    user: &UserId,
    zone: Option<&str>,
    target: &Target,
) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    let zone = match zone {
        Some(z) => {
            let set = notebook.set_time_zone(user, z).await?;
            eprintln!("set the time zone of user {user}");
            set
        }
        None => notebook.time_zone(user).await?,
    };
    println!("{}", zone.name());
    Ok(ExitCode::SUCCESS)
}

/// `nib user list`: one line per user, the same on both back ends.
async fn user_list(target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let users = app.accounts().list().await?;
    println!(
        "{:<24} {:<10} {:<5} {:<8} {:>6} {:>6} {:>6}",
        "USER", "CREATED", "OWNER", "PASSWORD", "PAGES", "TOKENS", "GRANTS"
    );
    for u in users {
        let created = if u.deleting {
            "deleting".to_owned()
        } else {
            u.created_at.map(date).unwrap_or_default()
        };
        println!(
            "{:<24} {:<10} {:<5} {:<8} {:>6} {:>6} {:>6}",
            u.user.as_str(),
            created,
            if u.owner { "yes" } else { "no" },
            if u.has_password { "yes" } else { "no" },
            u.pages,
            u.tokens,
            u.grants
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `nib user delete`: asks for the user's name again unless `--yes`, then deletes step by step.
async fn user_delete(user: &UserId, yes: bool, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    if !yes {
        eprint!(
            "This deletes user {user} for good: the data key first, then the password, tokens, \
             grants, pages, tasks and page images. Type the user name to confirm: "
        );
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the confirmation")?;
        anyhow::ensure!(
            line.trim() == user.as_str(),
            "not confirmed: nothing deleted (pass --yes to skip the question)"
        );
    }
    let mut accounts = app.accounts();
    if target.backend == Backend::Local {
        // This process holds the data directory's lock, so no `nib serve` has a request in
        // flight that a second sweep would have to wait out.
        accounts = accounts.with_settle(std::time::Duration::ZERO);
    }
    let done = accounts
        .delete(user, |step| eprintln!("{user}: {}", step.describe()))
        .await
        .with_context(|| {
            format!("the deletion of user {user} stopped; run `nib user delete {user}` again to finish it")
        })?;
    println!(
        "deleted user {user}: {} credentials, {} page images, {} data keys, {} items",
        done.credentials, done.assets, done.keys, done.items
    );
    Ok(ExitCode::SUCCESS)
}

/// The authorization server over the data directory (its URLs do not matter here).
fn oauth(app: &Services) -> nib::auth::oauth::OAuth {
    app.oauth(OAuthConfig::new("http://127.0.0.1"))
}

fn date(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .map(|d| d.date().to_string())
        .unwrap_or_default()
}

async fn client(command: ClientCommand, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let oauth = oauth(&app);
    match command {
        ClientCommand::Add {
            name,
            redirect_uris,
            confidential,
            application_type,
        } => {
            let request = RegistrationRequest {
                redirect_uris: Some(redirect_uris),
                token_endpoint_auth_method: Some(
                    if confidential {
                        "client_secret_basic"
                    } else {
                        "none"
                    }
                    .into(),
                ),
                client_name: Some(name),
                application_type: Some(application_type),
                ..Default::default()
            };
            let registered = oauth
                .clients
                .register(request, ClientKind::Preregistered)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {}", e.code(), e.description()))?;
            println!("{}", registered.record.client_id);
            if let Some(secret) = registered.client_secret {
                println!("{secret}");
                eprintln!("client id, then its secret (shown only once)");
            }
        }
        ClientCommand::List => {
            println!(
                "{:<40} {:<16} {:<11} NAME / REDIRECT URIS",
                "ID", "KIND", "CREATED"
            );
            for c in oauth.clients.list().await? {
                let kind = match c.kind {
                    ClientKind::Dynamic => "registered",
                    ClientKind::Preregistered => "pre-registered",
                    ClientKind::MetadataDocument => "metadata-doc",
                };
                println!(
                    "{:<40} {:<16} {:<11} {} {}",
                    c.client_id,
                    kind,
                    date(c.created_at),
                    c.display_name(),
                    c.redirect_uris.join(" ")
                );
            }
        }
        ClientCommand::Remove { client_id } => {
            anyhow::ensure!(
                oauth.clients.remove(&client_id).await?,
                "no client with id {client_id}"
            );
            println!("removed {client_id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn task_id(s: &str) -> anyhow::Result<nib::domain::TaskLinkId> {
    nib::domain::TaskLinkId::parse(s).map_err(|_| anyhow::anyhow!("not a task id: {s:?}"))
}

async fn task(command: TaskCommand, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    match command {
        TaskCommand::Show {
            task_link_id,
            user,
            json,
        } => {
            let detail = notebook
                .task_detail(&user_id(&user)?, &task_id(&task_link_id)?)
                .await?;
            let out = nib::tools::get_task::task_out(detail);
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(ExitCode::SUCCESS);
            }
            let t = &out.task;
            println!("task:       {}", t.task_link_id);
            println!("text:       {}", t.text);
            println!("status:     {}", t.status.as_str());
            println!("first seen: {}", t.first_seen_date);
            if let Some(d) = t.completed_date {
                println!("completed:  {d}");
            }
            if let Some(u) = &t.notion_url {
                println!("notion:     {u}");
            }
            println!("pages:");
            for l in &out.pages {
                println!(
                    "  {} {} {} [{}] {}",
                    l.date,
                    l.page_id,
                    l.line_id,
                    serde_json::to_value(l.page_status)?
                        .as_str()
                        .unwrap_or_default(),
                    l.line_text.as_deref().unwrap_or("(line not found)")
                );
            }
            println!("history:");
            if out.history_truncated > 0 {
                println!("  ({} older changes not kept)", out.history_truncated);
            }
            for c in &out.history {
                println!("  {} {:<9} {}", c.at, c.status.as_str(), c.summary);
            }
        }
        TaskCommand::Link { a, b, user } => task_link(notebook, true, &a, &b, &user).await?,
        TaskCommand::Unlink { a, b, user } => task_link(notebook, false, &a, &b, &user).await?,
    }
    Ok(ExitCode::SUCCESS)
}

fn cli_date(arg: &str, s: Option<&str>) -> anyhow::Result<Option<nib::domain::Date>> {
    s.map(|s| {
        nib::domain::Date::parse(s)
            .map_err(|_| anyhow::anyhow!("--{arg} must be a date, YYYY-MM-DD (got {s:?})"))
    })
    .transpose()
}

/// `nib notes add|list|tags`.
async fn notes(command: NotesCommand, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    match command {
        NotesCommand::Add {
            text,
            date,
            tags,
            source_url,
            user,
        } => {
            let user = user_id(&user)?;
            let date = match cli_date("date", date.as_deref())? {
                Some(d) => d,
                None => notebook.today_for(&user).await?,
            };
            let note = notebook
                .add_note(&user, date, &text, &tags, source_url.as_deref())
                .await?;
            println!(
                "added note {} on the page of {} ({}){}",
                note.line_id,
                note.date,
                note.page_id,
                if note.tags.is_empty() {
                    String::new()
                } else {
                    format!(", tags {}", note.tags.join(", "))
                }
            );
        }
        NotesCommand::List {
            tag,
            from,
            to,
            user,
        } => {
            let (from, to) = (
                cli_date("from", from.as_deref())?,
                cli_date("to", to.as_deref())?,
            );
            let user = user_id(&user)?;
            let mut after: Option<(nib::domain::Date, nib::domain::PageId, String)> = None;
            loop {
                let (notes, more) = notebook
                    .list_notes(
                        &user,
                        tag.as_deref(),
                        from,
                        to,
                        after.as_ref().map(|(d, p, l)| (*d, p, l.as_str())),
                        200,
                    )
                    .await?;
                for n in &notes {
                    let tags: Vec<String> = n.tags.iter().map(|t| format!("#{t}")).collect();
                    println!("{}  {:<24} {}", n.date, tags.join(" "), n.text);
                }
                match notes.last() {
                    Some(n) if more => {
                        after = Some((n.date, n.page_id.clone(), n.line_id.clone()));
                    }
                    _ => break,
                }
            }
        }
        NotesCommand::Tags { user } => {
            for (tag, count) in notebook.list_tags(&user_id(&user)?).await? {
                println!("{count:>6}  {tag}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `nib task link` / `unlink`.
async fn task_link(
    notebook: &nib::notebook::Notebook,
    linking: bool,
    a: &str,
    b: &str,
    user: &str,
) -> anyhow::Result<()> {
    let (user, a, b) = (user_id(user)?, task_id(a)?, task_id(b)?);
    let actor = nib::notebook::LinkActor {
        tool: if linking {
            "nib task link"
        } else {
            "nib task unlink"
        },
        client: None,
    };
    let done = if linking {
        notebook.link_tasks(&user, &a, &b, &actor).await?
    } else {
        notebook.unlink_tasks(&user, &a, &b, &actor).await?
    };
    match (linking, done.changed) {
        (true, true) => println!("linked {b} into {a}: one task"),
        (true, false) => println!("{b} was linked into {a} already"),
        (false, true) => println!("unlinked {b} from {a}: two tasks"),
        (false, false) => println!("{b} was not linked into {a}"),
    }
    Ok(())
}

async fn access_list(
    user: &UserId,
    since: Option<&str>,
    json: bool,
    target: &Target,
) -> anyhow::Result<ExitCode> {
    let since_ms = match since {
        Some(s) => {
            let day = nib::domain::Date::parse(s)
                .map_err(|_| anyhow::anyhow!("--since must be a date, YYYY-MM-DD (got {s:?})"))?;
            Some(day.inner().midnight().assume_utc().unix_timestamp() * 1000)
        }
        None => None,
    };
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let log = app.notebook().access_log();
    if !json {
        println!(
            "{:<24} {:<18} {:<40} {:<24} IDS",
            "AT (UTC)", "TOOL", "CREDENTIAL", "CLIENT"
        );
    }
    let mut before = None;
    loop {
        let (records, more) = log.list(user, since_ms, before, 200).await?;
        for (_, r) in &records {
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&nib::tools::AccessRecordView::of(r))?
                );
                continue;
            }
            let ids: Vec<String> = r
                .page_ids
                .iter()
                .map(|p| format!("page:{p}"))
                .chain(r.task_ids.iter().map(|t| format!("task:{t}")))
                .collect();
            println!(
                "{:<24} {:<18} {:<40} {:<24} {}",
                nib::tools::rfc3339_ms(r.at_ms),
                r.tool,
                r.credential_id,
                r.client.as_deref().unwrap_or("-"),
                if ids.is_empty() {
                    "-".to_owned()
                } else {
                    ids.join(",")
                }
            );
        }
        match records.last() {
            Some((position, _)) if more => before = Some(*position),
            _ => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn grant(command: GrantCommand, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let oauth = oauth(&app);
    match command {
        GrantCommand::List { user } => {
            let user = user_id(&user)?;
            println!(
                "{:<20} {:<11} {:<11} {:<11} {:<8} CLIENT",
                "ID", "SCOPE", "CREATED", "LAST USED", "STATE"
            );
            let now = app.clock.unix();
            for g in oauth.grants.list(&user).await? {
                let state = if g.revoked_at.is_some() {
                    "revoked"
                } else if g.is_active(now) {
                    "active"
                } else {
                    "expired"
                };
                println!(
                    "{:<20} {:<11} {:<11} {:<11} {:<8} {} ({})",
                    g.grant_id,
                    scope_string(g.scope),
                    date(g.created_at),
                    date(g.last_issued_at),
                    state,
                    g.client_name,
                    g.client_id
                );
            }
        }
        GrantCommand::Revoke { grant_id, user } => {
            let user = user_id(&user)?;
            match oauth
                .grants
                .revoke(&grant_id, Some(&user), "revoked with nib grant revoke")
                .await?
            {
                Some(g) => println!("revoked {}", g.grant_id),
                None => anyhow::bail!("user {user} has no grant {grant_id}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The integration token: `NIB_NOTION_TOKEN`, else one line on stdin (a prompt that does not
/// echo when stdin is a terminal).
fn read_notion_token() -> anyhow::Result<nib::adapters::notion::NotionToken> {
    use std::io::IsTerminal;
    let raw = zeroize::Zeroizing::new(match std::env::var("NIB_NOTION_TOKEN") {
        Ok(v) if !v.trim().is_empty() => v,
        _ if std::io::stdin().is_terminal() => {
            rpassword::prompt_password("Notion integration token: ")
                .context("cannot read the token")?
        }
        _ => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("cannot read the token from stdin")?;
            line
        }
    });
    nib::adapters::notion::NotionToken::parse(&raw)
        .ok_or_else(|| anyhow::anyhow!("no Notion token: set NIB_NOTION_TOKEN or give it on stdin"))
}

fn moment(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|d| {
            d.format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
            ))
            .ok()
        })
        .unwrap_or_default()
}

fn describe_mapping(m: &nib::adapters::notion::Mapping) -> String {
    use nib::adapters::notion::StatusMapping;
    let status = match &m.status {
        StatusMapping::Status {
            property,
            todo,
            done,
            cancelled,
        } => format!(
            "status -> '{property}' (todo: '{todo}', done: '{done}', cancelled: '{cancelled}')"
        ),
        StatusMapping::Checkbox { property } => {
            format!("status -> checkbox '{property}' (ticked when done)")
        }
    };
    let mut out = format!("text -> '{}'; {status}", m.title);
    if let Some(d) = &m.date {
        out.push_str(&format!("; page date -> '{d}'"));
    }
    if let Some(u) = &m.url {
        out.push_str(&format!("; source_url -> '{u}'"));
    }
    match &m.task_id {
        Some(t) => out.push_str(&format!("; task id -> '{t}'")),
        // A connection from before nib kept its ids in Notion: a push retried after its page
        // was created but not recorded can create a second page until this is mapped.
        None => out.push_str("; no task id property (nib notion connect again adds it)"),
    }
    out
}

async fn notion(command: NotionCommand, target_of: &Target) -> anyhow::Result<ExitCode> {
    let target = match &command {
        NotionCommand::Connect { target, .. }
        | NotionCommand::Status { target }
        | NotionCommand::Disconnect { target }
        | NotionCommand::Sync { target } => target,
    };
    let user = user_id(&target.user)?;
    let app = target_of.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    match command {
        NotionCommand::Connect { database, .. } => {
            let token = read_notion_token()?;
            app.ensure_user(&user).await?;
            let mapping = notebook
                .notion_connect(&user, &database, token)
                .await
                .context("cannot connect the Notion database")?;
            println!("connected the Notion database {database} for {user}");
            println!("mapping: {}", describe_mapping(&mapping));
        }
        NotionCommand::Status { .. } => match notebook.notion_status(&user).await? {
            None => println!("{user} has no Notion database connected"),
            Some(s) => {
                let now = app.clock.unix();
                println!("database:   {}", s.database_id);
                println!("connected:  {}", moment(s.connected_at));
                println!("mapping:    {}", describe_mapping(&s.mapping));
                match s.last_ok_at {
                    Some(at) => println!("last ok:    {}", moment(at)),
                    None => println!("last ok:    never"),
                }
                match &s.last_error {
                    Some((at, kind, message)) => {
                        println!("last error: {} {kind}: {message}", moment(*at))
                    }
                    None => println!("last error: none"),
                }
                if let Some(until) = s.retry_after_until.filter(|&u| u > now) {
                    println!(
                        "waiting:    Notion asked to wait until {} (Retry-After)",
                        moment(until)
                    );
                } else if let Some(until) = s.backoff_until.filter(|&u| u > now) {
                    println!("waiting:    backing off until {}", moment(until));
                }
                println!("pending:    {} task(s) in the outbox", s.pending);
            }
        },
        NotionCommand::Disconnect { .. } => {
            if notebook.notion_disconnect(&user).await? {
                println!("disconnected the Notion database of {user}");
            } else {
                println!("{user} had no Notion database connected");
            }
        }
        NotionCommand::Sync { .. } => {
            let r = notebook.notion_sync(&user).await?;
            println!(
                "created {}, updated {}, failed {}; {} task(s) still in the outbox",
                r.created, r.updated, r.failed, r.pending
            );
            if let Some(until) = r.retry_after_until {
                println!("Notion asked to wait until {} (Retry-After)", moment(until));
            }
            if r.pending > 0 {
                println!("see nib notion status for the last error");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `nib import --via-upload`: the folder's page files under `uploads/{user}/` in the bucket,
/// for the ingest function (each page's text files first, so its ink arrives second and the
/// page is read once with both).
#[cfg(feature = "aws")]
async fn upload(dir: &Path, user: &UserId, target: &Target) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        target.backend == Backend::Aws,
        "--via-upload puts the files in the deployment's S3 bucket for its ingest function, so it \
         needs --backend aws (locally, nib import writes the pages itself)"
    );
    let (pages, skipped) = nib::notebook::group_dir(dir)
        .with_context(|| format!("cannot read the folder {}", dir.display()))?;
    let config = target.aws_config()?;
    let assets = nib::adapters::aws::AwsClients::connect(&config)
        .await
        .assets(&config);
    let files: Vec<&PathBuf> = pages
        .iter()
        .flat_map(|p| {
            [&p.md, &p.txt, &p.pdf, &p.png, &p.jpg]
                .into_iter()
                .flatten()
        })
        .collect();
    let bar = progress_bar("uploading", pages.len());
    let mut failed = 0usize;
    let mut last_stem = None;
    for path in files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("group_dir keeps UTF-8 names");
        let stem = path.file_stem().map(|s| s.to_owned());
        if last_stem.is_some() && last_stem != stem {
            bar.inc(1);
        }
        last_stem = stem;
        let sent = match tokio::fs::read(path).await {
            Ok(bytes) => assets
                .put_upload(user, name, bytes)
                .await
                .map_err(|e| nib::telemetry::chain(&e)),
            Err(e) => Err(nib::telemetry::chain(&e)),
        };
        if let Err(cause) = sent {
            failed += 1;
            bar.suspend(|| eprintln!("error: {}: {cause}", path.display()));
        }
    }
    bar.finish_and_clear();
    for path in &skipped {
        eprintln!(
            "skipped: {} (not a .pdf, .png, .jpg, .md or .txt page file)",
            path.display()
        );
    }
    println!(
        "uploaded {} pages to s3://{}/uploads/{user}/ for the ingest function; {failed} files failed",
        pages.len(),
        config.bucket
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `nib user ensure-owner`: the first owner of a deployment, once.
async fn ensure_owner(
    user: &UserId,
    from_stdin: bool,
    target: &Target,
) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let connector = match target.backend {
        Backend::Aws => target.aws_config()?.public_url.map(|u| format!("{u}/mcp")),
        Backend::Local => None,
    };
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let users = app.users();
    if users.has_password(user).await? {
        println!("user {user} has a password already: nothing changed");
    } else {
        app.ensure_user(user).await?;
        let (password, generated) = if from_stdin || std::io::stdin().is_terminal() {
            (read_password(from_stdin)?, false)
        } else {
            (nib::auth::oauth::random_password(), true)
        };
        anyhow::ensure!(!password.is_empty(), "the password is empty");
        match users.set_password(user, &password, true).await {
            Ok(()) if generated => {
                println!("created user {user}; its password (shown only this once): {password}")
            }
            Ok(()) => println!("created user {user} with the password you gave"),
            // Another run created it meanwhile: theirs stands.
            Err(nib::auth::users::UserError::Exists(_)) => {
                println!("user {user} has a password already: nothing changed")
            }
            Err(e) => return Err(e.into()),
        }
    }
    app.ensure_user(user).await?;
    app.accounts().set_owner(user).await?;
    if let Some(url) = connector {
        println!("connector URL: {url}");
        println!(
            "  Claude (Settings > Connectors > Add custom connector) or ChatGPT (Settings > \
             Connectors, developer mode, Create): paste the URL, then sign in as {user}."
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `nib doctor`: the checks of `nib::doctor`, one line each.
#[cfg(feature = "aws")]
async fn doctor(target: &Target) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        target.backend == Backend::Aws,
        "nib doctor checks a deployment (the table, bucket, keys and connector), so it needs \
         --backend aws or --from-terraform; locally, `nib serve` says what is wrong as it starts"
    );
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let config = app.settings.aws_config().expect("an AWS target");
    let checks = nib::doctor::check_aws(config, &app).await;
    let mut failed = false;
    for check in &checks {
        println!("{}", check.line());
        failed |= check.outcome.is_err();
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
