//! `TestApp`: the system served on 127.0.0.1:0 in-process, with the sample notebook imported and
//! an admin token. Over the local back end (a temporary data directory, the default) or the AWS
//! back end (a fresh table and bucket on the test binary's moto server, see
//! `nib_testkit::emulator`). And where the `nib` binary is ([`nib_exe`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nib::auth::Scope;
use nib::domain::UserId;
use nib::http::{HttpConfig, RateLimits};
use nib::services::{LocalOptions, Services};
use nib_testkit::emulator::Emulator;
use serde_json::{Value, json};
use tempfile::TempDir;

pub const LATEST_LEGACY: &str = "2025-11-25";

/// Stops a `nib` process as an operator would (SIGTERM), so that it shuts down gracefully and
/// writes the log lines it still holds; killed if it is not gone within ten seconds.
pub fn stop(child: &mut std::process::Child) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// One `tools/call` to a `nib serve` process at `url` (its `/mcp`) with `token`: the JSON-RPC
/// reply.
pub async fn call_served(url: &str, token: &str, tool: &str, arguments: Value) -> Value {
    reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/sample")
}

/// The `nib` binary of this build, `target/{profile}/nib`: this test executable is
/// `target/{profile}/deps/integration-{hash}`. Cargo names only a binary of the test's own
/// package (`CARGO_BIN_EXE_*`) and builds only those for it, and `nib` is nib-cli's, so it
/// must be built first (`make test` does); a stale one is whatever was built last.
pub fn nib_exe() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe
        .parent()
        .expect("the test executable's directory")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let nib = dir.join(format!("nib{}", std::env::consts::EXE_SUFFIX));
    assert!(
        nib.exists(),
        "{} is missing: run `cargo build --workspace --all-targets` first (as `make test` does)",
        nib.display()
    );
    nib
}

/// Which adapters the system runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Embedded store, key file and asset folder in a temporary directory.
    Local,
    /// DynamoDB, S3 and KMS on the emulator: a fresh table and bucket per `TestApp`.
    Aws,
    /// The Lambda functions under `cargo lambda watch` over a fresh table and bucket on the
    /// emulator, behind an API Gateway stand-in (`lambda.rs`).
    Lambda,
}

#[derive(Clone, Copy)]
pub struct Options {
    pub public_discovery: bool,
    pub sessions: bool,
    pub import_sample: bool,
    pub backend: Backend,
    /// Rate limits on /mcp (off unless a test sets them).
    pub rate_limits: RateLimits,
    /// Accept http://127.0.0.1 client ID metadata documents (the OAuth tests serve them).
    pub dev_http_client_ids: bool,
    /// The Lambda back end's ingest engine (`NIB_OCR`): `textract` (its stand-in) or
    /// `openai` (the OpenAI-compatible stand-in, `LambdaStack::openai`).
    pub ingest_ocr: &'static str,
    /// The ingest function finds the OpenAI-compatible stand-in's key in the emulator's
    /// Secrets Manager (`NIB_OCR_OPENAI_API_KEY_SECRET`, as `infra/` configures it) rather
    /// than in its environment.
    pub ingest_key_in_secret: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            public_discovery: false,
            sessions: false,
            import_sample: true,
            backend: Backend::Local,
            rate_limits: RateLimits::OFF,
            dev_http_client_ids: false,
            ingest_ocr: "textract",
            ingest_key_in_secret: false,
        }
    }
}

impl Options {
    /// The defaults, over the AWS back end.
    pub fn aws() -> Options {
        Options {
            backend: Backend::Aws,
            ..Options::default()
        }
    }

    /// The defaults, through the Lambda functions (their own rate limits: the defaults of a
    /// deployment, which the tests stay under).
    pub fn lambda() -> Options {
        Options {
            backend: Backend::Lambda,
            ..Options::default()
        }
    }
}

/// The test binary's emulator, started on first use.
pub async fn emulator() -> &'static Emulator {
    Emulator::shared().await.unwrap_or_else(|e| panic!("{e}"))
}

pub struct TestApp {
    /// `http://127.0.0.1:PORT/mcp`
    pub url: String,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// An admin token of the default user.
    pub token: String,
    pub app: Arc<Services>,
    pub client: reqwest::Client,
    /// The data directory (empty over AWS).
    pub dir: TempDir,
    pub backend: Backend,
    /// The AWS configuration (AWS and Lambda back ends).
    pub aws_config: Option<nib::config::AwsConfig>,
    /// The functions and their emulator (Lambda back end); stopped when the app drops.
    pub lambda: Option<Arc<crate::lambda::LambdaStack>>,
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(Options::default()).await
    }

    /// A server over an empty notebook (no sample imported).
    pub async fn spawn_empty() -> TestApp {
        Self::spawn_with(Options {
            import_sample: false,
            ..Options::default()
        })
        .await
    }

    pub async fn spawn_with(options: Options) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (app, aws_config) = match options.backend {
            Backend::Local => (
                Services::open_local(
                    dir.path(),
                    LocalOptions {
                        public_url: base.clone(),
                        asset_ttl_seconds: 3600,
                        ocr: nib::config::OcrChoice::Off,
                        ..LocalOptions::default()
                    },
                )
                .unwrap(),
                None,
            ),
            Backend::Aws => {
                let mut config = emulator().await.fresh().await.unwrap();
                config.public_url = Some(base.clone());
                (
                    Services::open_aws(config.clone()).await.unwrap(),
                    Some(config),
                )
            }
            Backend::Lambda => {
                let emulator = emulator().await;
                let mut config = emulator.fresh().await.unwrap();
                config.public_url = Some(base.clone());
                let (key_id, public_pem) = emulator.create_signing_key().await.unwrap();
                config.signing_key_id = Some(key_id);
                config.signing_public_key_pem = Some(public_pem);
                (
                    Services::open_aws(config.clone()).await.unwrap(),
                    Some(config),
                )
            }
        };
        Self::serve(listener, dir, app, options, aws_config).await
    }

    /// Serves a system the test opened itself (over a back end it prepared, e.g. with faults).
    pub async fn spawn_over(app: Services, options: Options) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        Self::serve(listener, dir, app, options, None).await
    }

    async fn serve(
        listener: tokio::net::TcpListener,
        dir: TempDir,
        app: Services,
        options: Options,
        aws_config: Option<nib::config::AwsConfig>,
    ) -> TestApp {
        let base = format!("http://{}", listener.local_addr().unwrap());
        let backend = match (options.backend, app.back_end) {
            (Backend::Lambda, _) => Backend::Lambda,
            (_, nib::services::BackEnd::Local) => Backend::Local,
            (_, nib::services::BackEnd::Aws) => Backend::Aws,
        };
        let app = Arc::new(app);
        let token = app
            .first_start()
            .await
            .unwrap()
            .expect("first start makes a token")
            .token;
        if options.import_sample {
            let user = UserId::parse("default").unwrap();
            let (pages, _) = nib::notebook::group_dir(&sample_dir()).unwrap();
            for page in &pages {
                app.notebook().import_files(&user, page).await.unwrap();
            }
        }
        let mut config = HttpConfig::local(base.clone());
        config.public_discovery = options.public_discovery;
        config.sessions = options.sessions;
        config.rate_limits = options.rate_limits;
        if let Some(oauth) = &mut config.oauth {
            oauth.allow_http_loopback_client_ids = options.dev_http_client_ids;
        }
        let mut lambda = None;
        if backend == Backend::Lambda {
            let config = aws_config
                .as_ref()
                .expect("a Lambda back end has an AWS config");
            let stack = Arc::new(
                crate::lambda::LambdaStack::start(
                    config,
                    &base,
                    options.rate_limits,
                    options.ingest_ocr,
                    options.ingest_key_in_secret,
                )
                .await,
            );
            lambda = Some(stack.clone());
            tokio::spawn(crate::lambda::gateway(listener, stack));
        } else {
            let router = app.router(config);
            // As `nib serve` serves it: with the peer address (per-address OAuth limits).
            let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
            tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
        }
        TestApp {
            url: format!("{base}/mcp"),
            base,
            token,
            app,
            client: reqwest::Client::new(),
            dir,
            backend,
            aws_config,
            lambda,
        }
    }

    /// Whether `url` is a signed link to a page's ink: `/assets/...?expires=&sig=` locally, an
    /// S3 presigned URL over AWS.
    pub fn is_asset_url(&self, url: &str) -> bool {
        match self.backend {
            Backend::Local => url.contains("/assets/"),
            Backend::Aws | Backend::Lambda => {
                url.contains("/u/default/pages/")
                    && url.contains("X-Amz-Expires=")
                    && url.contains("X-Amz-Signature=")
            }
        }
    }

    /// Whether asset URLs are refused when tampered with. The local server checks its
    /// signatures; the emulator does not check S3's (real S3 does).
    pub fn asset_signatures_checked(&self) -> bool {
        self.backend == Backend::Local
    }

    /// A new token of the default user (or another user) with this scope.
    pub async fn token_for(&self, user: &str, scope: Scope) -> String {
        let user = UserId::parse(user).unwrap();
        self.app.ensure_user(&user).await.unwrap();
        self.app
            .tokens
            .create(&user, scope, None)
            .await
            .unwrap()
            .token
    }

    /// A POST to /mcp with JSON content type and Accept, no protocol version header, no token.
    pub fn post_anon(&self) -> reqwest::RequestBuilder {
        self.client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
    }

    /// A POST to /mcp with the usual headers and the admin token.
    pub fn post(&self) -> reqwest::RequestBuilder {
        self.post_anon().bearer_auth(&self.token)
    }

    /// Sends a JSON-RPC message with the admin token; returns status and JSON body.
    pub async fn rpc(&self, body: Value) -> (u16, Value) {
        self.rpc_with(&self.token, body).await
    }

    pub async fn rpc_with(&self, token: &str, body: Value) -> (u16, Value) {
        let r = self
            .post_anon()
            .bearer_auth(token)
            .header("mcp-protocol-version", LATEST_LEGACY)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Calls a tool with the admin token and returns the JSON-RPC `result` (may be isError).
    pub async fn call_raw(&self, token: &str, tool: &str, args: Value) -> Value {
        let (status, body) = self
            .rpc_with(token, json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": tool, "arguments": args } }))
            .await;
        assert_eq!(status, 200, "{tool}: {body}");
        body.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("{tool}: no result in {body}"))
    }

    /// Calls a tool that must succeed and returns its structured content, after checking the
    /// single text block carries the same JSON.
    pub async fn call(&self, tool: &str, args: Value) -> Value {
        let result = self.call_raw(&self.token, tool, args).await;
        assert_eq!(result["isError"], json!(false), "{tool}: {result}");
        let content = result["content"].as_array().unwrap();
        // One text block first; after it only resource links (the page tools name their
        // pages, from 2025-06-18).
        for link in &content[1..] {
            assert_eq!(link["type"], "resource_link", "{tool}: {link}");
            assert!(link["uri"].as_str().unwrap().starts_with("nib://pages/"));
        }
        let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(
            text, result["structuredContent"],
            "text block and structuredContent agree"
        );
        result["structuredContent"].clone()
    }

    /// Calls a tool that must fail as a business error and returns its message.
    pub async fn call_error(&self, tool: &str, args: Value) -> String {
        let result = self.call_raw(&self.token, tool, args).await;
        assert_eq!(result["isError"], json!(true), "{tool}: {result}");
        result["content"][0]["text"].as_str().unwrap().to_owned()
    }

    /// The page id of the (first) page with this date.
    pub async fn page_of(&self, date: &str) -> String {
        let pages = self
            .call("list_pages", json!({ "from": date, "to": date }))
            .await;
        pages["pages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap_or_else(|| panic!("no page on {date}"))["page_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// The tool names of a `tools/list` answer, in its order.
pub fn tool_names(listed: &Value) -> Vec<String> {
    listed["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {listed}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

pub fn initialize(version: &str) -> Value {
    json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "nib-tests", "version": "1" } }
    })
}
