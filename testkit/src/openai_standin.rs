//! A stand-in for an OpenAI-compatible chat-completions endpoint with image input (the
//! shape Ollama, llama.cpp's server, vLLM and OpenAI's API share), for tests of
//! `nib::adapters::remote_ocr::openai` and of `nib import --ocr openai`.
//!
//! [`OpenAiStandin::start`] serves `POST /v1/chat/completions` on 127.0.0.1, port 0, and
//! checks the request as a server would: the `Authorization: Bearer` key when it was started
//! with one (else 401, OpenAI's `invalid_api_key` error object), the model it serves (else
//! 404, `model_not_found`), and a user message whose content holds a text part and an
//! `image_url` part with a `data:image/png;base64,` URL that decodes to an image (else 400).
//! It answers the documented response: `{"id", "object": "chat.completion", "created",
//! "model", "choices": [{"index": 0, "message": {"role": "assistant", "content": ...},
//! "finish_reason": "stop"}], "usage"}`, with the markdown the test set
//! ([`OpenAiStandin::reply`]). [`OpenAiStandin::fail_next`] answers chosen HTTP statuses
//! first (with a body a test can check is never logged; [`OpenAiStandin::fail_next_retry_after`]
//! with a `Retry-After`), [`OpenAiStandin::hang_next`]
//! answers nothing until the client gives up. Every request is recorded ([`SeenChat`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

/// What a failing answer's body says: tests check it never reaches a log line or an error.
pub const FAULT_BODY_MARKER: &str = "provider-body-must-not-be-logged";

/// What the stand-in saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenChat {
    /// The `Authorization` header, as sent.
    pub authorization: Option<String>,
    pub model: String,
    /// The text part of the user message.
    pub prompt: String,
    /// The image part's size in pixels, when it decoded as a PNG.
    pub image_size: Option<(u32, u32)>,
}

#[derive(Default)]
struct Inner {
    reply: String,
    faults: VecDeque<(u16, Option<u64>)>,
    hangs: usize,
    requests: Vec<SeenChat>,
}

struct Config {
    model: String,
    key: Option<String>,
    inner: Mutex<Inner>,
}

type Shared = Arc<Config>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running stand-in; it stops when dropped.
pub struct OpenAiStandin {
    base_url: String,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for OpenAiStandin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl OpenAiStandin {
    /// Serves `model`, asking for `key` when one is given.
    pub async fn start(model: &str, key: Option<&str>) -> std::io::Result<OpenAiStandin> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let shared = Arc::new(Config {
            model: model.into(),
            key: key.map(Into::into),
            inner: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(OpenAiStandin {
            base_url,
            shared,
            server,
        })
    }

    /// `http://127.0.0.1:PORT/v1`, for `NIB_OCR_OPENAI_BASE_URL`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The assistant's answer to every page from now on.
    pub fn reply(&self, markdown: &str) {
        lock(&self.shared).reply = markdown.into();
    }

    /// The next requests are answered with these HTTP statuses, in order.
    pub fn fail_next(&self, statuses: &[u16]) {
        lock(&self.shared)
            .faults
            .extend(statuses.iter().map(|&s| (s, None)));
    }

    /// The next request is answered with `status` and `Retry-After: seconds`.
    pub fn fail_next_retry_after(&self, status: u16, seconds: u64) {
        lock(&self.shared).faults.push_back((status, Some(seconds)));
    }

    /// The next `times` requests get no answer at all (the client's timeout ends them).
    pub fn hang_next(&self, times: usize) {
        lock(&self.shared).hangs += times;
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenChat> {
        lock(&self.shared).requests.clone()
    }
}

fn error(status: StatusCode, code: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {
            "message": format!("{code}: {FAULT_BODY_MARKER}"),
            "type": "invalid_request_error",
            "param": null,
            "code": code
        }})),
    )
        .into_response()
}

async fn chat(State(shared): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    let parts = request
        .pointer("/messages/0/content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let prompt = parts
        .iter()
        .find(|p| p["type"] == "text")
        .and_then(|p| p["text"].as_str())
        .unwrap_or_default()
        .to_owned();
    let image_size = parts
        .iter()
        .find(|p| p["type"] == "image_url")
        .and_then(|p| p.pointer("/image_url/url").and_then(Value::as_str))
        .and_then(|url| url.strip_prefix("data:image/png;base64,"))
        .and_then(|b64| BASE64.decode(b64).ok())
        .filter(|png| png.starts_with(b"\x89PNG\r\n\x1a\n"))
        .and_then(|png| nib::ocr::raster::decode_image(&png).ok())
        .map(|page| (page.width, page.height));
    let (fault, hang) = {
        let mut inner = lock(&shared);
        inner.requests.push(SeenChat {
            authorization: authorization.clone(),
            model: model.clone(),
            prompt: prompt.clone(),
            image_size,
        });
        let hang = inner.hangs > 0;
        if hang {
            inner.hangs -= 1;
        }
        (if hang { None } else { inner.faults.pop_front() }, hang)
    };
    if hang {
        // Never answers: the client's timeout is what ends the request.
        std::future::pending::<()>().await;
    }
    if let Some((status, retry_after)) = fault {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut answer = error(status, "standin_fault");
        if let Some(seconds) = retry_after {
            answer
                .headers_mut()
                .insert("retry-after", seconds.to_string().parse().unwrap());
        }
        return answer;
    }
    if let Some(key) = &shared.key
        && authorization.as_deref() != Some(format!("Bearer {key}").as_str())
    {
        return error(StatusCode::UNAUTHORIZED, "invalid_api_key");
    }
    if model != shared.model {
        return error(StatusCode::NOT_FOUND, "model_not_found");
    }
    if request.pointer("/messages/0/role") != Some(&json!("user"))
        || prompt.is_empty()
        || image_size.is_none()
    {
        return error(StatusCode::BAD_REQUEST, "invalid_image");
    }
    let reply = lock(&shared).reply.clone();
    axum::Json(json!({
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": reply},
            "finish_reason": "stop"
        }],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    }))
    .into_response()
}
