//! Tool dispatch in process: a JSON-RPC `tools/call get_page` request through the whole axum
//! router (host and auth checks, rmcp, the tool catalog, the notebook over the embedded store,
//! and the serialized reply), with `tower::ServiceExt::oneshot` and no socket. `tools/list`
//! beside it shows what the HTTP and protocol layers cost without a store.

mod common;

use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt;
use nib::auth::Scope;
use nib::http::HttpConfig;
use tower::ServiceExt;

fn dispatch(c: &mut Criterion) {
    let rt = common::runtime();
    let app = common::notebook(&rt, 1_000);
    let user = common::user();
    let token = rt
        .block_on(app.tokens.create(&user, Scope::Read, Some("bench".into())))
        .expect("token")
        .token;
    let pages = rt
        .block_on(app.notebook().list_pages(&user, None, None, 500))
        .expect("pages");
    let page_id = pages[pages.len() / 2].page_id.to_string();
    let router = app.router(HttpConfig::local("http://127.0.0.1:8787".into()));

    let body = |method: &str, params: serde_json::Value| {
        serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params })
            .to_string()
    };
    let cases = [
        (
            "get_page",
            body(
                "tools/call",
                serde_json::json!({ "name": "get_page", "arguments": { "page_id": page_id } }),
            ),
        ),
        ("tools_list", body("tools/list", serde_json::json!({}))),
    ];
    let mut group = c.benchmark_group("dispatch");
    for (name, payload) in &cases {
        let request = || {
            Request::post("/mcp")
                .header("host", "127.0.0.1:8787")
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .header("authorization", format!("Bearer {token}"))
                .body(Body::from(payload.clone()))
                .expect("request")
        };
        let call = || async {
            let response = router.clone().oneshot(request()).await.expect("infallible");
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            (status, bytes)
        };
        let (status, bytes) = rt.block_on(call());
        assert_eq!(status, 200, "{name}: {}", String::from_utf8_lossy(&bytes));
        assert!(
            bytes.windows(9).any(|w| w == b"\"result\":"),
            "{name}: {}",
            String::from_utf8_lossy(&bytes)
        );
        group.bench_function(*name, |b| b.iter(|| rt.block_on(call())));
    }
    group.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
