//! The OAuth authorization server over real HTTP: discovery, registration, the consent page,
//! codes, tokens, refresh rotation, revocation, client ID metadata documents, and the MCP
//! endpoint's handling of our JWTs, with a negative test for every rule. Time is a test clock
//! that the tests move; nothing sleeps.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::Mac;
use nib::adapters::rate_limit::{InMemoryRateLimiter, StoreRateLimiter};
use nib::auth::oauth::jwt::AccessClaims;
use nib::auth::oauth::{Gates, OAuthConfig};
use nib::domain::UserId;
use nib::functions::Partition;
use nib::ports::{Clock, Cond, Index, Item, Query, QueryPage, Store, StoreError, Write};
use nib::services::{LocalOptions, Services};
use reqwest::Url;
use serde_json::{Value, json};
use sha2::Digest;
use tokio::sync::oneshot;

use crate::helpers::{LATEST_LEGACY, Options, TestApp, initialize, nib_exe};

pub(crate) const PASSWORD: &str = "correct horse battery staple";
const VERIFIER: &str = "nib-test-verifier-0123456789-abcdefghijklmnopqrstuvwxyz";
const REDIRECT: &str = "http://127.0.0.1:45678/callback";

/// System time moved by an offset the test controls.
#[derive(Default)]
struct TestClock(AtomicI64);

impl TestClock {
    fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }

    /// A clock a second past the start of an hour (so of a minute too): the limiters' fixed
    /// windows then last the whole test, whatever real time does meanwhile (a test that
    /// crossed a minute boundary in real time saw its counts start over).
    fn at_hour_start() -> TestClock {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        TestClock(AtomicI64::new(3600 - now % 3600 + 1))
    }
}

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        let offset = self.0.load(Ordering::SeqCst);
        SystemTime::now() + Duration::from_secs(offset as u64)
    }
}

fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
}

/// A server with a test clock, a password for the default user, and an HTTP client that does
/// not follow redirects.
pub(crate) struct Env {
    pub(crate) app: TestApp,
    clock: Arc<TestClock>,
    http: reqwest::Client,
    _data: tempfile::TempDir,
}

type Params = Vec<(String, String)>;

impl Env {
    async fn new() -> Env {
        Env::with(Options {
            import_sample: false,
            ..Options::default()
        })
        .await
    }

    async fn with(options: Options) -> Env {
        Env::over(options, |_, _| {}).await
    }

    /// [`Env::with`], after `prepare` changed the system the server runs over (its store,
    /// limiter or gates).
    async fn over(options: Options, prepare: impl FnOnce(&mut Services, &Arc<TestClock>)) -> Env {
        let data = tempfile::tempdir().unwrap();
        let mut app = Services::open_local(data.path(), LocalOptions::default()).unwrap();
        let clock = Arc::new(TestClock::at_hour_start());
        app.clock = clock.clone();
        app.limiter = Arc::new(InMemoryRateLimiter::new(clock.clone()));
        let user = UserId::parse("default").unwrap();
        app.ensure_user(&user).await.unwrap();
        app.users()
            .set_password(&user, PASSWORD, true)
            .await
            .unwrap();
        prepare(&mut app, &clock);
        let app = TestApp::spawn_over(app, options).await;
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Env {
            app,
            clock,
            http,
            _data: data,
        }
    }

    /// The deployment's shape: the Lambda functions behind the API Gateway stand-in, over the
    /// emulator, with the system clock.
    async fn lambda() -> Env {
        let app = TestApp::spawn_with(Options {
            import_sample: false,
            ..Options::lambda()
        })
        .await;
        let user = UserId::parse("default").unwrap();
        app.app
            .users()
            .set_password(&user, PASSWORD, true)
            .await
            .unwrap();
        Env {
            app,
            clock: Arc::new(TestClock::default()),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            _data: tempfile::tempdir().unwrap(),
        }
    }

    /// Around a system served and bootstrapped elsewhere (the deploy rehearsal in
    /// `operate.rs`), whose default user has [`PASSWORD`]; the system clock.
    pub(crate) fn around(app: TestApp) -> Env {
        Env {
            app,
            clock: Arc::new(TestClock::default()),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            _data: tempfile::tempdir().unwrap(),
        }
    }

    fn at(&self, path: &str) -> String {
        format!("{}{path}", self.app.base)
    }

    /// The server's own authorization server (same key), to craft tokens.
    fn oauth(&self) -> nib::auth::oauth::OAuth {
        self.app.app.oauth(OAuthConfig::new(&self.app.base))
    }

    async fn register(&self, body: Value) -> (u16, Value) {
        let r = self
            .http
            .post(self.at("/oauth/register"))
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// A public client (`none`) with one redirect URI.
    async fn public_client(&self) -> String {
        let (status, body) = self
            .register(json!({
                "client_name": "Test Client", "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none", "application_type": "native"
            }))
            .await;
        assert_eq!(status, 201, "{body}");
        body["client_id"].as_str().unwrap().to_owned()
    }

    /// A complete, valid authorization request.
    fn params(&self, client_id: &str) -> Params {
        [
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", REDIRECT),
            ("state", "st4te"),
            ("code_challenge", &challenge(VERIFIER)),
            ("code_challenge_method", "S256"),
            ("resource", &self.app.url),
            ("scope", "read write"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    async fn get_authorize(&self, params: &Params) -> reqwest::Response {
        self.http
            .get(self.at("/oauth/authorize"))
            .query(params)
            .send()
            .await
            .unwrap()
    }

    /// Opens the consent page: its CSRF cookie, the form's token and the HTML.
    async fn consent(&self, params: &Params) -> (String, String, String) {
        let r = self.get_authorize(params).await;
        assert_eq!(r.status(), 200);
        let cookie = r
            .headers()
            .get("set-cookie")
            .expect("a CSRF cookie")
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let html = r.text().await.unwrap();
        let csrf = field(&html, "csrf_token").expect("a csrf_token field");
        (cookie, csrf, html)
    }

    async fn submit(
        &self,
        params: &Params,
        cookie: Option<&str>,
        extra: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut form = params.clone();
        form.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut req = self.http.post(self.at("/oauth/authorize")).form(&form);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        req.send().await.unwrap()
    }

    /// Submits the consent form as `username` with `password`, approving.
    async fn sign_in(
        &self,
        params: &Params,
        cookie: &str,
        csrf: &str,
        username: &str,
        password: &str,
    ) -> reqwest::Response {
        self.submit(
            params,
            Some(cookie),
            &[
                ("csrf_token", csrf),
                ("username", username),
                ("password", password),
                ("decision", "approve"),
            ],
        )
        .await
    }

    /// Runs the consent page as a person would and returns the redirect it ends with.
    async fn authorize(&self, params: &Params) -> Url {
        let (cookie, csrf, _) = self.consent(params).await;
        let r = self
            .submit(
                params,
                Some(&cookie),
                &[
                    ("csrf_token", &csrf),
                    ("username", "default"),
                    ("password", PASSWORD),
                    ("decision", "approve"),
                ],
            )
            .await;
        assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
        location(&r)
    }

    async fn code(&self, client_id: &str) -> String {
        let url = self.authorize(&self.params(client_id)).await;
        query(&url, "code").expect("a code")
    }

    async fn token(&self, form: &[(&str, &str)], basic: Option<(&str, &str)>) -> (u16, Value) {
        let mut req = self.http.post(self.at("/oauth/token")).form(form);
        if let Some((id, secret)) = basic {
            req = req.header(
                "authorization",
                format!("Basic {}", STANDARD.encode(format!("{id}:{secret}"))),
            );
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        if status == 200 {
            assert_eq!(r.headers()["cache-control"], "no-store");
        }
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn exchange(&self, client_id: &str, code: &str) -> (u16, Value) {
        self.token(
            &[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", VERIFIER),
                ("client_id", client_id),
                ("resource", &self.app.url),
            ],
            None,
        )
        .await
    }

    async fn refresh(&self, client_id: &str, refresh_token: &str) -> (u16, Value) {
        self.token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
                ("client_id", client_id),
            ],
            None,
        )
        .await
    }

    /// A public client and a fresh token response for it.
    pub(crate) async fn tokens(&self) -> (String, Value) {
        let client = self.public_client().await;
        let code = self.code(&client).await;
        let (status, body) = self.exchange(&client, &code).await;
        assert_eq!(status, 200, "{body}");
        (client, body)
    }

    /// A `tools/call` on /mcp with this bearer token: status, `WWW-Authenticate`, body.
    pub(crate) async fn call(&self, token: &str, tool: &str, args: Value) -> (u16, String, Value) {
        let r = self
            .app
            .post_anon()
            .bearer_auth(token)
            .header("mcp-protocol-version", LATEST_LEGACY)
            .json(&json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": tool, "arguments": args } }))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let challenge = r
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, challenge, r.json().await.unwrap_or(Value::Null))
    }

    /// Signs `username` in on the page links' sign-in form (as a browser that followed a page
    /// link) and returns the session cookie (`nib_session=...`).
    async fn page_session(&self, username: &str, password: &str) -> String {
        let next = format!("/pages/{}", uuid::Uuid::now_v7());
        let r = self
            .http
            .get(self.at("/oauth/signin"))
            .query(&[("next", &next)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let csrf_cookie = cookie_of(&r, "nib_csrf").expect("a CSRF cookie");
        let csrf = field(&r.text().await.unwrap(), "csrf_token").unwrap();
        let r = self
            .http
            .post(self.at("/oauth/signin"))
            .header("cookie", &csrf_cookie)
            .form(&[
                ("next", next.as_str()),
                ("csrf_token", csrf.as_str()),
                ("username", username),
                ("password", password),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303, "{}", r.text().await.unwrap());
        cookie_of(&r, "nib_session").expect("a session cookie")
    }

    /// `GET /oauth/authorize` as a browser carrying `cookie`.
    async fn get_authorize_with(&self, params: &Params, cookie: &str) -> reqwest::Response {
        self.http
            .get(self.at("/oauth/authorize"))
            .query(params)
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
    }

    /// A page view's status with this cookie: 303 without a live session, 404 with one (the
    /// page does not exist), so it tells whether the session lives.
    async fn page_view_status(&self, cookie: &str) -> u16 {
        self.http
            .get(self.at(&format!("/pages/{}", uuid::Uuid::now_v7())))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// Asserts the token is refused with a 401 and the invalid_token challenge.
    async fn assert_refused(&self, token: &str) {
        let (status, challenge, body) = self.call(token, "list_pages", json!({})).await;
        assert_eq!(status, 401, "{body}");
        assert!(
            challenge.contains("error=\"invalid_token\"")
                && challenge.contains("resource_metadata="),
            "{challenge}"
        );
        assert!(body.get("result").is_none(), "never a tool result: {body}");
    }
}

/// The value of a form field in the page.
fn field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    Some(html[start..].split('"').next()?.to_owned())
}

/// `name=value` of the response's `Set-Cookie` named `name`.
fn cookie_of(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_owned())
}

fn location(r: &reqwest::Response) -> Url {
    Url::parse(r.headers()["location"].to_str().unwrap()).unwrap()
}

fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn set(params: &mut Params, name: &str, value: Option<&str>) {
    params.retain(|(k, _)| k != name);
    if let Some(v) = value {
        params.push((name.to_owned(), v.to_owned()));
    }
}

#[tokio::test]
async fn discovery_documents_name_the_authorization_server() {
    let env = Env::new().await;
    let issuer = env.app.base.clone();
    for path in [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ] {
        let m: Value = env
            .http
            .get(env.at(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(m["issuer"], issuer.as_str());
        assert_eq!(m["code_challenge_methods_supported"], json!(["S256"]));
        assert_eq!(m["client_id_metadata_document_supported"], true);
        assert_eq!(m["authorization_response_iss_parameter_supported"], true);
        assert_eq!(
            m["scopes_supported"],
            json!(["read", "edit", "write", "admin"])
        );
        assert_eq!(
            m["grant_types_supported"],
            json!(["authorization_code", "refresh_token"])
        );
        assert_eq!(
            m["token_endpoint_auth_methods_supported"],
            json!(["none", "client_secret_post", "client_secret_basic"])
        );
        for endpoint in [
            "authorization_endpoint",
            "token_endpoint",
            "registration_endpoint",
            "revocation_endpoint",
            "jwks_uri",
        ] {
            assert!(
                m[endpoint].as_str().unwrap().starts_with(&issuer),
                "{endpoint}"
            );
        }
    }
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let prm: Value = env
            .http
            .get(env.at(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(prm["resource"], env.app.url.as_str());
        assert_eq!(prm["authorization_servers"], json!([issuer]));
    }
    let jwks: Value = env
        .http
        .get(env.at("/oauth/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(jwks["keys"][0]["kty"], "EC");
    assert_eq!(jwks["keys"][0]["crv"], "P-256");
    assert_eq!(jwks["keys"][0]["alg"], "ES256");
    // The 401 challenge that starts a connector's flow points at the metadata.
    let r = env
        .app
        .post_anon()
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("/.well-known/oauth-protected-resource/mcp")
    );
}

#[tokio::test]
async fn registration_follows_rfc7591_and_always_grants_refresh() {
    let env = Env::new().await;
    // Asking only for authorization_code still gets refresh_token: connectors need it.
    let (status, body) = env
        .register(json!({
            "client_name": "Claude", "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
            "grant_types": ["authorization_code"], "token_endpoint_auth_method": "client_secret_post",
            "application_type": "web"
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(body["application_type"], "web");
    assert_eq!(body["token_endpoint_auth_method"], "client_secret_post");
    assert!(body["client_secret"].as_str().unwrap().len() >= 32);
    assert_eq!(body["client_secret_expires_at"], 0);

    let (status, body) = env
        .register(json!({ "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none", "application_type": "native" }))
        .await;
    assert_eq!(status, 201);
    assert!(body.get("client_secret").is_none());
    assert_eq!(body["application_type"], "native");

    for (bad, error) in [
        (json!({ "redirect_uris": [] }), "invalid_redirect_uri"),
        (
            json!({ "redirect_uris": ["http://evil.example/cb"] }),
            "invalid_redirect_uri",
        ),
        (
            json!({ "redirect_uris": ["javascript:alert(1)"] }),
            "invalid_redirect_uri",
        ),
        (
            json!({ "redirect_uris": ["https://a.example/cb#frag"] }),
            "invalid_redirect_uri",
        ),
        (
            json!({ "redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "private_key_jwt" }),
            "invalid_client_metadata",
        ),
        (
            json!({ "redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"] }),
            "invalid_client_metadata",
        ),
        (
            json!({ "redirect_uris": ["https://a.example/cb"], "application_type": "tv" }),
            "invalid_client_metadata",
        ),
    ] {
        let (status, body) = env.register(bad.clone()).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some(error)),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn a_client_connects_calls_a_tool_and_refreshes() {
    connects_calls_a_tool_and_refreshes(&Env::new().await).await;
}

/// The same through the Lambda functions: the oauth function signs with the KMS key, the mcp
/// front verifies with the public key alone (`lambda.rs`).
#[tokio::test]
async fn a_client_connects_through_the_lambda_functions() {
    connects_calls_a_tool_and_refreshes(&Env::lambda().await).await;
}

/// The owner connects a public client (registration, consent with the password, code
/// exchange), calls a tool with the access token and with the API token, and refreshes.
pub(crate) async fn connects_calls_a_tool_and_refreshes(env: &Env) {
    let client = env.public_client().await;
    let params = env.params(&client);
    let (_, _, html) = env.consent(&params).await;
    assert!(html.contains("Test Client"), "the page names the client");
    assert!(html.contains("127.0.0.1:45678"), "and the redirect host");
    assert!(html.contains("<strong>read</strong>") && html.contains("<strong>write</strong>"));
    assert!(!html.contains("<strong>admin</strong>"));
    assert!(!html.contains("<script"), "no JavaScript");

    let back = env.authorize(&params).await;
    assert_eq!(
        format!("{}://{}{}", back.scheme(), back.authority(), back.path()),
        REDIRECT
    );
    assert_eq!(query(&back, "state").as_deref(), Some("st4te"));
    assert_eq!(query(&back, "iss").as_deref(), Some(env.app.base.as_str()));
    let code = query(&back, "code").unwrap();

    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "read edit write");
    assert!(tokens["expires_in"].as_i64().unwrap() <= 3600);
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();

    // The JWT's claims: audience is the MCP resource, issuer is us, a jti, at most an hour.
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["aud"], env.app.url.as_str());
    assert_eq!(claims["iss"], env.app.base.as_str());
    assert!(claims["jti"].is_string());
    assert!(claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap() <= 3600);

    let (status, _, body) = env.call(access, "list_pages", json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false);
    // API tokens keep working beside OAuth.
    let (status, _, _) = env.call(&env.app.token, "list_pages", json!({})).await;
    assert_eq!(status, 200);

    // Refresh rotates.
    let (status, next) = env.refresh(&client, refresh).await;
    assert_eq!(status, 200, "{next}");
    let access2 = next["access_token"].as_str().unwrap();
    let refresh2 = next["refresh_token"].as_str().unwrap();
    assert_ne!(refresh2, refresh);
    assert_eq!(env.call(access2, "list_pages", json!({})).await.0, 200);
    // The grant is listed for the user.
    let grants = env
        .oauth()
        .grants
        .list(&UserId::parse("default").unwrap())
        .await
        .unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].client_name, "Test Client");
}

#[tokio::test]
async fn reusing_a_rotated_refresh_token_revokes_the_grant() {
    let env = Env::new().await;
    let (client, first) = env.tokens().await;
    let refresh1 = first["refresh_token"].as_str().unwrap();
    let (_, second) = env.refresh(&client, refresh1).await;
    let access2 = second["access_token"].as_str().unwrap().to_owned();
    let refresh2 = second["refresh_token"].as_str().unwrap().to_owned();
    // Someone replays the old one: refused, and everything of the grant dies.
    let (status, body) = env.refresh(&client, refresh1).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    env.assert_refused(&access2).await;
    let (status, body) = env.refresh(&client, &refresh2).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    // A refresh token is bound to its client.
    let (other, tokens) = env.tokens().await;
    let _ = other;
    let (status, body) = env
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}

#[tokio::test]
async fn refresh_tokens_live_for_weeks_and_then_expire() {
    let env = Env::new().await;
    let (client, tokens) = env.tokens().await;
    let access = tokens["access_token"].as_str().unwrap();
    // Three weeks later the access token is long expired (401, so the client refreshes)...
    env.clock.advance(21 * 24 * 3600);
    env.assert_refused(access).await;
    // ...and the refresh token still works, and rotates into a fresh 30 days.
    let (status, next) = env
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(
        env.call(
            next["access_token"].as_str().unwrap(),
            "list_pages",
            json!({})
        )
        .await
        .0,
        200
    );
    env.clock.advance(29 * 24 * 3600);
    let (status, next) = env
        .refresh(&client, next["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{next}");
    // Unused for 31 days: gone.
    env.clock.advance(31 * 24 * 3600);
    let (status, body) = env
        .refresh(&client, next["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
}

/// Exchanges a code as a confidential client would: secret in the body (`post`), in a Basic
/// header (`basic`), or not at all (`none`).
async fn exchange_as(env: &Env, id: &str, code: &str, how: &str, secret: &str) -> (u16, Value) {
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", REDIRECT),
        ("code_verifier", VERIFIER),
    ];
    let mut basic = None;
    match how {
        "post" => form.extend([("client_id", id), ("client_secret", secret)]),
        "basic" => basic = Some((id, secret)),
        _ => form.push(("client_id", id)),
    }
    env.token(&form, basic).await
}

#[tokio::test]
async fn confidential_clients_authenticate_by_post_or_basic() {
    let env = Env::new().await;
    for method in ["client_secret_post", "client_secret_basic"] {
        let (_, reg) = env
            .register(json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": method, "client_name": method }))
            .await;
        let id = reg["client_id"].as_str().unwrap();
        let secret = reg["client_secret"].as_str().unwrap();
        // Either method works, whichever was registered.
        for how in ["post", "basic"] {
            let code = env.code(id).await;
            let (status, body) = exchange_as(&env, id, &code, how, secret).await;
            assert_eq!(status, 200, "{method} via {how}: {body}");
        }
        // A wrong or missing secret is invalid_client (401).
        for (how, s) in [("post", "wrong"), ("basic", "wrong"), ("none", "")] {
            let code = env.code(id).await;
            let (status, body) = exchange_as(&env, id, &code, how, s).await;
            assert_eq!(
                (status, body["error"].as_str()),
                (401, Some("invalid_client")),
                "{method} via {how}"
            );
        }
    }
    // An unknown client too.
    let (status, body) = env
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "x"),
                ("client_id", "nope"),
            ],
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_client"))
    );
}

#[tokio::test]
async fn codes_are_single_use_and_bound_to_client_redirect_and_verifier() {
    let env = Env::new().await;
    let client = env.public_client().await;

    // Wrong verifier: refused, and the code is burnt.
    let code = env.code(&client).await;
    let (status, body) = env
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                (
                    "code_verifier",
                    "wrong-verifier-wrong-verifier-wrong-verifier-123",
                ),
                ("client_id", &client),
            ],
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    assert_eq!(env.exchange(&client, &code).await.0, 400, "burnt");

    // Wrong redirect URI.
    let code = env.code(&client).await;
    let (status, body) = env
        .token(
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", "http://127.0.0.1:45678/other"),
                ("code_verifier", VERIFIER),
                ("client_id", &client),
            ],
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Another client's code.
    let code = env.code(&client).await;
    let other = env.public_client().await;
    let (status, body) = env.exchange(&other, &code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Expired after 60 s.
    let code = env.code(&client).await;
    env.clock.advance(61);
    let (status, body) = env.exchange(&client, &code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Reused: the second exchange fails and revokes what the first one issued.
    let code = env.code(&client).await;
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200);
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(env.call(access, "list_pages", json!({})).await.0, 200);
    let (status, body) = env.exchange(&client, &code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    env.assert_refused(access).await;
    let (status, _) = env
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 400);

    // Unknown grant types and missing parameters.
    let (status, body) = env
        .token(&[("grant_type", "password"), ("client_id", &client)], None)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("unsupported_grant_type"))
    );
    let (status, body) = env
        .token(
            &[("grant_type", "authorization_code"), ("client_id", &client)],
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
}

#[tokio::test]
async fn untrusted_redirects_get_an_error_page_never_a_redirect() {
    let env = Env::new().await;
    let client = env.public_client().await;
    let cases: Vec<(&str, Option<&str>, Option<&str>)> = vec![
        ("redirect_uri", Some("https://evil.example/callback"), None),
        (
            "redirect_uri",
            Some("http://127.0.0.1:45678/callback/../evil"),
            None,
        ),
        (
            "redirect_uri",
            Some("http://127.0.0.2:45678/callback"),
            None,
        ),
        ("client_id", Some("nib_client_unknown"), None),
        ("client_id", None, None),
        // A plain-http metadata document URL that is not loopback: refused without a fetch.
        ("client_id", Some("http://example.com/client.json"), None),
    ];
    for (name, value, _) in cases {
        let mut params = env.params(&client);
        set(&mut params, name, value);
        let r = env.get_authorize(&params).await;
        assert_eq!(r.status(), 400, "{name}={value:?}");
        assert!(r.headers().get("location").is_none());
        let html = r.text().await.unwrap();
        assert!(html.contains("cannot be used"), "{html}");
    }
    // A duplicated parameter is refused too.
    let mut params = env.params(&client);
    params.push(("redirect_uri".into(), "https://evil.example/cb".into()));
    let r = env.get_authorize(&params).await;
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("location").is_none());
    // The consent POST is judged the same way.
    let mut params = env.params(&client);
    set(
        &mut params,
        "redirect_uri",
        Some("https://evil.example/callback"),
    );
    let r = env.submit(&params, None, &[("decision", "deny")]).await;
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("location").is_none());

    // A loopback redirect may use another port (RFC 8252).
    let mut params = env.params(&client);
    set(
        &mut params,
        "redirect_uri",
        Some("http://127.0.0.1:1234/callback"),
    );
    assert_eq!(env.get_authorize(&params).await.status(), 200);
}

/// Request errors that may go back to the client, once its redirect URI is verified.
const REQUEST_ERRORS: [(&str, Option<&str>, &str); 8] = [
    ("code_challenge", None, "invalid_request"),
    ("code_challenge_method", Some("plain"), "invalid_request"),
    ("code_challenge_method", None, "invalid_request"),
    ("code_challenge", Some("too-short"), "invalid_request"),
    ("resource", None, "invalid_target"),
    (
        "resource",
        Some("https://other.example/mcp"),
        "invalid_target",
    ),
    ("scope", Some("read openid"), "invalid_scope"),
    ("response_type", Some("token"), "unsupported_response_type"),
];

/// Anyone can register a client with any redirect URI: until a user approved it, a bad request
/// for it is an error page, never a 303 to that URI (else our authorization endpoint is an
/// open redirector for every link an attacker crafts). The consent POST is judged the same way.
#[tokio::test]
async fn request_errors_for_a_client_nobody_approved_get_an_error_page() {
    let env = Env::new().await;
    let (status, body) = env
        .register(json!({
            "client_name": "Totally Legit", "redirect_uris": ["https://evil.example/landing"],
            "token_endpoint_auth_method": "none"
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    let client = body["client_id"].as_str().unwrap().to_owned();
    for (name, value, error) in REQUEST_ERRORS {
        let mut params = env.params(&client);
        set(&mut params, "redirect_uri", None);
        set(&mut params, name, value);
        let r = env.get_authorize(&params).await;
        assert_eq!(r.status(), 400, "{name}={value:?}");
        assert!(r.headers().get("location").is_none(), "{name}={value:?}");
        let html = r.text().await.unwrap();
        assert!(
            html.contains("cannot be used") && html.contains(error),
            "{html}"
        );
        let r = env.submit(&params, None, &[("decision", "deny")]).await;
        assert_eq!(r.status(), 400, "POST {name}={value:?}");
        assert!(r.headers().get("location").is_none());
    }
}

#[tokio::test]
async fn request_errors_go_back_to_a_verified_redirect_uri() {
    let env = Env::new().await;
    let client = env.public_client().await;
    // Approved once by the user: from then on its redirect URI is one that person vouched
    // for, to a browser where they are signed in.
    env.code(&client).await;
    let session = env.page_session("default", PASSWORD).await;
    for (name, value, error) in REQUEST_ERRORS {
        let mut params = env.params(&client);
        set(&mut params, name, value);
        let r = env.get_authorize(&params).await;
        assert_eq!(r.status(), 400, "no session: nobody known vouches");
        assert!(r.headers().get("location").is_none());
        let r = env.get_authorize_with(&params, &session).await;
        assert_eq!(r.status(), 303, "{name}={value:?}");
        let back = location(&r);
        assert!(back.as_str().starts_with(REDIRECT));
        assert_eq!(
            query(&back, "error").as_deref(),
            Some(error),
            "{name}={value:?}"
        );
        assert_eq!(query(&back, "state").as_deref(), Some("st4te"));
        assert_eq!(query(&back, "iss").as_deref(), Some(env.app.base.as_str()));
        assert!(query(&back, "code").is_none());
    }
}

/// One user's approval vouches for a client to that user only (issue 29, item 3): a user who
/// registers a client with a redirect URI of theirs and approves it cannot make a malformed
/// authorization link bounce another person (signed in or not) to that URI. The old global
/// approval mark vouches for nobody.
#[tokio::test]
async fn one_users_approval_of_a_client_does_not_bounce_another_user() {
    let env = Env::new().await;
    let mallory = UserId::parse("mallory").unwrap();
    env.app.app.ensure_user(&mallory).await.unwrap();
    env.app
        .app
        .users()
        .set_password(&mallory, PASSWORD, true)
        .await
        .unwrap();
    let landing = "https://evil.example/landing";
    let (status, body) = env
        .register(json!({
            "client_name": "Totally Legit", "redirect_uris": [landing],
            "token_endpoint_auth_method": "none"
        }))
        .await;
    assert_eq!(status, 201, "{body}");
    let client = body["client_id"].as_str().unwrap().to_owned();
    let mut params = env.params(&client);
    set(&mut params, "redirect_uri", Some(landing));
    // Mallory approves her own client.
    let (cookie, csrf, _) = env.consent(&params).await;
    let r = env
        .sign_in(&params, &cookie, &csrf, "mallory", PASSWORD)
        .await;
    assert_eq!(r.status(), 303);
    assert!(location(&r).as_str().starts_with(landing));
    // The old global mark, as a deployment from before may still hold it.
    env.app
        .app
        .store
        .put(
            Item {
                pk: format!("CLIENT#{client}"),
                sk: "APPROVED".into(),
                gsi1: None,
                version: 1,
                expires_at: None,
                body: b"{}".to_vec(),
            },
            Cond::None,
        )
        .await
        .unwrap();

    // The malformed link she sends around.
    let mut link = params.clone();
    set(&mut link, "scope", Some("openid"));
    let victim = env.page_session("default", PASSWORD).await;
    for cookie in [None, Some(victim.as_str())] {
        let r = match cookie {
            Some(c) => env.get_authorize_with(&link, c).await,
            None => env.get_authorize(&link).await,
        };
        assert_eq!(r.status(), 400, "signed in: {}", cookie.is_some());
        assert!(r.headers().get("location").is_none());
        let mut req = env.http.post(env.at("/oauth/authorize")).form(&link);
        if let Some(c) = cookie {
            req = req.header("cookie", c);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 400, "POST, signed in: {}", cookie.is_some());
        assert!(r.headers().get("location").is_none());
    }
    // A forged session cookie vouches for nobody either.
    let forged = format!("nib_session={}", "A".repeat(43));
    assert_eq!(env.get_authorize_with(&link, &forged).await.status(), 400);
    // To Mallory's own browser her approval still counts.
    let hers = env.page_session("mallory", PASSWORD).await;
    let r = env.get_authorize_with(&link, &hers).await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        query(&location(&r), "error").as_deref(),
        Some("invalid_scope")
    );
}

/// A page session ends after 8 hours without use, on the server's clock; use keeps it alive
/// (the idle expiry slides), and sign-in is asked again once it ended.
#[tokio::test]
async fn page_sessions_expire_after_eight_idle_hours() {
    let env = Env::new().await;
    let session = env.page_session("default", PASSWORD).await;
    assert_eq!(env.page_view_status(&session).await, 404, "signed in");
    env.clock.advance(7 * 3600);
    assert_eq!(env.page_view_status(&session).await, 404, "used at 7 h");
    env.clock.advance(7 * 3600);
    assert_eq!(
        env.page_view_status(&session).await,
        404,
        "14 h after sign-in, 7 h after its last use"
    );
    env.clock.advance(8 * 3600);
    assert_eq!(env.page_view_status(&session).await, 303, "8 h idle: ended");
    // Ended for /oauth/authorize too.
    let client = env.public_client().await;
    env.code(&client).await;
    let mut params = env.params(&client);
    set(&mut params, "scope", Some("openid"));
    assert_eq!(
        env.get_authorize_with(&params, &session).await.status(),
        400
    );
}

#[tokio::test]
async fn the_consent_form_needs_its_csrf_token_cookie_and_the_password() {
    let env = Env::new().await;
    let client = env.public_client().await;
    let params = env.params(&client);
    let (cookie, csrf, _) = env.consent(&params).await;
    let approve = |csrf: &'static str| {
        [
            ("csrf_token", csrf),
            ("username", "default"),
            ("password", PASSWORD),
            ("decision", "approve"),
        ]
    };
    let csrf: &'static str = Box::leak(csrf.into_boxed_str());

    // No token, a token without its cookie, a forged token, another cookie.
    let without = [
        ("username", "default"),
        ("password", PASSWORD),
        ("decision", "approve"),
    ];
    for (c, extra) in [
        (Some(cookie.as_str()), &without[..]),
        (None, &approve(csrf)[..]),
        (Some(cookie.as_str()), &approve("99999999999.AAAA")[..]),
        (
            Some("nib_csrf=AAAAAAAAAAAAAAAAAAAAAAAA"),
            &approve(csrf)[..],
        ),
    ] {
        let r = env.submit(&params, c, extra).await;
        assert_eq!(r.status(), 403);
        assert!(r.headers().get("location").is_none());
    }
    // A token made for other parameters (say, a smaller scope) does not fit.
    let mut admin = params.clone();
    set(&mut admin, "scope", Some("admin"));
    let r = env.submit(&admin, Some(&cookie), &approve(csrf)).await;
    assert_eq!(r.status(), 403);
    // An expired form.
    env.clock.advance(3600);
    let r = env.submit(&params, Some(&cookie), &approve(csrf)).await;
    assert_eq!(r.status(), 403);

    // A wrong password shows the page again, without a redirect.
    let (cookie, csrf, _) = env.consent(&params).await;
    let r = env
        .submit(
            &params,
            Some(&cookie),
            &[
                ("csrf_token", &csrf),
                ("username", "default"),
                ("password", "wrong password"),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("location").is_none());
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("Wrong user name or password")
    );
    let r = env
        .submit(
            &params,
            Some(&cookie),
            &[
                ("csrf_token", &csrf),
                ("username", "nobody"),
                ("password", PASSWORD),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(r.status(), 401);
    // Deny sends access_denied back.
    let r = env
        .submit(
            &params,
            Some(&cookie),
            &[("csrf_token", &csrf), ("decision", "deny")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert_eq!(
        query(&location(&r), "error").as_deref(),
        Some("access_denied")
    );
}

#[tokio::test]
async fn forged_expired_foreign_and_revoked_access_tokens_get_401() {
    let env = Env::new().await;
    let (client, tokens) = env.tokens().await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    let parts: Vec<&str> = access.split('.').collect();
    let mut claims: AccessClaims =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let oauth = env.oauth();

    // Our own key, another audience.
    let mut foreign = claims.clone();
    foreign.aud = "https://other.example/mcp".into();
    env.assert_refused(&oauth.sign_access_token(&foreign).await.unwrap())
        .await;
    // Another issuer.
    let mut foreign = claims.clone();
    foreign.iss = "https://evil.example".into();
    env.assert_refused(&oauth.sign_access_token(&foreign).await.unwrap())
        .await;
    // Tampered: a raised scope under the old signature.
    claims.scope = "read write admin".into();
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap()),
        parts[2]
    );
    env.assert_refused(&tampered).await;
    // alg: none.
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"at+jwt"}"#),
        parts[1]
    );
    env.assert_refused(&none).await;
    // HS256 keyed with our public key (algorithm confusion).
    let jwks: Value = env
        .http
        .get(env.at("/oauth/jwks.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let public = URL_SAFE_NO_PAD
        .decode(jwks["keys"][0]["x"].as_str().unwrap())
        .unwrap();
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"at+jwt"}"#);
    let signing_input = format!("{header}.{}", parts[1]);
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&public).unwrap();
    mac.update(signing_input.as_bytes());
    let hs = format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    );
    env.assert_refused(&hs).await;
    // Garbage that looks like neither kind of token.
    env.assert_refused("not-a-token").await;

    // The genuine token works until its grant is revoked (`nib grant revoke`).
    assert_eq!(env.call(&access, "list_pages", json!({})).await.0, 200);
    let grant = env
        .oauth()
        .grants
        .list(&UserId::parse("default").unwrap())
        .await
        .unwrap()
        .pop()
        .unwrap();
    env.oauth()
        .grants
        .revoke(&grant.grant_id, None, "test")
        .await
        .unwrap();
    env.assert_refused(&access).await;
    let (status, _) = env
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 400);

    // Expiry, on the server's clock.
    let (_, tokens) = env.tokens().await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(env.call(access, "list_pages", json!({})).await.0, 200);
    env.clock.advance(3600);
    env.assert_refused(access).await;
}

#[tokio::test]
async fn the_revocation_endpoint_ends_the_grant() {
    let env = Env::new().await;
    for kind in ["refresh_token", "access_token"] {
        let (client, tokens) = env.tokens().await;
        let access = tokens["access_token"].as_str().unwrap();
        let r = env
            .http
            .post(env.at("/oauth/revoke"))
            .form(&[
                ("token", tokens[kind].as_str().unwrap()),
                ("token_type_hint", kind),
                ("client_id", &client),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        env.assert_refused(access).await;
        let (status, _) = env
            .refresh(&client, tokens["refresh_token"].as_str().unwrap())
            .await;
        assert_eq!(status, 400, "{kind}");
    }
    // Unknown tokens are not errors; another client cannot revoke ours.
    let (client, tokens) = env.tokens().await;
    let other = env.public_client().await;
    for (token, who) in [
        ("nib_rt_unknown", client.as_str()),
        (tokens["refresh_token"].as_str().unwrap(), other.as_str()),
    ] {
        let r = env
            .http
            .post(env.at("/oauth/revoke"))
            .form(&[("token", token), ("client_id", who)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    assert_eq!(
        env.call(
            tokens["access_token"].as_str().unwrap(),
            "list_pages",
            json!({})
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn a_read_grant_is_asked_to_step_up_for_write_tools() {
    let env = Env::new().await;
    let client = env.public_client().await;
    let mut params = env.params(&client);
    set(&mut params, "scope", Some("read"));
    let code = query(&env.authorize(&params).await, "code").unwrap();
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200);
    assert_eq!(tokens["scope"], "read");
    let access = tokens["access_token"].as_str().unwrap();
    let (status, challenge, body) = env
        .call(
            access,
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "x" }),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"edit\""),
        "{challenge}"
    );
    assert_eq!(env.call(access, "list_tasks", json!({})).await.0, 200);
    // Refreshing cannot widen the scope.
    let (status, body) = env
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
                ("client_id", &client),
                ("scope", "read write"),
            ],
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_scope"))
    );
}

/// The consent page's "no deletes" box: a write request approved with it ticked is granted
/// `edit`, whose tokens never list or call the destructive tools. A read request offers no box.
#[tokio::test]
async fn a_grant_without_deletes_never_sees_the_delete_tools() {
    let env = Env::new().await;
    let client = env.public_client().await;
    let mut read = env.params(&client);
    set(&mut read, "scope", Some("read"));
    let (_, _, html) = env.consent(&read).await;
    assert!(
        !html.contains("name=\"no_deletes\""),
        "a read grant deletes nothing anyway"
    );

    let params = env.params(&client);
    let (cookie, csrf, html) = env.consent(&params).await;
    assert!(html.contains("name=\"no_deletes\""), "{html}");
    let r = env
        .submit(
            &params,
            Some(&cookie),
            &[
                ("csrf_token", &csrf),
                ("username", "default"),
                ("password", PASSWORD),
                ("no_deletes", "1"),
                ("decision", "approve"),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let code = query(&location(&r), "code").unwrap();
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["scope"], "read edit");
    let access = tokens["access_token"].as_str().unwrap();
    let r = env
        .http
        .post(env.at("/mcp"))
        .bearer_auth(access)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    let listed: Value = r.json().await.unwrap();
    let names = crate::helpers::tool_names(&listed);
    assert!(
        names.iter().any(|n| n == "create_task") && names.iter().any(|n| n == "restore_page"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("delete_")), "{names:?}");
    let (status, challenge, _) = env
        .call(access, "delete_task", json!({ "task_link_id": "t_x" }))
        .await;
    assert_eq!(status, 403);
    assert!(challenge.contains("scope=\"write\""), "{challenge}");
    let (status, _, body) = env
        .call(
            access,
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "no deletes" }),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_pre_registered_client_connects_without_the_unverified_warning() {
    use nib::auth::oauth::clients::{ClientKind, RegistrationRequest};
    let env = Env::new().await;
    let registered = env
        .oauth()
        .clients
        .register(
            RegistrationRequest {
                redirect_uris: Some(vec![REDIRECT.into()]),
                token_endpoint_auth_method: Some("none".into()),
                client_name: Some("Operator's App".into()),
                ..Default::default()
            },
            ClientKind::Preregistered,
        )
        .await
        .unwrap();
    let client = registered.record.client_id;
    let (_, _, html) = env.consent(&env.params(&client)).await;
    assert!(
        html.contains("Operator&#39;s App") || html.contains("Operator&#x27;s App"),
        "escaped: {html}"
    );
    assert!(!html.contains("has not verified"));
    let code = env.code(&client).await;
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
}

#[tokio::test]
async fn the_consent_page_escapes_what_clients_send() {
    let env = Env::new().await;
    let (_, body) = env
        .register(json!({ "client_name": "<script>alert(1)</script>", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" }))
        .await;
    let mut params = env.params(body["client_id"].as_str().unwrap());
    set(&mut params, "state", Some("\"><script>x</script>"));
    let (_, _, html) = env.consent(&params).await;
    assert!(!html.contains("<script"), "{html}");
    assert!(
        html.contains("&#60;script&#62;alert(1)") || html.contains("&lt;script&gt;alert(1)"),
        "the name is shown, escaped"
    );
}

/// Serves a client ID metadata document at `http://127.0.0.1:PORT/client.json`.
async fn metadata_document_server(name: &str) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/client.json", listener.local_addr().unwrap());
    let doc = json!({
        "client_id": url, "client_name": name, "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none", "grant_types": ["authorization_code", "refresh_token"]
    });
    let router = axum::Router::new().route(
        "/client.json",
        axum::routing::get(move || {
            let doc = doc.clone();
            async move { axum::Json(doc) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    url
}

#[tokio::test]
async fn a_url_client_id_is_resolved_as_a_metadata_document() {
    let env = Env::with(Options {
        import_sample: false,
        dev_http_client_ids: true,
        ..Options::default()
    })
    .await;
    let client = metadata_document_server("Metadata Doc App").await;
    let params = env.params(&client);
    let (_, _, html) = env.consent(&params).await;
    assert!(html.contains("Metadata Doc App"));
    // The name is whatever the document says (anyone can publish "Claude"): the page says so,
    // and shows the one thing that is known, the host that serves the document.
    let host = Url::parse(&client).unwrap();
    let host = format!("{}:{}", host.host_str().unwrap(), host.port().unwrap());
    assert!(html.contains("has not verified"), "{html}");
    assert!(
        html.contains(&format!("<strong>{host}</strong>")),
        "the document's host {host} is shown: {html}"
    );
    let code = query(&env.authorize(&params).await, "code").unwrap();
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(
        env.call(
            tokens["access_token"].as_str().unwrap(),
            "list_pages",
            json!({})
        )
        .await
        .0,
        200
    );
    // A redirect URI the document does not list is refused with a page.
    let mut params = env.params(&client);
    set(&mut params, "redirect_uri", Some("https://evil.example/cb"));
    assert_eq!(env.get_authorize(&params).await.status(), 400);
}

#[tokio::test]
async fn http_metadata_documents_need_the_development_option() {
    let env = Env::new().await;
    let client = metadata_document_server("Local App").await;
    let r = env.get_authorize(&env.params(&client)).await;
    assert_eq!(r.status(), 400);
    assert!(r.headers().get("location").is_none());
    assert!(r.text().await.unwrap().contains("cannot be used"));
}

#[tokio::test]
async fn sign_in_attempts_are_limited_per_user() {
    let env = Env::new().await;
    let client = env.public_client().await;
    let params = env.params(&client);
    let (cookie, csrf, _) = env.consent(&params).await;
    let mut statuses = Vec::new();
    for _ in 0..11 {
        let r = env
            .submit(
                &params,
                Some(&cookie),
                &[
                    ("csrf_token", &csrf),
                    ("username", "default"),
                    ("password", "guess"),
                    ("decision", "approve"),
                ],
            )
            .await;
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses[..10], [401; 10]);
    assert_eq!(statuses[10], 429);
}

/// The store the authorization server runs over in some tests: the local store behind a fence
/// of partitions, as the oauth role's `dynamodb:LeadingKeys` fences it on AWS (the emulator
/// fences nothing), and a way to hold the grant a code exchange creates.
struct TestStore {
    inner: Arc<dyn Store>,
    /// When set, only items in these partitions, and no index, may be reached: anything else
    /// fails as AccessDenied would, and is recorded.
    fence: Mutex<Option<Vec<Partition>>>,
    refused: Mutex<Vec<String>>,
    /// When set, the next transaction that creates a grant reports on the sender and waits for
    /// the receiver.
    hold_grant: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

impl TestStore {
    fn over(app: &mut Services, clock: &Arc<TestClock>) -> Arc<TestStore> {
        let store = Arc::new(TestStore {
            inner: app.store.clone(),
            fence: Mutex::new(None),
            refused: Mutex::new(Vec::new()),
            hold_grant: Mutex::new(None),
        });
        app.store = store.clone();
        // As on AWS: the limits' counters are items in the same store.
        app.limiter = Arc::new(StoreRateLimiter::new(store.clone(), clock.clone()));
        store
    }

    fn fence(&self, partitions: &[Partition]) {
        *self.fence.lock().unwrap() = Some(partitions.to_vec());
    }

    fn refused(&self) -> Vec<String> {
        self.refused.lock().unwrap().clone()
    }

    /// Holds the next grant creation: returns when it arrived, and the release.
    fn hold_next_grant(&self) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (arrived_tx, arrived_rx) = oneshot::channel();
        let (release_tx, release_rx) = oneshot::channel();
        *self.hold_grant.lock().unwrap() = Some((arrived_tx, release_rx));
        (arrived_rx, release_tx)
    }

    fn check(&self, what: &str, pk: &str, index: Index) -> Result<(), StoreError> {
        let fence = self.fence.lock().unwrap();
        let Some(partitions) = fence.as_ref() else {
            return Ok(());
        };
        if index == Index::Table && partitions.iter().any(|p| p.contains(pk)) {
            return Ok(());
        }
        let entry = format!("{what} {pk} ({index:?})");
        self.refused.lock().unwrap().push(entry.clone());
        Err(StoreError::Unavailable(
            format!("AccessDenied: {entry} is not in dynamodb:LeadingKeys").into(),
        ))
    }
}

#[async_trait::async_trait]
impl Store for TestStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.check("GetItem", pk, Index::Table)?;
        self.inner.get(pk, sk).await
    }

    async fn batch_get(&self, keys: &[(String, String)]) -> Result<Vec<Option<Item>>, StoreError> {
        for (pk, _) in keys {
            self.check("BatchGetItem", pk, Index::Table)?;
        }
        self.inner.batch_get(keys).await
    }

    async fn query(&self, query: &Query) -> Result<QueryPage, StoreError> {
        self.check("Query", &query.partition, query.index)?;
        self.inner.query(query).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        for w in &writes {
            self.check("TransactWriteItems", w.key().0, Index::Table)?;
        }
        let creates_grant = writes.iter().any(|w| {
            matches!(w, Write::Put { item, cond: Cond::NotExists } if item.pk.starts_with("GRANT#"))
        });
        let hold = if creates_grant {
            self.hold_grant.lock().unwrap().take()
        } else {
            None
        };
        if let Some((arrived, release)) = hold {
            let _ = arrived.send(());
            let _ = release.await;
        }
        self.inner.transact(writes).await
    }

    async fn increment(
        &self,
        pk: &str,
        sk: &str,
        by: u64,
        expires_at: i64,
    ) -> Result<u64, StoreError> {
        self.check("UpdateItem", pk, Index::Table)?;
        self.inner.increment(pk, sk, by, expires_at).await
    }
}

/// What the oauth role allowed before the fix: no `RL#` counters at all.
const OLD_OAUTH_ROLE: [Partition; 6] = [
    Partition::Prefix("CLIENT#"),
    Partition::Prefix("CODE#"),
    Partition::Prefix("RT#"),
    Partition::Prefix("GRANT#"),
    Partition::Prefix("USER#"),
    Partition::Exact("SECRET#oauth"),
];

fn retry_after(r: &reqwest::Response) -> u64 {
    r.headers()
        .get("retry-after")
        .expect("a Retry-After header")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// On AWS the limiter's counters are items the oauth role must be allowed to write; when it
/// cannot (as with the old role, which had no `RL#`), sign-in and registration are refused with
/// 503 and `Retry-After`: the right password does not get through an unguarded page.
#[tokio::test]
async fn sign_in_and_registration_fail_closed_when_the_limiter_is_refused() {
    let mut store = None;
    let env = Env::over(
        Options {
            import_sample: false,
            ..Options::default()
        },
        |app, clock| store = Some(TestStore::over(app, clock)),
    )
    .await;
    let store = store.unwrap();
    let client = env.public_client().await;
    let params = env.params(&client);
    store.fence(&OLD_OAUTH_ROLE);

    let (cookie, csrf, _) = env.consent(&params).await;
    let r = env
        .sign_in(&params, &cookie, &csrf, "default", PASSWORD)
        .await;
    assert_eq!(r.status(), 503);
    assert!(retry_after(&r) >= 1);
    assert!(r.headers().get("location").is_none(), "no code");
    let html = r.text().await.unwrap();
    assert!(html.contains("unavailable right now"), "{html}");

    let r = env
        .http
        .post(env.at("/oauth/register"))
        .json(&json!({ "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert!(retry_after(&r) >= 1);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "temporarily_unavailable", "{body}");
    assert!(
        store.refused().iter().all(|r| r.contains(" RL#")),
        "{:?}",
        store.refused()
    );
    assert!(!store.refused().is_empty());
}

/// The whole authorization server over a store fenced to `OAUTH_PARTITIONS`, the list the
/// oauth role is checked against (`functions::iam_policy`): registration, a metadata document
/// client, sign-in, codes, refresh, revocation, a replay and a request error, and not one access
/// outside the list. Together with that check, the deployed role allows all the code does.
#[tokio::test]
async fn the_authorization_server_reaches_only_the_oauth_partitions() {
    let mut store = None;
    let env = Env::over(
        Options {
            import_sample: false,
            dev_http_client_ids: true,
            ..Options::default()
        },
        |app, clock| store = Some(TestStore::over(app, clock)),
    )
    .await;
    let store = store.unwrap();
    store.fence(nib::functions::OAUTH_PARTITIONS);

    let client = env.public_client().await;
    let code = env.code(&client).await;
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(env.exchange(&client, &code).await.0, 400, "a replay");
    let code = env.code(&client).await;
    let (status, tokens) = env.exchange(&client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let (status, refreshed) = env
        .refresh(&client, tokens["refresh_token"].as_str().unwrap())
        .await;
    assert_eq!(status, 200, "{refreshed}");
    let r = env
        .http
        .post(env.at("/oauth/revoke"))
        .form(&[
            ("token", refreshed["refresh_token"].as_str().unwrap()),
            ("client_id", &client),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // A request error for the client the user approved, in a browser where that user is
    // signed in (a session created, read and then ended): back to its redirect URI.
    let session = env.page_session("default", PASSWORD).await;
    let mut params = env.params(&client);
    set(&mut params, "scope", Some("openid"));
    assert_eq!(
        env.get_authorize_with(&params, &session).await.status(),
        303
    );
    // The page's sign-out form (its token as the page makes it).
    let id = session.strip_prefix("nib_session=").unwrap();
    let token = nib::auth::web_sessions::WebSessions::csrf_token(id, "sign-out");
    let r = env
        .http
        .post(env.at("/oauth/signout"))
        .header("cookie", &session)
        .form(&[("csrf_token", token.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        env.get_authorize_with(&params, &session).await.status(),
        400
    );
    // A metadata document client: fetched (and counted per address), signed in, exchanged.
    let doc = metadata_document_server("Fenced Doc App").await;
    let code = query(&env.authorize(&env.params(&doc)).await, "code").unwrap();
    assert_eq!(env.exchange(&doc, &code).await.0, 200);
    // A wrong password: limits counted, password checked.
    let params = env.params(&client);
    let (cookie, csrf, _) = env.consent(&params).await;
    let r = env
        .sign_in(&params, &cookie, &csrf, "default", "wrong")
        .await;
    assert_eq!(r.status(), 401);
    assert_eq!(store.refused(), Vec::<String>::new());
}

/// Every sign-in attempt costs an argon2id check, whatever the user name: attempts from one
/// address are limited across names (20 a minute), not only per name (the per-name limit alone
/// let one client try a new name, and cost one check, every time).
#[tokio::test]
async fn sign_in_attempts_are_limited_per_client_address() {
    let env = Env::new().await;
    let client = env.public_client().await;
    let params = env.params(&client);
    let (cookie, csrf, _) = env.consent(&params).await;
    for n in 0..20 {
        let r = env
            .sign_in(&params, &cookie, &csrf, &format!("nobody{n}"), "guess")
            .await;
        assert_eq!(r.status(), 401, "attempt {n}");
    }
    let r = env
        .sign_in(&params, &cookie, &csrf, "default", PASSWORD)
        .await;
    assert_eq!(r.status(), 429);
    assert!((1..=60).contains(&retry_after(&r)));
    assert!(r.headers().get("location").is_none());
    // The window ends: the right password works again.
    env.clock.advance(60);
    let r = env
        .sign_in(&params, &cookie, &csrf, "default", PASSWORD)
        .await;
    assert_eq!(r.status(), 303);
}

/// Serves a client ID metadata document for any path, `http://127.0.0.1:PORT/{name}`, each
/// naming its own URL; returns the base URL.
async fn metadata_documents_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let at = base.clone();
    let router = axum::Router::new().route(
        "/{name}",
        axum::routing::get(
            move |axum::extract::Path(name): axum::extract::Path<String>| {
                let url = format!("{at}/{name}");
                async move {
                    axum::Json(json!({
                        "client_id": url, "client_name": name, "redirect_uris": [REDIRECT],
                        "token_endpoint_auth_method": "none"
                    }))
                }
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    base
}

/// Each new URL client_id costs an outbound fetch (up to 5 s): one address gets 10 a minute,
/// at the authorization and the token endpoint alike; a cached document costs nothing.
#[tokio::test]
async fn metadata_document_fetches_are_limited_per_client_address() {
    let env = Env::with(Options {
        import_sample: false,
        dev_http_client_ids: true,
        ..Options::default()
    })
    .await;
    let base = metadata_documents_server().await;
    for n in 0..10 {
        let r = env
            .get_authorize(&env.params(&format!("{base}/app{n}.json")))
            .await;
        assert_eq!(r.status(), 200, "document {n}");
    }
    let r = env
        .get_authorize(&env.params(&format!("{base}/app10.json")))
        .await;
    assert_eq!(r.status(), 429);
    assert!(retry_after(&r) >= 1);
    assert!(r.headers().get("location").is_none());
    let r = env
        .http
        .post(env.at("/oauth/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", "nib_rt_x"),
            ("client_id", &format!("{base}/app11.json")),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(retry_after(&r) >= 1);
    // Cached: no fetch, no count.
    let r = env
        .get_authorize(&env.params(&format!("{base}/app3.json")))
        .await;
    assert_eq!(r.status(), 200);
}

/// Password checks in flight are capped per process: with every slot taken, a sign-in is
/// answered 503 with `Retry-After` at once (not queued behind them); once a slot is free, the
/// same form signs in.
#[tokio::test]
async fn sign_ins_over_the_concurrency_cap_are_refused_at_once() {
    let gates = Gates::new(1, 8);
    let env = Env::over(
        Options {
            import_sample: false,
            ..Options::default()
        },
        |app, _| app.oauth_gates = gates.clone(),
    )
    .await;
    let client = env.public_client().await;
    let params = env.params(&client);
    let (cookie, csrf, _) = env.consent(&params).await;
    let busy = gates.sign_in.clone().try_acquire_owned().unwrap();
    let r = env
        .sign_in(&params, &cookie, &csrf, "default", PASSWORD)
        .await;
    assert_eq!(r.status(), 503);
    assert!(retry_after(&r) >= 1);
    assert!(r.headers().get("location").is_none());
    drop(busy);
    let r = env
        .sign_in(&params, &cookie, &csrf, "default", PASSWORD)
        .await;
    assert_eq!(r.status(), 303);
}

/// Metadata document fetches in flight are capped per process: while one fetch hangs (a slow
/// or malicious document server) and holds the only slot, another new URL client_id is
/// answered 503 with `Retry-After` at the authorization and token endpoints, without a fetch.
#[tokio::test]
async fn metadata_fetches_over_the_concurrency_cap_are_refused_at_once() {
    let env = Env::over(
        Options {
            import_sample: false,
            dev_http_client_ids: true,
            ..Options::default()
        },
        |app, _| app.oauth_gates = Gates::new(4, 1),
    )
    .await;
    // A document server that holds its first request until released.
    let (arrived_tx, arrived_rx) = oneshot::channel::<()>();
    let arrived = Arc::new(Mutex::new(Some(arrived_tx)));
    let release = Arc::new(tokio::sync::Notify::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slow = format!("http://{}/slow.json", listener.local_addr().unwrap());
    let doc = json!({ "client_id": slow, "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none" });
    let (a, rel) = (arrived.clone(), release.clone());
    let router = axum::Router::new().route(
        "/slow.json",
        axum::routing::get(move || {
            let (a, rel, doc) = (a.clone(), rel.clone(), doc.clone());
            async move {
                if let Some(tx) = a.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                rel.notified().await;
                axum::Json(doc)
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let hanging = {
        let (http, url) = (env.http.clone(), env.at("/oauth/authorize"));
        let params = env.params(&slow);
        tokio::spawn(async move { http.get(url).query(&params).send().await.unwrap().status() })
    };
    arrived_rx.await.unwrap();

    let other = metadata_document_server("Other App").await;
    let r = env.get_authorize(&env.params(&other)).await;
    assert_eq!(r.status(), 503);
    assert!(retry_after(&r) >= 1);
    assert!(r.text().await.unwrap().contains("being fetched"));
    let (status, body) = env
        .token(
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", "nib_rt_x"),
                ("client_id", &other),
            ],
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("temporarily_unavailable"))
    );

    release.notify_one();
    hanging.await.unwrap();
    // The slot is free again.
    assert_eq!(env.get_authorize(&env.params(&other)).await.status(), 200);
}

/// A replayed code must revoke what its first exchange issues, even when the replay comes
/// while that exchange is between burning the code and creating the grant: the revocation
/// then writes the grant itself, revoked, and the first exchange fails instead of handing out
/// tokens nobody can revoke through the replay.
#[tokio::test]
async fn a_replay_racing_the_first_exchange_still_revokes_it() {
    let mut store = None;
    let env = Env::over(
        Options {
            import_sample: false,
            ..Options::default()
        },
        |app, clock| store = Some(TestStore::over(app, clock)),
    )
    .await;
    let store = store.unwrap();
    let client = env.public_client().await;
    let code = env.code(&client).await;
    let (arrived, release) = store.hold_next_grant();
    let first = {
        let env_http = env.http.clone();
        let url = env.at("/oauth/token");
        let form: Vec<(String, String)> = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
            ("client_id", client.as_str()),
            ("resource", env.app.url.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        tokio::spawn(async move {
            let r = env_http.post(url).form(&form).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap_or(Value::Null))
        })
    };
    arrived.await.unwrap();
    // The code is burnt, the grant not written yet: the replay.
    let (status, body) = env.exchange(&client, &code).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    release.send(()).unwrap();
    let (status, body) = first.await.unwrap();
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_grant")),
        "the first exchange issues nothing: {body}"
    );
    let grants = env
        .oauth()
        .grants
        .list(&UserId::parse("default").unwrap())
        .await
        .unwrap();
    assert_eq!(grants.len(), 1);
    assert!(grants[0].revoked_at.is_some(), "{grants:?}");
    assert_eq!(
        grants[0].revoked_reason.as_deref(),
        Some("authorization code replayed")
    );
}

/// The CLI: `nib user create/passwd`, `nib client add/list`, `nib grant list/revoke`.
#[tokio::test]
async fn the_cli_manages_users_clients_and_grants() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let data = tempfile::tempdir().unwrap();
    let nib = |args: &[&str], stdin: Option<&str>| {
        let mut child = Command::new(nib_exe())
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, _, err) = nib(
        &["user", "create", "alice", "--password-stdin"],
        Some("short\n"),
    );
    assert!(!ok && err.contains("at least 8"), "{err}");
    let (ok, _, err) = nib(
        &["user", "create", "alice", "--password-stdin"],
        Some("alice's long password\n"),
    );
    assert!(ok, "{err}");
    let (ok, _, err) = nib(
        &["user", "create", "alice", "--password-stdin"],
        Some("another password\n"),
    );
    assert!(!ok && err.contains("already has a password"), "{err}");
    let (ok, _, err) = nib(
        &["user", "passwd", "alice", "--password-stdin"],
        Some("another password\n"),
    );
    assert!(ok, "{err}");
    let (ok, out, err) = nib(
        &[
            "client",
            "add",
            "--name",
            "Conformance",
            "--redirect-uri",
            "http://127.0.0.1:3000/callback",
        ],
        None,
    );
    assert!(ok, "{err}");
    let client_id = out.trim().to_owned();
    assert!(client_id.starts_with("nib_client_"));
    let (ok, out, _) = nib(&["client", "list"], None);
    assert!(ok && out.contains(&client_id) && out.contains("pre-registered"));
    let (ok, out, _) = nib(&["grant", "list", "--user", "alice"], None);
    assert!(ok && out.lines().count() == 1, "{out}");
    let (ok, _, err) = nib(&["grant", "revoke", "gr_nope", "--user", "alice"], None);
    assert!(!ok && err.contains("no grant"), "{err}");

    // The password works on a server over the same data.
    let app = Services::open_local(data.path(), LocalOptions::default()).unwrap();
    let users = app.users();
    assert_eq!(
        users.check("alice", "another password").await.unwrap(),
        Some(UserId::parse("alice").unwrap())
    );
    assert_eq!(
        users.check("alice", "alice's long password").await.unwrap(),
        None
    );
}
