//! Import from a folder: files sharing a stem are one page (`STEM.pdf` and/or `STEM.png` (or
//! `STEM.jpg`, stored as the page's PNG) for the
//! ink, `STEM.md` or `STEM.txt` for its OCR). A bad file fails its page with a message naming
//! it; the other pages go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::pages::PageDraft;
use super::records::{OcrKind, PageSources};
use super::{Notebook, NotebookError, SavedPage};
use crate::domain::{Date, UserId};

/// The files of one page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageFiles {
    pub stem: String,
    pub pdf: Option<PathBuf>,
    pub png: Option<PathBuf>,
    /// A JPEG, converted to the page's PNG (unless the page has a PNG file too).
    pub jpg: Option<PathBuf>,
    pub md: Option<PathBuf>,
    pub txt: Option<PathBuf>,
}

/// Whether `ext` names one of a page's files (pdf, png, jpg, jpeg, md, markdown, txt; any case).
pub fn is_page_extension(ext: &str) -> bool {
    PAGE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
}

/// The extensions of a page's files.
pub const PAGE_EXTENSIONS: [&str; 7] = ["pdf", "png", "jpg", "jpeg", "md", "markdown", "txt"];

impl PageFiles {
    /// Puts `path` in the slot its extension names; false (and nothing set) for another one.
    pub fn set(&mut self, ext: &str, path: PathBuf) -> bool {
        let slot = match ext.to_ascii_lowercase().as_str() {
            "pdf" => &mut self.pdf,
            "png" => &mut self.png,
            "jpg" | "jpeg" => &mut self.jpg,
            "md" | "markdown" => &mut self.md,
            "txt" => &mut self.txt,
            _ => return false,
        };
        *slot = Some(path);
        true
    }

    /// The file a page-level message names: the OCR file, else the ink.
    pub fn first_file(&self) -> PathBuf {
        [&self.md, &self.txt, &self.png, &self.jpg, &self.pdf]
            .into_iter()
            .flatten()
            .next()
            .cloned()
            .unwrap_or_default()
    }
}

/// Why one page was not imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportFailure {
    /// The file at fault, or the page's first file when no single file is.
    pub path: PathBuf,
    /// For the person importing: may quote the file (a front-matter date that is not one).
    pub reason: String,
    /// The reason without anything from the file, for log lines.
    pub kind: FailureKind,
}

/// What kind of failure an [`ImportFailure`] is: a fixed label, safe in a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Unreadable,
    BadSignature,
    /// An image whose header is right but whose pixels cannot be read (or are too many).
    BadImage,
    NotUtf8,
    BadDate,
    NoDate,
    /// The notebook refused the page (`NotebookError::Invalid`).
    Refused,
    /// The page could not be stored (store, keys, assets).
    NotStored,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Unreadable => "unreadable file",
            FailureKind::BadSignature => "file content does not match its extension",
            FailureKind::BadImage => "image cannot be read",
            FailureKind::NotUtf8 => "OCR file is not UTF-8",
            FailureKind::BadDate => "front-matter date is not a date",
            FailureKind::NoDate => "no page date",
            FailureKind::Refused => "page refused",
            FailureKind::NotStored => "page not stored",
        }
    }
}

impl ImportFailure {
    /// The notebook refused the page, for `reason` (an `Invalid` message).
    pub fn refused(path: impl Into<PathBuf>, reason: impl Into<String>) -> ImportFailure {
        ImportFailure {
            path: path.into(),
            reason: reason.into(),
            kind: FailureKind::Refused,
        }
    }
}

impl std::fmt::Display for ImportFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// The outcome of importing a folder.
#[derive(Debug, Clone, Default)]
pub struct ImportReport {
    pub created: usize,
    pub updated: usize,
    pub failed: Vec<ImportFailure>,
    /// Files that are not part of any page (other extensions, hidden files).
    pub skipped: Vec<PathBuf>,
}

/// Groups a folder's files into pages, sorted by stem. Not recursive.
pub fn group_dir(dir: &Path) -> std::io::Result<(Vec<PageFiles>, Vec<PathBuf>)> {
    let mut pages: BTreeMap<String, PageFiles> = BTreeMap::new();
    let mut skipped = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.is_file() {
            continue;
        }
        let (Some(stem), Some(ext)) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|e| e.to_str()),
        ) else {
            skipped.push(path);
            continue;
        };
        if stem.starts_with('.') {
            skipped.push(path);
            continue;
        }
        if !is_page_extension(ext) {
            skipped.push(path);
            continue;
        }
        let (stem, ext) = (stem.to_owned(), ext.to_owned());
        let page = pages.entry(stem.clone()).or_insert_with(|| PageFiles {
            stem,
            ..PageFiles::default()
        });
        page.set(&ext, path);
    }
    skipped.sort();
    let pages = pages
        .into_values()
        .filter(|p| {
            p.pdf.is_some()
                || p.png.is_some()
                || p.jpg.is_some()
                || p.md.is_some()
                || p.txt.is_some()
        })
        .collect();
    Ok((pages, skipped))
}

/// Splits a `---` front-matter block off the top of a text, returning its `date:` value (if
/// any) and the rest.
fn front_matter(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    let mut offset = 0;
    let mut date = None;
    for line in rest.split_inclusive('\n') {
        offset += line.len();
        let trimmed = line.trim();
        if trimmed == "---" {
            return (date, &rest[offset..]);
        }
        if let Some(value) = trimmed.strip_prefix("date:") {
            date = Some(value.trim().trim_matches(|c| c == '"' || c == '\''));
        }
    }
    // No closing line: not front matter after all.
    (None, text)
}

/// The date a stem starts with: `2026-06-19`, `2026-06-19-2`, `2026-06-19 standup`.
fn stem_date(stem: &str) -> Option<Date> {
    let head = stem.get(..10)?;
    let date = Date::parse(head).ok()?;
    match stem[10..].chars().next() {
        None | Some('-' | '_' | ' ' | '.') => Some(date),
        _ => None,
    }
}

/// Why a PDF that does not parse is refused (checked only where the OCR pipeline, which
/// parses PDFs, is built in).
#[cfg(feature = "ocr")]
pub const UNREADABLE_PDF: &str = "the PDF cannot be read (damaged, or not a PDF)";

const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";
const PDF_MAGIC: &[u8] = b"%PDF-";
const JPEG_MAGIC: &[u8] = &[0xFF, 0xD8, 0xFF];

/// A page's JPEG as the PNG the page keeps (builds without the page rasters cannot read one).
fn jpeg_as_png(path: &Path, jpeg: &[u8]) -> Result<Vec<u8>, ImportFailure> {
    #[cfg(feature = "ocr")]
    return crate::ocr::raster::jpeg_to_png(jpeg).map_err(|e| {
        fail(
            path,
            FailureKind::BadImage,
            format!("not a readable JPEG: {e}"),
        )
    });
    #[cfg(not(feature = "ocr"))]
    {
        let _ = jpeg;
        Err(fail(
            path,
            FailureKind::Unreadable,
            "this build of nib cannot read JPEG files",
        ))
    }
}

fn fail(path: &Path, kind: FailureKind, reason: impl Into<String>) -> ImportFailure {
    ImportFailure {
        path: path.to_owned(),
        reason: reason.into(),
        kind,
    }
}

/// Why a page without a date is refused.
pub(super) const NO_DATE: &str =
    "no page date: add a 'date: YYYY-MM-DD' front-matter line or start the file name with the date";

/// Unix milliseconds of a file's modification time.
fn unix_millis(t: SystemTime) -> Option<i64> {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// Why a PDF is refused, when it is: it does not parse, has no page, or its streams inflate
/// past the caps (`raster::check_pdf`). The web app's upload, `nib import` and ingest say the
/// same.
#[cfg(feature = "ocr")]
pub fn pdf_refusal(bytes: &[u8]) -> Option<String> {
    match crate::ocr::raster::check_pdf(bytes) {
        Ok(pages) if pages > 0 => None,
        Ok(_) => Some(UNREADABLE_PDF.to_owned()),
        Err(crate::ports::OcrError::BadImage(why)) => Some(format!("{UNREADABLE_PDF}: {why}")),
        Err(e) => Some(format!("{UNREADABLE_PDF}: {e}")),
    }
}

/// Reads and checks a page's files into a draft, each with its modification time.
pub fn read_page(files: &PageFiles) -> Result<PageDraft, ImportFailure> {
    read_page_with(files, |path| {
        let bytes = std::fs::read(path)?;
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        Ok((bytes, modified))
    })
}

/// [`read_page`] over files that `load` reads, with when each was written if known (the
/// `ingest` function's are S3 objects, named by their keys, with their `LastModified`).
pub fn read_page_with(
    files: &PageFiles,
    load: impl Fn(&Path) -> std::io::Result<(Vec<u8>, Option<SystemTime>)>,
) -> Result<PageDraft, ImportFailure> {
    let read = |path: &Path| {
        load(path)
            .map(|(bytes, modified)| (bytes, modified.and_then(unix_millis)))
            .map_err(|e| fail(path, FailureKind::Unreadable, format!("cannot read: {e}")))
    };
    // Ink files must be what their extension says: a mislabelled file fails its page.
    let ink = |path: &Option<PathBuf>,
               magic: &[u8],
               what: &str|
     -> Result<(Option<Vec<u8>>, Option<i64>), ImportFailure> {
        let Some(p) = path else {
            return Ok((None, None));
        };
        let (bytes, modified) = read(p)?;
        if !bytes.starts_with(magic) {
            return Err(fail(
                p,
                FailureKind::BadSignature,
                format!("not a {what} file (bad signature)"),
            ));
        }
        Ok((Some(bytes), modified))
    };
    let (pdf, pdf_modified) = ink(&files.pdf, PDF_MAGIC, "PDF")?;
    // A PDF that does not parse would be kept as ink nothing can show or read: refused here,
    // so `nib import`, the web app and the ingest function all refuse it the same way.
    // So is one whose streams inflate past the caps (`raster::check_pdf`), before any PDF
    // library decodes them.
    #[cfg(feature = "ocr")]
    if let (Some(path), Some(bytes)) = (&files.pdf, &pdf)
        && let Some(why) = pdf_refusal(bytes)
    {
        return Err(fail(path, FailureKind::BadImage, why));
    }
    let (mut png, mut png_modified) = ink(&files.png, PNG_MAGIC, "PNG")?;
    if png.is_none()
        && let Some(path) = &files.jpg
    {
        let (jpeg, modified) = ink(&files.jpg, JPEG_MAGIC, "JPEG")?;
        png = Some(jpeg_as_png(path, &jpeg.unwrap_or_default())?);
        png_modified = modified;
    }
    let ocr_file = files
        .md
        .as_ref()
        .map(|p| (OcrKind::Markdown, p))
        .or(files.txt.as_ref().map(|p| (OcrKind::Text, p)));
    let mut date = None;
    let mut ocr_modified = None;
    let ocr = match ocr_file {
        Some((kind, path)) => {
            let (bytes, modified) = read(path)?;
            ocr_modified = modified;
            let text = String::from_utf8(bytes)
                .map_err(|_| fail(path, FailureKind::NotUtf8, "not UTF-8 text"))?;
            let (fm_date, body) = front_matter(&text);
            if let Some(value) = fm_date {
                date = Some(Date::parse(value).map_err(|_| {
                    fail(
                        path,
                        FailureKind::BadDate,
                        format!("front matter date '{value}' is not a date written YYYY-MM-DD"),
                    )
                })?);
            }
            Some((kind, body.to_owned()))
        }
        None => None,
    };
    let date = date.or_else(|| stem_date(&files.stem));
    // Ink alone may lack a date: it can still update the page its stem names (the notebook
    // refuses it for a new page). OCR without a date is a page nobody can place.
    if date.is_none() && ocr.is_some() {
        return Err(fail(&files.first_file(), FailureKind::NoDate, NO_DATE));
    }
    Ok(PageDraft {
        date,
        stem: files.stem.clone(),
        ocr,
        pdf,
        png,
        sources: PageSources {
            ocr: ocr_modified,
            pdf: pdf_modified,
            png: png_modified,
        },
        png_rendered: false,
    })
}

impl Notebook {
    /// Imports one page's files.
    pub async fn import_files(
        &self,
        user: &UserId,
        files: &PageFiles,
    ) -> Result<SavedPage, ImportFailure> {
        let draft = read_page(files)?;
        let first = files.first_file();
        self.import_page(user, draft)
            .await
            .map_err(|e| import_failure(&first, user, e))
    }

    /// Imports one page's files through the OCR step ([`Notebook::import_draft`], with the
    /// `ocr` feature): ink alone is read by the notebook's engine, and a PDF of several pages
    /// is several pages. `force` reads the ink even when the page has text of its own.
    pub async fn import_files_read(
        &self,
        user: &UserId,
        files: &PageFiles,
        force: bool,
    ) -> Result<Vec<SavedPage>, ImportFailure> {
        // Reading checks the files (a PDF's streams inflated under their caps, a JPEG made a
        // PNG): work for the pool, not for the caller's async worker.
        let draft = {
            let files = files.clone();
            self.work().run(move || read_page(&files)).await?
        };
        let first = files.first_file();
        #[cfg(feature = "ocr")]
        let saved = self.import_draft(user, draft, force).await;
        #[cfg(not(feature = "ocr"))]
        let saved = {
            let _ = force;
            self.import_page(user, draft).await.map(|s| vec![s])
        };
        saved.map_err(|e| import_failure(&first, user, e))
    }
}

/// An import's failure as the caller shows it (the file's name), logged once with ids only.
fn import_failure(first: &Path, user: &UserId, e: NotebookError) -> ImportFailure {
    match e {
        // A page in the trash stays there: the import says so, and how to restore it.
        NotebookError::Invalid(reason) | NotebookError::InTrash(reason) => {
            ImportFailure::refused(first, reason)
        }
        other => {
            // The caller shows the file's name; the log line has ids only.
            let chain = crate::telemetry::chain(&other);
            tracing::error!(error = %chain, user = %user, "import failed");
            fail(
                first,
                FailureKind::NotStored,
                format!("could not be stored: {chain}"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A JPEG is the page's PNG, in its colours; a PNG beside it wins; a damaged one fails its
    /// page by name.
    #[cfg(feature = "ocr")]
    #[test]
    fn a_jpeg_becomes_the_pages_png() {
        let dir = tempfile::tempdir().unwrap();
        let img = image::RgbImage::from_fn(40, 30, |x, _| image::Rgb([200, 20, (x * 6) as u8]));
        let jpg = dir.path().join("2026-07-01.JPG");
        img.save_with_format(&jpg, image::ImageFormat::Jpeg)
            .unwrap();
        let (pages, skipped) = group_dir(dir.path()).unwrap();
        assert!(skipped.is_empty());
        let draft = read_page(&pages[0]).unwrap();
        let png = draft.png.expect("the JPEG as PNG");
        assert!(png.starts_with(PNG_MAGIC));
        let back = image::load_from_memory(&png).unwrap().to_rgb8();
        assert_eq!(back.dimensions(), (40, 30));
        let red = back.get_pixel(5, 5).0[0];
        assert!(red > 150, "colour kept: {red}");
        assert!(draft.sources.png.is_some());

        let png_path = dir.path().join("2026-07-01.png");
        std::fs::write(
            &png_path,
            crate::ocr::raster::to_png(&crate::ports::PageImage {
                width: 1,
                height: 1,
                gray: vec![0],
            }),
        )
        .unwrap();
        let (pages, _) = group_dir(dir.path()).unwrap();
        let draft = read_page(&pages[0]).unwrap();
        let kept = image::load_from_memory(&draft.png.unwrap()).unwrap();
        assert_eq!((kept.width(), kept.height()), (1, 1), "the PNG file wins");

        std::fs::remove_file(&png_path).unwrap();
        std::fs::write(&jpg, [0xFF, 0xD8, 0xFF, 0xE0, 0, 0]).unwrap();
        let (pages, _) = group_dir(dir.path()).unwrap();
        let failure = read_page(&pages[0]).unwrap_err();
        assert_eq!(failure.kind, FailureKind::BadImage);
        assert_eq!(failure.path, jpg);
    }

    #[test]
    fn stems_carry_dates() {
        assert_eq!(stem_date("2026-06-19").unwrap().to_string(), "2026-06-19");
        assert_eq!(stem_date("2026-06-19-2").unwrap().to_string(), "2026-06-19");
        assert!(stem_date("2026-06-190").is_none());
        assert!(stem_date("notes").is_none());
        assert!(stem_date("2026-13-01").is_none());
    }

    #[test]
    fn front_matter_gives_the_date_and_is_removed() {
        let (date, body) = front_matter("---\ntitle: x\ndate: 2026-06-19\n---\n## Tasks\n");
        assert_eq!(date, Some("2026-06-19"));
        assert_eq!(body, "## Tasks\n");
        let (date, body) = front_matter("---\nnot closed\n");
        assert_eq!(date, None);
        assert_eq!(body, "---\nnot closed\n");
    }
}
