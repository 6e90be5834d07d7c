//! `nib import`: a folder of page files (once, or `--watch`ed), a bundle (`--bundle`), or with
//! `--via-upload` the folder's files put in the deployment's bucket for its ingest function.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use nib::domain::UserId;
use nib::services::DEFAULT_USER;

use super::{DEFAULT_OCR, progress_bar, shutdown, user_id};
#[cfg(feature = "aws")]
use crate::Backend;
use crate::{Target, watch};

#[derive(clap::Args)]
pub(crate) struct ImportArgs {
    #[arg(required_unless_present = "bundle", conflicts_with = "bundle")]
    dir: Option<PathBuf>,
    /// Import a bundle written by `nib export` instead (into an empty notebook; again
    /// changes nothing).
    #[arg(long, value_name = "BUNDLE.zip")]
    bundle: Option<PathBuf>,
    #[arg(long, default_value = DEFAULT_USER)]
    user: String,
    /// The engine that reads pages that come as ink alone: local (PP-OCR, `make tools-ocr`
    /// installs it), openai or google-vision (NIB_OCR_* settings; docs/ocr.md,
    /// "Choosing an OCR provider"), or off.
    #[arg(long, env = "NIB_OCR", default_value = DEFAULT_OCR)]
    ocr: String,
    /// Read the ink again even where the page has text of its own or was read before.
    #[arg(long)]
    force_ocr: bool,
    /// AWS only: put the files under uploads/{user}/ in the bucket, for the ingest
    /// function to import (and Textract to read), instead of writing the pages here.
    #[arg(long, conflicts_with = "watch")]
    via_upload: bool,
    /// Keep watching the folder (a tablet's sync folder): import each new or changed page
    /// once its files stop changing, one line per file; a restart imports nothing twice.
    #[arg(long, conflicts_with = "bundle")]
    watch: bool,
    /// With --watch: how long a page's files must be left alone before they are imported.
    #[arg(long, default_value_t = 2000, value_name = "MS", requires = "watch")]
    settle_ms: u64,
}

pub(crate) async fn run(args: ImportArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let ImportArgs {
        dir,
        bundle,
        user,
        ocr,
        force_ocr,
        via_upload,
        watch,
        settle_ms,
    } = args;
    let ocr = nib::config::OcrChoice::parse(&ocr)?;
    match (dir, bundle) {
        (_, Some(bundle)) => import_bundle(&bundle, &user_id(&user)?, target).await,
        (Some(dir), None) if watch => {
            let app = target.open(ocr).await?;
            let user = user_id(&user)?;
            app.ensure_user(&user).await?;
            watch::Watch {
                app: &app,
                dir: &dir,
                data_dir: &target.data_dir,
                user: &user,
                force_ocr,
                settle: std::time::Duration::from_millis(settle_ms),
            }
            .run(shutdown())
            .await?;
            Ok(ExitCode::SUCCESS)
        }
        #[cfg(feature = "aws")]
        (Some(dir), None) if via_upload => upload(&dir, &user_id(&user)?, target).await,
        #[cfg(not(feature = "aws"))]
        (Some(_), None) if via_upload => Err(nib::services::ServicesError::NoAws.into()),
        (Some(dir), None) => import(&dir, &user_id(&user)?, target, ocr, force_ocr).await,
        (None, None) => unreachable!("clap requires a folder or --bundle"),
    }
}

/// Pages `nib import` reads, parses and commits at once, when some carry ink: each holds its
/// files' bytes until written, and waits its turn for the OCR engine.
const IMPORT_CONCURRENCY: usize = 16;
/// The same when every page is text (Markdown or plain text): more commits share each of the
/// store's group commits (at most 64), so fewer fsyncs and fewer rewritten pages per page
/// written (10,000 pages: 1.33x the pages/s of 16; bench/findings.md, "Footprint, continued").
const TEXT_IMPORT_CONCURRENCY: usize = 64;

/// `nib import --bundle`: checks the whole bundle, then writes it.
async fn import_bundle(bundle: &Path, user: &UserId, target: &Target) -> anyhow::Result<ExitCode> {
    let file = std::io::BufReader::new(
        std::fs::File::open(bundle).with_context(|| format!("cannot open {}", bundle.display()))?,
    );
    let app = target.open_bulk(nib::config::OcrChoice::Off).await?;
    app.ensure_user(user).await?;
    let bar = progress_bar("importing", 0);
    let tick = || {
        bar.inc_length(1);
        bar.inc(1)
    };
    let result = app.notebook().import_bundle(user, file, &tick).await;
    bar.finish_and_clear();
    let r = result.with_context(|| format!("cannot import {}", bundle.display()))?;
    println!(
        "imported {} pages and {} tasks into {user}; {} pages and {} tasks were there already",
        r.pages, r.tasks, r.pages_present, r.tasks_present
    );
    Ok(ExitCode::SUCCESS)
}

/// `nib import DIR`: every page of the folder, several at a time.
async fn import(
    dir: &Path,
    user: &UserId,
    target: &Target,
    ocr: nib::config::OcrChoice,
    force_ocr: bool,
) -> anyhow::Result<ExitCode> {
    let (pages, skipped) = nib::notebook::group_dir(dir)
        .with_context(|| format!("cannot read the folder {}", dir.display()))?;
    let app = target.open_bulk(ocr).await?;
    app.ensure_user(user).await?;
    let bar = progress_bar("importing", pages.len());
    let started = std::time::Instant::now();
    let (mut created, mut updated, mut failed) = (0usize, 0usize, 0usize);
    // Without a terminal there is no bar: say how far we got now and then instead.
    let plain_progress = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    // Several pages in flight, so the store commits their transactions together (one fsync
    // for the group); the statistics are counters, so page commits do not contend on them.
    // Pages of nearby dates share tasks (a task copied forward day to day), and concurrent
    // commits of one task retry, so the pages in flight are far apart: each of
    // the workers takes one contiguous run of dates, in order. Each worker is
    // its own task, so their parsing, embedding and sealing run on every core (polled
    // together from this task, they had one).
    // Each page's vectors are left pending (one small item, nothing read) and folded into
    // their blocks once at the end: rewriting a page's whole block at each commit made the
    // import slower as the notebook grew. Search reads pending entries meanwhile, and a
    // crash before the fold loses nothing (the next import or `nib reindex` folds them).
    app.notebook().defer_vectors(true);
    let text_only = pages
        .iter()
        .all(|p| p.pdf.is_none() && p.png.is_none() && p.jpg.is_none());
    let workers_wanted = if text_only {
        TEXT_IMPORT_CONCURRENCY
    } else {
        IMPORT_CONCURRENCY
    };
    let chunk = pages.len().div_ceil(workers_wanted).max(1);
    let (tx, mut results) = tokio::sync::mpsc::unbounded_channel();
    let mut workers = tokio::task::JoinSet::new();
    for run in pages.chunks(chunk) {
        let (run, notebook, user, tx) = (
            run.to_vec(),
            app.notebook().clone(),
            user.clone(),
            tx.clone(),
        );
        workers.spawn(async move {
            for page in &run {
                let result = notebook.import_files_read(&user, page, force_ocr).await;
                if tx.send(result).is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    let mut done = 0;
    while let Some(result) = results.recv().await {
        if plain_progress && done > 0 && done % 50 == 0 {
            eprintln!("progress: {done}/{}", pages.len());
        }
        done += 1;
        match result {
            Ok(saved) => {
                for page in saved {
                    if page.created {
                        created += 1;
                    } else {
                        updated += 1;
                    }
                }
            }
            Err(failure) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: {failure}"));
            }
        }
        bar.inc(1);
    }
    // A worker that stopped early (it panicked) is a failure, not a short import.
    while let Some(joined) = workers.join_next().await {
        joined.context("an import worker failed")?;
    }
    app.notebook().defer_vectors(false);
    bar.set_message("folding search vectors");
    app.notebook()
        .fold_vectors(user)
        .await
        .context("cannot fold the imported pages' search vectors into their blocks")?;
    bar.finish_and_clear();
    for path in &skipped {
        eprintln!(
            "skipped: {} (not a .pdf, .png, .jpg, .md or .txt page file)",
            path.display()
        );
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "imported {} pages ({created} new, {updated} updated) in {secs:.2}s ({:.1} pages/s); {failed} failed",
        created + updated,
        (created + updated) as f64 / secs.max(1e-9)
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `nib import --via-upload`: the folder's page files under `uploads/{user}/` in the bucket,
/// for the ingest function (each page's text files first, so its ink arrives second and the
/// page is read once with both).
#[cfg(feature = "aws")]
async fn upload(dir: &Path, user: &UserId, target: &Target) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        target.backend == Backend::Aws,
        "--via-upload puts the files in the deployment's S3 bucket for its ingest function, so it \
         needs --backend aws (locally, nib import writes the pages itself)"
    );
    let (pages, skipped) = nib::notebook::group_dir(dir)
        .with_context(|| format!("cannot read the folder {}", dir.display()))?;
    let config = target.aws_config()?;
    let assets = nib::adapters::aws::AwsClients::connect(&config)
        .await
        .assets(&config);
    let files: Vec<&PathBuf> = pages
        .iter()
        .flat_map(|p| {
            [&p.md, &p.txt, &p.pdf, &p.png, &p.jpg]
                .into_iter()
                .flatten()
        })
        .collect();
    let bar = progress_bar("uploading", pages.len());
    let mut failed = 0usize;
    let mut last_stem = None;
    for path in files {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("group_dir keeps UTF-8 names");
        let stem = path.file_stem().map(|s| s.to_owned());
        if last_stem.is_some() && last_stem != stem {
            bar.inc(1);
        }
        last_stem = stem;
        let sent = match tokio::fs::read(path).await {
            Ok(bytes) => assets
                .put_upload(user, name, bytes)
                .await
                .map_err(|e| nib::telemetry::chain(&e)),
            Err(e) => Err(nib::telemetry::chain(&e)),
        };
        if let Err(cause) = sent {
            failed += 1;
            bar.suspend(|| eprintln!("error: {}: {cause}", path.display()));
        }
    }
    bar.finish_and_clear();
    for path in &skipped {
        eprintln!(
            "skipped: {} (not a .pdf, .png, .jpg, .md or .txt page file)",
            path.display()
        );
    }
    println!(
        "uploaded {} pages to s3://{}/uploads/{user}/ for the ingest function; {failed} files failed",
        pages.len(),
        config.bucket
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
