//! Ink to text on import: the step between reading a page's files and writing the page.
//!
//! [`Notebook::import_draft`] is what `nib import` and the ingest function call:
//! - a PDF of several pages (a whole notebook exported as one file) becomes one page per PDF
//!   page, in order, all dated from the stem; page 1 keeps the stem, page n the stem `STEM#n`
//!   (so a re-import finds each again). Each page gets that one page of the PDF (split out) and
//!   a PNG rendered from it, so clients that cannot show PDFs can show the page;
//! - a page whose ink came without an OCR file is read by the engine (`Notebook::with_ocr`);
//!   the result is the page's OCR source (`OcrKind::Engine`: its markdown, the engine, each
//!   line's confidence, a blind hash of the ink) and runs through the same parser, task
//!   reconciliation and index as an imported markdown page;
//! - a page whose ink the engine failed to read (a remote provider down, past its retries) is
//!   written without text, the failure logged with the page's id; `nib ocr` reads it later;
//! - a page that has an OCR file of its own keeps that text (OCR fills only ink-only pages,
//!   unless forced), and ink the engine already read (same blind hash) is not read again.

use sha2::{Digest, Sha256};

use super::pages::{PageDraft, SavedPage};
use super::records::{
    EngineOcr, OcrKind, PageRecord, StemRecord, decode, page_sk, stem_sk, user_pk,
};
use super::{Notebook, NotebookError};
use crate::domain::UserId;
use crate::ocr::{self, raster};
use crate::ports::{OcrError, PageImage};

impl From<OcrError> for NotebookError {
    fn from(e: OcrError) -> Self {
        match e {
            OcrError::BadImage(reason) => {
                NotebookError::Invalid(format!("the ink cannot be read: {reason}"))
            }
            other => NotebookError::Ocr(other),
        }
    }
}

/// What the page of a stem has now, as far as OCR is concerned.
struct Stored {
    kind: Option<OcrKind>,
    ink: Option<String>,
}

impl Notebook {
    /// Imports a page's files as read (see the module docs): splits a multi-page PDF, renders
    /// a PNG for PDF-only ink, reads ink-only pages with the engine (`force`: also pages whose
    /// text came from a file, and ink read before), then writes each page.
    pub async fn import_draft(
        &self,
        user: &UserId,
        draft: PageDraft,
        force: bool,
    ) -> Result<Vec<SavedPage>, NotebookError> {
        let mut out = Vec::new();
        // Rendering, splitting and reading run in the work pool, off the async workers.
        match self.work().run(move || expand(draft)).await? {
            Expanded::One(draft, image) => {
                let (draft, unread) = self.read_ink(user, draft, image, force).await?;
                out.push(self.import_unread(user, draft, unread).await?);
            }
            Expanded::Pages(mut pages) => {
                // One page at a time: its raster, its own PDF and its PNG live only while it is
                // read and written, so a 200-page PDF imports in the memory of one page.
                for index in 0..pages.len() {
                    let (back, page) = self
                        .work()
                        .run(move || {
                            let page = pages.page(index);
                            (pages, page)
                        })
                        .await;
                    pages = back;
                    let (draft, image) = page?;
                    let (draft, unread) = self.read_ink(user, draft, Some(image), force).await?;
                    out.push(self.import_unread(user, draft, unread).await?);
                }
            }
        }
        Ok(out)
    }

    /// Writes a page; when the engine failed on its ink (`unread`), says so with the page's id
    /// and why (the engine's error: a provider's name and HTTP status, never what it answered).
    async fn import_unread(
        &self,
        user: &UserId,
        draft: PageDraft,
        unread: Option<OcrError>,
    ) -> Result<SavedPage, NotebookError> {
        let saved = self.import_page(user, draft).await?;
        if let Some(e) = unread {
            tracing::warn!(
                user = %user,
                page = %saved.page_id,
                error = %crate::telemetry::chain(&e),
                "the page's ink could not be read; it is stored unread (`nib ocr` reads it again)"
            );
        }
        Ok(saved)
    }

    /// The page imported under `stem`, if any.
    pub async fn page_of_stem(
        &self,
        user: &UserId,
        stem: &str,
    ) -> Result<Option<crate::domain::PageId>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let blind = keys.blind("stem", stem);
        match self.store.get(&user_pk(user), &stem_sk(&blind)).await? {
            Some(item) => Ok(Some(decode::<StemRecord>("stem", &item.body)?.page_id)),
            None => Ok(None),
        }
    }

    /// Reads a stored page's ink again with the engine (`nib ocr`) and writes what it read,
    /// keeping the page's id and its task links (line ids follow the text; a task whose text
    /// was read the same keeps its id and status). Skipped (`None`): a page without ink, one
    /// whose text came from a file, or ink the engine already read, unless `force`.
    pub async fn reread_page(
        &self,
        user: &UserId,
        page_id: &crate::domain::PageId,
        force: bool,
    ) -> Result<Option<SavedPage>, NotebookError> {
        let Some(engine) = self.ocr.clone() else {
            return Err(NotebookError::Invalid("no OCR engine is configured".into()));
        };
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let item = self
            .store
            .get(&pk, &page_sk(page_id))
            .await?
            .ok_or(NotebookError::NotFound("page"))?;
        let record: PageRecord = decode("page", &item.body)?;
        if !force && matches!(record.ocr_kind, Some(OcrKind::Markdown | OcrKind::Text)) {
            return Ok(None);
        }
        let kind = if record.has_png {
            crate::ports::AssetKind::Png
        } else if record.has_pdf {
            crate::ports::AssetKind::Pdf
        } else {
            return Ok(None);
        };
        let Some(ink) = self.assets.get(user, page_id, kind).await? else {
            return Ok(None);
        };
        let ink_hash = keys.blind("ink", &hex::encode(Sha256::digest(&ink)));
        let read_before = match record.ocr_kind {
            Some(OcrKind::Engine) => self
                .open_ocr(user, &keys, &record)?
                .and_then(|s| EngineOcr::decode(&s))
                .and_then(|e| e.ink),
            _ => None,
        };
        if !force && read_before.as_deref() == Some(ink_hash.as_str()) {
            return Ok(None);
        }
        let image = self
            .work()
            .run(move || raster::decode(&ink))
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| NotebookError::Invalid("the ink has no page".into()))?;
        let vocabulary = self.read_vocabulary(user, &keys).await?.1;
        let read = self.read_image(engine.as_ref(), image, &vocabulary).await?;
        let source = engine_source(&read, ink_hash);
        let draft = PageDraft {
            date: Some(record.date),
            stem: String::new(),
            ocr: Some((OcrKind::Engine, source)),
            pdf: None,
            png: None,
            // As new as what the page took last, so it is taken.
            sources: super::records::PageSources {
                ocr: record
                    .sources
                    .ocr
                    .max(record.sources.png)
                    .max(record.sources.pdf),
                ..record.sources
            },
            png_rendered: false,
        };
        self.import_page_as(user, draft, Some((page_id.clone(), record.stem.clone())))
            .await
            .map(Some)
    }

    /// The draft with what the engine read of its ink, when it should be read; with the
    /// engine's error instead when reading failed: the page is then written without it (the
    /// ink is kept, nothing is lost) and `nib ocr` can read it later.
    async fn read_ink(
        &self,
        user: &UserId,
        mut draft: PageDraft,
        image: Option<PageImage>,
        force: bool,
    ) -> Result<(PageDraft, Option<OcrError>), NotebookError> {
        let Some(engine) = self.ocr.clone() else {
            return Ok((draft, None));
        };
        if draft.ocr.is_some() {
            return Ok((draft, None));
        }
        let Some(ink) = draft.png.as_ref().or(draft.pdf.as_ref()) else {
            return Ok((draft, None));
        };
        let keys = self.vault.user_keys(user).await?;
        let ink_hash = keys.blind("ink", &hex::encode(Sha256::digest(ink)));
        let stored = self.stored_ocr(user, &keys, &draft.stem).await?;
        if !force && let Some(stored) = &stored {
            let from_file = matches!(stored.kind, Some(OcrKind::Markdown | OcrKind::Text));
            let already_read = stored.ink.as_deref() == Some(ink_hash.as_str());
            if from_file || already_read {
                return Ok((draft, None));
            }
        }
        let image = match image {
            Some(image) => image,
            None => {
                let bytes = ink.clone();
                let decoded = self.work().run(move || raster::decode(&bytes)).await;
                match decoded.map(|pages| pages.into_iter().next()) {
                    Ok(Some(image)) => image,
                    Ok(None) | Err(_) => {
                        tracing::warn!(user = %user, "ink that cannot be decoded is stored unread");
                        return Ok((draft, None));
                    }
                }
            }
        };
        let vocabulary = self.read_vocabulary(user, &keys).await?.1;
        // Whatever the engine's failure (a provider down or refusing, a page over its limits,
        // the local engine's error), the page is imported: an import of a folder or an upload
        // does not stop at one page, and the ink is what matters; its text can come later.
        let read = match self.read_image(engine.as_ref(), image, &vocabulary).await {
            Ok(read) => read,
            Err(e) => return Ok((draft, Some(e))),
        };
        tracing::debug!(user = %user, lines = read.lines.len(), "page read by OCR");
        let source = engine_source(&read, ink_hash);
        draft.ocr = Some((OcrKind::Engine, source));
        // The text is as new as the ink it was read from.
        draft.sources.ocr = draft.sources.png.or(draft.sources.pdf);
        Ok((draft, None))
    }

    /// One page image read by the engine with the user's `vocabulary` (the words they
    /// corrected, `notebook::corrections`), in a slot of the work pool: the engine's own
    /// threads (or a remote engine) do the recognition, the layout runs on a blocking thread,
    /// so at most one page per slot is being read however many arrive.
    async fn read_image(
        &self,
        engine: &dyn crate::ports::Ocr,
        image: PageImage,
        vocabulary: &[String],
    ) -> Result<ocr::ReadPage, OcrError> {
        let _slot = self.work().slot().await;
        let segments = engine.recognize_with(&image, vocabulary).await?;
        let markdown = engine.writes_markdown();
        let lines =
            tokio::task::spawn_blocking(move || ocr::layout::lines(&image, segments, markdown))
                .await
                .map_err(|e| OcrError::Failed(Box::new(e)))?;
        Ok(ocr::ReadPage {
            engine: engine.engine(),
            lines,
        })
    }

    /// The OCR kind and ink hash of the page of `stem`, when there is one.
    async fn stored_ocr(
        &self,
        user: &UserId,
        keys: &crate::crypto::UserKeys,
        stem: &str,
    ) -> Result<Option<Stored>, NotebookError> {
        let pk = user_pk(user);
        let blind = keys.blind("stem", stem);
        let Some(item) = self.store.get(&pk, &stem_sk(&blind)).await? else {
            return Ok(None);
        };
        let page_id = decode::<StemRecord>("stem", &item.body)?.page_id;
        let Some(item) = self.store.get(&pk, &page_sk(&page_id)).await? else {
            return Ok(None);
        };
        let record: PageRecord = decode("page", &item.body)?;
        let ink = match record.ocr_kind {
            Some(OcrKind::Engine) => self
                .open_ocr(user, keys, &record)?
                .and_then(|s| EngineOcr::decode(&s))
                .and_then(|e| e.ink),
            _ => None,
        };
        Ok(Some(Stored {
            kind: record.ocr_kind,
            ink,
        }))
    }
}

/// What the engine read, as the page's sealed OCR source (`OcrKind::Engine`).
fn engine_source(read: &ocr::ReadPage, ink_hash: String) -> String {
    EngineOcr {
        markdown: read.markdown(),
        engine: read.engine.to_string(),
        confidence: read.lines.iter().map(|l| l.confidence).collect(),
        ink: Some(ink_hash),
    }
    .encode()
}

/// The pages a draft's files make (see [`expand`]).
enum Expanded {
    /// The draft as it is, with its rendered page image when it has one.
    One(PageDraft, Option<PageImage>),
    /// A PDF of several pages: each page rendered and split out when it is imported.
    Pages(Box<PdfPages>),
}

/// A multi-page PDF's drafts, made one at a time ([`PdfPages::page`]).
struct PdfPages {
    /// The draft without its PDF: what every page's draft starts from.
    draft: PageDraft,
    raster: raster::PdfRaster,
    split: raster::PdfSplit,
}

impl PdfPages {
    fn len(&self) -> usize {
        self.raster.page_count()
    }

    /// Page `index`'s draft (from 0) with its rendered image: page 1 keeps the stem and any
    /// OCR file or PNG that came beside the PDF, page n is `STEM#n`; each gets its own
    /// one-page PDF and, unless it has a PNG, one rendered from it.
    fn page(&self, index: usize) -> Result<(PageDraft, PageImage), NotebookError> {
        let image = self.raster.page(index)?;
        let mut d = self.draft.clone();
        if index > 0 {
            d.stem = format!("{}#{}", self.draft.stem, index + 1);
            // An OCR file beside a multi-page PDF belongs to its first page.
            d.ocr = None;
            d.sources.ocr = None;
            d.png = None;
        }
        d.pdf = Some(self.split.page(index)?);
        if d.png.is_none() {
            d.png = Some(raster::to_png(&image));
            d.sources.png = d.sources.pdf;
            d.png_rendered = true;
        }
        Ok((d, image))
    }
}

/// The pages a draft's files make: a multi-page PDF is split into one page per PDF page
/// (rendered and split lazily, [`PdfPages`]); a one-page PDF without a PNG gets one rendered;
/// anything else is the draft as it is.
fn expand(draft: PageDraft) -> Result<Expanded, NotebookError> {
    let Some(pdf) = draft.pdf.as_ref() else {
        return Ok(Expanded::One(draft, None));
    };
    if draft.png.is_some() && raster::pdf_page_count(pdf) <= 1 {
        // A PDF with its own PNG beside it: the PNG is the page's picture.
        return Ok(Expanded::One(draft, None));
    }
    // Ink nib cannot render is kept as it came (nothing of an upload is lost); it just gets no
    // picture and no reading. Every page's size is checked here, before any page is written.
    let raster = match raster::PdfRaster::open(pdf) {
        Ok(raster) => raster,
        Err(e) => {
            tracing::warn!(error = %e, "a PDF that cannot be rendered is stored as it is");
            return Ok(Expanded::One(draft, None));
        }
    };
    if raster.page_count() == 1 {
        let image = raster.page(0)?;
        let mut draft = draft;
        if draft.png.is_none() {
            draft.png = Some(raster::to_png(&image));
            draft.sources.png = draft.sources.pdf;
            draft.png_rendered = true;
        }
        return Ok(Expanded::One(draft, Some(image)));
    }
    let split = match raster::PdfSplit::open(pdf, raster.page_count()) {
        Ok(split) => split,
        Err(e) => {
            tracing::warn!(error = %e, "a PDF that cannot be split is stored as one page");
            return Ok(Expanded::One(draft, None));
        }
    };
    // The whole PDF's bytes are not needed again: the renderer and the splitter hold their own.
    let mut draft = draft;
    draft.pdf = None;
    Ok(Expanded::Pages(Box::new(PdfPages {
        draft,
        raster,
        split,
    })))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use async_trait::async_trait;

    use super::*;
    use crate::adapters::embedded::EmbeddedStore;
    use crate::adapters::local_assets::LocalAssets;
    use crate::adapters::local_keys::LocalKeys;
    use crate::crypto::Vault;
    use crate::domain::Date;
    use crate::notebook::NotebookConfig;
    use crate::notebook::records::PageSources;
    use crate::ports::{Ocr, OcrEngine, OcrLine, Store, SystemClock};

    /// An engine that reads nothing and notes, at each page it is given, how many PDF pages
    /// this thread has rendered so far.
    #[derive(Default)]
    struct Rendered {
        seen: Mutex<Vec<usize>>,
    }

    #[async_trait]
    impl Ocr for Rendered {
        fn engine(&self) -> OcrEngine {
            OcrEngine {
                name: "rendered-count".into(),
                version: "1".into(),
            }
        }

        async fn recognize(&self, _page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
            let rendered = raster::PAGES_RENDERED.load(std::sync::atomic::Ordering::SeqCst);
            self.seen.lock().unwrap().push(rendered);
            Ok(Vec::new())
        }
    }

    /// A notebook in memory whose OCR engine is `engine`.
    fn notebook_with(dir: &std::path::Path, engine: Arc<dyn Ocr>) -> Notebook {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory());
        let keys = Arc::new(LocalKeys::open_or_create(&dir.join("master.key")).unwrap());
        let vault = Arc::new(Vault::new(
            store.clone(),
            keys,
            16,
            Duration::from_secs(3600),
        ));
        let assets = Arc::new(LocalAssets::new(
            dir.join("assets"),
            "http://127.0.0.1".into(),
            [1; 32],
            [2; 32],
        ));
        Notebook::new(
            store,
            vault,
            assets,
            Arc::new(SystemClock),
            NotebookConfig::default(),
        )
        .with_ocr(engine)
    }

    /// Issue 48: ink with no writing on it (a 1x1 image), read by an engine that finds nothing,
    /// is a page without OCR text: `has_ocr` is false in `list_pages` and `get_page` alike.
    #[tokio::test]
    async fn an_empty_reading_of_blank_ink_is_no_ocr_text() {
        let dir = tempfile::tempdir().unwrap();
        let notebook = notebook_with(dir.path(), Arc::new(Rendered::default()));
        let user = UserId::parse("default").unwrap();
        let mut png = std::io::Cursor::new(Vec::new());
        image::RgbImage::from_pixel(1, 1, image::Rgb([255, 255, 255]))
            .write_to(&mut png, image::ImageFormat::Png)
            .unwrap();
        let draft = PageDraft {
            date: Some(Date::parse("2026-06-19").unwrap()),
            stem: "2026-06-19".into(),
            ocr: None,
            pdf: None,
            png: Some(png.into_inner()),
            sources: PageSources {
                png: Some(1),
                ..PageSources::default()
            },
            png_rendered: false,
        };
        let saved = notebook.import_draft(&user, draft, false).await.unwrap();
        let page_id = &saved[0].page_id;
        let listed = notebook.list_pages(&user, None, None, 10).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].has_ink && !listed[0].has_ocr, "{listed:?}");
        let page = notebook.get_page(&user, page_id).await.unwrap();
        assert!(page.has_ink && !page.has_ocr, "{page:?}");
        assert_eq!(page.ocr_engine.as_deref(), Some("rendered-count 1"));
    }

    // Renders are counted process-wide: they run on the work pool's threads.
    #[tokio::test(flavor = "current_thread")]
    async fn a_multi_page_pdf_is_rendered_one_page_at_a_time_as_it_is_imported() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::in_memory());
        let keys = Arc::new(LocalKeys::open_or_create(&dir.path().join("master.key")).unwrap());
        let vault = Arc::new(Vault::new(
            store.clone(),
            keys,
            16,
            Duration::from_secs(3600),
        ));
        let assets = Arc::new(LocalAssets::new(
            dir.path().join("assets"),
            "http://127.0.0.1".into(),
            [1; 32],
            [2; 32],
        ));
        let engine = Arc::new(Rendered::default());
        let notebook = Notebook::new(
            store,
            vault,
            assets,
            Arc::new(SystemClock),
            NotebookConfig::default(),
        )
        .with_ocr(engine.clone());
        let user = UserId::parse("default").unwrap();
        let pdf = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/ocr/2025-03-21.pdf"
        ))
        .unwrap();
        let draft = PageDraft {
            date: Some(Date::parse("2025-03-21").unwrap()),
            stem: "2025-03-21".into(),
            ocr: None,
            pdf: Some(pdf),
            png: None,
            sources: PageSources {
                pdf: Some(1),
                ..PageSources::default()
            },
            png_rendered: false,
        };
        let before = raster::PAGES_RENDERED.load(std::sync::atomic::Ordering::SeqCst);
        let saved = notebook.import_draft(&user, draft, false).await.unwrap();
        assert_eq!(saved.len(), 3);
        let seen: Vec<usize> = engine
            .seen
            .lock()
            .unwrap()
            .iter()
            .map(|n| n - before)
            .collect();
        // Page n is rendered when page n is read, after page n - 1 was written and dropped; a
        // 200-page PDF never holds more than one page's raster.
        assert_eq!(seen, vec![1, 2, 3]);
        for (n, page) in saved.iter().enumerate() {
            let stem = if n == 0 {
                "2025-03-21".to_owned()
            } else {
                format!("2025-03-21#{}", n + 1)
            };
            let found = notebook.page_of_stem(&user, &stem).await.unwrap();
            assert_eq!(found.as_ref(), Some(&page.page_id), "{stem}");
        }
    }

    /// An engine that reads the lines it is told, one under the other, and notes the
    /// vocabulary it was given at each page.
    struct Scripted {
        lines: Mutex<Vec<&'static str>>,
        vocabularies: Mutex<Vec<Vec<String>>>,
    }

    #[async_trait]
    impl Ocr for Scripted {
        fn engine(&self) -> OcrEngine {
            OcrEngine {
                name: "scripted".into(),
                version: "1".into(),
            }
        }

        async fn recognize(&self, page: &PageImage) -> Result<Vec<OcrLine>, OcrError> {
            self.recognize_with(page, &[]).await
        }

        async fn recognize_with(
            &self,
            _page: &PageImage,
            vocabulary: &[String],
        ) -> Result<Vec<OcrLine>, OcrError> {
            self.vocabularies.lock().unwrap().push(vocabulary.to_vec());
            let lines = self.lines.lock().unwrap().clone();
            Ok(lines
                .into_iter()
                .enumerate()
                .map(|(i, text)| OcrLine {
                    text: text.into(),
                    confidence: 0.9,
                    bbox: crate::ports::OcrBox {
                        x: 40.0,
                        y: 40.0 + 60.0 * i as f32,
                        w: 300.0,
                        h: 30.0,
                    },
                })
                .collect())
        }
    }

    /// Issue 46: a line the owner corrected stays corrected when the same ink is read again
    /// (`nib ocr --force`, also when the engine now reads it otherwise) and when it is
    /// uploaded again; the corrected words are the vocabulary the engine gets for that user's
    /// ink, and not for another user's.
    #[tokio::test]
    async fn a_correction_survives_reading_the_ink_again_and_its_words_reach_the_engine() {
        use crate::notebook::{Correction, TextSource};
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(Scripted {
            lines: Mutex::new(vec!["Called leurecly", "Lunch at noon"]),
            vocabularies: Mutex::new(Vec::new()),
        });
        let notebook = notebook_with(dir.path(), engine.clone());
        let user = UserId::parse("default").unwrap();
        let mut png = std::io::Cursor::new(Vec::new());
        image::RgbImage::from_pixel(400, 200, image::Rgb([255, 255, 255]))
            .write_to(&mut png, image::ImageFormat::Png)
            .unwrap();
        let png = png.into_inner();
        let draft = || PageDraft {
            date: Some(Date::parse("2026-06-19").unwrap()),
            stem: "2026-06-19".into(),
            ocr: None,
            pdf: None,
            png: Some(png.clone()),
            sources: PageSources {
                png: Some(1),
                ..PageSources::default()
            },
            png_rendered: false,
        };
        let saved = notebook.import_draft(&user, draft(), false).await.unwrap();
        let id = saved[0].page_id.clone();
        let page = notebook.get_page(&user, &id).await.unwrap();
        let texts: Vec<&str> = page.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["Called leurecly", "Lunch at noon"]);
        assert!(page.lines.iter().all(|l| l.text_source == TextSource::Ocr));
        let line = page.lines[0].line_id.clone();
        notebook
            .correct_line(
                &user,
                &id,
                &line,
                Correction {
                    text: Some("Called Kennedy".into()),
                    ticked: None,
                },
            )
            .await
            .unwrap();

        let corrected = |page: &crate::notebook::PageView| {
            page.lines
                .iter()
                .map(|l| (l.text.clone(), l.text_source))
                .collect::<Vec<_>>()
        };
        let expected = vec![
            ("Called Kennedy".to_owned(), TextSource::Corrected),
            ("Lunch at noon".to_owned(), TextSource::Ocr),
        ];

        // The same ink read again, the same way: by the line's id.
        notebook
            .reread_page(&user, &id, true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            corrected(&notebook.get_page(&user, &id).await.unwrap()),
            expected
        );
        let given = engine.vocabularies.lock().unwrap().clone();
        assert_eq!(given.len(), 2);
        assert!(given[0].is_empty(), "no corrections yet: {given:?}");
        assert_eq!(given[1], ["Called", "Kennedy"]);

        // Read otherwise (the vocabulary helped, or not quite): by its place.
        *engine.lines.lock().unwrap() = vec!["Called Kennedv", "Lunch at noon"];
        notebook
            .reread_page(&user, &id, true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            corrected(&notebook.get_page(&user, &id).await.unwrap()),
            expected
        );

        // The same ink uploaded again: not read again, the correction stays.
        notebook.import_draft(&user, draft(), false).await.unwrap();
        assert_eq!(engine.vocabularies.lock().unwrap().len(), 3);
        assert_eq!(
            corrected(&notebook.get_page(&user, &id).await.unwrap()),
            expected
        );

        // Another user's ink is read without this user's words.
        let bob = UserId::parse("bob").unwrap();
        notebook.import_draft(&bob, draft(), false).await.unwrap();
        assert_eq!(engine.vocabularies.lock().unwrap()[3], Vec::<String>::new());
    }
}
