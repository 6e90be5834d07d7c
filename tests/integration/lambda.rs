//! The serverless deployment end to end, on this machine (docs/design.md §3):
//!
//! - [`LambdaStack`]: `cargo lambda watch --only-lambda-apis` (cargo-lambda's Lambda runtime API
//!   and Invoke API emulator, installed by `make tools-python`) with the six function binaries
//!   polling it, configured as on AWS (`infra/locals.tf`), against moto's DynamoDB, S3 and KMS.
//!   The `mcp` front reaches the class functions through the real Lambda `Invoke` API of the
//!   emulator (`AWS_ENDPOINT_URL_LAMBDA`).
//! - [`gateway`]: an HTTP server standing in for API Gateway: it routes by `infra/api.tf`'s
//!   route keys (read from the file, so the test follows the Terraform), turns each request into
//!   an API Gateway v2 (payload format 2.0) event shaped like `tests/data/lambda/*.json`, invokes
//!   the route's function and maps its answer back. Like API Gateway, it renames a
//!   `WWW-Authenticate` response header to `x-amzn-Remapped-WWW-Authenticate`, the worst case
//!   the 401 challenge must survive: clients then find the protected resource metadata at its
//!   well-known URL.
//!
//! `TestApp::spawn_with(Options::lambda())` serves a `TestApp` through the gateway, so the
//! notebook tests of `notebook.rs` run again through `mcp` -> `pages`/`tasks` here, and the
//! OAuth flow of `oauth.rs` through the `oauth` function (tokens signed by KMS) and the front
//! (verified offline with the public key).
//!
//! The function binaries come from the same build as this test (`cargo build --workspace
//! --bins`, which `make test` runs first).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use nib::adapters::aws::AwsClients;
use nib::config::AwsConfig;
use nib::http::RateLimits;
use nib_testkit::emulator::venv_dir;
use nib_testkit::pdf::one_page;
use serde_json::{Value, json};

use crate::helpers::{LATEST_LEGACY, Options, TestApp, nib_exe, sample_dir};

/// The functions and how many instances of each poll the emulator (more than one where the
/// tests send concurrent requests).
const FUNCTIONS: [(&str, usize); 6] = [
    ("mcp", 2),
    ("pages", 2),
    ("tasks", 2),
    ("ingest", 1),
    ("oauth", 1),
    ("account", 1),
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn fixture(name: &str) -> Value {
    let path = workspace_root().join("tests/data/lambda").join(name);
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

/// The emulator and the function processes; dropping it stops them all.
pub struct LambdaStack {
    /// `http://127.0.0.1:PORT`: the Invoke API (and the runtime API under `/.rt/{function}`).
    endpoint: String,
    processes: std::sync::Mutex<Vec<Child>>,
    http: reqwest::Client,
    /// Amazon Textract for the ingest function (`NIB_OCR=textract`): the stand-in.
    pub textract: nib_testkit::textract_standin::TextractStandin,
    /// An OpenAI-compatible vision model for the ingest function when it is started with
    /// `NIB_OCR=openai` (serving [`OPENAI_MODEL`], asking for [`OPENAI_KEY`]).
    pub openai: nib_testkit::openai_standin::OpenAiStandin,
    /// The ingest function's `NIB_OCR`.
    ingest_ocr: &'static str,
    /// The ARN of the emulator's Secrets Manager secret holding [`OPENAI_KEY`], when the
    /// ingest function is to read its key from there (`NIB_OCR_OPENAI_API_KEY_SECRET`)
    /// instead of its environment.
    pub ingest_key_secret: Option<String>,
    /// Notion for the tasks function (`NIB_NOTION_API_URL`): the stand-in, accepting
    /// [`NOTION_TOKEN`].
    pub notion: nib_testkit::notion_standin::NotionStandin,
}

/// The integration token the Lambda stack's Notion stand-in accepts.
pub const NOTION_TOKEN: &str = "ntn_lambda_standin_SECRET_token";

/// The model and the key of the Lambda stack's OpenAI-compatible stand-in.
pub const OPENAI_MODEL: &str = "llava:lambda";
pub const OPENAI_KEY: &str = "sk-lambda-standin-SECRET";

impl Drop for LambdaStack {
    fn drop(&mut self) {
        for child in self.processes.lock().unwrap().iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl LambdaStack {
    /// Starts the emulator and every function against `config`, serving `public_url`.
    pub async fn start(
        config: &AwsConfig,
        public_url: &str,
        limits: RateLimits,
        ingest_ocr: &'static str,
        ingest_key_in_secret: bool,
    ) -> LambdaStack {
        let cargo_lambda = venv_dir().join("bin/cargo-lambda");
        assert!(
            cargo_lambda.exists(),
            "{} is missing: run `make tools-python`",
            cargo_lambda.display()
        );
        let ingest_key_secret = if ingest_key_in_secret {
            let name = format!("nib-ocr-key-{}", uuid::Uuid::new_v4());
            Some(
                crate::helpers::emulator()
                    .await
                    .create_secret(&name, OPENAI_KEY)
                    .await
                    .unwrap(),
            )
        } else {
            None
        };
        let port = free_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let watch = Command::new(&cargo_lambda)
            .args(["lambda", "watch", "--only-lambda-apis", "--quiet"])
            .args(["--invoke-address", "127.0.0.1", "--invoke-port"])
            .arg(port.to_string())
            .current_dir(workspace_root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stack = LambdaStack {
            endpoint,
            textract: nib_testkit::textract_standin::TextractStandin::start()
                .await
                .unwrap(),
            openai: nib_testkit::openai_standin::OpenAiStandin::start(
                OPENAI_MODEL,
                Some(OPENAI_KEY),
            )
            .await
            .unwrap(),
            ingest_ocr,
            ingest_key_secret,
            notion: nib_testkit::notion_standin::NotionStandin::start(NOTION_TOKEN)
                .await
                .unwrap(),
            processes: std::sync::Mutex::new(vec![watch]),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
        };
        stack.wait_for_port(port).await;

        let nib = nib_exe();
        let bin_dir = nib.parent().unwrap();
        for (name, instances) in FUNCTIONS {
            let bin = bin_dir.join(name);
            assert!(
                bin.exists(),
                "{} is missing: build the functions first (`cargo build --workspace --bins`, as `make test` does)",
                bin.display()
            );
            for _ in 0..instances {
                let child = stack
                    .function_command(&bin, name, config, public_url)
                    .env("NIB_RATE_PER_MINUTE", limits.per_minute.to_string())
                    .env("NIB_RATE_PER_HOUR", limits.per_hour.to_string())
                    .env(
                        "NIB_WRITE_RATE_PER_MINUTE",
                        limits.writes_per_minute.to_string(),
                    )
                    .env(
                        "NIB_WRITE_RATE_PER_HOUR",
                        limits.writes_per_hour.to_string(),
                    )
                    .spawn();
                stack.processes.lock().unwrap().push(child.unwrap());
            }
        }
        stack
    }

    /// A function process, with the environment Terraform gives it (`infra/locals.tf`) and
    /// the runtime API variables the Lambda service sets.
    fn function_command(
        &self,
        bin: &Path,
        name: &str,
        config: &AwsConfig,
        public_url: &str,
    ) -> Command {
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env(
                "AWS_LAMBDA_RUNTIME_API",
                format!("{}/.rt/{name}", self.endpoint),
            )
            .env("AWS_LAMBDA_FUNCTION_NAME", name)
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
            .env("AWS_ENDPOINT_URL", config.endpoint_url.as_deref().unwrap())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("NIB_TABLE", &config.table)
            .env("NIB_BUCKET", &config.bucket)
            .env("NIB_KMS_KEY_ID", &config.kms_key_id)
            .env(
                "NIB_ASSET_TTL_SECONDS",
                config.asset_ttl_seconds.to_string(),
            )
            .env("NIB_PUBLIC_URL", public_url)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if name == "ingest" {
            cmd.env("NIB_OCR", self.ingest_ocr)
                .env("AWS_ENDPOINT_URL_TEXTRACT", self.textract.endpoint())
                .env("NIB_OCR_OPENAI_BASE_URL", self.openai.base_url())
                .env("NIB_OCR_OPENAI_MODEL", OPENAI_MODEL)
                .env("NIB_OCR_ATTEMPTS", "2");
            match &self.ingest_key_secret {
                Some(arn) => cmd.env("NIB_OCR_OPENAI_API_KEY_SECRET", arn),
                None => cmd.env("NIB_OCR_OPENAI_API_KEY", OPENAI_KEY),
            };
        }
        if name == "tasks" {
            cmd.env("NIB_NOTION_API_URL", &self.notion.url);
        }
        if name == "mcp" {
            cmd.env("NIB_PAGES_FUNCTION", "pages")
                .env("NIB_TASKS_FUNCTION", "tasks")
                .env("NIB_ACCOUNT_FUNCTION", "account")
                .env("NIB_UPLOAD_ROLE_ARN", UPLOAD_ROLE_ARN)
                .env("AWS_ENDPOINT_URL_LAMBDA", &self.endpoint);
        }
        if matches!(name, "mcp" | "oauth") {
            cmd.env(
                "NIB_SIGNING_PUBLIC_KEY",
                config.signing_public_key_pem.as_deref().unwrap(),
            );
        }
        if name == "oauth" {
            cmd.env(
                "NIB_SIGNING_KEY_ID",
                config.signing_key_id.as_deref().unwrap(),
            );
        }
        cmd
    }

    async fn wait_for_port(&self, port: u16) {
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return;
            }
            if let Some(status) = self.processes.lock().unwrap()[0].try_wait().unwrap() {
                panic!("cargo lambda watch exited: {status}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("cargo lambda watch did not listen on {port} within 60 s");
    }

    /// A synchronous Invoke of `function` with `payload`: the HTTP status of the Invoke call
    /// and the function's answer (JSON, or the raw text when it is not).
    pub async fn invoke(&self, function: &str, payload: &Value) -> (u16, Value) {
        let r = self
            .http
            .post(format!(
                "{}/2015-03-31/functions/{function}/invocations",
                self.endpoint
            ))
            .json(payload)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

/// A free port for `cargo lambda watch`, below the kernel's ephemeral range. A port the kernel
/// handed out (binding port 0) and released at once could be handed to the next server any test
/// starts before cargo lambda binds it; the functions would then poll that server, which panics
/// their runtime ("missing lambda-runtime-aws-request-id header") and fails the test. Every
/// other server in the tests binds port 0, so they never take a port from this range.
fn free_port() -> u16 {
    let start = 20_000 + (std::process::id() % 5_000) as u16;
    (0..10_000u16)
        .map(|i| 20_000 + (start - 20_000 + i.wrapping_mul(7_919)) % 10_000)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port in 20000-29999")
}

// ---- The API Gateway stand-in ---------------------------------------------------------------

/// The uploads role the front signs the web app's uploads as (`infra/iam.tf`'s
/// `aws_iam_role.uploads`); moto's STS assumes any role ARN.
pub const UPLOAD_ROLE_ARN: &str = "arn:aws:iam::123456789012:role/nib-uploads-role";

/// `infra/api.tf`'s route keys: `("POST", "/mcp", "mcp")`, `("GET", "/oauth/{proxy+}", "oauth")`.
fn terraform_routes() -> Vec<(String, String, String)> {
    let hcl = std::fs::read_to_string(workspace_root().join("infra/api.tf")).unwrap();
    let routes: Vec<_> = hcl
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.strip_prefix('"')?;
            let (key, value) = rest.split_once('"')?;
            let (method, path) = key.split_once(' ')?;
            let function = value.trim().strip_prefix('=')?.trim().trim_matches('"');
            let known = ["GET", "POST", "PUT", "DELETE", "PATCH"].contains(&method);
            (known && path.starts_with('/'))
                .then(|| (method.to_owned(), path.to_owned(), function.to_owned()))
        })
        .collect();
    assert!(routes.len() >= 5, "no routes found in infra/api.tf");
    routes
}

/// The route key and function of a request, as API Gateway matches them: an exact path first,
/// else the `{proxy+}` route with the longest prefix (`POST /app/{proxy+}` before a shorter
/// one).
fn route<'a>(
    routes: &'a [(String, String, String)],
    method: &Method,
    path: &str,
) -> Option<(String, &'a str, Option<String>)> {
    let same_method = || routes.iter().filter(|(m, _, _)| m == method.as_str());
    if let Some((m, p, f)) = same_method().find(|(_, p, _)| p == path) {
        return Some((format!("{m} {p}"), f.as_str(), None));
    }
    same_method()
        .filter_map(|(m, p, f)| {
            let prefix = p.strip_suffix("{proxy+}")?;
            let proxy = path.strip_prefix(prefix).filter(|rest| !rest.is_empty())?;
            Some((
                prefix.len(),
                (format!("{m} {p}"), f.as_str(), Some(proxy.to_owned())),
            ))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, found)| found)
}

/// Serves API Gateway's side of the deployment on `listener`.
pub async fn gateway(listener: tokio::net::TcpListener, stack: Arc<LambdaStack>) {
    let routes = Arc::new(terraform_routes());
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let stack = stack.clone();
            let routes = routes.clone();
            async move { through_gateway(&stack, &routes, method, uri, headers, body).await }
        },
    );
    axum::serve(listener, app).await.unwrap();
}

async fn through_gateway(
    stack: &LambdaStack,
    routes: &[(String, String, String)],
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let Some((route_key, function, proxy)) = route(routes, &method, path) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({ "message": "Not Found" })),
        )
            .into_response();
    };
    let event = event(&route_key, proxy, &method, &uri, &headers, &body);
    let (status, reply) = stack.invoke(function, &event).await;
    if status != 200 || reply.get("statusCode").is_none() {
        // What API Gateway answers when the integration fails.
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({ "message": "Internal Server Error" })),
        )
            .into_response();
    }
    response(&reply)
}

/// An API Gateway v2 event for the request, on the shape of the fixture.
fn event(
    route_key: &str,
    proxy: Option<String>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Value {
    let mut event = fixture("apigw-v2-mcp-tools-list.json");
    // Header names lowercased, repeated headers joined with commas; cookies apart.
    let mut joined: BTreeMap<String, String> = BTreeMap::new();
    let mut cookies = Vec::new();
    for (name, value) in headers {
        let value = value.to_str().unwrap_or_default().to_owned();
        if name == "cookie" {
            cookies.extend(value.split("; ").map(str::to_owned));
            continue;
        }
        joined
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push(',');
                v.push_str(&value);
            })
            .or_insert(value);
    }
    let host = joined.get("host").cloned().unwrap_or_default();
    joined.insert("x-forwarded-proto".into(), "https".into());
    let text = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_none_or(|t| {
            t.starts_with("text/")
                || t.starts_with("application/json")
                || t.starts_with("application/x-www-form-urlencoded")
        });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let query = uri.query().unwrap_or_default();
    event["routeKey"] = json!(route_key);
    event["rawPath"] = json!(uri.path());
    event["rawQueryString"] = json!(query);
    event["headers"] = json!(joined);
    if !cookies.is_empty() {
        event["cookies"] = json!(cookies);
    }
    if !query.is_empty() {
        let params: BTreeMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        event["queryStringParameters"] = json!(params);
    }
    if let Some(proxy) = proxy {
        event["pathParameters"] = json!({ "proxy": proxy });
    }
    let ctx = &mut event["requestContext"];
    ctx["routeKey"] = json!(route_key);
    ctx["domainName"] = json!(host);
    ctx["http"]["method"] = json!(method.as_str());
    ctx["http"]["path"] = json!(uri.path());
    ctx["http"]["sourceIp"] = json!("127.0.0.1");
    ctx["requestId"] = json!(uuid::Uuid::new_v4().to_string());
    ctx["timeEpoch"] = json!(now);
    if body.is_empty() {
        event.as_object_mut().unwrap().remove("body");
        event["isBase64Encoded"] = json!(false);
    } else if text {
        event["body"] = json!(String::from_utf8_lossy(body));
        event["isBase64Encoded"] = json!(false);
    } else {
        event["body"] = json!(STANDARD.encode(body));
        event["isBase64Encoded"] = json!(true);
    }
    event
}

/// The HTTP response of a function's API Gateway v2 answer.
fn response(reply: &Value) -> Response {
    let status = StatusCode::from_u16(reply["statusCode"].as_u64().unwrap() as u16).unwrap();
    let body = match reply["body"].as_str() {
        None => Vec::new(),
        Some(b) if reply["isBase64Encoded"] == json!(true) => STANDARD.decode(b).unwrap(),
        Some(b) => b.as_bytes().to_vec(),
    };
    let mut response = (status, body).into_response();
    let out = response.headers_mut();
    // The function's headers are the response's: not the default of a byte body.
    out.remove(axum::http::header::CONTENT_TYPE);
    let mut add = |name: &str, value: &str| {
        let name = if name.eq_ignore_ascii_case("www-authenticate") {
            "x-amzn-remapped-www-authenticate"
        } else {
            name
        };
        out.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    };
    for (name, value) in reply["headers"].as_object().into_iter().flatten() {
        add(name, value.as_str().unwrap_or_default());
    }
    for (name, values) in reply["multiValueHeaders"].as_object().into_iter().flatten() {
        for value in values.as_array().into_iter().flatten() {
            add(name, value.as_str().unwrap_or_default());
        }
    }
    for cookie in reply["cookies"].as_array().into_iter().flatten() {
        add("set-cookie", cookie.as_str().unwrap_or_default());
    }
    response
}

// ---- Tests ----------------------------------------------------------------------------------

mod notebook {
    crate::notebook::notebook_tests!(crate::helpers::Options::lambda());
}

mod task_detail {
    crate::task_detail::task_detail_tests!(crate::helpers::Options::lambda());
}

/// One trash round trip through the functions: delete_page and restore_page (pages function),
/// the tasks reconciled without the page and back, list_trash.
#[tokio::test]
async fn a_page_goes_to_the_trash_and_back_through_the_functions() {
    let app = TestApp::spawn_with(Options::lambda()).await;
    crate::trash::deleting_a_page_hides_it_everywhere_and_restore_gives_back_exactly_what_was_there(&app)
        .await;
}

mod resources {
    crate::resources::resource_tests!(crate::helpers::Options::lambda());
}

mod notes {
    crate::notes::notes_tests!(crate::helpers::Options::lambda());
}

mod confirm {
    crate::confirm::confirm_tests!(crate::helpers::Options::lambda());

    /// The functions issue no session ids (API Gateway cannot hold a call's stream while its
    /// client answers), so a 2025-11-25 client that can elicit is not asked: the tool runs as
    /// before, annotated destructive.
    #[tokio::test]
    async fn the_functions_issue_no_sessions_and_destructive_tools_run_as_before() {
        let app = crate::helpers::TestApp::spawn_with(crate::helpers::Options::lambda()).await;
        assert_eq!(
            crate::confirm::open_session(&app, "2025-11-25", true).await,
            None
        );
        let page = app.page_of("2026-06-17").await;
        let r = app
            .post()
            .header("mcp-protocol-version", "2025-11-25")
            .json(&serde_json::json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": { "name": "delete_page", "arguments": { "page_id": page } } }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["content-type"], "application/json");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(
            body["result"]["structuredContent"]["deleted"], true,
            "{body}"
        );
    }
}

#[tokio::test]
async fn the_401_challenge_survives_and_the_well_known_fallback_works() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();

    // The fixture, as API Gateway sends it (no token), to the front directly: the function's
    // own answer carries the challenge, pointing at the metadata of this deployment.
    let mut event = fixture("apigw-v2-mcp-tools-list.json");
    let host = app.base.strip_prefix("http://").unwrap();
    event["headers"]["host"] = json!(host);
    event["requestContext"]["domainName"] = json!(host);
    let (status, reply) = stack.invoke("mcp", &event).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["statusCode"], 401, "{reply}");
    let challenge = reply["headers"]["www-authenticate"]
        .as_str()
        .unwrap_or_else(|| panic!("no www-authenticate in {reply}"));
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", app.base);
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );
    let body: Value = serde_json::from_str(reply["body"].as_str().unwrap()).unwrap();
    assert!(body.get("result").is_none(), "{body}");

    // Through the gateway the header arrives renamed; a client then asks the well-known
    // URLs (RFC 9728 §3), which the oauth function answers.
    let r = app
        .post_anon()
        .header("mcp-protocol-version", LATEST_LEGACY)
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("www-authenticate").is_none());
    assert_eq!(
        r.headers()["x-amzn-remapped-www-authenticate"]
            .to_str()
            .unwrap(),
        challenge
    );
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let doc: Value = r.json().await.unwrap();
        assert_eq!(doc["resource"], app.url.as_str(), "{path}: {doc}");
        assert_eq!(doc["authorization_servers"], json!([app.base]), "{path}");
    }
    let r = app
        .client
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            app.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["issuer"], app.base.as_str());
    // A path no route names is API Gateway's 404, not a function's.
    let r = app
        .client
        .get(format!("{}/nowhere", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn class_functions_run_only_their_own_tools_for_the_principal_they_are_given() {
    let app = TestApp::spawn_with(Options::lambda()).await;
    let stack = app.lambda.as_ref().unwrap();
    let principal =
        |scope: &str| json!({ "user": "default", "scope": scope, "credential_id": "t" });

    let (status, reply) = stack
        .invoke("pages", &fixture("pages-list-pages.json"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        reply["result"]["pages"].as_array().unwrap().len(),
        5,
        "{reply}"
    );
    let (_, reply) = stack
        .invoke("tasks", &fixture("tasks-list-tasks.json"))
        .await;
    assert!(
        !reply["result"]["tasks"].as_array().unwrap().is_empty(),
        "{reply}"
    );

    // A tool of the other class is unknown here.
    let (_, reply) = stack
        .invoke(
            "tasks",
            &json!({ "principal": principal("admin"), "tool": "list_pages" }),
        )
        .await;
    assert_eq!(reply["error"]["kind"], "unknown_tool", "{reply}");
    // The scope in the payload still bounds what runs.
    let (_, reply) = stack
        .invoke(
            "tasks",
            &json!({ "principal": principal("read"), "tool": "create_task", "arguments": { "text": "x" } }),
        )
        .await;
    assert_eq!(reply["error"]["kind"], "business", "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap()
            .contains("edit scope"),
        "{reply}"
    );
    // Another user's pages are not this user's: the principal scopes every read.
    let (_, reply) = stack
        .invoke(
            "pages",
            &json!({ "principal": { "user": "mallory", "scope": "read", "credential_id": "t" }, "tool": "list_pages" }),
        )
        .await;
    assert_eq!(reply["result"]["pages"], json!([]), "{reply}");
    // A principal that is not one never reaches a handler.
    let (_, reply) = stack
        .invoke(
            "pages",
            &json!({ "principal": { "user": "../x", "scope": "read", "credential_id": "t" }, "tool": "list_pages" }),
        )
        .await;
    assert!(reply.get("result").is_none(), "{reply}");
    let listed = app.call("list_pages", json!({})).await;
    // The account function runs the web app's deletion and nothing else: no tool, and not
    // for a principal that is not the web app's; its fixture names a user that does not exist.
    let (_, reply) = stack
        .invoke(
            "account",
            &json!({ "principal": principal("admin"), "tool": "list_pages" }),
        )
        .await;
    assert_eq!(reply["error"]["kind"], "unknown_tool", "{reply}");
    let (_, reply) = stack
        .invoke(
            "account",
            &json!({ "principal": principal("write"), "tool": "delete_account" }),
        )
        .await;
    assert_eq!(reply["error"]["kind"], "unknown_tool", "{reply}");
    let (_, reply) = stack
        .invoke("account", &fixture("account-delete-account.json"))
        .await;
    assert_eq!(reply["error"]["kind"], "not_found", "{reply}");
    assert_eq!(
        app.call("list_pages", json!({})).await["pages"],
        listed["pages"],
        "the default user is untouched"
    );
}

#[tokio::test]
async fn uploads_become_pages_through_the_ingest_function() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();
    let config = app.aws_config.clone().unwrap();
    let s3 = AwsClients::connect(&config).await.s3;

    // Every file of the sample folder, uploaded and announced one by one, as S3 would.
    let mut files: Vec<PathBuf> = std::fs::read_dir(sample_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut imported = 0;
    for path in &files {
        let name = path.file_name().unwrap().to_str().unwrap();
        let key = format!("uploads/default/{name}");
        s3.put_object()
            .bucket(&config.bucket)
            .key(&key)
            .body(std::fs::read(path).unwrap().into())
            .send()
            .await
            .unwrap();
        let (status, reply) = stack
            .invoke("ingest", &s3_event(&config.bucket, &key))
            .await;
        assert_eq!(status, 200, "{name}: {reply}");
        imported += reply["imported"].as_u64().unwrap_or(0);
    }
    assert!(imported > 0);

    // The same pages as `nib import` of the folder makes.
    let (pages, _) = nib::notebook::group_dir(&sample_dir()).unwrap();
    let listed = app.call("list_pages", json!({ "limit": 100 })).await;
    assert_eq!(
        listed["pages"].as_array().unwrap().len(),
        pages.len(),
        "{listed}"
    );
    // The page of 2026-06-19.pdf, .png and .md (three events) is one page with its ink.
    let day = app
        .call(
            "list_pages",
            json!({ "from": "2026-06-19", "to": "2026-06-19" }),
        )
        .await;
    let mut with_ink = 0;
    for summary in day["pages"].as_array().unwrap() {
        let page = app
            .call("get_page", json!({ "page_id": summary["page_id"] }))
            .await;
        if page["pdf_url"].is_string() && page["png_url"].is_string() {
            with_ink += 1;
            assert!(
                page["ocr_markdown"]
                    .as_str()
                    .unwrap()
                    .contains("quarterly budget")
            );
        }
    }
    assert_eq!(with_ink, 1, "{day}");

    // A redelivered event changes nothing.
    let key = "uploads/default/2026-06-19.md";
    let (_, reply) = stack.invoke("ingest", &s3_event(&config.bucket, key)).await;
    assert_eq!(reply["imported"], 1, "{reply}");
    let again = app.call("list_pages", json!({ "limit": 100 })).await;
    assert_eq!(again["pages"], listed["pages"]);

    // A bad page is dropped with its reason, without failing the invocation (no retry).
    let bad = "uploads/default/2026-07-01.pdf";
    s3.put_object()
        .bucket(&config.bucket)
        .key(bad)
        .body(b"not a pdf".to_vec().into())
        .send()
        .await
        .unwrap();
    let (status, reply) = stack.invoke("ingest", &s3_event(&config.bucket, bad)).await;
    assert_eq!(status, 200);
    assert_eq!(
        reply,
        json!({ "imported": 0, "rejected": 1, "superseded": 0 })
    );
    // An object outside uploads/{user}/ is ignored.
    let (_, reply) = stack
        .invoke("ingest", &s3_event(&config.bucket, "u/default/pages/x.png"))
        .await;
    assert_eq!(
        reply,
        json!({ "imported": 0, "rejected": 0, "superseded": 0 })
    );
}

/// Puts `bytes` at `key` in the test's bucket, as an uploader would.
async fn upload(clients: &AwsClients, config: &AwsConfig, key: &str, bytes: &[u8]) {
    clients
        .s3
        .put_object()
        .bucket(&config.bucket)
        .key(key)
        .body(bytes.to_vec().into())
        .send()
        .await
        .unwrap();
}

/// The bytes behind a page's signed ink URL (a presigned S3 GET on the emulator).
async fn ink(app: &TestApp, url: &Value) -> Vec<u8> {
    let r = app.client.get(url.as_str().unwrap()).send().await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    r.bytes().await.unwrap().to_vec()
}

const PAGE_MD: &[u8] =
    b"## Tasks\n- [ ] Call the printer about the proofs\n## Notes\n- Met with Dana\n";

/// Trigger (a) through the ingest function: the OCR upload of a page expired (objects under
/// `uploads/` live 7 days) and a new scan arrives alone. The page takes the new ink and keeps
/// its OCR, its lines and its task with the task's history; before, the page write replaced
/// the OCR and lines with nothing and deleted the task.
#[tokio::test]
async fn an_ink_upload_alone_keeps_the_pages_text_and_tasks() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();
    let config = app.aws_config.clone().unwrap();
    let s3 = AwsClients::connect(&config).await;
    let (md, pdf) = (
        "uploads/default/2026-06-19.md",
        "uploads/default/2026-06-19.pdf",
    );
    upload(&s3, &config, md, PAGE_MD).await;
    upload(&s3, &config, pdf, &one_page("first scan")).await;
    for key in [md, pdf] {
        let (status, reply) = stack.invoke("ingest", &s3_event(&config.bucket, key)).await;
        assert_eq!((status, &reply["imported"]), (200, &json!(1)), "{reply}");
    }
    let tasks = app.call("list_tasks", json!({ "status": "open" })).await;
    let task = tasks["tasks"][0]["task_link_id"].clone();
    app.call(
        "update_task_status",
        json!({ "task_link_id": task, "status": "done" }),
    )
    .await;
    let page_id = app.page_of("2026-06-19").await;
    let before = app.call("get_page", json!({ "page_id": page_id })).await;

    // The lifecycle rule removed the OCR upload; a second scan of the page arrives.
    s3.s3
        .delete_object()
        .bucket(&config.bucket)
        .key(md)
        .send()
        .await
        .unwrap();
    upload(&s3, &config, pdf, &one_page("second scan")).await;
    let (_, reply) = stack.invoke("ingest", &s3_event(&config.bucket, pdf)).await;
    assert_eq!(
        reply,
        json!({ "imported": 1, "rejected": 0, "superseded": 0 })
    );

    let after = app.call("get_page", json!({ "page_id": page_id })).await;
    for field in ["ocr_markdown", "has_ocr", "structure_json", "date"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    let done = app.call("list_tasks", json!({ "status": "done" })).await;
    assert_eq!(done["tasks"][0]["task_link_id"], task, "{done}");
    assert_eq!(ink(&app, &after["pdf_url"]).await, one_page("second scan"));
}

/// Trigger (b) through the ingest function: an event whose objects are older than what the
/// page took. The page stands for one that took newer uploads of the stem, committed by an
/// event that won a race (its files are stamped an hour ahead, as S3's `LastModified` of a
/// later upload would be); the uploads now in the bucket are older. Their event replaces
/// nothing (`superseded`), a redelivery neither, and a new file beside stale siblings is taken
/// alone.
#[tokio::test]
async fn an_older_upload_never_replaces_what_the_page_took() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();
    let config = app.aws_config.clone().unwrap();
    let s3 = AwsClients::connect(&config).await;

    let newer = tempfile::tempdir().unwrap();
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    for (name, bytes) in [
        ("2026-06-19.md", PAGE_MD.to_vec()),
        ("2026-06-19.pdf", one_page("newer scan")),
    ] {
        let path = newer.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
    }
    let user = nib::domain::UserId::parse("default").unwrap();
    let (pages, _) = nib::notebook::group_dir(newer.path()).unwrap();
    app.app
        .notebook()
        .import_files(&user, &pages[0])
        .await
        .unwrap();
    let page_id = app.page_of("2026-06-19").await;
    let before = app.call("get_page", json!({ "page_id": page_id })).await;

    let md = "uploads/default/2026-06-19.md";
    upload(&s3, &config, md, b"## Notes\n- an older draft\n").await;
    upload(
        &s3,
        &config,
        "uploads/default/2026-06-19.pdf",
        &one_page("older scan"),
    )
    .await;
    for _ in 0..2 {
        let (_, reply) = stack.invoke("ingest", &s3_event(&config.bucket, md)).await;
        assert_eq!(
            reply,
            json!({ "imported": 0, "rejected": 0, "superseded": 1 })
        );
    }
    let png = "uploads/default/2026-06-19.png";
    upload(&s3, &config, png, b"\x89PNG\r\n\x1a\n a photo").await;
    let (_, reply) = stack.invoke("ingest", &s3_event(&config.bucket, png)).await;
    assert_eq!(reply["imported"], 1, "{reply}");

    let after = app.call("get_page", json!({ "page_id": page_id })).await;
    assert_eq!(after["ocr_markdown"], before["ocr_markdown"]);
    assert_eq!(after["structure_json"], before["structure_json"]);
    assert_eq!(ink(&app, &after["pdf_url"]).await, one_page("newer scan"));
    assert_eq!(
        ink(&app, &after["png_url"]).await,
        b"\x89PNG\r\n\x1a\n a photo"
    );
}

/// The S3 fixture, for `key` in `bucket` (URL-encoded as S3 does).
/// S3's event notifications to the ingest function (`infra/s3.tf`: every new object under
/// `uploads/`), which the emulator does not send: each new key there, seen by listing the
/// bucket, is announced to the function once, as S3 would. Stops when the handle is aborted.
pub fn deliver_upload_events(
    stack: Arc<LambdaStack>,
    config: AwsConfig,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let s3 = AwsClients::connect(&config).await.s3;
        let mut announced = std::collections::HashSet::new();
        loop {
            if let Ok(listed) = s3
                .list_objects_v2()
                .bucket(&config.bucket)
                .prefix("uploads/")
                .send()
                .await
            {
                for key in listed.contents().iter().filter_map(|o| o.key()) {
                    if announced.insert(key.to_owned()) {
                        stack.invoke("ingest", &s3_event(&config.bucket, key)).await;
                    }
                }
            }
            // Polled, as S3 would deliver within moments; nothing waits on this interval.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

pub(crate) fn s3_event(bucket: &str, key: &str) -> Value {
    let mut event = fixture("s3-object-created.json");
    let record = &mut event["Records"][0]["s3"];
    record["bucket"]["name"] = json!(bucket);
    record["bucket"]["arn"] = json!(format!("arn:aws:s3:::{bucket}"));
    let encoded: String = url::form_urlencoded::byte_serialize(key.as_bytes()).collect();
    record["object"]["key"] = json!(encoded.replace("%2F", "/"));
    event
}

/// Issue 12 through the ingest function: an upload of ink alone (a handwritten page, no text
/// beside it) is read by Textract (the stand-in answers the page's lines, as AWS documents
/// them) and becomes a page with text, tasks from the checkboxes in its pixels, and search.
#[tokio::test]
async fn an_ink_only_upload_is_read_by_textract_into_text_and_tasks() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();
    let config = app.aws_config.clone().unwrap();
    let s3 = AwsClients::connect(&config).await;
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data/ocr"));
    let png = std::fs::read(dir.join("2025-03-17.png")).unwrap();
    let truth = nib_testkit::textract_standin::TruthPage::parse(
        &std::fs::read_to_string(dir.join("2025-03-17.truth.json")).unwrap(),
    )
    .unwrap();
    let image = nib::ocr::raster::decode(&png).unwrap().remove(0);
    stack
        .textract
        .answer_page(&image, truth[0].lines_for(&image));
    let key = "uploads/default/2025-03-17.png";
    upload(&s3, &config, key, &png).await;
    let (status, reply) = stack.invoke("ingest", &s3_event(&config.bucket, key)).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["imported"], 1, "{reply}");
    let page_id = app.page_of("2025-03-17").await;
    let page = app.call("get_page", json!({ "page_id": page_id })).await;
    assert_eq!(
        page["ocr_engine"], "amazon-textract DetectDocumentText",
        "{page}"
    );
    let text = page["ocr_text"].as_str().unwrap();
    assert!(text.contains("Sign Wonka invoice"), "{text}");
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    assert!(
        tasks["tasks"].as_array().unwrap().len() >= 3,
        "tasks from the checkboxes: {tasks}"
    );
    let hits = app.call("search_pages", json!({ "query": "Wonka" })).await;
    assert_eq!(hits["results"][0]["page_id"], json!(page_id));
}

/// Issue 46 through the ingest function: with `NIB_OCR=openai` in its environment (the
/// functions' setting), an ink-only upload is read by the OpenAI-compatible model (the
/// stand-in) into text and tasks; a page the provider fails on past its tries is imported all
/// the same, unread, and the model's key shows in no answer.
#[tokio::test]
async fn an_ink_only_upload_is_read_by_a_remote_model_through_the_ingest_function() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ingest_ocr: "openai",
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();
    let config = app.aws_config.clone().unwrap();
    let s3 = AwsClients::connect(&config).await;
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data/ocr"));
    stack
        .openai
        .reply("# Friday\n- [ ] call the bank\n- [x] buy milk\nplain words");
    ingest_page(stack, &s3, &config, &dir.join("2025-03-17.png")).await;
    let page_id = app.page_of("2025-03-17").await;
    let page = app.call("get_page", json!({ "page_id": page_id })).await;
    assert_eq!(
        page["ocr_engine"],
        format!("openai-compatible {OPENAI_MODEL}"),
        "{page}"
    );
    assert_eq!(
        page["ocr_text"], "Friday\ncall the bank\nbuy milk\nplain words",
        "{page}"
    );
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    let mut got: Vec<(String, String)> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["text"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("buy milk".to_owned(), "done".to_owned()),
            ("call the bank".to_owned(), "todo".to_owned()),
        ]
    );
    let seen = stack.openai.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );

    // Past its two tries: imported unread, nothing of the key in what a client sees.
    stack.openai.fail_next(&[500, 500]);
    let reply = ingest_page(stack, &s3, &config, &dir.join("2025-03-15.png")).await;
    assert!(!reply.to_string().contains(OPENAI_KEY), "{reply}");
    let unread = app.page_of("2025-03-15").await;
    let page = app.call("get_page", json!({ "page_id": unread })).await;
    assert!(page["ocr_text"].is_null(), "{page}");
    assert!(!page.to_string().contains(OPENAI_KEY), "{page}");
    assert_eq!(stack.openai.requests().len(), 3);
}

/// Uploads an ink file under `uploads/default/` and has the ingest function take it: one page
/// imported.
async fn ingest_page(
    stack: &LambdaStack,
    s3: &AwsClients,
    config: &AwsConfig,
    ink: &Path,
) -> Value {
    let key = format!(
        "uploads/default/{}",
        ink.file_name().unwrap().to_str().unwrap()
    );
    upload(s3, config, &key, &std::fs::read(ink).unwrap()).await;
    let (status, reply) = stack
        .invoke("ingest", &s3_event(&config.bucket, &key))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["imported"], 1, "{reply}");
    reply
}

/// Issue 46 item 3 on AWS: the provider's key is not in the ingest function's environment but
/// in a Secrets Manager secret its ARN names (`NIB_OCR_OPENAI_API_KEY_SECRET`, as `infra/`
/// sets it). The function reads it at cold start from the emulator, and the stand-in receives
/// exactly that key with an ink-only upload's page.
#[tokio::test]
async fn the_ingest_function_reads_its_ocr_key_from_a_secret() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ingest_ocr: "openai",
        ingest_key_in_secret: true,
        ..Options::lambda()
    })
    .await;
    let stack = app.lambda.as_ref().unwrap();
    assert!(stack.ingest_key_secret.is_some());
    let config = app.aws_config.clone().unwrap();
    let s3 = AwsClients::connect(&config).await;
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/data/ocr"));
    stack.openai.reply("# Monday\n- [ ] renew the passport");
    let reply = ingest_page(stack, &s3, &config, &dir.join("2025-03-17.png")).await;
    assert!(!reply.to_string().contains(OPENAI_KEY), "{reply}");

    let seen = stack.openai.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    let page_id = app.page_of("2025-03-17").await;
    let page = app.call("get_page", json!({ "page_id": page_id })).await;
    assert_eq!(
        page["ocr_engine"],
        format!("openai-compatible {OPENAI_MODEL}"),
        "{page}"
    );
    assert_eq!(page["ocr_text"], "Monday\nrenew the passport", "{page}");
    assert!(!page.to_string().contains(OPENAI_KEY), "{page}");
}

/// A key the ingest function cannot have stops its cold start with the variable named and
/// what went wrong by kind, never a key: a secret that is not there (Secrets Manager's error
/// code), or a key given two ways (both variables named). Even at `RUST_LOG=trace`, where the
/// SDK would log what it sends and receives.
#[tokio::test]
async fn an_ocr_key_secret_that_cannot_be_read_stops_the_ingest_cold_start() {
    let emulator = crate::helpers::emulator().await;
    let config = emulator.fresh().await.unwrap();
    let inline_key = "sk-inline-SECRET-value";
    let stored_key = "sk-stored-SECRET-value";
    let arn = emulator
        .create_secret(&format!("nib-ocr-key-{}", uuid::Uuid::new_v4()), stored_key)
        .await
        .unwrap();
    let missing = arn.replace("nib-ocr-key-", "nib-no-such-key-");
    let bin = nib_exe().parent().unwrap().join("ingest");
    assert!(
        bin.exists(),
        "{} is missing: build the functions first",
        bin.display()
    );
    let cold_start = |vars: &[(&str, &str)]| {
        let mut cmd = Command::new(&bin);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("AWS_ENDPOINT_URL", config.endpoint_url.as_deref().unwrap())
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("NIB_TABLE", &config.table)
            .env("NIB_BUCKET", &config.bucket)
            .env("NIB_KMS_KEY_ID", &config.kms_key_id)
            .env("NIB_OCR", "openai")
            .env("NIB_OCR_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .env("NIB_OCR_OPENAI_MODEL", OPENAI_MODEL)
            .env("RUST_LOG", "trace")
            .stdin(Stdio::null());
        for (name, value) in vars {
            cmd.env(name, value);
        }
        let out = cmd.output().unwrap();
        let logs = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{logs}");
        assert!(
            !logs.contains(inline_key) && !logs.contains(stored_key),
            "a key in the logs: {logs}"
        );
        logs
    };

    let logs = cold_start(&[("NIB_OCR_OPENAI_API_KEY_SECRET", missing.as_str())]);
    assert!(logs.contains("cold start failed"), "{logs}");
    assert!(logs.contains("NIB_OCR_OPENAI_API_KEY_SECRET"), "{logs}");
    assert!(logs.contains("ResourceNotFoundException"), "{logs}");

    let logs = cold_start(&[
        ("NIB_OCR_OPENAI_API_KEY_SECRET", arn.as_str()),
        ("NIB_OCR_OPENAI_API_KEY", inline_key),
    ]);
    assert!(logs.contains("cold start failed"), "{logs}");
    assert!(
        logs.contains("NIB_OCR_OPENAI_API_KEY and NIB_OCR_OPENAI_API_KEY_SECRET are set"),
        "{logs}"
    );
}

/// The pages function writes a call's access record before it replies: the next call (on any
/// instance) sees it, with the front's verified credential and its name, and no flush.
#[tokio::test]
async fn the_class_functions_write_the_access_record_before_replying() {
    let app = TestApp::spawn_with(Options::lambda()).await;
    let page = app.page_of("2026-06-18").await;
    let got = app.call("get_page", json!({ "page_id": page })).await;
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    let access = app.call("list_access", json!({})).await;
    let records = access["records"].as_array().unwrap();
    let tools: Vec<&str> = records
        .iter()
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    // Newest first: list_tasks (the tasks function), get_page, list_pages (page_of).
    assert_eq!(tools, ["list_tasks", "get_page", "list_pages"], "{access}");
    assert_eq!(records[1]["page_ids"], json!([page]));
    assert_eq!(records[1]["client"], "created on first start");
    assert!(
        records[1]["credential_id"]
            .as_str()
            .unwrap()
            .starts_with("tok_"),
        "{access}"
    );
    let first_task = &tasks["tasks"][0]["task_link_id"];
    assert!(
        records[0]["task_ids"]
            .as_array()
            .unwrap()
            .contains(first_task)
    );
    // An unchanged read through the functions: the short answer, and no record.
    let same = app
        .call(
            "get_page",
            json!({ "page_id": page, "if_revision": got["revision"] }),
        )
        .await;
    assert_eq!(same["unchanged"], true, "{same}");
    let again = app.call("list_access", json!({})).await;
    assert_eq!(again["records"], access["records"]);
}
