//! `nib ocr`: pages' stored ink read again with an OCR engine.

use std::process::ExitCode;

#[cfg(feature = "ocr-local")]
use nib::domain::UserId;
use nib::services::DEFAULT_USER;

use super::DEFAULT_OCR;
#[cfg(feature = "ocr-local")]
use super::{progress_bar, user_id};
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct OcrArgs {
    /// The page imported under this file stem (e.g. 2026-06-19).
    #[arg(long, conflicts_with = "all", required_unless_present = "all")]
    stem: Option<String>,
    /// Every page with ink.
    #[arg(long)]
    all: bool,
    /// Also pages whose text came from a file, and ink read before.
    #[arg(long)]
    force: bool,
    #[arg(long, default_value = DEFAULT_USER)]
    user: String,
    #[arg(long, env = "NIB_OCR", default_value = DEFAULT_OCR)]
    ocr: String,
}

pub(crate) async fn run(args: OcrArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let OcrArgs {
        stem,
        all: _,
        force,
        user,
        ocr,
    } = args;
    let ocr = nib::config::OcrChoice::parse(&ocr)?;
    #[cfg(feature = "ocr-local")]
    let done = reread(stem.as_deref(), force, &user_id(&user)?, target, ocr).await;
    #[cfg(not(feature = "ocr-local"))]
    let done = {
        let _ = (stem, force, user, ocr, target);
        Err(anyhow::anyhow!("this build of nib has no OCR engine"))
    };
    done
}

/// `nib ocr`: the page of `stem`, or every page with ink, read again.
#[cfg(feature = "ocr-local")]
async fn reread(
    stem: Option<&str>,
    force: bool,
    user: &UserId,
    target: &Target,
    ocr: nib::config::OcrChoice,
) -> anyhow::Result<ExitCode> {
    if ocr == nib::config::OcrChoice::Off {
        anyhow::bail!("nib ocr needs an engine: --ocr local, openai or google-vision");
    }
    let app = target.open(ocr).await?;
    let mut ids = Vec::new();
    match stem {
        Some(stem) => match app.notebook().page_of_stem(user, stem).await? {
            Some(id) => ids.push(id),
            None => anyhow::bail!("no page was imported under the stem {stem:?}"),
        },
        None => {
            let mut after = None;
            loop {
                let (pages, more) = app
                    .notebook()
                    .list_pages_after(
                        user,
                        None,
                        None,
                        after.as_ref().map(|(d, p): &(_, _)| (*d, p)),
                        200,
                    )
                    .await?;
                after = pages.last().map(|p| (p.date, p.page_id.clone()));
                ids.extend(pages.into_iter().filter(|p| p.has_ink).map(|p| p.page_id));
                if !more {
                    break;
                }
            }
        }
    }
    let bar = progress_bar("reading", ids.len());
    let (mut read, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    for id in &ids {
        match app.notebook().reread_page(user, id, force).await {
            Ok(Some(_)) => read += 1,
            Ok(None) => skipped += 1,
            Err(e) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: page {id}: {}", nib::telemetry::chain(&e)));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!(
        "read {read} pages again; {skipped} skipped (text of their own, or ink read before; --force reads them); {failed} failed"
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
