//! Per-credential rate limits on /mcp over real HTTP: exact under concurrency (both limiter
//! implementations), the 429 shape, per-token isolation, write limits, and window resets. The
//! clock is pinned so that no window boundary falls inside a test.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use nib::adapters::rate_limit::{InMemoryRateLimiter, StoreRateLimiter};
use nib::auth::Scope;
use nib::http::{RATE_LIMITED_CODE, RateLimits};
use nib::ports::{Clock, RateLimiter};
use nib::services::{LocalOptions, Services};
use serde_json::{Value, json};

use crate::helpers::{LATEST_LEGACY, Options, TestApp};

/// A clock pinned to the start of a minute (and of an hour), moved only by the test.
struct PinnedClock(AtomicI64);

impl PinnedClock {
    fn new() -> Arc<PinnedClock> {
        Arc::new(PinnedClock(AtomicI64::new(1_800_000_000 / 3600 * 3600)))
    }

    fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for PinnedClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
    }
}

#[derive(Clone, Copy)]
enum Limiter {
    Memory,
    Store,
}

struct Env {
    app: TestApp,
    clock: Arc<PinnedClock>,
    _data: tempfile::TempDir,
}

async fn spawn(limits: RateLimits, limiter: Limiter) -> Env {
    spawn_with(limits, |app, clock| match limiter {
        Limiter::Memory => Arc::new(InMemoryRateLimiter::new(clock)) as Arc<dyn RateLimiter>,
        Limiter::Store => Arc::new(StoreRateLimiter::new(app.store.clone(), clock)),
    })
    .await
}

/// A server whose limiter `limiter` makes, over the pinned clock.
async fn spawn_with(
    limits: RateLimits,
    limiter: impl FnOnce(&Services, Arc<dyn Clock>) -> Arc<dyn RateLimiter>,
) -> Env {
    let data = tempfile::tempdir().unwrap();
    let mut app = Services::open_local(data.path(), LocalOptions::default()).unwrap();
    let clock = PinnedClock::new();
    app.limiter = limiter(&app, clock.clone());
    let app = TestApp::spawn_over(
        app,
        Options {
            import_sample: false,
            rate_limits: limits,
            ..Options::default()
        },
    )
    .await;
    Env {
        app,
        clock,
        _data: data,
    }
}

async fn call(env: &Env, token: &str, tool: &str, args: Value) -> reqwest::Response {
    env.app
        .post_anon()
        .bearer_auth(token)
        .header("mcp-protocol-version", LATEST_LEGACY)
        .json(&json!({ "jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": { "name": tool, "arguments": args } }))
        .send()
        .await
        .unwrap()
}

fn per_minute(n: u64) -> RateLimits {
    RateLimits {
        per_minute: n,
        ..RateLimits::OFF
    }
}

/// 200 concurrent tool calls on a limit of 60: exactly 60 succeed and 140 get 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_the_limit_passes_under_concurrency() {
    for limiter in [Limiter::Memory, Limiter::Store] {
        let env = spawn(per_minute(60), limiter).await;
        let calls =
            (0..200).map(|_| call(&env, &env.app.token, "list_pages", json!({ "limit": 1 })));
        let statuses: Vec<u16> = futures::future::join_all(calls)
            .await
            .iter()
            .map(|r| r.status().as_u16())
            .collect();
        let ok = statuses.iter().filter(|s| **s == 200).count();
        let limited = statuses.iter().filter(|s| **s == 429).count();
        assert_eq!((ok, limited), (60, 140), "{statuses:?}");
    }
}

#[tokio::test]
async fn over_the_limit_is_429_with_retry_after_and_a_json_rpc_error() {
    let env = spawn(
        RateLimits {
            per_minute: 3,
            per_hour: 5,
            ..RateLimits::OFF
        },
        Limiter::Memory,
    )
    .await;
    env.clock.advance(20);
    for _ in 0..3 {
        assert_eq!(
            call(&env, &env.app.token, "list_tasks", json!({}))
                .await
                .status(),
            200
        );
    }
    let r = call(&env, &env.app.token, "list_tasks", json!({})).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "40");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["jsonrpc"], "2.0");
    assert_eq!(body["id"], 9);
    assert_eq!(body["error"]["code"], RATE_LIMITED_CODE);
    assert_eq!(body["error"]["data"]["retryAfterSeconds"], 40);
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("retry after 40 s") && message.contains("per minute"),
        "{message}"
    );

    // Another token has its own counters.
    let other = env.app.token_for("default", Scope::Read).await;
    assert_eq!(
        call(&env, &other, "list_tasks", json!({})).await.status(),
        200
    );

    // The next minute opens again, until the hour's limit.
    env.clock.advance(40);
    for _ in 0..2 {
        assert_eq!(
            call(&env, &env.app.token, "list_tasks", json!({}))
                .await
                .status(),
            200
        );
    }
    let r = call(&env, &env.app.token, "list_tasks", json!({})).await;
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], (3600 - 60).to_string());
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("per hour")
    );
}

#[tokio::test]
async fn writes_can_be_limited_apart_from_reads() {
    let env = spawn(
        RateLimits {
            per_minute: 100,
            writes_per_minute: 2,
            ..RateLimits::OFF
        },
        Limiter::Memory,
    )
    .await;
    for i in 0..2 {
        let r = call(
            &env,
            &env.app.token,
            "create_task",
            json!({ "target_date": "2026-06-20", "text": format!("task {i}") }),
        )
        .await;
        assert_eq!(r.status(), 200);
    }
    let r = call(
        &env,
        &env.app.token,
        "create_task",
        json!({ "target_date": "2026-06-20", "text": "one too many" }),
    )
    .await;
    assert_eq!(r.status(), 429);
    // Reads go on.
    assert_eq!(
        call(&env, &env.app.token, "list_tasks", json!({}))
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn no_limits_by_default_in_the_library_and_unauthenticated_requests_are_not_counted() {
    let env = spawn(per_minute(1), Limiter::Memory).await;
    // A request without a token is refused by authentication, not counted.
    for _ in 0..3 {
        let r = env
            .app
            .post_anon()
            .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
    }
    assert_eq!(
        call(&env, &env.app.token, "list_tasks", json!({}))
            .await
            .status(),
        200
    );
    assert_eq!(
        call(&env, &env.app.token, "list_tasks", json!({}))
            .await
            .status(),
        429
    );
    assert_eq!(RateLimits::DEFAULT.all().len(), 2);
    assert!(RateLimits::OFF.all().is_empty());
}

/// A 2025-03-26 batch of `n` tools/call messages of `tool`.
async fn batch(
    env: &Env,
    tool: &str,
    n: usize,
    args: impl Fn(usize) -> Value,
) -> reqwest::Response {
    let messages: Vec<Value> = (0..n)
        .map(|i| json!({ "jsonrpc": "2.0", "id": i, "method": "tools/call", "params": { "name": tool, "arguments": args(i) } }))
        .collect();
    env.app
        .post_anon()
        .bearer_auth(&env.app.token)
        .header("mcp-protocol-version", "2025-03-26")
        .json(&messages)
        .send()
        .await
        .unwrap()
}

/// Every message of a batch counts against the limits, reads and writes apart: a batch is no
/// way around them (it used to count once per HTTP request).
#[tokio::test]
async fn a_batch_counts_every_message_against_the_limits() {
    for limiter in [Limiter::Memory, Limiter::Store] {
        let env = spawn(
            RateLimits {
                per_minute: 6,
                writes_per_minute: 2,
                ..RateLimits::OFF
            },
            limiter,
        )
        .await;
        let r = batch(&env, "list_pages", 4, |_| json!({ "limit": 1 })).await;
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.json::<Value>().await.unwrap().as_array().unwrap().len(),
            4
        );
        // Four more reads would make eight of six: refused whole.
        let r = batch(&env, "list_pages", 4, |_| json!({ "limit": 1 })).await;
        assert_eq!(r.status(), 429);
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            RATE_LIMITED_CODE
        );

        // Writes: three create_task calls in one batch are over a write limit of two.
        let env = spawn(
            RateLimits {
                per_minute: 100,
                writes_per_minute: 2,
                ..RateLimits::OFF
            },
            limiter,
        )
        .await;
        let r = batch(
            &env,
            "create_task",
            3,
            |i| json!({ "target_date": "2026-06-20", "text": format!("batched {i}") }),
        )
        .await;
        assert_eq!(r.status(), 429);
        // Reads in a batch go on (they are not writes).
        let r = batch(&env, "list_tasks", 5, |_| json!({})).await;
        assert_eq!(r.status(), 200);
    }
}

/// A batch over the cap is one JSON-RPC error and nothing of it runs.
#[tokio::test]
async fn a_batch_over_the_cap_is_one_error_and_runs_nothing() {
    let env = spawn(RateLimits::OFF, Limiter::Memory).await;
    let n = nib::http::MAX_BATCH_MESSAGES + 1;
    let r = batch(
        &env,
        "create_task",
        n,
        |i| json!({ "target_date": "2026-06-20", "text": format!("capped {i}") }),
    )
    .await;
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("at most {}", nib::http::MAX_BATCH_MESSAGES)),
        "{body}"
    );
    let tasks = env.app.call("list_tasks", json!({ "status": "all" })).await;
    assert_eq!(
        tasks["tasks"],
        json!([]),
        "nothing of the batch ran: {tasks}"
    );
    // Exactly the cap is accepted.
    let r = batch(&env, "list_tasks", n - 1, |_| json!({})).await;
    assert_eq!(r.status(), 200);
}

async fn prompt(env: &Env, name: &str) -> reqwest::Response {
    env.app
        .post_anon()
        .bearer_auth(&env.app.token)
        .header("mcp-protocol-version", LATEST_LEGACY)
        .json(&json!({ "jsonrpc": "2.0", "id": 5, "method": "prompts/get", "params": { "name": name } }))
        .send()
        .await
        .unwrap()
}

/// A `prompts/get` counts the most dispatches its prompt makes (weekly_review: one
/// `list_pages`, two `list_tasks` per status, ten page reads), not one request's worth: a
/// prompt used to cost one unit for up to fifteen tool calls (on AWS, Lambda invocations).
#[tokio::test]
async fn a_prompt_counts_what_it_dispatches() {
    let weekly = nib::mcp::prompt_max_dispatches("weekly_review").unwrap();
    assert_eq!(weekly, 15);
    for limiter in [Limiter::Memory, Limiter::Store] {
        let env = spawn(per_minute(weekly + 1), limiter).await;
        let r = prompt(&env, "weekly_review").await;
        assert_eq!(r.status(), 200);
        assert!(r.json::<Value>().await.unwrap()["result"]["messages"].is_array());
        assert_eq!(
            call(&env, &env.app.token, "list_tasks", json!({}))
                .await
                .status(),
            200,
            "the one unit left"
        );
        assert_eq!(
            call(&env, &env.app.token, "list_tasks", json!({}))
                .await
                .status(),
            429
        );
        // A prompt that does not fit what is left of the window is refused whole.
        let env = spawn(per_minute(weekly - 1), limiter).await;
        let r = prompt(&env, "weekly_review").await;
        assert_eq!(r.status(), 429);
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            RATE_LIMITED_CODE
        );
    }
}

/// A limiter that panics at its next hit once armed: the stand-in for a bug that panics in a
/// request handler, which nothing in nib is known to do (so a fake is the only way to get one).
struct PanicsWhenArmed {
    inner: InMemoryRateLimiter,
    armed: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl RateLimiter for PanicsWhenArmed {
    async fn hit_many(
        &self,
        key: &str,
        windows: &[nib::ports::Window],
        n: u64,
    ) -> Result<nib::ports::RateDecision, nib::ports::RateLimitError> {
        if self.armed.swap(false, Ordering::SeqCst) {
            panic!("a request handler panicked (on purpose, in a test)");
        }
        self.inner.hit_many(key, windows, n).await
    }
}

/// A panic in one request's handler is that request's JSON 500 with a correlation id (the
/// error writer's body, the id also in `x-correlation-id`), and the same server answers the
/// next request. It used to drop the connection without an answer (and, in a release build
/// with `panic = "abort"`, take `nib serve` down).
#[tokio::test]
async fn a_panicking_handler_answers_500_and_the_server_goes_on() {
    let mut limiter = None;
    let env = spawn_with(per_minute(100), |_, clock| {
        let l = Arc::new(PanicsWhenArmed {
            inner: InMemoryRateLimiter::new(clock),
            armed: std::sync::atomic::AtomicBool::new(false),
        });
        limiter = Some(l.clone());
        l
    })
    .await;
    let limiter = limiter.unwrap();
    assert_eq!(
        call(&env, &env.app.token, "list_tasks", json!({}))
            .await
            .status(),
        200
    );
    limiter.armed.store(true, Ordering::SeqCst);
    let r = call(&env, &env.app.token, "list_tasks", json!({})).await;
    assert_eq!(r.status(), 500);
    let cid = r.headers()["x-correlation-id"].to_str().unwrap().to_owned();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body,
        json!({ "error": "internal_error", "message": "internal error", "correlationId": cid })
    );
    for _ in 0..2 {
        assert_eq!(
            call(&env, &env.app.token, "list_tasks", json!({}))
                .await
                .status(),
            200,
            "the same server answers"
        );
    }
}
