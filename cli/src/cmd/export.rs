//! `nib export`: a user's notebook as a bundle (`nib import --bundle` reads it back) or as
//! Markdown.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use nib::services::DEFAULT_USER;

use super::{progress_bar, user_id};
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct ExportArgs {
    /// The ZIP file to write (replaced if it exists).
    out: PathBuf,
    #[arg(long, default_value = DEFAULT_USER)]
    user: String,
    #[arg(long, value_enum, default_value = "bundle")]
    format: ExportFormat,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportFormat {
    /// `nib-bundle` version 1 (docs/user-guide.md, "The bundle"): everything, re-importable.
    Bundle,
    /// One `.md` per page with front matter, its image beside it.
    Markdown,
}

/// `nib export`: the bundle or the Markdown ZIP, written to a temporary file beside `out` and
/// renamed at the end, so a failed export leaves no half archive under the name.
pub(crate) async fn run(args: ExportArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let ExportArgs { out, user, format } = args;
    let (out, user) = (out.as_path(), &user_id(&user)?);
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let total = app.notebook().page_count(user).await?;
    let bar = progress_bar("exporting", usize::try_from(total).unwrap_or(usize::MAX));
    let partial = out.with_extension("zip.partial");
    let file = std::io::BufWriter::new(
        std::fs::File::create(&partial)
            .with_context(|| format!("cannot create {}", partial.display()))?,
    );
    let tick = || bar.inc(1);
    let result = match format {
        ExportFormat::Bundle => app.notebook().export_bundle(user, file, &tick).await,
        ExportFormat::Markdown => app.notebook().export_markdown(user, file, &tick).await,
    };
    bar.finish_and_clear();
    let report = match result {
        Ok(report) => report,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(anyhow::Error::new(e).context("cannot export the notebook"));
        }
    };
    std::fs::rename(&partial, out).with_context(|| format!("cannot write {}", out.display()))?;
    println!(
        "exported {} pages, {} tasks and {} ink files of {user} to {}",
        report.pages,
        report.tasks,
        report.ink_files,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
