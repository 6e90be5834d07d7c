//! Reading handwriting: ink files to page images (`raster`), an engine behind the [`Ocr`] port
//! (the local PP-OCR engine in `paddle`, Textract on AWS, a remote provider the operator
//! brings), and the layout analysis that turns
//! the engine's text segments into notebook lines (`layout`: headings, tasks with their
//! checkboxes, bullets). The result is written as a page's OCR text and markdown and then runs
//! through the same parser, task reconciliation and index as an imported markdown page.
//!
//! A crate of its own, depending on nothing of nib's: nib's library names its port in `ports`
//! and re-exports the crate as `nib::ocr`. Its pixel loops are the tests' largest cost in an
//! unoptimised build, so the dev profile optimises this crate alone (Cargo.toml).

#[cfg(feature = "local")]
pub mod decode;
#[cfg(feature = "pipeline")]
pub mod layout;
#[cfg(feature = "local")]
pub mod paddle;
mod port;
#[cfg(feature = "pipeline")]
pub mod raster;

pub use port::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};

#[cfg(feature = "pipeline")]
pub use layout::{Kind, Line, UNSURE_BELOW};

/// One page as OCR read it.
#[cfg(feature = "pipeline")]
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPage {
    pub engine: OcrEngine,
    pub lines: Vec<Line>,
}

#[cfg(feature = "pipeline")]
impl ReadPage {
    /// The page's text: its lines, without markdown marks.
    pub fn text(&self) -> String {
        self.lines
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The page as nib's markdown (`#`, `- [ ]`, `- [x]`, `-`).
    pub fn markdown(&self) -> String {
        self.lines
            .iter()
            .map(Line::markdown)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Reads one page image: the engine's segments, then the layout.
#[cfg(feature = "pipeline")]
pub async fn read(ocr: &dyn Ocr, image: &PageImage) -> Result<ReadPage, OcrError> {
    let segments = ocr.recognize(image).await?;
    Ok(ReadPage {
        engine: ocr.engine(),
        lines: layout::lines(image, segments, ocr.writes_markdown()),
    })
}
