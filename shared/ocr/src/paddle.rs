//! The local OCR engine: PaddleOCR's PP-OCRv6 small detection and recognition models (ONNX, as
//! the PyPI package `rapidocr` 3.10.0 ships them) run by onnxruntime, whose shared library comes
//! from the PyPI wheel `onnxruntime` and is loaded at run time (`ort`'s `load-dynamic`). `make
//! tools-ocr` puts both in `.tools/ocr/`; nothing is downloaded at build or run time.
//!
//! The pipeline is PaddleOCR's, written here without OpenCV:
//! 1. detection (DB): the page scaled to at most 960 px and to multiples of 32, normalised to
//!    [-1, 1]; the probability map thresholded at 0.3 and dilated; each connected region's
//!    minimum-area rectangle (convex hull + rotating calipers), kept when its mean probability
//!    is at least 0.5, grown by `area * 1.6 / perimeter` (DB's unclip);
//! 2. recognition (SVTR, CTC): each rectangle cut out upright (bilinear, so rotated lines come
//!    out straight), 48 px high, batched by width; CTC decoding over the character list the
//!    model carries in its metadata, a beam search weighed by a word list (`ocr::decode`); the
//!    confidence is the mean probability of the characters a greedy reading keeps.
//!
//! Sessions are not shareable while running (`Session::run` takes `&mut`), so the engine keeps
//! a small pool, one per worker, each single-threaded: pages in parallel scale better on few
//! cores than one page over many threads (measured, docs/decisions/0056-ocr-engine-pp-ocrv6.md).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use async_trait::async_trait;
use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use ort::value::Tensor;

use super::decode::{Decoder, Lexicon, Vocabulary};
use crate::{Ocr, OcrBox, OcrEngine, OcrError, OcrLine, PageImage};

/// The model files: the recognition model by the name the `rapidocr` wheel gives it, the
/// detector as `make tools-ocr` leaves it, quantised to 8 bits (`tests/ocr/quantize.py`: a third
/// of the floating-point detector's time, docs/decisions/0059-ocr-int8-detector.md).
pub const DET_MODEL: &str = "PP-OCRv6_det_small.int8.onnx";
pub const REC_MODEL: &str = "PP-OCRv6_rec_small.onnx";
/// The word list the decoder weighs spellings with (`make tools-ocr` writes it from the
/// wordfreq wheel, `tests/ocr/lexicon.py`); without it lines are decoded greedily.
pub const LEXICON: &str = "lexicon.tsv";
/// The longest side the page is scaled to before detection: PaddleOCR's own default
/// (`det_limit_side_len`; rapidocr's 2000 took 2.6 GiB with two workers and 2.7x the time, for
/// CER and task F1 within half a point of these, bench/findings.md "Footprint, continued").
/// Recognition still reads the crops from the full page.
const MAX_SIDE: f32 = 960.0;
const DET_THRESH: f32 = 0.3;
const BOX_THRESH: f32 = 0.5;
const UNCLIP_RATIO: f32 = 1.6;
const REC_HEIGHT: usize = 48;
const REC_MIN_WIDTH: usize = 320;
const REC_BATCH: usize = 6;
/// A batch's width in pixels at most (its widest crop times its crops): a batch of six long
/// lines would otherwise run at 6 x 3200, and onnxruntime keeps what its largest run took.
const REC_BATCH_WIDTH: usize = 2880;
/// The widest crop recognised at once; longer ones are narrowed (a 1400 px line is ~ 1600).
const REC_MAX_WIDTH: usize = 3200;

fn failed(e: impl std::error::Error + Send + Sync + 'static) -> OcrError {
    OcrError::Failed(Box::new(e))
}

struct Sessions {
    det: Session,
    rec: Session,
}

/// PP-OCRv6 through onnxruntime. Cheap to clone (the sessions are shared).
#[derive(Clone)]
pub struct PaddleOcr {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    pool: Vec<Mutex<Sessions>>,
    /// The recognition alphabet (index 0 is CTC's blank, the last is a space) and the word
    /// list, for decoding.
    decoder: Decoder,
    engine: OcrEngine,
}

/// Where the engine's files are: `$NIB_OCR_DIR`, else `.tools/ocr` at the top of the
/// repository (what `make tools-ocr` fills).
pub fn default_dir() -> PathBuf {
    std::env::var_os("NIB_OCR_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.tools/ocr")))
}

/// onnxruntime is loaded once per process, from the first directory asked for.
static RUNTIME: OnceLock<Result<Environment, String>> = OnceLock::new();

fn load_runtime(dir: &Path) -> Result<Environment, OcrError> {
    RUNTIME
        .get_or_init(|| {
            let lib = std::fs::read_dir(dir)
                .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libonnxruntime.so"))
                })
                .ok_or_else(|| {
                    format!(
                        "no libonnxruntime.so in {} (run `make tools-ocr`)",
                        dir.display()
                    )
                })?;
            ort::init_from(&lib)
                .map_err(|e| format!("{}: {e}", lib.display()))?
                .with_name("nib-ocr")
                .build()
                .map_err(|e| format!("{}: {e}", lib.display()))
        })
        .clone()
        .map_err(OcrError::Unavailable)
}

impl PaddleOcr {
    /// Opens the engine from `dir` (the models, the runtime library and `VERSION`), with
    /// `workers` sessions.
    pub fn open(dir: &Path, workers: usize) -> Result<PaddleOcr, OcrError> {
        PaddleOcr::open_with(dir, workers, true)
    }

    /// [`PaddleOcr::open`], with the word list or without it (greedy decoding: what the
    /// evaluation compares against).
    pub fn open_with(dir: &Path, workers: usize, lexicon: bool) -> Result<PaddleOcr, OcrError> {
        for file in [DET_MODEL, REC_MODEL] {
            if !dir.join(file).is_file() {
                return Err(OcrError::Unavailable(format!(
                    "{} is missing (run `make tools-ocr`)",
                    dir.join(file).display()
                )));
            }
        }
        let env = load_runtime(dir)?;
        let session = |file: &str| -> Result<Session, OcrError> {
            let unavailable =
                |e: ort::Error| OcrError::Unavailable(format!("cannot load {file}: {e}"));
            Session::builder(&env)
                .map_err(unavailable)?
                .with_optimization_level(GraphOptimizationLevel::Level3)
                .map_err(|e| unavailable(e.into()))?
                .with_intra_threads(1)
                .map_err(|e| unavailable(e.into()))?
                // The pattern is planned per input shape, and every page and crop batch has its
                // own: kept on, it only added memory (bench/findings.md, "Footprint, continued").
                .with_memory_pattern(false)
                .map_err(|e| unavailable(e.into()))?
                .commit_from_file(dir.join(file))
                .map_err(unavailable)
        };
        let mut pool = Vec::new();
        for _ in 0..workers.max(1) {
            pool.push(Mutex::new(Sessions {
                det: session(DET_MODEL)?,
                rec: session(REC_MODEL)?,
            }));
        }
        let alphabet = {
            let rec = &pool[0].lock().expect("a fresh lock").rec;
            let metadata = rec
                .metadata()
                .map_err(|e| OcrError::Unavailable(format!("no model metadata: {e}")))?;
            metadata.custom("character").ok_or_else(|| {
                OcrError::Unavailable(format!("{REC_MODEL} carries no character list"))
            })?
        };
        let mut chars = vec![String::new()];
        chars.extend(alphabet.lines().map(str::to_owned));
        chars.push(" ".into());
        let lexicon = match std::fs::read_to_string(dir.join(LEXICON)) {
            Ok(_) if !lexicon => Lexicon::new(),
            Ok(tsv) => Lexicon::parse(&tsv),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Lexicon::new(),
            Err(e) => {
                return Err(OcrError::Unavailable(format!(
                    "cannot read {}: {e}",
                    dir.join(LEXICON).display()
                )));
            }
        };
        let mut version = std::fs::read_to_string(dir.join("VERSION"))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        if !lexicon.is_empty() {
            version.push_str(" lexicon");
        }
        Ok(PaddleOcr {
            inner: std::sync::Arc::new(Inner {
                pool,
                decoder: Decoder::new(chars, lexicon),
                engine: OcrEngine {
                    name: "pp-ocrv6-small".into(),
                    version,
                },
            }),
        })
    }

    /// The whole pipeline on one page, on the calling thread.
    pub fn recognize_blocking(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
        self.inner.recognize(page, &Vocabulary::default())
    }

    /// The same, with the user's own words weighed as words (`Vocabulary`).
    pub fn recognize_with_blocking(
        &self,
        page: &PageImage,
        vocabulary: &Vocabulary,
    ) -> Result<Vec<OcrLine>, OcrError> {
        self.inner.recognize(page, vocabulary)
    }
}

impl Inner {
    fn recognize(
        &self,
        page: &PageImage,
        vocabulary: &Vocabulary,
    ) -> Result<Vec<OcrLine>, OcrError> {
        if page.width < 8 || page.height < 8 {
            return Ok(Vec::new());
        }
        // Any free session, else wait for the first.
        let mut guard = self
            .pool
            .iter()
            .find_map(|m| m.try_lock().ok())
            .unwrap_or_else(|| self.pool[0].lock().unwrap_or_else(|p| p.into_inner()));
        let sessions = &mut *guard;
        let boxes = detect(&mut sessions.det, page)?;
        recognize(&mut sessions.rec, &self.decoder, vocabulary, page, &boxes)
    }
}

#[async_trait]
impl Ocr for PaddleOcr {
    fn engine(&self) -> OcrEngine {
        self.inner.engine.clone()
    }

    async fn recognize(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
        self.recognize_with(page, &[]).await
    }

    async fn recognize_with(
        &self,
        page: &PageImage,
        vocabulary: &[String],
    ) -> Result<Vec<OcrLine>, OcrError> {
        let (inner, page) = (self.inner.clone(), page.clone());
        let vocabulary = Vocabulary::new(vocabulary.iter().map(String::as_str));
        tokio::task::spawn_blocking(move || inner.recognize(&page, &vocabulary))
            .await
            .map_err(failed)?
    }
}

/// A rotated rectangle: its four corners clockwise from the top left, in page pixels.
#[derive(Debug, Clone, Copy)]
struct Quad([(f32, f32); 4]);

impl Quad {
    fn width(&self) -> f32 {
        dist(self.0[0], self.0[1]).max(dist(self.0[3], self.0[2]))
    }

    fn height(&self) -> f32 {
        dist(self.0[0], self.0[3]).max(dist(self.0[1], self.0[2]))
    }

    fn bbox(&self) -> OcrBox {
        let xs = self.0.map(|p| p.0);
        let ys = self.0.map(|p| p.1);
        let (x0, x1) = (min4(xs), max4(xs));
        let (y0, y1) = (min4(ys), max4(ys));
        OcrBox {
            x: x0,
            y: y0,
            w: x1 - x0,
            h: y1 - y0,
        }
    }
}

fn dist(a: (f32, f32), b: (f32, f32)) -> f32 {
    ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
}

fn min4(v: [f32; 4]) -> f32 {
    v.into_iter().fold(f32::INFINITY, f32::min)
}

fn max4(v: [f32; 4]) -> f32 {
    v.into_iter().fold(f32::NEG_INFINITY, f32::max)
}

/// The page resized to `w` x `h` (bilinear), as a [-1, 1] CHW tensor of three equal channels.
fn det_input(page: &PageImage, window: Window, w: usize, h: usize) -> Vec<f32> {
    let plane = resample(page, window, w, h);
    let mut data = Vec::with_capacity(3 * w * h);
    for _ in 0..3 {
        data.extend(plane.iter().map(|&v| v / 127.5 - 1.0));
    }
    data
}

/// A part of the page in page pixels: left, top, width, height.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Window {
    x: f32,
    y: f32,
    w: f32,
    h: f32,
}

impl Window {
    fn whole(page: &PageImage) -> Window {
        Window {
            x: 0.0,
            y: 0.0,
            w: page.width as f32,
            h: page.height as f32,
        }
    }
}

/// Bilinear resampling of a window of the page to `w` x `h`, values 0..255.
fn resample(page: &PageImage, window: Window, w: usize, h: usize) -> Vec<f32> {
    let sx = window.w / w as f32;
    let sy = window.h / h as f32;
    let mut out = Vec::with_capacity(w * h);
    for y in 0..h {
        let fy = window.y + (y as f32 + 0.5) * sy - 0.5;
        for x in 0..w {
            let fx = window.x + (x as f32 + 0.5) * sx - 0.5;
            out.push(sample(page, fx, fy));
        }
    }
    out
}

/// The grey value at a real position (bilinear, edges repeated).
fn sample(page: &PageImage, x: f32, y: f32) -> f32 {
    let (w, h) = (page.width as i64, page.height as i64);
    let x0 = x.floor();
    let y0 = y.floor();
    let (ax, ay) = (x - x0, y - y0);
    let at = |xi: i64, yi: i64| -> f32 {
        let xi = xi.clamp(0, w - 1);
        let yi = yi.clamp(0, h - 1);
        f32::from(page.gray[(yi * w + xi) as usize])
    };
    let (x0, y0) = (x0 as i64, y0 as i64);
    let top = at(x0, y0) * (1.0 - ax) + at(x0 + 1, y0) * ax;
    let bottom = at(x0, y0 + 1) * (1.0 - ax) + at(x0 + 1, y0 + 1) * ax;
    top * (1.0 - ay) + bottom * ay
}

fn round32(v: f32) -> usize {
    (((v / 32.0).round() as usize) * 32).max(32)
}

/// Text regions of the page, as rotated rectangles in page pixels: found on the whole page
/// scaled to [`MAX_SIDE`], then, when the text lies in a part of it (a page written at the top,
/// a photo with the desk around the page), found again in that part alone, seen larger. At
/// 960 px a whole page's handwriting is a few pixels high, and a phone photo's page is a
/// fraction of the frame; detecting in the part that holds the text keeps the detector's input
/// (and memory) the same size and reads the writing at up to twice the scale.
fn detect(det: &mut Session, page: &PageImage) -> Result<Vec<Quad>, OcrError> {
    let whole = Window::whole(page);
    let quads = detect_in(det, page, whole)?;
    match zoom_window(page, &quads) {
        Some(window) => detect_in(det, page, window),
        None => Ok(quads),
    }
}

/// The part of the page the text found at first sight lies in, with a margin, when it is
/// small enough that detecting in it alone sees the writing [`MIN_ZOOM`] times larger.
fn zoom_window(page: &PageImage, quads: &[Quad]) -> Option<Window> {
    let (pw, ph) = (page.width as f32, page.height as f32);
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for q in quads {
        for (x, y) in q.0 {
            x0 = x0.min(x);
            y0 = y0.min(y);
            x1 = x1.max(x);
            y1 = y1.max(y);
        }
    }
    if quads.is_empty() {
        return None;
    }
    let margin = 0.04 * pw.max(ph);
    let (x0, y0) = ((x0 - margin).max(0.0), (y0 - margin).max(0.0));
    let (x1, y1) = ((x1 + margin).min(pw), (y1 + margin).min(ph));
    let window = Window {
        x: x0,
        y: y0,
        w: x1 - x0,
        h: y1 - y0,
    };
    let before = (MAX_SIDE / pw.max(ph)).min(1.0);
    let after = (MAX_SIDE / window.w.max(window.h)).min(1.0);
    (after >= MIN_ZOOM * before).then_some(window)
}

/// How much larger a second look at the text's part of the page must see it to be worth it.
const MIN_ZOOM: f32 = 1.25;

/// Text regions in a window of the page, as rotated rectangles in page pixels.
fn detect_in(det: &mut Session, page: &PageImage, window: Window) -> Result<Vec<Quad>, OcrError> {
    let (pw, ph) = (window.w, window.h);
    let scale = (MAX_SIDE / pw.max(ph)).min(1.0);
    let (w, h) = (round32(pw * scale), round32(ph * scale));
    let input =
        Tensor::from_array(([1usize, 3, h, w], det_input(page, window, w, h))).map_err(failed)?;
    let outputs = det.run(ort::inputs![input]).map_err(failed)?;
    let (shape, prob) = outputs[0].try_extract_tensor::<f32>().map_err(failed)?;
    let (mh, mw) = (shape[2] as usize, shape[3] as usize);
    if mh * mw != prob.len() {
        return Err(OcrError::Failed("unexpected detection output shape".into()));
    }
    let mut mask: Vec<bool> = prob.iter().map(|&p| p > DET_THRESH).collect();
    dilate(&mut mask, mw, mh);
    let (fx, fy) = (pw / mw as f32, ph / mh as f32);
    let mut quads = Vec::new();
    for region in regions(&mask, mw, mh) {
        let Some(rect) = min_area_rect(&region) else {
            continue;
        };
        if rect.short_side() < 3.0 {
            continue;
        }
        if mean_inside(prob, mw, mh, &rect) < BOX_THRESH {
            continue;
        }
        let grown = rect.unclip(UNCLIP_RATIO);
        if grown.short_side() < 5.0 {
            continue;
        }
        let corners = grown.corners().map(|(x, y)| {
            (
                window.x + (x * fx).clamp(0.0, pw),
                window.y + (y * fy).clamp(0.0, ph),
            )
        });
        quads.push(Quad(corners));
    }
    Ok(quads)
}

/// A 2x2 dilation (DB's `use_dilation`), in place.
fn dilate(mask: &mut [bool], w: usize, h: usize) {
    let src = mask.to_vec();
    for y in 0..h {
        for x in 0..w {
            if src[y * w + x] {
                continue;
            }
            // cv2.dilate with a 2x2 kernel anchored at its centre reaches up and left.
            let up = y > 0 && src[(y - 1) * w + x];
            let left = x > 0 && src[y * w + x - 1];
            let up_left = x > 0 && y > 0 && src[(y - 1) * w + x - 1];
            if up || left || up_left {
                mask[y * w + x] = true;
            }
        }
    }
}

/// The boundary points (row extremes and column extremes) of each 8-connected region.
fn regions(mask: &[bool], w: usize, h: usize) -> Vec<Vec<(f32, f32)>> {
    let mut label = vec![u32::MAX; w * h];
    let mut out = Vec::new();
    let mut stack = Vec::new();
    for start in 0..w * h {
        if !mask[start] || label[start] != u32::MAX {
            continue;
        }
        let id = out.len() as u32;
        label[start] = id;
        stack.push(start);
        // Per row: leftmost and rightmost x; per column: topmost and bottommost y.
        let mut rows: std::collections::HashMap<usize, (usize, usize)> = Default::default();
        let mut cols: std::collections::HashMap<usize, (usize, usize)> = Default::default();
        let mut count = 0usize;
        while let Some(i) = stack.pop() {
            count += 1;
            let (x, y) = (i % w, i / w);
            let r = rows.entry(y).or_insert((x, x));
            r.0 = r.0.min(x);
            r.1 = r.1.max(x);
            let c = cols.entry(x).or_insert((y, y));
            c.0 = c.0.min(y);
            c.1 = c.1.max(y);
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (nx, ny) = (x as i64 + dx, y as i64 + dy);
                    if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                        continue;
                    }
                    let j = ny as usize * w + nx as usize;
                    if mask[j] && label[j] == u32::MAX {
                        label[j] = id;
                        stack.push(j);
                    }
                }
            }
        }
        let mut points = Vec::with_capacity(2 * (rows.len() + cols.len()) * 2);
        // Pixel corners, so a one-pixel-wide region still has an area.
        for (y, (x0, x1)) in rows {
            points.push((x0 as f32, y as f32));
            points.push((x0 as f32, y as f32 + 1.0));
            points.push((x1 as f32 + 1.0, y as f32));
            points.push((x1 as f32 + 1.0, y as f32 + 1.0));
        }
        for (x, (y0, y1)) in cols {
            points.push((x as f32, y0 as f32));
            points.push((x as f32 + 1.0, y0 as f32));
            points.push((x as f32, y1 as f32 + 1.0));
            points.push((x as f32 + 1.0, y1 as f32 + 1.0));
        }
        if count >= 4 {
            out.push(points);
        } else {
            out.push(Vec::new());
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

/// A rectangle at an angle: centre, unit axis `u` (along the length), half extents.
#[derive(Debug, Clone, Copy)]
struct Rect {
    cx: f32,
    cy: f32,
    ux: f32,
    uy: f32,
    half_w: f32,
    half_h: f32,
}

impl Rect {
    fn short_side(&self) -> f32 {
        2.0 * self.half_w.min(self.half_h)
    }

    fn unclip(&self, ratio: f32) -> Rect {
        let (w, h) = (2.0 * self.half_w, 2.0 * self.half_h);
        let d = w * h * ratio / (2.0 * (w + h));
        Rect {
            half_w: self.half_w + d,
            half_h: self.half_h + d,
            ..*self
        }
    }

    /// Corners clockwise from the top left of the upright reading of the rectangle.
    fn corners(&self) -> [(f32, f32); 4] {
        // Read along the longer axis, left to right.
        let (mut ux, mut uy, mut hw, mut hh) = (self.ux, self.uy, self.half_w, self.half_h);
        if hh > hw {
            (ux, uy) = (-uy, ux);
            (hw, hh) = (hh, hw);
        }
        if ux < 0.0 {
            (ux, uy) = (-ux, -uy);
        }
        // v is u turned a quarter clockwise in image coordinates (y down): it points down.
        let (vx, vy) = (-uy, ux);
        let p = |a: f32, b: f32| (self.cx + a * ux + b * vx, self.cy + a * uy + b * vy);
        [p(-hw, -hh), p(hw, -hh), p(hw, hh), p(-hw, hh)]
    }
}

/// The minimum-area enclosing rectangle of `points` (convex hull, rotating calipers).
fn min_area_rect(points: &[(f32, f32)]) -> Option<Rect> {
    let hull = convex_hull(points);
    if hull.len() < 3 {
        return None;
    }
    let mut best: Option<(f32, Rect)> = None;
    for i in 0..hull.len() {
        let (a, b) = (hull[i], hull[(i + 1) % hull.len()]);
        let len = dist(a, b);
        if len == 0.0 {
            continue;
        }
        let (ux, uy) = ((b.0 - a.0) / len, (b.1 - a.1) / len);
        let (mut umin, mut umax, mut vmin, mut vmax) = (
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::INFINITY,
            f32::NEG_INFINITY,
        );
        for p in &hull {
            let u = p.0 * ux + p.1 * uy;
            let v = -p.0 * uy + p.1 * ux;
            umin = umin.min(u);
            umax = umax.max(u);
            vmin = vmin.min(v);
            vmax = vmax.max(v);
        }
        let area = (umax - umin) * (vmax - vmin);
        if best.as_ref().is_none_or(|(a, _)| area < *a) {
            let (cu, cv) = ((umin + umax) / 2.0, (vmin + vmax) / 2.0);
            best = Some((
                area,
                Rect {
                    cx: cu * ux - cv * uy,
                    cy: cu * uy + cv * ux,
                    ux,
                    uy,
                    half_w: (umax - umin) / 2.0,
                    half_h: (vmax - vmin) / 2.0,
                },
            ));
        }
    }
    best.map(|(_, r)| r)
}

/// Andrew's monotone chain.
fn convex_hull(points: &[(f32, f32)]) -> Vec<(f32, f32)> {
    let mut p = points.to_vec();
    p.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    p.dedup();
    if p.len() < 3 {
        return p;
    }
    let cross = |o: (f32, f32), a: (f32, f32), b: (f32, f32)| {
        (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
    };
    let mut lower: Vec<(f32, f32)> = Vec::new();
    for &q in &p {
        while lower.len() >= 2 && cross(lower[lower.len() - 2], lower[lower.len() - 1], q) <= 0.0 {
            lower.pop();
        }
        lower.push(q);
    }
    let mut upper: Vec<(f32, f32)> = Vec::new();
    for &q in p.iter().rev() {
        while upper.len() >= 2 && cross(upper[upper.len() - 2], upper[upper.len() - 1], q) <= 0.0 {
            upper.pop();
        }
        upper.push(q);
    }
    lower.pop();
    upper.pop();
    lower.extend(upper);
    lower
}

/// The mean of `prob` over the pixels inside `rect` (DB's fast box score).
fn mean_inside(prob: &[f32], w: usize, h: usize, rect: &Rect) -> f32 {
    let corners = rect.corners();
    let xs = corners.map(|c| c.0);
    let ys = corners.map(|c| c.1);
    let x0 = (min4(xs).floor().max(0.0)) as usize;
    let x1 = (max4(xs).ceil() as usize).min(w - 1);
    let y0 = (min4(ys).floor().max(0.0)) as usize;
    let y1 = (max4(ys).ceil() as usize).min(h - 1);
    let (mut sum, mut n) = (0.0f32, 0usize);
    for y in y0..=y1 {
        for x in x0..=x1 {
            let (dx, dy) = (x as f32 + 0.5 - rect.cx, y as f32 + 0.5 - rect.cy);
            let u = dx * rect.ux + dy * rect.uy;
            let v = -dx * rect.uy + dy * rect.ux;
            if u.abs() <= rect.half_w + 0.5 && v.abs() <= rect.half_h + 0.5 {
                sum += prob[y * w + x];
                n += 1;
            }
        }
    }
    if n == 0 { 0.0 } else { sum / n as f32 }
}

/// The text in each of `quads`.
fn recognize(
    rec: &mut Session,
    decoder: &Decoder,
    vocabulary: &Vocabulary,
    page: &PageImage,
    quads: &[Quad],
) -> Result<Vec<OcrLine>, OcrError> {
    // Crops at their natural size, upright.
    let crops: Vec<(usize, usize, Vec<f32>)> = quads
        .iter()
        .map(|q| {
            let (cw, ch) = (q.width().round().max(1.0), q.height().round().max(1.0));
            let rw = ((REC_HEIGHT as f32 * cw / ch).ceil() as usize).clamp(1, REC_MAX_WIDTH);
            let [p0, p1, _, p3] = q.0;
            let mut data = Vec::with_capacity(rw * REC_HEIGHT);
            for i in 0..REC_HEIGHT {
                let t = (i as f32 + 0.5) / REC_HEIGHT as f32;
                for j in 0..rw {
                    let s = (j as f32 + 0.5) / rw as f32;
                    let x = p0.0 + s * (p1.0 - p0.0) + t * (p3.0 - p0.0);
                    let y = p0.1 + s * (p1.1 - p0.1) + t * (p3.1 - p0.1);
                    data.push(sample(page, x, y) / 127.5 - 1.0);
                }
            }
            (rw, REC_HEIGHT, data)
        })
        .collect();
    let mut order: Vec<usize> = (0..crops.len()).collect();
    order.sort_by_key(|&i| crops[i].0);
    let mut results: Vec<Option<(String, f32)>> = vec![None; crops.len()];
    for batch in &rec_batches(&order, |i| crops[i].0) {
        let width = batch
            .iter()
            .map(|&i| crops[i].0)
            .max()
            .unwrap_or(REC_MIN_WIDTH)
            .max(REC_MIN_WIDTH);
        let n = batch.len();
        // Zero is mid-grey after normalising, as PaddleOCR pads.
        let mut data = vec![0.0f32; n * 3 * REC_HEIGHT * width];
        for (b, &i) in batch.iter().enumerate() {
            let (cw, _, crop) = &crops[i];
            for c in 0..3 {
                for y in 0..REC_HEIGHT {
                    let dst = ((b * 3 + c) * REC_HEIGHT + y) * width;
                    data[dst..dst + cw].copy_from_slice(&crop[y * cw..(y + 1) * cw]);
                }
            }
        }
        let input = Tensor::from_array(([n, 3, REC_HEIGHT, width], data)).map_err(failed)?;
        let outputs = rec.run(ort::inputs![input]).map_err(failed)?;
        let (shape, probs) = outputs[0].try_extract_tensor::<f32>().map_err(failed)?;
        let (steps, classes) = (shape[1] as usize, shape[2] as usize);
        for (b, &i) in batch.iter().enumerate() {
            let seq = &probs[b * steps * classes..(b + 1) * steps * classes];
            results[i] = Some(decoder.decode(seq, steps, classes, vocabulary));
        }
    }
    Ok(quads
        .iter()
        .zip(results)
        .filter_map(|(q, r)| {
            let (text, confidence) = r?;
            let text = text.trim().to_owned();
            (!text.is_empty()).then(|| OcrLine {
                text,
                confidence,
                bbox: q.bbox(),
            })
        })
        .collect())
}

/// `order` (crop indices, narrowest first) cut into batches of at most [`REC_BATCH`] crops and
/// [`REC_BATCH_WIDTH`] pixels of padded width; a crop wider than that goes alone.
fn rec_batches(order: &[usize], width: impl Fn(usize) -> usize) -> Vec<Vec<usize>> {
    let mut batches: Vec<Vec<usize>> = Vec::new();
    for &i in order {
        let w = width(i).max(REC_MIN_WIDTH);
        match batches.last_mut() {
            Some(b) if b.len() < REC_BATCH && (b.len() + 1) * w <= REC_BATCH_WIDTH => b.push(i),
            _ => batches.push(vec![i]),
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimum_rectangle_of_a_tilted_bar_follows_its_tilt() {
        // A 100 x 10 bar turned by 2 degrees.
        let a = 2f32.to_radians();
        let (c, s) = (a.cos(), a.sin());
        let mut points = Vec::new();
        for i in 0..=100 {
            for j in 0..=10 {
                let (x, y) = (i as f32, j as f32);
                points.push((x * c - y * s + 50.0, x * s + y * c + 20.0));
            }
        }
        let r = min_area_rect(&points).unwrap();
        let (long, short) = (2.0 * r.half_w.max(r.half_h), 2.0 * r.half_w.min(r.half_h));
        assert!(
            (long - 100.0).abs() < 0.5 && (short - 10.0).abs() < 0.5,
            "{r:?}"
        );
        let q = Quad(r.corners());
        let slope = (q.0[1].1 - q.0[0].1) / (q.0[1].0 - q.0[0].0);
        assert!((slope.atan().to_degrees() - 2.0).abs() < 0.2, "{q:?}");
        assert!(
            q.0[0].0 < q.0[1].0 && q.0[0].1 < q.0[3].1,
            "top left first: {q:?}"
        );
    }

    #[test]
    fn recognition_batches_are_bounded_by_count_and_padded_width() {
        // Narrowest first: six short crops share a batch, then the width bounds it, and a crop
        // wider than the bound goes alone.
        let widths = [100, 100, 200, 300, 320, 320, 320, 700, 800, 1500, 4000];
        let order: Vec<usize> = (0..widths.len()).collect();
        let batches = rec_batches(&order, |i| widths[i]);
        assert_eq!(
            batches,
            vec![vec![0, 1, 2, 3, 4, 5], vec![6, 7, 8], vec![9], vec![10]]
        );
        for b in &batches {
            let padded = b
                .iter()
                .map(|&i| widths[i].max(REC_MIN_WIDTH))
                .max()
                .unwrap();
            assert!(b.len() == 1 || b.len() * padded <= REC_BATCH_WIDTH);
        }
    }

    #[test]
    fn ctc_merges_repeats_and_drops_blanks() {
        let chars: Vec<String> = ["", "a", "b", " "].iter().map(|s| s.to_string()).collect();
        // a a blank a b b
        let steps = [1usize, 1, 0, 1, 2, 2];
        let mut seq = vec![0.0f32; steps.len() * 4];
        for (t, &c) in steps.iter().enumerate() {
            seq[t * 4 + c] = 0.9;
        }
        let decoder = Decoder::new(chars, Lexicon::new());
        let (text, conf) = decoder.decode(&seq, steps.len(), 4, &Vocabulary::default());
        assert_eq!(text, "aab");
        assert!((conf - 0.9).abs() < 1e-6);
    }

    #[test]
    fn regions_are_found_and_separated() {
        let (w, h) = (20, 10);
        let mut mask = vec![false; w * h];
        for y in 2..5 {
            for x in 1..8 {
                mask[y * w + x] = true;
            }
            for x in 12..18 {
                mask[y * w + x] = true;
            }
        }
        assert_eq!(regions(&mask, w, h).len(), 2);
    }
}
