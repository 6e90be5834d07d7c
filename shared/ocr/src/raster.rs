//! Ink files to page images: PNG and JPEG decoded, PDF pages rendered (hayro, pure Rust, so
//! the ingest Lambda needs no poppler), everything turned to 8-bit grey for the engines and the
//! layout analysis. Limits keep a hostile file from exhausting memory.

use std::io::Cursor;

use crate::{OcrError, PageImage};

/// The largest image accepted, in pixels (a 600 dpi A4 scan is ~35 M).
pub const MAX_PIXELS: u64 = 40_000_000;
/// The most pages of one PDF read.
pub const MAX_PDF_PAGES: usize = 500;
/// The longer side PDF pages are rendered at: about a 160 dpi A4 page, what the engines were
/// measured at (a handwritten line is then ~40-60 px high).
const PDF_LONG_SIDE: f32 = 1872.0;

/// What kind of file `bytes` are, by their magic numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InkFormat {
    Png,
    Jpeg,
    Pdf,
}

impl InkFormat {
    pub fn sniff(bytes: &[u8]) -> Option<InkFormat> {
        if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(InkFormat::Png)
        } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(InkFormat::Jpeg)
        } else if bytes.len() > 5
            && bytes[..1024.min(bytes.len())]
                .windows(5)
                .any(|w| w == b"%PDF-")
        {
            Some(InkFormat::Pdf)
        } else {
            None
        }
    }
}

/// The page images of an ink file: one for a PNG or JPEG, one per page of a PDF.
pub fn decode(bytes: &[u8]) -> Result<Vec<PageImage>, OcrError> {
    match InkFormat::sniff(bytes) {
        Some(InkFormat::Png | InkFormat::Jpeg) => decode_image(bytes).map(|p| vec![p]),
        Some(InkFormat::Pdf) => pdf_pages(bytes),
        None => Err(OcrError::BadImage("not a PNG, JPEG or PDF file".into())),
    }
}

/// Whether a PNG or JPEG can be a page: its header reads and its size is within
/// [`MAX_PIXELS`] (an image bomb is refused from its header, before anything is decoded).
pub fn check_image(bytes: &[u8]) -> Result<(), OcrError> {
    let (w, h) = image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| OcrError::BadImage(e.to_string()))?
        .into_dimensions()
        .map_err(|e| OcrError::BadImage(e.to_string()))?;
    if u64::from(w) * u64::from(h) > MAX_PIXELS {
        return Err(OcrError::BadImage(format!(
            "{w}x{h} is more than {MAX_PIXELS} pixels"
        )));
    }
    Ok(())
}

/// A PNG or JPEG as grey pixels.
pub fn decode_image(bytes: &[u8]) -> Result<PageImage, OcrError> {
    let mut reader = image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| OcrError::BadImage(e.to_string()))?;
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_PIXELS * 4);
    reader.limits(limits);
    let (w, h) = reader
        .into_dimensions()
        .map_err(|e| OcrError::BadImage(e.to_string()))?;
    if u64::from(w) * u64::from(h) > MAX_PIXELS {
        return Err(OcrError::BadImage(format!(
            "{w}x{h} is more than {MAX_PIXELS} pixels"
        )));
    }
    let mut reader = image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| OcrError::BadImage(e.to_string()))?;
    reader.limits(limits_for(w, h));
    let img = reader
        .decode()
        .map_err(|e| OcrError::BadImage(e.to_string()))?;
    let gray = img.to_luma8();
    Ok(PageImage {
        width: gray.width(),
        height: gray.height(),
        gray: gray.into_raw(),
    })
}

/// A JPEG (a phone's photo of a page, a tablet's export) as a PNG in its own colours: pages
/// keep their ink as PDF or PNG, so a JPEG is stored as the page's PNG. The same pixel limit
/// as [`decode_image`] is checked from the header before anything is decoded.
pub fn jpeg_to_png(bytes: &[u8]) -> Result<Vec<u8>, OcrError> {
    if InkFormat::sniff(bytes) != Some(InkFormat::Jpeg) {
        return Err(OcrError::BadImage("not a JPEG file".into()));
    }
    let bad = |e: image::ImageError| OcrError::BadImage(e.to_string());
    let reader = image::ImageReader::with_format(Cursor::new(bytes), image::ImageFormat::Jpeg);
    let (w, h) = reader.into_dimensions().map_err(bad)?;
    if u64::from(w) * u64::from(h) > MAX_PIXELS {
        return Err(OcrError::BadImage(format!(
            "{w}x{h} is more than {MAX_PIXELS} pixels"
        )));
    }
    let mut reader = image::ImageReader::with_format(Cursor::new(bytes), image::ImageFormat::Jpeg);
    reader.limits(limits_for(w, h));
    let img = reader.decode().map_err(bad)?;
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .map_err(bad)?;
    Ok(out)
}

fn limits_for(w: u32, h: u32) -> image::Limits {
    let mut limits = image::Limits::default();
    limits.max_alloc = Some((u64::from(w) * u64::from(h) * 8).max(1 << 20));
    limits
}

/// How many pages a PDF has (0 when it cannot be read, or is refused by [`check_pdf`]).
pub fn pdf_page_count(bytes: &[u8]) -> usize {
    check_pdf(bytes).unwrap_or(0)
}

/// The most bytes one stream of a PDF may decode to: an RGB image at [`MAX_PIXELS`], the
/// largest thing a page's stream legitimately holds.
pub const MAX_PDF_STREAM_BYTES: u64 = MAX_PIXELS * 3;
/// The most bytes all streams of one PDF together may decode to (what the checks inflate, a
/// few seconds of one core at worst).
pub const MAX_PDF_DECODED_BYTES: u64 = 2 << 30;

/// A PDF's page count, once its streams are known to decode within the budgets: each at most
/// [`MAX_PDF_STREAM_BYTES`], all together at most [`MAX_PDF_DECODED_BYTES`], and no image
/// over [`MAX_PIXELS`]. The PDF libraries (hayro, lopdf) inflate a stream whole, with no cap:
/// a 1.5 MB PDF of zeros inflated to 1.6 GB. So every compressed stream is first inflated
/// here into a counter that stops at the cap, before either library parses the file (the raw
/// scan: cross-reference and object streams are decoded while parsing), then again with its
/// declared filters once parsed. A stream whose filters cannot be decoded here under a cap
/// (ASCII armour before Flate, say) counts at its worst case. Refused: "damaged".
pub fn check_pdf(bytes: &[u8]) -> Result<usize, OcrError> {
    // The raw scan and the parsed streams count the same bytes, each against its own budget.
    Budget::default().raw_scan(bytes)?;
    let pdf = hayro::hayro_syntax::Pdf::new(bytes.to_vec())
        .map_err(|_| OcrError::BadImage("it does not parse".into()))?;
    let mut budget = Budget::default();
    for object in pdf.objects() {
        if let hayro::hayro_syntax::object::Object::Stream(stream) = object {
            budget.stream(&stream)?;
        }
    }
    Ok(pdf.pages().len())
}

/// What a PDF's streams decoded to so far.
#[derive(Default)]
struct Budget {
    total: u64,
}

/// Why a PDF is refused when a stream decodes past the caps.
fn too_large() -> OcrError {
    OcrError::BadImage(format!(
        "damaged: a stream decodes to more than {} MiB (or all of them to more than {} MiB)",
        MAX_PDF_STREAM_BYTES >> 20,
        MAX_PDF_DECODED_BYTES >> 20
    ))
}

/// Worst-case expansion of filters decoded here only by bound: Flate's longest match (258
/// bytes) from one bit, LZW's longest string from nine bits, run-length's 128 from two bytes.
const FLATE_WORST: u64 = 1032;
const LZW_WORST: u64 = 2730;
const RUN_LENGTH_WORST: u64 = 64;

impl Budget {
    fn add(&mut self, len: u64) -> Result<(), OcrError> {
        self.total = self.total.saturating_add(len);
        if len > MAX_PDF_STREAM_BYTES || self.total > MAX_PDF_DECODED_BYTES {
            return Err(too_large());
        }
        Ok(())
    }

    /// Every `stream ... endstream` in the file's bytes that inflates (zlib, or raw deflate
    /// as hayro also tries), counted without keeping the output.
    fn raw_scan(&mut self, bytes: &[u8]) -> Result<(), OcrError> {
        let mut at = 0;
        while let Some(found) = find(&bytes[at..], b"stream") {
            let start = at + found;
            at = start + b"stream".len();
            if bytes[..start].ends_with(b"end") {
                continue;
            }
            let body = match &bytes[at..] {
                [b'\r', b'\n', rest @ ..] | [b'\n', rest @ ..] | [b'\r', rest @ ..] => rest,
                _ => continue,
            };
            let end = find(body, b"endstream").unwrap_or(body.len());
            let data = &body[..end];
            self.add(inflated_len(data, true).max(inflated_len(data, false)))?;
        }
        Ok(())
    }

    /// One parsed stream through its filters, in order.
    fn stream(&mut self, stream: &hayro::hayro_syntax::object::Stream<'_>) -> Result<(), OcrError> {
        use hayro::hayro_syntax::Filter;
        let dict = stream.dict();
        let is_image = dict
            .get::<hayro::hayro_syntax::object::Name<'_>>(b"Subtype")
            .is_some_and(|n| n.as_ref() == b"Image");
        if is_image {
            let w = dict.get::<u32>(b"Width").unwrap_or(0);
            let h = dict.get::<u32>(b"Height").unwrap_or(0);
            if u64::from(w) * u64::from(h) > MAX_PIXELS {
                return Err(OcrError::BadImage(format!(
                    "an image in the PDF is {w}x{h}, more than {MAX_PIXELS} pixels"
                )));
            }
        }
        let raw = stream.raw_data();
        // The bytes so far when they were decoded here; else only a bound on their length.
        let mut data: Option<Vec<u8>> = None;
        let mut len = raw.len() as u64;
        let filters = stream.filters();
        let last = filters.len().saturating_sub(1);
        for (i, filter) in filters.iter().enumerate() {
            let input: Option<&[u8]> = match (&data, i) {
                (Some(d), _) => Some(d),
                (None, 0) => Some(&raw),
                (None, _) => None,
            };
            let keep = i != last;
            let decoded = match (filter, input) {
                (Filter::FlateDecode, Some(input)) => Some(inflate(input, keep)),
                (Filter::LzwDecode, Some(input)) => Some(lzw(input, keep)),
                (Filter::RunLengthDecode, Some(input)) => Some(run_length(input, keep)),
                _ => None,
            };
            match decoded {
                Some((n, bytes)) => {
                    len = n;
                    data = bytes;
                }
                None => {
                    data = None;
                    len = len.saturating_mul(match filter {
                        Filter::FlateDecode => FLATE_WORST,
                        Filter::LzwDecode => LZW_WORST,
                        Filter::RunLengthDecode => RUN_LENGTH_WORST,
                        // ASCII armour shrinks; an image filter's output is the image's size,
                        // checked above; Crypt is decryption.
                        _ => 1,
                    });
                }
            }
            if len > MAX_PDF_STREAM_BYTES {
                return Err(too_large());
            }
        }
        self.add(len)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A writer that keeps (when asked) and counts what it is given, and fails past the cap.
struct Capped {
    kept: Option<Vec<u8>>,
    len: u64,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.len += buf.len() as u64;
        if self.len > MAX_PDF_STREAM_BYTES {
            return Err(std::io::Error::other("over the cap"));
        }
        if let Some(kept) = &mut self.kept {
            kept.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capped {
    fn new(keep: bool) -> Capped {
        Capped {
            kept: keep.then(Vec::new),
            len: 0,
        }
    }
}

/// How many bytes `data` inflates to (zlib, or raw deflate), up to just past the cap; what
/// came out before an error counts.
fn inflated_len(data: &[u8], zlib: bool) -> u64 {
    let mut out = Capped::new(false);
    let _ = if zlib {
        std::io::copy(&mut flate2::read::ZlibDecoder::new(data), &mut out)
    } else {
        std::io::copy(&mut flate2::read::DeflateDecoder::new(data), &mut out)
    };
    out.len
}

/// Flate as hayro decodes it (zlib, else raw deflate), counted and kept when `keep`.
fn inflate(data: &[u8], keep: bool) -> (u64, Option<Vec<u8>>) {
    let mut best = Capped::new(keep);
    let _ = std::io::copy(&mut flate2::read::ZlibDecoder::new(data), &mut best);
    if best.len <= MAX_PDF_STREAM_BYTES {
        let mut raw = Capped::new(keep);
        let _ = std::io::copy(&mut flate2::read::DeflateDecoder::new(data), &mut raw);
        if raw.len > best.len {
            best = raw;
        }
    }
    // What no decoder here reads, hayro's lenient fallback may: counted at its worst.
    if best.len == 0 && !data.is_empty() {
        return (data.len() as u64 * FLATE_WORST, None);
    }
    (best.len, best.kept)
}

/// LZW (PDF's default early change), counted and kept when `keep`.
fn lzw(data: &[u8], keep: bool) -> (u64, Option<Vec<u8>>) {
    let mut out = Capped::new(keep);
    let mut decoder = weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8);
    let _ = decoder.into_stream(&mut out).decode_all(data);
    (out.len, out.kept)
}

/// Run-length: a length byte n, then n + 1 bytes (n < 128) or one byte 257 - n times.
fn run_length(data: &[u8], keep: bool) -> (u64, Option<Vec<u8>>) {
    let mut out = Capped::new(keep);
    let mut i = 0;
    while let Some(&n) = data.get(i) {
        use std::io::Write as _;
        let written = match n {
            128 => break,
            0..128 => {
                let run = data.get(i + 1..i + 2 + n as usize).unwrap_or_default();
                i += 2 + n as usize;
                out.write_all(run)
            }
            _ => {
                let Some(&b) = data.get(i + 1) else { break };
                i += 2;
                out.write_all(&vec![b; 257 - n as usize])
            }
        };
        if written.is_err() {
            break;
        }
    }
    (out.len, out.kept)
}

/// Every page of a PDF, rendered so its longer side is about [`PDF_LONG_SIDE`] pixels. For a
/// PDF of many pages prefer [`PdfRaster`], which renders one page at a time.
pub fn pdf_pages(bytes: &[u8]) -> Result<Vec<PageImage>, OcrError> {
    let raster = PdfRaster::open(bytes)?;
    (0..raster.page_count()).map(|i| raster.page(i)).collect()
}

/// How many PDF pages this process has rendered: lets the tests see that an import renders
/// each page just before it reads it, not all of them first. Process-wide, as pages render on
/// the work pool's threads (nextest runs each test in a process of its own).
pub static PAGES_RENDERED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A PDF's pages, rendered on demand one at a time: a notebook exported as one 200-page PDF
/// is never in memory as 200 rasters (~2.5 MB each at [`PDF_LONG_SIDE`]), only as its bytes
/// and the page being read.
pub struct PdfRaster {
    pdf: hayro::hayro_syntax::Pdf,
}

impl PdfRaster {
    /// Parses the PDF and checks what can be checked before rendering anything: the page
    /// count and every page's size, so that a bad page fails the whole file up front rather
    /// than halfway through an import.
    pub fn open(bytes: &[u8]) -> Result<PdfRaster, OcrError> {
        check_pdf(bytes)?;
        let pdf = hayro::hayro_syntax::Pdf::new(bytes.to_vec())
            .map_err(|e| OcrError::BadImage(format!("unreadable PDF: {e:?}")))?;
        let pages = pdf.pages();
        if pages.len() > MAX_PDF_PAGES {
            return Err(OcrError::BadImage(format!(
                "the PDF has {} pages; at most {MAX_PDF_PAGES} are read",
                pages.len()
            )));
        }
        if pages.is_empty() {
            return Err(OcrError::BadImage("the PDF has no pages".into()));
        }
        for page in pages.iter() {
            page_scale(page)?;
        }
        Ok(PdfRaster { pdf })
    }

    /// How many pages the PDF has (at least one).
    pub fn page_count(&self) -> usize {
        self.pdf.pages().len()
    }

    /// Page `index` (from 0) as grey pixels.
    pub fn page(&self, index: usize) -> Result<PageImage, OcrError> {
        use hayro::hayro_interpret::InterpreterSettings;
        use hayro::{PixmapSettings, RenderCache, RenderSettings};

        let page = self
            .pdf
            .pages()
            .get(index)
            .ok_or_else(|| OcrError::BadImage(format!("the PDF has no page {}", index + 1)))?;
        let scale = page_scale(page)?;
        // A cache per page: what one page's drawing decoded is dropped with the page.
        let cache = RenderCache::new();
        let pixmap = hayro::render(
            page,
            &cache,
            &InterpreterSettings::default(),
            &RenderSettings::default(),
            &PixmapSettings {
                x_scale: scale,
                y_scale: scale,
                ..Default::default()
            },
        );
        PAGES_RENDERED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (pw, ph) = (u32::from(pixmap.width()), u32::from(pixmap.height()));
        // Premultiplied RGBA on a transparent page, composited over white paper: the luma of
        // the colour plus what the missing coverage lets through.
        let rgba = pixmap.data_as_u8_slice();
        let gray = rgba
            .chunks_exact(4)
            .map(|p| {
                let (r, g, b, a) = (
                    u32::from(p[0]),
                    u32::from(p[1]),
                    u32::from(p[2]),
                    u32::from(p[3]),
                );
                ((r * 299 + g * 587 + b * 114) / 1000 + (255 - a)).min(255) as u8
            })
            .collect();
        Ok(PageImage {
            width: pw,
            height: ph,
            gray,
        })
    }
}

/// The scale that renders `page` at [`PDF_LONG_SIDE`], or why it cannot be rendered.
fn page_scale(page: &hayro::hayro_syntax::page::Page<'_>) -> Result<f32, OcrError> {
    let (w, h) = page.render_dimensions();
    if !(w.is_finite() && h.is_finite()) || w < 1.0 || h < 1.0 {
        return Err(OcrError::BadImage("a PDF page has no size".into()));
    }
    let scale = PDF_LONG_SIDE / w.max(h);
    if f64::from(w * scale) * f64::from(h * scale) > MAX_PIXELS as f64 {
        return Err(OcrError::BadImage("a PDF page is too large".into()));
    }
    Ok(scale)
}

/// One PDF per page of `pdf` (which has `count` pages), in order: each holds that page and
/// only the objects it uses.
pub fn split_pdf(pdf: &[u8], count: usize) -> Result<Vec<Vec<u8>>, OcrError> {
    let split = PdfSplit::open(pdf, count)?;
    (0..count).map(|i| split.page(i)).collect()
}

/// A PDF split into one-page PDFs on demand, one at a time (as [`PdfRaster`] renders them).
pub struct PdfSplit {
    doc: lopdf::Document,
    numbers: Vec<u32>,
}

impl PdfSplit {
    /// Parses the PDF, which its renderer found to have `count` pages; the page tree must
    /// agree.
    pub fn open(pdf: &[u8], count: usize) -> Result<PdfSplit, OcrError> {
        let bad = |e: lopdf::Error| OcrError::BadImage(format!("unreadable PDF: {e}"));
        let doc = lopdf::Document::load_mem(pdf).map_err(bad)?;
        let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
        if numbers.len() != count {
            return Err(OcrError::BadImage(format!(
                "the PDF's page tree has {} pages, its renderer {count}",
                numbers.len()
            )));
        }
        Ok(PdfSplit { doc, numbers })
    }

    /// Page `index` (from 0) as a PDF of its own: that page and only the objects it uses.
    pub fn page(&self, index: usize) -> Result<Vec<u8>, OcrError> {
        let keep = *self
            .numbers
            .get(index)
            .ok_or_else(|| OcrError::BadImage(format!("the PDF has no page {}", index + 1)))?;
        let mut one = self.doc.clone();
        let others: Vec<u32> = self
            .numbers
            .iter()
            .copied()
            .filter(|&n| n != keep)
            .collect();
        one.delete_pages(&others);
        one.prune_objects();
        let mut bytes = Vec::new();
        one.save_to(&mut bytes)
            .map_err(|e| OcrError::Failed(Box::new(e)))?;
        Ok(bytes)
    }
}

/// A page image as PNG (the `png_url` of a page that came as PDF; Textract's input).
pub fn to_png(page: &PageImage) -> Vec<u8> {
    let mut out = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new(&mut out);
    image::ImageEncoder::write_image(
        encoder,
        &page.gray,
        page.width,
        page.height,
        image::ExtendedColorType::L8,
    )
    .expect("writing a PNG to memory cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_sniffed_by_content() {
        let png = to_png(&PageImage {
            width: 3,
            height: 2,
            gray: vec![0, 50, 100, 150, 200, 250],
        });
        assert_eq!(InkFormat::sniff(&png), Some(InkFormat::Png));
        let back = decode(&png).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].width, back[0].height), (3, 2));
        assert_eq!(back[0].gray, vec![0, 50, 100, 150, 200, 250]);
        assert_eq!(InkFormat::sniff(b"%PDF-1.7\n"), Some(InkFormat::Pdf));
        assert_eq!(InkFormat::sniff(b"hello"), None);
        assert!(matches!(decode(b"hello"), Err(OcrError::BadImage(_))));
        assert!(matches!(
            decode(b"\x89PNG\r\n\x1a\nbroken"),
            Err(OcrError::BadImage(_))
        ));
        assert!(matches!(
            decode(b"%PDF-1.7 broken"),
            Err(OcrError::BadImage(_))
        ));
    }

    #[test]
    fn a_pdf_page_renders_to_grey_pixels() {
        // An image-only PDF, as scanners and most notebook apps write them.
        let pdf = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/ocr/2025-03-16.pdf"
        ))
        .unwrap();
        assert_eq!(pdf_page_count(&pdf), 1);
        let pages = decode(&pdf).unwrap();
        assert_eq!(pages.len(), 1);
        let p = &pages[0];
        assert_eq!(p.width.max(p.height), PDF_LONG_SIDE as u32);
        assert_eq!(p.gray.len(), (p.width * p.height) as usize);
        // Mostly white paper with some ink.
        let dark = p.gray.iter().filter(|&&v| v < 128).count();
        assert!(dark > 1000 && dark < p.gray.len() / 4, "{dark}");
    }

    #[test]
    fn a_pdf_splits_into_one_pdf_per_page() {
        let pdf = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/ocr/2025-03-21.pdf"
        ))
        .unwrap();
        let pages = pdf_pages(&pdf).unwrap();
        assert_eq!(pages.len(), 3);
        let split = split_pdf(&pdf, 3).unwrap();
        assert_eq!(split.len(), 3);
        for (one, page) in split.iter().zip(&pages) {
            assert_eq!(pdf_page_count(one), 1);
            // Each one-page PDF renders as that page of the whole.
            let rendered = &pdf_pages(one).unwrap()[0];
            assert_eq!((rendered.width, rendered.height), (page.width, page.height));
            assert_eq!(rendered.gray, page.gray);
            assert!(one.len() < pdf.len(), "only its own objects");
        }
        assert!(matches!(split_pdf(&pdf, 2), Err(OcrError::BadImage(_))));
    }
}
