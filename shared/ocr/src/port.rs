//! The OCR port: what an engine is given (a [`PageImage`]) and what it answers ([`OcrLine`]s),
//! implemented by the local engine here (`paddle`) and by nib's adapters (Textract, remote
//! providers).

use async_trait::async_trait;

/// A page image for OCR: 8-bit grey, row-major, `width * height` bytes. Decoding (PNG, JPEG)
/// and PDF rasterising happen before an engine sees it (`crate::raster`), so every engine
/// and the layout analysis look at the same pixels.
#[derive(Clone)]
pub struct PageImage {
    pub width: u32,
    pub height: u32,
    pub gray: Vec<u8>,
}

impl std::fmt::Debug for PageImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PageImage({}x{})", self.width, self.height)
    }
}

/// A rectangle in page-image pixels.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct OcrBox {
    pub x: f32,
    pub y: f32,
    pub w: f32,
    pub h: f32,
}

impl OcrBox {
    pub fn right(&self) -> f32 {
        self.x + self.w
    }

    pub fn bottom(&self) -> f32 {
        self.y + self.h
    }

    pub fn center_y(&self) -> f32 {
        self.y + self.h / 2.0
    }
}

/// One piece of recognised text: a line, or a segment of one (engines differ; the layout step
/// joins segments into lines by position).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OcrLine {
    pub text: String,
    /// The engine's confidence in the text, 0..1.
    pub confidence: f32,
    pub bbox: OcrBox,
}

/// Which engine read a page, as recorded on the page (`ocr_engine`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OcrEngine {
    pub name: String,
    pub version: String,
}

impl std::fmt::Display for OcrEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    /// The engine cannot run here (model files or library missing, service unreachable).
    #[error("the OCR engine is not available: {0}")]
    Unavailable(String),
    /// The input is not an image the pipeline can read (corrupt, unsupported, too large).
    #[error("not a readable page image: {0}")]
    BadImage(String),
    /// The engine failed on this page.
    #[error("OCR failed")]
    Failed(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Recognises the text of one page image (docs/design.md §2 `Ocr`): the local PP-OCR engine
/// (`crate::paddle`), Amazon Textract on AWS, or a remote provider the operator brings
/// (nib's `adapters::remote_ocr`: an OpenAI-compatible vision model, Google Cloud Vision).
#[async_trait]
pub trait Ocr: Send + Sync {
    fn engine(&self) -> OcrEngine;

    /// The text on `page`, as lines or line segments with their boxes, in any order; or, for
    /// an engine that [`Ocr::writes_markdown`], the page's lines in order, each in nib's
    /// markdown, without boxes.
    async fn recognize(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError>;

    /// [`Ocr::recognize`] with the page's owner's own words (those they corrected) as a
    /// decoding prior. An engine that takes no vocabulary reads the page as it would anyway.
    async fn recognize_with(
        &self,
        page: &PageImage,
        vocabulary: &[String],
    ) -> Result<Vec<OcrLine>, OcrError> {
        let _ = vocabulary;
        self.recognize(page).await
    }

    /// Whether [`Ocr::recognize`] answers the page's lines already laid out as markdown (a
    /// vision-language model asked for the page as markdown): the layout analysis, which
    /// needs boxes, is then skipped and each line's marks are read instead
    /// (`crate::layout::from_markdown`).
    fn writes_markdown(&self) -> bool {
        false
    }
}
