//! `nib serve`: the MCP server (with the web app and the authorization server); while it runs,
//! the idle watch, the Notion outbox timer and, with `--watch`, a watched folder.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nib::auth::oauth::MAX_ACCESS_TTL_SECS;
use nib::domain::UserId;
use nib::http::{HttpConfig, RateLimits};
use nib::services::{DEFAULT_USER, LocalOptions, Role, Services};

use super::{DEFAULT_OCR, shutdown};
use crate::{Backend, Target, idle, outbox, watch};

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
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
    /// settings; docs/ocr.md, "Choosing an OCR provider"), or off. Without the local engine's
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

pub(crate) async fn run(args: ServeArgs, target: &Target) -> anyhow::Result<ExitCode> {
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
