//! `nib-ocr-eval DIR [--show]`: reads every page of a folder of generated pages
//! (`STEM.png|jpg|pdf` + `STEM.truth.json`, from `tests/ocr/generate.py`) with the local OCR
//! engine and prints the scores the product is judged on: median CER, task F1, checkbox status
//! accuracy, pages without text, and pages/s with the peak memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use nib::ocr::paddle::{PaddleOcr, default_dir};
use nib::ocr::{ReadPage, layout, raster};
use nib::ports::{Ocr, PageImage};
use nib_bench::ocr_score::{PageScore, TruthFile, TruthPage, score_page, summarize};

fn ink_file(dir: &Path, stem: &str) -> Option<PathBuf> {
    ["png", "jpg", "jpeg", "pdf"]
        .iter()
        .map(|ext| dir.join(format!("{stem}.{ext}")))
        .find(|p| p.is_file())
}

/// One page of an ink file: the file and the page's index in it (from 0).
struct Ink {
    path: PathBuf,
    page: usize,
}

impl Ink {
    fn decode(&self) -> anyhow::Result<PageImage> {
        let bytes = std::fs::read(&self.path)?;
        let image = match raster::InkFormat::sniff(&bytes) {
            Some(raster::InkFormat::Pdf) => raster::PdfRaster::open(&bytes)?.page(self.page)?,
            _ => raster::decode_image(&bytes)?,
        };
        Ok(image)
    }
}

/// Peak resident memory of this process, in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(PathBuf::from)
    else {
        bail!("usage: nib-ocr-eval DIR [--show] [--workers N] [--greedy] [--cache DIR]");
    };
    let show = args.iter().any(|a| a == "--show");
    // `--cache DIR`: the engine's segments per page, kept for re-scoring the layout alone.
    let cache = args
        .iter()
        .position(|a| a == "--cache")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let workers = args
        .iter()
        .position(|a| a == "--workers")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    // Pages are decoded by the workers as they take them, so memory holds the pages being
    // read, not all of them (as `nib import` does).
    let mut jobs: Vec<(String, TruthPage, Ink)> = Vec::new();
    let mut truths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".truth.json"))
        .collect();
    truths.sort();
    for t in truths {
        let file = TruthFile::parse(&std::fs::read_to_string(&t)?)
            .map_err(|e| anyhow::anyhow!("{}: {e}", t.display()))?;
        let ink =
            ink_file(&dir, &file.stem).with_context(|| format!("no ink file for {}", file.stem))?;
        let bytes = std::fs::read(&ink)?;
        let count = match raster::InkFormat::sniff(&bytes) {
            Some(raster::InkFormat::Pdf) => raster::pdf_page_count(&bytes),
            _ => 1,
        };
        if count != file.pages.len() {
            bail!(
                "{}: {count} pages of ink, {} of truth",
                file.stem,
                file.pages.len()
            );
        }
        for (i, page) in file.pages.into_iter().enumerate() {
            let ink = Ink {
                path: ink.clone(),
                page: i,
            };
            jobs.push((format!("{}#{}", file.stem, i + 1), page, ink));
        }
    }
    // `--greedy`: without the word list, as the engine decoded before it.
    let lexicon = !args.iter().any(|a| a == "--greedy");
    let engine = Arc::new(PaddleOcr::open_with(&default_dir(), workers, lexicon)?);
    eprintln!(
        "{} pages, {workers} workers, engine {}",
        jobs.len(),
        engine.engine()
    );
    let started = Instant::now();
    let queue = Arc::new(std::sync::Mutex::new(
        jobs.into_iter().enumerate().collect::<Vec<_>>(),
    ));
    let results = Arc::new(std::sync::Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (queue, results, engine) = (queue.clone(), results.clone(), engine.clone());
            let cache = cache.clone();
            s.spawn(move || {
                loop {
                    let Some((i, (name, truth, ink))) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let image = match ink.decode() {
                        Ok(image) => image,
                        Err(e) => {
                            let e = Err(e);
                            results.lock().unwrap().push((i, name, truth, e));
                            continue;
                        }
                    };
                    let cached = cache.as_ref().map(|d| d.join(format!("{name}.json")));
                    let segments = match cached.as_ref().and_then(|f| std::fs::read(f).ok()) {
                        Some(bytes) => Ok(serde_json::from_slice(&bytes).expect("cache")),
                        None => engine.recognize_blocking(&image),
                    };
                    if let (Some(f), Ok(s)) = (cached.as_ref(), segments.as_ref()) {
                        std::fs::create_dir_all(f.parent().unwrap()).ok();
                        std::fs::write(f, serde_json::to_vec(s).unwrap()).ok();
                    }
                    if std::env::var_os("NIB_OCR_FEATURES").is_some() {
                        eprintln!("PAGE\t{name}");
                    }
                    let read = segments
                        .map(|segments| ReadPage {
                            engine: engine.engine(),
                            lines: layout::analyze(&image, segments),
                        })
                        .map_err(anyhow::Error::from);
                    results.lock().unwrap().push((i, name, truth, read));
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut results = Arc::try_unwrap(results).unwrap().into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    let mut scores: Vec<PageScore> = Vec::new();
    for (_, name, truth, read) in &results {
        let read = read
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{name}: {e:#}"))?;
        let markdown = read.markdown();
        let score = score_page(truth, &markdown);
        println!(
            "{name}\tcer {:.3}\ttasks {}/{}/{}\tstatus {}/{}\t{}",
            score.cer,
            score.tasks_matched,
            score.tasks_predicted,
            score.tasks_truth,
            score.status_right,
            score.tasks_matched,
            truth.style.as_deref().unwrap_or(&truth.font)
        );
        if show {
            println!(
                "--- truth\n{}\n--- read\n{markdown}\n",
                nib_bench::ocr_score::to_markdown(truth)
            );
        }
        scores.push(score);
    }
    // Real handwriting: the scores per style of writing too.
    let mut styles: Vec<&str> = results
        .iter()
        .filter_map(|r| r.2.style.as_deref())
        .collect();
    styles.sort_unstable();
    styles.dedup();
    for style in styles {
        let of: Vec<PageScore> = results
            .iter()
            .zip(&scores)
            .filter(|(r, _)| r.2.style.as_deref() == Some(style))
            .map(|(_, s)| s.clone())
            .collect();
        let s = summarize(&of);
        println!(
            "style {style}\tpages {}\tmedian CER {:.4}\tmean CER {:.4}\ttask F1 {:.3}\tstatus {:.3}",
            s.pages, s.median_cer, s.mean_cer, s.task_f1, s.status_accuracy
        );
    }
    let summary = summarize(&scores);
    println!(
        "pages {}\tmedian CER {:.4}\tmean CER {:.4}\ttask P {:.3} R {:.3} F1 {:.3}\tstatus {:.3}\twithout text {}",
        summary.pages,
        summary.median_cer,
        summary.mean_cer,
        summary.task_precision,
        summary.task_recall,
        summary.task_f1,
        summary.status_accuracy,
        summary.pages_without_text
    );
    println!(
        "{:.2} pages/s ({:.2} s/page) with {workers} workers; peak RSS {:.0} MiB",
        summary.pages as f64 / elapsed,
        elapsed / summary.pages.max(1) as f64,
        peak_rss_mib()
    );
    Ok(())
}
