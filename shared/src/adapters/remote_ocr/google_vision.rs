//! `GoogleVisionOcr`: the `Ocr` port over Google Cloud Vision (`NIB_OCR=google-vision`).
//!
//! Each page is one `POST {base}/v1/images:annotate` with one request: the page as PNG
//! (base64 in `image.content`, from the same grey pixels every engine reads) and the feature
//! `DOCUMENT_TEXT_DETECTION`, Vision's dense-text model (handwriting included). The API key
//! goes in the `X-Goog-Api-Key` header, which Google APIs take in place of the `key` query
//! parameter: the URL, which proxies and error messages show, never carries it.
//!
//! Vision answers `fullTextAnnotation`: pages, blocks, paragraphs, words, symbols. It has no
//! line level; a symbol's `property.detectedBreak` says what follows it (`SPACE`,
//! `SURE_SPACE`, `EOL_SURE_SPACE` at a wrapped line's end, `LINE_BREAK` at a paragraph's end,
//! `HYPHEN`). So the words are joined into lines at `EOL_SURE_SPACE`, `LINE_BREAK`, `HYPHEN`
//! and at each paragraph's end; a line's box is the union of its words' `boundingBox`
//! (vertices in pixels of the image sent; `normalizedVertices`, ratios, are read too), its
//! confidence the words' weighted by length. These go through `ocr::layout::analyze` with the
//! pixels, as Textract's lines do, so checkboxes are found in the ink.
//!
//! A per-image `error` inside a 200 (a `google.rpc.Status`) fails the page with its code
//! only; its message is not kept.
//!
//! Tested against a stand-in (`nib_testkit::vision_standin`); not against Google's service.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;
use serde_json::json;

use super::{Caller, RemoteOcrError, page_png};
use crate::config::{GoogleVisionConfig, Secret};
use crate::ports::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};

/// The provider's name in errors and logs.
pub const PROVIDER: &str = "google-vision";
/// The largest PNG sent: Vision takes a JSON request of at most 10 MB, and base64 makes the
/// image a third larger.
pub const MAX_PNG_BYTES: usize = 7 * 1024 * 1024;

/// Google Cloud Vision behind the `Ocr` port. `Debug` redacts the key.
#[derive(Debug, Clone)]
pub struct GoogleVisionOcr {
    url: String,
    api_key: Secret,
    caller: Caller,
}

impl GoogleVisionOcr {
    pub fn new(config: &GoogleVisionConfig) -> GoogleVisionOcr {
        GoogleVisionOcr {
            url: format!("{}/v1/images:annotate", config.base_url),
            api_key: config.api_key.clone(),
            caller: Caller::new(PROVIDER, config.policy),
        }
    }
}

#[async_trait]
impl Ocr for GoogleVisionOcr {
    fn engine(&self) -> OcrEngine {
        OcrEngine {
            name: "google-cloud-vision".into(),
            version: "DOCUMENT_TEXT_DETECTION".into(),
        }
    }

    async fn recognize(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
        let png = page_png(page, PROVIDER, MAX_PNG_BYTES)?;
        let body = json!({
            "requests": [{
                "image": { "content": BASE64.encode(&png) },
                "features": [{ "type": "DOCUMENT_TEXT_DETECTION" }]
            }]
        });
        drop(png);
        let answer = self
            .caller
            .post_json(
                &self.url,
                &[("x-goog-api-key", self.api_key.expose())],
                &body,
            )
            .await?;
        let bad = || RemoteOcrError::BadAnswer {
            provider: PROVIDER,
            status: 200,
        };
        let answer: Annotate = serde_json::from_value(answer).map_err(|_| bad())?;
        let response = answer.responses.into_iter().next().ok_or_else(bad)?;
        if let Some(error) = response.error
            && error.code != 0
        {
            return Err(RemoteOcrError::Refused {
                provider: PROVIDER,
                code: error.code,
            }
            .into());
        }
        Ok(response
            .full_text_annotation
            .map(|a| lines(&a, page.width, page.height))
            .unwrap_or_default())
    }
}

#[derive(Deserialize)]
struct Annotate {
    #[serde(default)]
    responses: Vec<AnnotateResponse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnnotateResponse {
    full_text_annotation: Option<TextAnnotation>,
    error: Option<Status>,
}

#[derive(Deserialize)]
struct Status {
    #[serde(default)]
    code: i64,
}

#[derive(Deserialize)]
struct TextAnnotation {
    #[serde(default)]
    pages: Vec<VisionPage>,
}

#[derive(Deserialize)]
struct VisionPage {
    #[serde(default)]
    blocks: Vec<Block>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(default)]
    paragraphs: Vec<Paragraph>,
}

#[derive(Deserialize)]
struct Paragraph {
    #[serde(default)]
    words: Vec<Word>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Word {
    bounding_box: Option<BoundingPoly>,
    #[serde(default)]
    symbols: Vec<Symbol>,
    confidence: Option<f32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundingPoly {
    #[serde(default)]
    vertices: Vec<Vertex>,
    #[serde(default)]
    normalized_vertices: Vec<Vertex>,
}

/// Vision leaves out a coordinate that is 0.
#[derive(Deserialize)]
struct Vertex {
    #[serde(default)]
    x: f32,
    #[serde(default)]
    y: f32,
}

#[derive(Deserialize)]
struct Symbol {
    #[serde(default)]
    text: String,
    property: Option<SymbolProperty>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SymbolProperty {
    detected_break: Option<DetectedBreak>,
}

#[derive(Deserialize)]
struct DetectedBreak {
    #[serde(rename = "type", default)]
    kind: String,
}

/// A line being gathered: its text, box (x0, y0, x1, y1) and confidence weighed by length.
#[derive(Default)]
struct Gathering {
    text: String,
    bounds: Option<(f32, f32, f32, f32)>,
    weighted: f32,
    chars: f32,
}

impl Gathering {
    fn finish(&mut self, out: &mut Vec<OcrLine>) {
        let g = std::mem::take(self);
        let text = g.text.trim();
        if let (false, Some((x0, y0, x1, y1))) = (text.is_empty(), g.bounds) {
            out.push(OcrLine {
                text: text.to_owned(),
                confidence: if g.chars > 0.0 {
                    (g.weighted / g.chars).clamp(0.0, 1.0)
                } else {
                    1.0
                },
                bbox: OcrBox {
                    x: x0,
                    y: y0,
                    w: x1 - x0,
                    h: y1 - y0,
                },
            });
        }
    }
}

/// The annotation's words joined into lines, with boxes in pixels of a `width` x `height`
/// page (clamped to it).
fn lines(annotation: &TextAnnotation, width: u32, height: u32) -> Vec<OcrLine> {
    let (pw, ph) = (width as f32, height as f32);
    let mut out = Vec::new();
    let mut line = Gathering::default();
    for paragraph in annotation
        .pages
        .iter()
        .flat_map(|p| &p.blocks)
        .flat_map(|b| &b.paragraphs)
    {
        for word in &paragraph.words {
            let text: String = word.symbols.iter().map(|s| s.text.as_str()).collect();
            let n = text.chars().count() as f32;
            line.text.push_str(&text);
            line.weighted += word.confidence.unwrap_or(1.0) * n;
            line.chars += n;
            if let Some(b) = word.bounding_box.as_ref().and_then(|b| word_box(b, pw, ph)) {
                line.bounds = Some(match line.bounds {
                    None => b,
                    Some(a) => (a.0.min(b.0), a.1.min(b.1), a.2.max(b.2), a.3.max(b.3)),
                });
            }
            let after = word
                .symbols
                .last()
                .and_then(|s| s.property.as_ref())
                .and_then(|p| p.detected_break.as_ref())
                .map(|b| b.kind.as_str());
            match after {
                Some("EOL_SURE_SPACE" | "LINE_BREAK" | "HYPHEN") => line.finish(&mut out),
                Some("SPACE" | "SURE_SPACE") => line.text.push(' '),
                _ => {}
            }
        }
        line.finish(&mut out);
    }
    out
}

/// A word's box in pixels, from its vertices (pixels) or normalised vertices (ratios).
fn word_box(poly: &BoundingPoly, pw: f32, ph: f32) -> Option<(f32, f32, f32, f32)> {
    let points: Vec<(f32, f32)> = if !poly.vertices.is_empty() {
        poly.vertices.iter().map(|v| (v.x, v.y)).collect()
    } else {
        poly.normalized_vertices
            .iter()
            .map(|v| (v.x * pw, v.y * ph))
            .collect()
    };
    if points.is_empty() {
        return None;
    }
    let fold = |f: fn(f32, f32) -> f32, init: f32, pick: fn(&(f32, f32)) -> f32| {
        points.iter().map(pick).fold(init, f)
    };
    let x0 = fold(f32::min, f32::MAX, |p| p.0).clamp(0.0, pw);
    let y0 = fold(f32::min, f32::MAX, |p| p.1).clamp(0.0, ph);
    let x1 = fold(f32::max, f32::MIN, |p| p.0).clamp(x0, pw);
    let y1 = fold(f32::max, f32::MIN, |p| p.1).clamp(y0, ph);
    Some((x0, y0, x1, y1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(text: &str, brk: Option<&str>, x: f32, y: f32, conf: f32) -> serde_json::Value {
        let n = text.chars().count();
        let symbols: Vec<_> = text
            .chars()
            .enumerate()
            .map(|(i, c)| match (i + 1 == n, brk) {
                (true, Some(b)) => {
                    json!({"text": c.to_string(), "property": {"detectedBreak": {"type": b}}})
                }
                _ => json!({"text": c.to_string()}),
            })
            .collect();
        json!({
            "boundingBox": {"vertices": [
                {"x": x, "y": y}, {"x": x + 40.0, "y": y}, {"x": x + 40.0, "y": y + 20.0}, {"x": x, "y": y + 20.0}
            ]},
            "symbols": symbols,
            "confidence": conf
        })
    }

    #[test]
    fn words_join_into_lines_at_the_breaks_vision_marks() {
        let annotation: TextAnnotation = serde_json::from_value(json!({"pages": [{"blocks": [
            {"paragraphs": [
                {"words": [
                    word("call", Some("SPACE"), 10.0, 10.0, 0.9),
                    word("bank", Some("EOL_SURE_SPACE"), 60.0, 12.0, 0.5),
                    word("milk", Some("LINE_BREAK"), 10.0, 50.0, 1.0),
                ]},
                // The last word of a paragraph without a break still ends the line.
                {"words": [word("end", None, 0.0, 90.0, 1.0)]}
            ]}
        ]}]}))
        .unwrap();
        let got = lines(&annotation, 200, 100);
        let texts: Vec<&str> = got.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["call bank", "milk", "end"]);
        assert_eq!(
            got[0].bbox,
            OcrBox {
                x: 10.0,
                y: 10.0,
                w: 90.0,
                h: 22.0
            }
        );
        assert!((got[0].confidence - 0.7).abs() < 1e-5);
        // Clamped to the page: the last box reaches past its bottom.
        assert_eq!(got[2].bbox.bottom(), 100.0);
    }
}
