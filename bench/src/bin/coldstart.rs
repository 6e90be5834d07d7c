//! `nib-coldstart`: time from process start to the first answered request, median of N runs.
//!
//! Two modes:
//!
//! - `lambda --name NAME --bin PATH [--event FILE] [--runs N]`: a Lambda function binary under a
//!   minimal local Lambda Runtime API (the two calls a function makes: `GET
//!   /2018-06-01/runtime/invocation/next`, answered with the event, and `POST
//!   .../invocation/{id}/response` or `.../error`). The clock runs from just before the process is
//!   spawned until its answer to the first invocation arrives.
//! - `http --name NAME --bin PATH --body FILE [--runs N] -- ARGS...`: a server started with ARGS
//!   (`{port}` in them is replaced by a free port), polled with the POST body until it answers
//!   200; the clock runs from spawn to that answer. `nib serve` uses this until the Lambda
//!   functions exist.
//!
//! Peak RSS is the process's `VmHWM` just after its first answer. The result is one JSON object on
//! stdout, with the last run's answer (a Lambda function's body) for callers that check it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, oneshot};

/// A first answer: when it came, how (`response`, `error`, `init_error`) and its body.
type Answer = (Instant, &'static str, Bytes);

/// The first answer of the current run, and who waits for it.
#[derive(Default)]
struct Runtime {
    event: Bytes,
    /// Set per run: the request id handed out, and where to report the answer.
    waiting: Mutex<Option<oneshot::Sender<Answer>>>,
    /// Hands out one invocation per run; later `next` calls wait forever (until killed).
    served: Mutex<bool>,
    forever: Notify,
    counter: Mutex<u64>,
}

async fn next(State(rt): State<Arc<Runtime>>) -> Response {
    let first = {
        let mut served = rt.served.lock().unwrap();
        !std::mem::replace(&mut *served, true)
    };
    if !first {
        // A function asks for its second invocation after answering the first: keep it waiting.
        rt.forever.notified().await;
        return StatusCode::GONE.into_response();
    }
    let id = {
        let mut c = rt.counter.lock().unwrap();
        *c += 1;
        format!("bench-{c}")
    };
    let deadline = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
        + 30_000;
    let mut headers = HeaderMap::new();
    let mut set = |k: &'static str, v: String| {
        if let Ok(v) = v.parse() {
            headers.insert(k, v);
        }
    };
    set("lambda-runtime-aws-request-id", id);
    set("lambda-runtime-deadline-ms", deadline.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:000000000000:function:bench".into(),
    );
    set(
        "lambda-runtime-trace-id",
        "Root=1-00000000-000000000000000000000000".into(),
    );
    set("content-type", "application/json".into());
    (headers, rt.event.clone()).into_response()
}

async fn answered(rt: &Runtime, how: &'static str, body: Bytes) -> Response {
    if let Some(tx) = rt.waiting.lock().unwrap().take() {
        let _ = tx.send((Instant::now(), how, body));
    }
    (StatusCode::ACCEPTED, "{\"status\":\"OK\"}").into_response()
}

async fn response(
    State(rt): State<Arc<Runtime>>,
    Path(_id): Path<String>,
    body: Bytes,
) -> Response {
    answered(&rt, "response", body).await
}

async fn error(State(rt): State<Arc<Runtime>>, Path(_id): Path<String>, body: Bytes) -> Response {
    answered(&rt, "error", body).await
}

async fn init_error(State(rt): State<Arc<Runtime>>, body: Bytes) -> Response {
    answered(&rt, "init_error", body).await
}

/// `VmHWM` of a live process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn stop(child: &mut Child, graceful: bool) {
    if graceful {
        // nib serve shuts down on SIGTERM and closes its store cleanly, so the next run does
        // not start with a store recovery.
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        for _ in 0..200 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

struct Run {
    ms: f64,
    rss_kib: Option<u64>,
    outcome: String,
    /// The body of the answer (a Lambda function's), empty for `http`.
    answer: Bytes,
}

async fn lambda_runs(bin: &PathBuf, event: Bytes, runs: usize) -> anyhow::Result<Vec<Run>> {
    let rt = Arc::new(Runtime {
        event,
        ..Runtime::default()
    });
    let router = axum::Router::new()
        .route(
            "/2018-06-01/runtime/invocation/next",
            axum::routing::get(next),
        )
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            axum::routing::post(response),
        )
        .route(
            "/2018-06-01/runtime/invocation/{id}/error",
            axum::routing::post(error),
        )
        .route(
            "/2018-06-01/runtime/init/error",
            axum::routing::post(init_error),
        )
        .with_state(rt.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });

    let name = bin
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("bench")
        .to_owned();
    let mut out = Vec::new();
    for _ in 0..runs {
        let (tx, rx) = oneshot::channel();
        *rt.waiting.lock().unwrap() = Some(tx);
        *rt.served.lock().unwrap() = false;
        let started = Instant::now();
        let mut child = Command::new(bin)
            .env("AWS_LAMBDA_RUNTIME_API", addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", &name)
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
            .env("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}"))
            .env("AWS_LAMBDA_LOG_STREAM_NAME", "bench")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_DEFAULT_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_SESSION_TOKEN", "bench")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let result = tokio::time::timeout(Duration::from_secs(10), rx).await;
        let rss_kib = peak_rss_kib(child.id());
        stop(&mut child, false);
        rt.forever.notify_waiters();
        match result {
            Ok(Ok((at, how, answer))) => out.push(Run {
                ms: at.duration_since(started).as_secs_f64() * 1000.0,
                rss_kib,
                outcome: how.to_owned(),
                answer,
            }),
            _ => bail!(
                "{} did not answer its first invocation within 10 s",
                bin.display()
            ),
        }
    }
    Ok(out)
}

/// One POST over a fresh connection; the status code, or `None` when nothing answered.
async fn post_status(addr: SocketAddr, headers: &[String], body: &[u8]) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.ok()?;
    stream.write_all(body).await.ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

async fn http_runs(
    bin: &PathBuf,
    args: &[String],
    headers: &[String],
    body: Bytes,
    runs: usize,
) -> anyhow::Result<Vec<Run>> {
    let mut out = Vec::new();
    for _ in 0..runs {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{port}", &port.to_string()))
            .collect();
        let started = Instant::now();
        let mut child = Command::new(bin)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", bin.display()))?;
        let deadline = started + Duration::from_secs(10);
        let mut answer = None;
        while Instant::now() < deadline {
            match post_status(addr, headers, &body).await {
                Some(status) => {
                    answer = Some((Instant::now(), status));
                    break;
                }
                None => tokio::time::sleep(Duration::from_micros(250)).await,
            }
        }
        let rss_kib = peak_rss_kib(child.id());
        stop(&mut child, true);
        match answer {
            Some((at, 200)) => out.push(Run {
                ms: at.duration_since(started).as_secs_f64() * 1000.0,
                rss_kib,
                outcome: "200".into(),
                answer: Bytes::new(),
            }),
            Some((_, status)) => bail!("{} answered {status}, not 200", bin.display()),
            None => bail!("{} did not answer within 10 s", bin.display()),
        }
    }
    Ok(out)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let usage = "usage: nib-coldstart (lambda|http) --name NAME --bin PATH [--event FILE] [--body FILE] [--header H]... [--runs N] [-- ARGS...]";
    let mut args = std::env::args().skip(1);
    let mode = args.next().context(usage)?;
    let mut opts: HashMap<String, String> = HashMap::new();
    let mut headers = Vec::new();
    let mut rest = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--" => {
                rest.extend(args.by_ref());
            }
            "--header" => headers.push(args.next().context(usage)?),
            flag if flag.starts_with("--") => {
                opts.insert(flag[2..].to_owned(), args.next().context(usage)?);
            }
            _ => bail!("{usage}"),
        }
    }
    let bin = PathBuf::from(opts.get("bin").context(usage)?);
    let name = opts
        .get("name")
        .cloned()
        .unwrap_or_else(|| bin.display().to_string());
    let runs: usize = opts.get("runs").map_or(Ok(20), |r| r.parse())?;
    let read = |key: &str, default: &str| -> anyhow::Result<Bytes> {
        Ok(match opts.get(key) {
            Some(path) => {
                Bytes::from(std::fs::read(path).with_context(|| format!("cannot read {path}"))?)
            }
            None => Bytes::from(default.to_owned()),
        })
    };
    let results = match mode.as_str() {
        "lambda" => lambda_runs(&bin, read("event", "{}")?, runs).await?,
        "http" => http_runs(&bin, &rest, &headers, read("body", "")?, runs).await?,
        _ => bail!("{usage}"),
    };
    let mut ms: Vec<f64> = results.iter().map(|r| r.ms).collect();
    ms.sort_by(f64::total_cmp);
    let size = std::fs::metadata(&bin)?.len();
    let report = json!({
        "name": name,
        "mode": mode,
        "binary": bin.display().to_string(),
        "binary_bytes": size,
        "runs": ms.len(),
        "median_ms": percentile(&ms, 0.5),
        "min_ms": ms[0],
        "p90_ms": percentile(&ms, 0.9),
        "max_ms": ms[ms.len() - 1],
        "peak_rss_kib": results.iter().filter_map(|r| r.rss_kib).max(),
        "outcome": results.last().map(|r| r.outcome.clone()),
        // The last run's answer, for a caller that checks what was timed.
        "answer": results.last().map(|r| String::from_utf8_lossy(&r.answer).into_owned()),
    });
    println!("{report}");
    Ok(())
}
