//! `nib-ocr-eval DIR [--show]`: reads every page of a folder of generated pages
//! (`STEM.png|jpg|pdf` + `STEM.truth.json`, from `tests/ocr/generate.py`) with the local OCR
//! engine and prints the scores the product is judged on: median CER, task F1, checkbox status
//! accuracy, pages without text, and pages/s with the peak memory.
//!
//! `--teach` (real handwriting, whose truth names the writer) then measures what corrections
//! teach the decoder: the owner corrects the lines the engine misread on the pages of one
//! writer, the words of those lines join the vocabulary (as `correct_line` adds them,
//! `notebook::words_of`), and the pages several of those writers wrote are read again with it:
//! their CER before and after. (`tests/ocr/real/build.py` has one page per writer; its pages of
//! several writers reuse those writers' lines, so this is the best case of the same words in
//! the same hands.)

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use nib::ocr::decode::Vocabulary;
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
        bail!("usage: nib-ocr-eval DIR [--show] [--workers N] [--greedy] [--cache DIR] [--teach]");
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
    let jobs: Vec<Job> = jobs
        .into_iter()
        .map(|(name, truth, ink)| Job {
            name,
            truth,
            ink,
            vocabulary: None,
        })
        .collect();
    let results = read_all(&engine, jobs, workers, cache.as_deref());
    let elapsed = started.elapsed().as_secs_f64();
    let mut scores: Vec<PageScore> = Vec::new();
    for (job, read) in &results {
        let (name, truth) = (&job.name, &job.truth);
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
        .filter_map(|r| r.0.truth.style.as_deref())
        .collect();
    styles.sort_unstable();
    styles.dedup();
    for style in styles {
        let of: Vec<PageScore> = results
            .iter()
            .zip(&scores)
            .filter(|(r, _)| r.0.truth.style.as_deref() == Some(style))
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
    if args.iter().any(|a| a == "--teach") {
        teach(&engine, results, scores, workers)?;
    }
    Ok(())
}

/// One page to read, with the owner's vocabulary when it is read again after corrections.
struct Job {
    name: String,
    truth: TruthPage,
    ink: Ink,
    vocabulary: Option<Vocabulary>,
}

type Read = anyhow::Result<ReadPage>;

/// Reads the jobs on `workers` threads, each page decoded by the worker that takes it (memory
/// holds the pages being read, not all of them, as `nib import` does); results in job order.
fn read_all(
    engine: &Arc<PaddleOcr>,
    jobs: Vec<Job>,
    workers: usize,
    cache: Option<&Path>,
) -> Vec<(Job, Read)> {
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>());
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            let (queue, results) = (&queue, &results);
            s.spawn(move || {
                loop {
                    let Some((i, job)) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let read = read_one(engine, &job, cache);
                    results.lock().unwrap().push((i, job, read));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);
    results
        .into_iter()
        .map(|(_, job, read)| (job, read))
        .collect()
}

fn read_one(engine: &PaddleOcr, job: &Job, cache: Option<&Path>) -> Read {
    let image = job.ink.decode()?;
    // The cache holds first readings only: a reading with a vocabulary is always made.
    let cached = cache
        .filter(|_| job.vocabulary.is_none())
        .map(|d| d.join(format!("{}.json", job.name)));
    let segments = match cached.as_ref().and_then(|f| std::fs::read(f).ok()) {
        Some(bytes) => Ok(serde_json::from_slice(&bytes)?),
        None => match &job.vocabulary {
            Some(v) => engine.recognize_with_blocking(&image, v),
            None => engine.recognize_blocking(&image),
        },
    };
    if let (Some(f), Ok(s)) = (cached.as_ref(), segments.as_ref()) {
        std::fs::create_dir_all(f.parent().unwrap()).ok();
        std::fs::write(f, serde_json::to_vec(s)?).ok();
    }
    if std::env::var_os("NIB_OCR_FEATURES").is_some() {
        eprintln!("PAGE\t{}", job.name);
    }
    Ok(ReadPage {
        engine: engine.engine(),
        lines: layout::analyze(&image, segments?),
    })
}

/// `--teach`: the owner corrects the misread lines of every page one writer wrote, then the
/// pages several of those writers wrote are read again with the corrected words.
fn teach(
    engine: &Arc<PaddleOcr>,
    first: Vec<(Job, Read)>,
    scores: Vec<PageScore>,
    workers: usize,
) -> anyhow::Result<()> {
    let mut words: Vec<String> = Vec::new();
    let mut corrected_pages = 0;
    let mut again = Vec::new();
    let mut before = Vec::new();
    for ((mut job, read), score) in first.into_iter().zip(scores) {
        let Ok(read) = read else { continue };
        match job.truth.writer.as_deref() {
            // `tests/ocr/real/build.py` names the writer of a page of several "several".
            Some("several") => {
                before.push(score.cer);
                again.push(job);
            }
            Some(_) => {
                // The lines the owner corrects: those the reading does not hold as written.
                let markdown = read.markdown();
                for line in &job.truth.lines {
                    if !line.text.is_empty() && !markdown.contains(line.text.as_str()) {
                        words.extend(nib::notebook::words_of(&line.text));
                    }
                }
                corrected_pages += 1;
                job.vocabulary = None;
            }
            None => {}
        }
    }
    if again.is_empty() || corrected_pages == 0 {
        bail!("--teach needs pages of one writer and pages of several (tests/ocr/real/build.py)");
    }
    eprintln!(
        "{} corrected words from {corrected_pages} page(s); {} page(s) read again",
        words.len(),
        again.len()
    );
    let vocabulary = Vocabulary::new(words.iter().map(String::as_str));
    for job in &mut again {
        job.vocabulary = Some(vocabulary.clone());
    }
    let after = read_all(engine, again, workers, None);
    let mut all_after = Vec::new();
    for ((job, read), cer_before) in after.iter().zip(&before) {
        let read = read
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", job.name))?;
        let cer_after = score_page(&job.truth, &read.markdown()).cer;
        println!("taught {}\tcer {cer_before:.3} -> {cer_after:.3}", job.name);
        all_after.push(cer_after);
    }
    let n = before.len() as f64;
    let (mean_before, mean_after) = (
        before.iter().sum::<f64>() / n,
        all_after.iter().sum::<f64>() / n,
    );
    println!(
        "taught pages {}\tmedian CER {:.4} -> {:.4}\tmean CER {:.4} -> {:.4}",
        before.len(),
        median(&mut before),
        median(&mut all_after),
        mean_before,
        mean_after
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
