//! `nib`: the server, import, and the admin commands, over either back end (`--backend`).
//!
//! Locally the embedded store is one file that one process opens at a time: `nib import` and
//! `nib token` work on a data directory while no `nib serve` runs on it (they say so clearly
//! when one does). With `--backend aws` every command works on the deployed table, bucket and
//! keys (settings from the `NIB_*` variables, or `--from-terraform`), alongside the functions.
//!
//! Each command lives in its own module under `cmd/`: its arguments and its `run`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use nib::config::AwsConfig;
use nib::services::{LocalOptions, Role, Services, Settings};

mod cmd;
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

// The variants' doc comments are the commands' help; the argument types carry none of their own.
#[derive(Subcommand)]
enum Command {
    /// Serve the notebook over MCP (Streamable HTTP, POST /mcp).
    Serve(cmd::serve::ServeArgs),
    /// Import pages from a folder: STEM.pdf / STEM.png (ink) with STEM.md / STEM.txt (OCR).
    Import(cmd::import::ImportArgs),
    /// Read pages' stored ink again with the OCR engine (task ids and statuses stay).
    Ocr(cmd::ocr::OcrArgs),
    /// Rebuild a user's search vectors: pages without them, with stale ones, or with another
    /// embedding model's (after an upgrade that changed the model) are embedded again.
    Reindex(cmd::reindex::ReindexArgs),
    /// Export a user's notebook: a bundle `nib import --bundle` reads back, or Markdown.
    Export(cmd::export::ExportArgs),
    /// Create, list and revoke API tokens.
    Token(cmd::token::TokenArgs),
    /// Users' sign-in passwords (the OAuth consent page asks for them).
    User(cmd::user::UserArgs),
    /// Pre-register, list and remove OAuth clients.
    Client(cmd::client::ClientArgs),
    /// List and revoke what users approved on the consent page (OAuth grants).
    Grant(cmd::grant::GrantArgs),
    /// The MCP tools this nib serves, in tools/list order: one line each, `name<TAB>scope<TAB>title`
    /// (the scope a token needs to list and call it).
    Tools,
    /// Check a deployment: the table, the bucket, the data key, a probe item, the connector.
    /// One line per check, `ok` or `FAIL: <cause> -> <fix>`; exit code 1 on any failure.
    Doctor,
    /// A read-only end-to-end check of a live connector URL (ending in /mcp), as a client sees
    /// it: the OAuth metadata chain; with a read token also each protocol era, the tools and a
    /// signed page image. One line per check; exit code 1 on any failure.
    Smoke(cmd::smoke::SmokeArgs),
    /// Push tasks to a Notion database: connect one, see how pushing goes, push what waits.
    Notion(cmd::notion::NotionArgs),
    /// Who opened a user's notebook: the access record (kept 90 days).
    Access(cmd::access::AccessArgs),
    /// One task: its pages and status history; link two tasks that are the same work.
    Task(cmd::task::TaskArgs),
    /// Typed notes: add one to a day's page, list them, list their tags.
    Notes(cmd::notes::NotesArgs),
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

fn default_data_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_DATA_HOME") {
        return PathBuf::from(dir).join("nib");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".local/share/nib"),
        None => PathBuf::from(".nib"),
    }
}

/// glibc's malloc gives a thread that meets contention a heap of its own (up to 8 per core),
/// and each heap keeps what was freed in it: at 16 concurrent searches a 10,000-page server
/// held ~4 MB more than with one heap per core, at the same speed (bench/search-meaning.md, "A
/// search server under 60 MiB"). So one heap per core, set before any other thread starts.
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
        Command::Serve(args) => cmd::serve::run(args, target).await,
        Command::Import(args) => cmd::import::run(args, target).await,
        Command::Ocr(args) => cmd::ocr::run(args, target).await,
        Command::Reindex(args) => cmd::reindex::run(args, target).await,
        Command::Export(args) => cmd::export::run(args, target).await,
        Command::Token(args) => cmd::token::run(args, target).await,
        Command::User(args) => cmd::user::run(args, target).await,
        Command::Client(args) => cmd::client::run(args, target).await,
        Command::Grant(args) => cmd::grant::run(args, target).await,
        Command::Tools => cmd::tools::run(),
        Command::Doctor => cmd::doctor::run(target).await,
        Command::Smoke(args) => cmd::smoke::run(args).await,
        Command::Notion(args) => cmd::notion::run(args, target).await,
        Command::Access(args) => cmd::access::run(args, target).await,
        Command::Task(args) => cmd::task::run(args, target).await,
        Command::Notes(args) => cmd::notes::run(args, target).await,
    }
}
