//! `TextractOcr`: the `Ocr` port over Amazon Textract (issue 12), the ingest function's engine.
//!
//! Every page is one synchronous `DetectDocumentText` call with the page image in the request
//! (`Document.Bytes`), encoded as PNG from the same grey pixels the layout analysis reads
//! (`ocr::raster::to_png`): an uploaded PNG or JPEG, or a page of a PDF that nib rendered
//! itself. nib never calls `StartDocumentTextDetection`: the asynchronous API would need
//! Textract to read the bucket and an SNS topic to report back, for no gain at ~1-2 s a page
//! (docs/decisions/0008-textract-synchronous.md).
//!
//! Textract answers `PAGE`, `LINE` and `WORD` blocks; a `LINE` is what the port calls a line:
//! its text, its confidence (Textract's 0-100 scaled to 0..1) and its axis-aligned box, which
//! Textract gives as ratios of the page's width and height and we turn back into pixels of the
//! page that was sent. Words, and lines without text or box, are not used.
//!
//! Errors: a document Textract refuses (`InvalidParameterException`,
//! `UnsupportedDocumentException`, `BadDocumentException`, `DocumentTooLargeException`, or a
//! page over its limits, refused before sending) is `OcrError::BadImage`: trying again cannot
//! help. `AccessDeniedException` is `Unavailable` (the role lacks
//! `textract:DetectDocumentText`: a deployment fault). Everything else (throttling, 5xx,
//! timeouts, network) is `Failed`, after the SDK's standard retry has had its three attempts;
//! the ingest invocation then fails and Lambda retries the event.
//!
//! Tested against a Textract stand-in, from `nib-testkit` (`testkit/tests/library/textract.rs`).

use async_trait::async_trait;
use aws_sdk_textract::Client;
use aws_sdk_textract::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_textract::operation::detect_document_text::DetectDocumentTextError;
use aws_sdk_textract::primitives::Blob;
use aws_sdk_textract::types::{Block, BlockType, Document};

use crate::ocr::raster;
use crate::ports::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};

/// The engine's name as recorded on a page (`ocr_engine`).
pub const ENGINE_NAME: &str = "amazon-textract";
/// The engine's version: the operation, since Textract does not version its model per call.
pub const ENGINE_VERSION: &str = "DetectDocumentText";
/// Textract's limit on a synchronous document, in bytes (10 MB).
pub const MAX_DOCUMENT_BYTES: usize = 10 * 1024 * 1024;
/// Textract's limit on each side of an image, in pixels.
pub const MAX_SIDE: u32 = 10_000;

/// Why a call to Textract failed, as the source of `OcrError::Failed`.
#[derive(Debug, thiserror::Error)]
pub enum TextractError {
    #[error("Textract DetectDocumentText failed")]
    Call(#[source] SdkError<DetectDocumentTextError>),
}

/// Amazon Textract behind the `Ocr` port. Cheap to clone (the SDK client is shared).
#[derive(Debug, Clone)]
pub struct TextractOcr {
    client: Client,
}

impl TextractOcr {
    /// Pages read with `client` (build it with `AwsClients`, which sets its timeouts, retry,
    /// endpoint and call counter).
    pub fn new(client: Client) -> TextractOcr {
        TextractOcr { client }
    }
}

#[async_trait]
impl Ocr for TextractOcr {
    fn engine(&self) -> OcrEngine {
        OcrEngine {
            name: ENGINE_NAME.into(),
            version: ENGINE_VERSION.into(),
        }
    }

    async fn recognize(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
        let png = document(page)?;
        let out = self
            .client
            .detect_document_text()
            .document(Document::builder().bytes(Blob::new(png)).build())
            .send()
            .await
            .map_err(map_error)?;
        Ok(lines(out.blocks(), page.width, page.height))
    }
}

/// The page as the PNG Textract is sent, or why Textract would refuse it.
fn document(page: &PageImage) -> Result<Vec<u8>, OcrError> {
    let (w, h) = (page.width, page.height);
    if w == 0 || h == 0 || page.gray.len() as u64 != u64::from(w) * u64::from(h) {
        return Err(OcrError::BadImage(format!(
            "a {w}x{h} page with {} bytes of pixels",
            page.gray.len()
        )));
    }
    if w > MAX_SIDE || h > MAX_SIDE {
        return Err(OcrError::BadImage(format!(
            "{w}x{h} is larger than Textract reads ({MAX_SIDE} px a side)"
        )));
    }
    let png = raster::to_png(page);
    if png.len() > MAX_DOCUMENT_BYTES {
        return Err(OcrError::BadImage(format!(
            "the page is {} bytes as PNG; Textract reads at most {MAX_DOCUMENT_BYTES}",
            png.len()
        )));
    }
    Ok(png)
}

/// The `LINE` blocks as lines in pixels of a `width` x `height` page.
fn lines(blocks: &[Block], width: u32, height: u32) -> Vec<OcrLine> {
    let (pw, ph) = (width as f32, height as f32);
    blocks
        .iter()
        .filter(|b| b.block_type() == Some(&BlockType::Line))
        .filter_map(|b| {
            let text = b.text().filter(|t| !t.trim().is_empty())?;
            let bb = b.geometry()?.bounding_box()?;
            // Ratios of the page, clamped to it (Textract may reach a hair past an edge).
            let x0 = bb.left().clamp(0.0, 1.0);
            let y0 = bb.top().clamp(0.0, 1.0);
            let x1 = (bb.left() + bb.width()).clamp(x0, 1.0);
            let y1 = (bb.top() + bb.height()).clamp(y0, 1.0);
            Some(OcrLine {
                text: text.to_owned(),
                confidence: (b.confidence().unwrap_or(0.0) / 100.0).clamp(0.0, 1.0),
                bbox: OcrBox {
                    x: x0 * pw,
                    y: y0 * ph,
                    w: (x1 - x0) * pw,
                    h: (y1 - y0) * ph,
                },
            })
        })
        .collect()
}

fn map_error(e: SdkError<DetectDocumentTextError>) -> OcrError {
    use DetectDocumentTextError as E;
    let Some(service) = e.as_service_error() else {
        // Timeouts, network, an unreadable answer: transient as far as we can tell.
        return OcrError::Failed(Box::new(TextractError::Call(e)));
    };
    let said = || {
        format!(
            "Textract: {}: {}",
            service.code().unwrap_or("unknown error"),
            service.message().unwrap_or("no message")
        )
    };
    match service {
        E::InvalidParameterException(_)
        | E::UnsupportedDocumentException(_)
        | E::BadDocumentException(_)
        | E::DocumentTooLargeException(_) => OcrError::BadImage(said()),
        E::AccessDeniedException(_) => OcrError::Unavailable(said()),
        _ => OcrError::Failed(Box::new(TextractError::Call(e))),
    }
}
