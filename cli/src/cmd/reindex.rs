//! `nib reindex`: a user's search vectors rebuilt where missing, stale or another model's.

use std::process::ExitCode;

use anyhow::Context;
use nib::services::DEFAULT_USER;

use super::user_id;
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct ReindexArgs {
    #[arg(long, default_value = DEFAULT_USER)]
    user: String,
}

pub(crate) async fn run(args: ReindexArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let user = &user_id(&args.user)?;
    let app = target.open_bulk(nib::config::OcrChoice::Off).await?;
    let report = app
        .notebook()
        .reindex(user)
        .await
        .context("cannot rebuild the search vectors")?;
    println!(
        "reindexed {user}: {} pages, {} embedded again, {} vector blocks written (model {})",
        report.pages,
        report.embedded,
        report.blocks,
        nib::embed::model()?.id()
    );
    Ok(ExitCode::SUCCESS)
}
