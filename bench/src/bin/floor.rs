//! `nib-floor --bind ADDR --captures FILE`: the load benchmark's floor server.
//!
//! It answers `POST /mcp` with the exact bytes (status, content type, body) that `nib serve`
//! answered to the same request body, captured beforehand, and does nothing else: no checks, no
//! authentication, no protocol, no store. It runs on the same stack as nib (tokio's multi-thread
//! runtime, axum, hyper), so the gap between the two is what nib's own work costs.
//!
//! The captures file is JSON: `[{"request": "...", "status": 200, "content_type": "...",
//! "response": "..."}]`, request and response bodies as strings.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

struct Capture {
    status: StatusCode,
    content_type: String,
    body: Bytes,
}

type Captures = Arc<HashMap<Bytes, Capture>>;

async fn answer(State(captures): State<Captures>, body: Bytes) -> Response {
    match captures.get(&body) {
        Some(c) => (
            c.status,
            [(header::CONTENT_TYPE, c.content_type.clone())],
            c.body.clone(),
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no capture for this request").into_response(),
    }
}

fn load(path: &str) -> anyhow::Result<Captures> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    let list: Vec<Value> = serde_json::from_str(&text).context("captures are not JSON")?;
    let mut map = HashMap::new();
    for entry in list {
        let field = |name: &str| {
            entry[name]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("a capture has no string '{name}'"))
        };
        let status = entry["status"]
            .as_u64()
            .context("a capture has no status")?;
        map.insert(
            Bytes::from(field("request")?),
            Capture {
                status: StatusCode::from_u16(u16::try_from(status)?)?,
                content_type: field("content_type")?,
                body: Bytes::from(field("response")?),
            },
        );
    }
    Ok(Arc::new(map))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut bind: SocketAddr = "127.0.0.1:0".parse()?;
    let mut captures = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bind" => bind = args.next().context("--bind ADDR")?.parse()?,
            "--captures" => captures = Some(args.next().context("--captures FILE")?),
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    let captures = load(&captures.context("usage: nib-floor --bind ADDR --captures FILE")?)?;
    let router = axum::Router::new()
        .route("/mcp", axum::routing::post(answer))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .with_state(captures);
    let listener = tokio::net::TcpListener::bind(bind).await?;
    println!("floor: serving http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, router).await?;
    Ok(())
}
