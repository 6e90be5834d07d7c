//! `nib`: the local server, import, and token management, over one data directory.
//!
//! The embedded store is one file that one process opens at a time: `nib import` and
//! `nib token` work on a data directory while no `nib serve` runs on it (they say so clearly
//! when one does).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use nib::app::{App, DEFAULT_USER, LocalOptions};
use nib::auth::Scope;
use nib::domain::UserId;
use nib::http::HttpConfig;

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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the notebook over MCP (Streamable HTTP, POST /mcp).
    Serve(ServeArgs),
    /// Import pages from a folder: STEM.pdf / STEM.png (ink) with STEM.md / STEM.txt (OCR).
    Import {
        dir: PathBuf,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Create, list and revoke API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
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
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print it (it is shown only this once).
    Create {
        #[arg(long, value_parser = ["read", "write", "admin"])]
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

fn open(data_dir: &Path, options: LocalOptions) -> anyhow::Result<App> {
    App::open_local(data_dir, options)
        .with_context(|| format!("cannot open the data directory {}", data_dir.display()))
}

fn user_id(s: &str) -> anyhow::Result<UserId> {
    UserId::parse(s).map_err(|e| anyhow::anyhow!("--user '{s}' {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    nib::telemetry::init();
    let cli = Cli::parse();
    let data_dir = cli.data_dir.clone().unwrap_or_else(default_data_dir);
    match run(cli.command, &data_dir).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, data_dir: &Path) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => serve(args, data_dir).await,
        Command::Import { dir, user } => import(&dir, &user_id(&user)?, data_dir).await,
        Command::Token { command } => token(command, data_dir).await,
    }
}

async fn serve(args: ServeArgs, data_dir: &Path) -> anyhow::Result<ExitCode> {
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
    let app = open(
        data_dir,
        LocalOptions {
            public_url: public_url.clone(),
            asset_ttl_seconds: args.asset_ttl_seconds,
        },
    )?;
    let first = app.first_start().await?;
    let mut config = HttpConfig::local(public_url.clone());
    config.public_discovery = args.public_discovery;
    config.sessions = args.sessions;
    config.allowed_hosts.extend(args.allowed_hosts);
    config.allowed_origins.extend(args.allowed_origins);
    if let Some(host) = public_url
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or(rest).to_owned())
    {
        config.allowed_hosts.push(host);
    }
    let router = app.router(config);

    // Tests and scripts read these lines: keep their shape.
    println!("nib: serving {public_url}/mcp");
    match first {
        Some(t) => println!(
            "nib: token for user {} ({}): {}",
            t.record.user, t.record.scope, t.token
        ),
        None => println!(
            "nib: data in {}; create a token with `nib token create --scope read` (while the server is stopped)",
            data_dir.display()
        ),
    }
    tracing::info!(%addr, data_dir = %data_dir.display(), "listening");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown())
        .await
        .context("server failed")?;
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

async fn import(dir: &Path, user: &UserId, data_dir: &Path) -> anyhow::Result<ExitCode> {
    let (pages, skipped) = nib::notebook::group_dir(dir)
        .with_context(|| format!("cannot read the folder {}", dir.display()))?;
    let app = open(data_dir, LocalOptions::default())?;
    app.ensure_user(user).await?;
    let bar = indicatif::ProgressBar::new(pages.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} importing [{bar:30}] {pos}/{len} pages {per_sec} {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let started = std::time::Instant::now();
    let (mut created, mut updated, mut failed) = (0usize, 0usize, 0usize);
    // Without a terminal there is no bar: say how far we got now and then instead.
    let plain_progress = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    for (done, page) in pages.iter().enumerate() {
        if plain_progress && done > 0 && done % 50 == 0 {
            eprintln!("progress: {done}/{}", pages.len());
        }
        match app.notebook.import_files(user, page).await {
            Ok(saved) if saved.created => created += 1,
            Ok(_) => updated += 1,
            Err(failure) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: {failure}"));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    for path in &skipped {
        eprintln!(
            "skipped: {} (not a .pdf, .png, .md or .txt page file)",
            path.display()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "imported {} pages ({created} new, {updated} updated) in {secs:.2}s ({:.0} pages/s); {failed} failed",
        created + updated,
        (created + updated) as f64 / secs.max(1e-9)
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn token(command: TokenCommand, data_dir: &Path) -> anyhow::Result<ExitCode> {
    let app = open(data_dir, LocalOptions::default())?;
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
