//! A stand-in for Google Cloud Vision's `images:annotate` with `DOCUMENT_TEXT_DETECTION`, for
//! tests of `nib::adapters::remote_ocr::google_vision`.
//!
//! [`VisionStandin::start`] serves `POST /v1/images:annotate` on 127.0.0.1, port 0, and
//! checks the request: the API key in `X-Goog-Api-Key` or the `key` query parameter (else
//! 403 with a `google.rpc.Status` error body), one request whose `features` ask for
//! `DOCUMENT_TEXT_DETECTION` and whose `image.content` is base64 of an image (else 400). It
//! answers the documented shape: `responses[0].fullTextAnnotation` with `pages` (`width`,
//! `height`), `blocks`, `paragraphs`, `words` (a `boundingBox` of four `vertices` in pixels,
//! a `confidence`, `symbols`) and the text; each line the test set
//! ([`VisionStandin::reply`]) is one paragraph, its words splitting the line's box by
//! length, a `SPACE` break after each word but the last, which gets `LINE_BREAK`. As Vision
//! does, a vertex coordinate that is 0 is left out. [`VisionStandin::fail_next`] and
//! [`VisionStandin::hang_next`] make requests fail or go unanswered; a per-image error inside
//! a 200 comes from [`VisionStandin::refuse_next`]. Every request is recorded ([`SeenAnnotate`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

use crate::textract_standin::StandinLine;

pub use crate::openai_standin::FAULT_BODY_MARKER;

/// What the stand-in saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenAnnotate {
    /// The key, from the header or the query, and where it came.
    pub key_header: Option<String>,
    pub key_query: Option<String>,
    /// The first feature's `type`.
    pub feature: String,
    /// The image's size in pixels, when `image.content` decoded as a PNG.
    pub image_size: Option<(u32, u32)>,
}

#[derive(Default)]
struct Inner {
    lines: Vec<StandinLine>,
    faults: VecDeque<u16>,
    refusals: usize,
    hangs: usize,
    requests: Vec<SeenAnnotate>,
}

struct Config {
    key: String,
    inner: Mutex<Inner>,
}

type Shared = Arc<Config>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.inner.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running stand-in; it stops when dropped.
pub struct VisionStandin {
    base_url: String,
    shared: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for VisionStandin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl VisionStandin {
    /// Serves requests that carry `key`.
    pub async fn start(key: &str) -> std::io::Result<VisionStandin> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Config {
            key: key.into(),
            inner: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/images:annotate", post(annotate))
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(VisionStandin {
            base_url,
            shared,
            server,
        })
    }

    /// `http://127.0.0.1:PORT`, for `NIB_OCR_GOOGLE_VISION_URL`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The lines read on every page from now on (boxes in pixels of the image sent; the
    /// confidence on Vision's 0..1 scale).
    pub fn reply(&self, lines: Vec<StandinLine>) {
        lock(&self.shared).lines = lines;
    }

    /// The next requests are answered with these HTTP statuses, in order.
    pub fn fail_next(&self, statuses: &[u16]) {
        lock(&self.shared).faults.extend(statuses);
    }

    /// The next `times` requests get a 200 whose one response is an `error` (code 3).
    pub fn refuse_next(&self, times: usize) {
        lock(&self.shared).refusals += times;
    }

    /// The next `times` requests get no answer at all.
    pub fn hang_next(&self, times: usize) {
        lock(&self.shared).hangs += times;
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenAnnotate> {
        lock(&self.shared).requests.clone()
    }
}

fn status_error(status: StatusCode, reason: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {
            "code": status.as_u16(),
            "message": format!("{reason}: {FAULT_BODY_MARKER}"),
            "status": reason
        }})),
    )
        .into_response()
}

async fn annotate(
    State(shared): State<Shared>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: String,
) -> Response {
    let key_header = headers
        .get("x-goog-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let key_query = query.as_deref().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("key="))
            .map(str::to_owned)
    });
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let one = request.pointer("/requests/0").cloned().unwrap_or_default();
    let feature = one
        .pointer("/features/0/type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let image_size = one
        .pointer("/image/content")
        .and_then(Value::as_str)
        .and_then(|b64| BASE64.decode(b64).ok())
        .filter(|png| png.starts_with(b"\x89PNG\r\n\x1a\n"))
        .and_then(|png| nib::ocr::raster::decode_image(&png).ok())
        .map(|page| (page.width, page.height));
    let (fault, refuse, hang, lines) = {
        let mut inner = lock(&shared);
        inner.requests.push(SeenAnnotate {
            key_header: key_header.clone(),
            key_query: key_query.clone(),
            feature: feature.clone(),
            image_size,
        });
        if inner.hangs > 0 {
            inner.hangs -= 1;
            (None, false, true, Vec::new())
        } else if let Some(status) = inner.faults.pop_front() {
            (Some(status), false, false, Vec::new())
        } else if inner.refusals > 0 {
            inner.refusals -= 1;
            (None, true, false, Vec::new())
        } else {
            (None, false, false, inner.lines.clone())
        }
    };
    if hang {
        std::future::pending::<()>().await;
    }
    if let Some(status) = fault {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        return status_error(status, "UNAVAILABLE");
    }
    let key = key_header.or(key_query);
    if key.as_deref() != Some(shared.key.as_str()) {
        return status_error(StatusCode::FORBIDDEN, "PERMISSION_DENIED");
    }
    let Some((width, height)) = image_size else {
        return status_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT");
    };
    if feature != "DOCUMENT_TEXT_DETECTION"
        || request["requests"].as_array().map(Vec::len) != Some(1)
    {
        return status_error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT");
    }
    if refuse {
        return axum::Json(json!({"responses": [{"error": {
            "code": 3,
            "message": format!("Bad image data: {FAULT_BODY_MARKER}")
        }}]}))
        .into_response();
    }
    let text: String = lines.iter().map(|l| format!("{}\n", l.text)).collect();
    let paragraphs: Vec<Value> = lines.iter().map(paragraph).collect();
    axum::Json(json!({"responses": [{
        "fullTextAnnotation": {
            "pages": [{
                "width": width,
                "height": height,
                "confidence": 0.9,
                "blocks": [{
                    "blockType": "TEXT",
                    "boundingBox": {"vertices": []},
                    "paragraphs": paragraphs
                }]
            }],
            "text": text
        }
    }]}))
    .into_response()
}

/// A vertex as Vision writes it: a coordinate that is 0 is left out.
fn vertex(x: f32, y: f32) -> Value {
    let (x, y) = (x.round() as i64, y.round() as i64);
    let mut v = serde_json::Map::new();
    if x != 0 {
        v.insert("x".into(), x.into());
    }
    if y != 0 {
        v.insert("y".into(), y.into());
    }
    Value::Object(v)
}

fn poly(x0: f32, y0: f32, x1: f32, y1: f32) -> Value {
    json!({"vertices": [vertex(x0, y0), vertex(x1, y0), vertex(x1, y1), vertex(x0, y1)]})
}

/// One line as a paragraph: its words share the line's box by their length.
fn paragraph(line: &StandinLine) -> Value {
    let words: Vec<&str> = line.text.split_whitespace().collect();
    let total: usize = words
        .iter()
        .map(|w| w.chars().count() + 1)
        .sum::<usize>()
        .max(1);
    let b = line.bbox;
    let mut x = b.x;
    let n = words.len();
    let words: Vec<Value> = words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let width = b.w * (w.chars().count() + 1) as f32 / total as f32;
            let chars: Vec<char> = w.chars().collect();
            let symbols: Vec<Value> = chars
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    if j + 1 == chars.len() {
                        let kind = if i + 1 == n { "LINE_BREAK" } else { "SPACE" };
                        json!({"text": c.to_string(), "confidence": line.confidence,
                               "property": {"detectedBreak": {"type": kind}}})
                    } else {
                        json!({"text": c.to_string(), "confidence": line.confidence})
                    }
                })
                .collect();
            let word = json!({
                "boundingBox": poly(x, b.y, x + width, b.bottom()),
                "symbols": symbols,
                "confidence": line.confidence
            });
            x += width;
            word
        })
        .collect();
    json!({
        "boundingBox": poly(b.x, b.y, b.right(), b.bottom()),
        "words": words,
        "confidence": line.confidence
    })
}
