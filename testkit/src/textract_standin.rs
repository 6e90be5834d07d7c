//! A stand-in for Amazon Textract's `DetectDocumentText`, for tests (moto's Textract answers
//! every document with no text, so nothing downstream of the OCR could be tested on it).
//!
//! [`TextractStandin::start`] serves on 127.0.0.1, port 0, the protocol the SDK speaks to
//! Textract: AWS JSON 1.1, `POST /` with `X-Amz-Target: Textract.DetectDocumentText` and
//! `Content-Type: application/x-amz-json-1.1`, the document base64 in `Document.Bytes`. It
//! answers the documented response shape (`DocumentMetadata.Pages`, and `Blocks`: one `PAGE`,
//! then a `LINE` per line, each with `CHILD` relationships to its `WORD`s; `Confidence` 0-100;
//! `Geometry` as ratios of the page, a `BoundingBox` and a four-point `Polygon`), and errors as
//! Textract does (`{"__type": ..., "Message": ...}` and `x-amzn-ErrorType`).
//!
//! What it reads on a page is what the test told it: [`TextractStandin::answer`] registers, for
//! one document (by the SHA-256 of its bytes), lines with their text, confidence and box in
//! pixels; the box is sent as ratios of the image's real size, as Textract sends it. A valid
//! image nobody registered reads as a page without text; bytes that are not a PNG or JPEG get
//! `UnsupportedDocumentException`, and more than 10 MB `DocumentTooLargeException`, as from
//! Textract. [`TextractStandin::fail_next`] makes the next requests fail with a chosen error
//! ([`Fault`]), to test the adapter's mapping and the SDK's retries. Every request is recorded
//! ([`TextractStandin::requests`]) with what the SDK sent: target, content type, the signing
//! scope's service, the document's hash and size.
//!
//! Test lines can come from the generated OCR pages' truth files (`tests/data/ocr/*.truth.json`,
//! [`TruthPage`]).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use nib::ports::{OcrBox, PageImage};

/// Textract's limit on a synchronous document.
const MAX_DOCUMENT_BYTES: usize = 10 * 1024 * 1024;

/// One line the stand-in reads on a page.
#[derive(Debug, Clone, PartialEq)]
pub struct StandinLine {
    pub text: String,
    /// Textract's scale: 0-100.
    pub confidence: f32,
    /// In pixels of the page image.
    pub bbox: OcrBox,
}

impl StandinLine {
    pub fn new(text: &str, confidence: f32, bbox: OcrBox) -> StandinLine {
        StandinLine {
            text: text.into(),
            confidence,
            bbox,
        }
    }
}

/// One page of a truth file of the generated OCR pages (`tests/ocr/generate.py`,
/// `tests/data/ocr/*.truth.json`): the size it was drawn at and its lines, read with
/// confidence 99.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthPage {
    pub width: f32,
    pub height: f32,
    pub lines: Vec<StandinLine>,
}

impl TruthPage {
    /// Every page of a truth file: one for a single image, `pages` for a multi-page PDF.
    pub fn parse(json: &str) -> Result<Vec<TruthPage>, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Truth {
            #[serde(default)]
            width: f32,
            #[serde(default)]
            height: f32,
            #[serde(default)]
            lines: Vec<TruthLine>,
            #[serde(default)]
            pages: Vec<Truth>,
        }
        #[derive(serde::Deserialize)]
        struct TruthLine {
            text: String,
            /// `[x, y, w, h]` in pixels; empty for a line that was not drawn.
            #[serde(default)]
            bbox: Vec<f32>,
        }
        fn page(t: Truth) -> TruthPage {
            let lines = t
                .lines
                .into_iter()
                .filter_map(|l| match l.bbox[..] {
                    [x, y, w, h] => Some(StandinLine::new(&l.text, 99.0, OcrBox { x, y, w, h })),
                    _ => None,
                })
                .collect();
            TruthPage {
                width: t.width,
                height: t.height,
                lines,
            }
        }
        let truth: Truth = serde_json::from_str(json)?;
        Ok(if truth.pages.is_empty() {
            vec![page(truth)]
        } else {
            truth.pages.into_iter().map(page).collect()
        })
    }

    /// The lines in pixels of `image`, which may have been rendered at another size than the
    /// page was drawn at (nib renders PDF pages itself).
    pub fn lines_for(&self, image: &PageImage) -> Vec<StandinLine> {
        let sx = if self.width > 0.0 {
            image.width as f32 / self.width
        } else {
            1.0
        };
        let sy = if self.height > 0.0 {
            image.height as f32 / self.height
        } else {
            1.0
        };
        self.lines
            .iter()
            .map(|l| StandinLine {
                bbox: OcrBox {
                    x: l.bbox.x * sx,
                    y: l.bbox.y * sy,
                    w: l.bbox.w * sx,
                    h: l.bbox.h * sy,
                },
                ..l.clone()
            })
            .collect()
    }
}

/// An error the stand-in answers instead of reading the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl Fault {
    pub fn new(status: u16, code: &str, message: &str) -> Fault {
        Fault {
            status,
            code: code.into(),
            message: message.into(),
        }
    }

    /// Throttled (the SDK retries it).
    pub fn throttling() -> Fault {
        Fault::new(400, "ThrottlingException", "Rate exceeded")
    }

    /// Over the account's TPS quota (the SDK retries it).
    pub fn throughput_exceeded() -> Fault {
        Fault::new(
            400,
            "ProvisionedThroughputExceededException",
            "Provisioned rate exceeded",
        )
    }

    /// Textract's own failure (the SDK retries it).
    pub fn server_error() -> Fault {
        Fault::new(500, "InternalServerError", "Internal server error")
    }

    pub fn invalid_parameter() -> Fault {
        Fault::new(
            400,
            "InvalidParameterException",
            "Request has invalid parameters",
        )
    }

    pub fn bad_document() -> Fault {
        Fault::new(
            400,
            "BadDocumentException",
            "Request has unreadable document",
        )
    }

    pub fn access_denied() -> Fault {
        Fault::new(
            400,
            "AccessDeniedException",
            "User is not authorized to perform: textract:DetectDocumentText",
        )
    }
}

/// What the stand-in saw of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// `X-Amz-Target`.
    pub target: String,
    pub content_type: String,
    /// The service named in the SigV4 credential scope (`textract`), if the request was signed.
    pub signed_for: Option<String>,
    /// SHA-256 of the decoded `Document.Bytes`, hex; `None` when there were none.
    pub document_sha256: Option<String>,
    pub document_len: usize,
    /// The document's size in pixels, when it is an image.
    pub image_size: Option<(u32, u32)>,
}

#[derive(Default)]
struct Inner {
    pages: HashMap<String, Vec<StandinLine>>,
    /// Faults to answer, each with how many requests it still gets.
    faults: VecDeque<(Fault, usize)>,
    requests: Vec<SeenRequest>,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running stand-in; it stops when dropped.
pub struct TextractStandin {
    endpoint: String,
    inner: Shared,
    server: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TextractStandin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextractStandin")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for TextractStandin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl TextractStandin {
    /// Serves on 127.0.0.1, on a port the kernel picks.
    pub async fn start() -> std::io::Result<TextractStandin> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let inner = Shared::default();
        let app = Router::new()
            .route("/", post(detect_document_text))
            // A 10 MB document is ~14 MB of base64: let it arrive, so the answer is Textract's.
            .layer(DefaultBodyLimit::max(2 * MAX_DOCUMENT_BYTES))
            .with_state(inner.clone());
        let server = tokio::spawn(async move {
            // Ends when the task is aborted (on drop) or the runtime shuts down.
            let _ = axum::serve(listener, app).await;
        });
        Ok(TextractStandin {
            endpoint,
            inner,
            server,
        })
    }

    /// `http://127.0.0.1:PORT`, for `AwsConfig::textract_endpoint_url`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Reads `lines` on the document `bytes` (matched by SHA-256).
    pub fn answer(&self, bytes: &[u8], lines: Vec<StandinLine>) {
        lock(&self.inner).pages.insert(sha256_hex(bytes), lines);
    }

    /// Reads `lines` on `page` as `TextractOcr` sends it (its PNG).
    pub fn answer_page(&self, page: &PageImage, lines: Vec<StandinLine>) {
        self.answer(&nib::ocr::raster::to_png(page), lines);
    }

    /// The next `times` requests get `fault` (after any queued before it).
    pub fn fail_next(&self, times: usize, fault: Fault) {
        if times > 0 {
            lock(&self.inner).faults.push_back((fault, times));
        }
    }

    /// Every request from now on gets `fault`, until [`TextractStandin::heal`].
    pub fn fail_always(&self, fault: Fault) {
        self.fail_next(usize::MAX, fault);
    }

    /// Drops the queued faults.
    pub fn heal(&self) {
        lock(&self.inner).faults.clear();
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.inner).requests.clone()
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// `AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request, ...` -> SERVICE.
fn signed_for(headers: &HeaderMap) -> Option<String> {
    let auth = header(headers, "authorization");
    let credential = auth
        .strip_prefix("AWS4-HMAC-SHA256 ")?
        .split(',')
        .find_map(|part| part.trim().strip_prefix("Credential="))?;
    let scope: Vec<&str> = credential.split('/').collect();
    (scope.len() == 5 && scope[4] == "aws4_request").then(|| scope[3].to_owned())
}

fn error(status: u16, code: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        json!({ "__type": code, "Message": message }).to_string(),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        "content-type",
        HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    if let Ok(v) = HeaderValue::from_str(code) {
        headers.insert("x-amzn-errortype", v);
    }
    response
}

async fn detect_document_text(
    State(inner): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = header(&headers, "x-amz-target");
    let content_type = header(&headers, "content-type");
    let document = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["Document"]["Bytes"].as_str().map(str::to_owned))
        .and_then(|b| BASE64.decode(b).ok());
    let image_size = document.as_deref().and_then(image_size);
    let seen = SeenRequest {
        target: target.clone(),
        content_type: content_type.clone(),
        signed_for: signed_for(&headers),
        document_sha256: document.as_deref().map(sha256_hex),
        document_len: document.as_ref().map_or(0, Vec::len),
        image_size,
    };
    let (fault, lines) = {
        let mut inner = lock(&inner);
        inner.requests.push(seen.clone());
        let fault = match inner.faults.front_mut() {
            Some((fault, left)) => {
                let fault = fault.clone();
                *left -= 1;
                if *left == 0 {
                    inner.faults.pop_front();
                }
                Some(fault)
            }
            None => None,
        };
        let lines = seen
            .document_sha256
            .as_ref()
            .and_then(|h| inner.pages.get(h).cloned());
        (fault, lines)
    };
    if target != "Textract.DetectDocumentText" {
        return error(
            400,
            "UnknownOperationException",
            "this stand-in serves DetectDocumentText only",
        );
    }
    if content_type != "application/x-amz-json-1.1" {
        return error(400, "SerializationException", "not AWS JSON 1.1");
    }
    if let Some(f) = fault {
        return error(f.status, &f.code, &f.message);
    }
    let Some(document) = document else {
        return error(
            400,
            "InvalidParameterException",
            "Request has invalid parameters",
        );
    };
    if document.len() > MAX_DOCUMENT_BYTES {
        return error(
            400,
            "DocumentTooLargeException",
            "Document size exceeds the limit",
        );
    }
    let Some((w, h)) = image_size else {
        return error(
            400,
            "UnsupportedDocumentException",
            "Request has unsupported document format",
        );
    };
    let body = response(w, h, &lines.unwrap_or_default());
    let mut response = (StatusCode::OK, body.to_string()).into_response();
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    response
}

/// A PNG's or JPEG's size in pixels, without decoding it.
fn image_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .ok()?;
    match reader.format()? {
        image::ImageFormat::Png | image::ImageFormat::Jpeg => reader.into_dimensions().ok(),
        _ => None,
    }
}

/// `Geometry` of a box given in pixels of a `w` x `h` page: ratios, as Textract sends them.
fn geometry(b: &OcrBox, w: f32, h: f32) -> Value {
    let (l, t, r, btm) = (b.x / w, b.y / h, b.right() / w, b.bottom() / h);
    json!({
        "BoundingBox": { "Width": r - l, "Height": btm - t, "Left": l, "Top": t },
        "Polygon": [
            { "X": l, "Y": t }, { "X": r, "Y": t }, { "X": r, "Y": btm }, { "X": l, "Y": btm }
        ],
    })
}

/// The `DetectDocumentText` answer for one page with `lines` on it.
fn response(w: u32, h: u32, lines: &[StandinLine]) -> Value {
    let (pw, ph) = (w as f32, h as f32);
    let id = || uuid::Uuid::new_v4().to_string();
    let mut line_blocks = Vec::new();
    let mut word_blocks = Vec::new();
    for line in lines {
        // Words share the line's box, split across it by their length.
        let words: Vec<&str> = line.text.split_whitespace().collect();
        let total: usize = words.iter().map(|w| w.chars().count() + 1).sum();
        let mut x = line.bbox.x;
        let mut ids = Vec::new();
        for word in &words {
            let share = (word.chars().count() + 1) as f32 / total.max(1) as f32;
            let width = line.bbox.w * share;
            let word_id = id();
            word_blocks.push(json!({
                "BlockType": "WORD",
                "Confidence": line.confidence,
                "Text": word,
                "TextType": "HANDWRITING",
                "Geometry": geometry(
                    &OcrBox { x, y: line.bbox.y, w: width, h: line.bbox.h }, pw, ph),
                "Id": word_id,
                "Page": 1,
            }));
            ids.push(word_id);
            x += width;
        }
        line_blocks.push(json!({
            "BlockType": "LINE",
            "Confidence": line.confidence,
            "Text": line.text,
            "Geometry": geometry(&line.bbox, pw, ph),
            "Id": id(),
            "Relationships": [{ "Type": "CHILD", "Ids": ids }],
            "Page": 1,
        }));
    }
    let mut page = json!({
        "BlockType": "PAGE",
        "Geometry": geometry(&OcrBox { x: 0.0, y: 0.0, w: pw, h: ph }, pw, ph),
        "Id": id(),
        "Page": 1,
    });
    if !line_blocks.is_empty() {
        let ids: Vec<Value> = line_blocks.iter().map(|b| b["Id"].clone()).collect();
        page["Relationships"] = json!([{ "Type": "CHILD", "Ids": ids }]);
    }
    let blocks: Vec<Value> = std::iter::once(page)
        .chain(line_blocks)
        .chain(word_blocks)
        .collect();
    json!({
        "DocumentMetadata": { "Pages": 1 },
        "Blocks": blocks,
        "DetectDocumentTextModelVersion": "1.0",
    })
}
