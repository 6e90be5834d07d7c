//! `nib smoke`: a read-only end-to-end check of a live connector URL, one line per check.

use std::process::ExitCode;

#[derive(clap::Args)]
pub(crate) struct SmokeArgs {
    url: String,
    /// A read token (nib token create --scope read); NIB_SMOKE_TOKEN.
    #[arg(long, env = "NIB_SMOKE_TOKEN")]
    token: Option<String>,
}

pub(crate) async fn run(args: SmokeArgs) -> anyhow::Result<ExitCode> {
    let SmokeArgs { url, token } = args;
    let checks = nib::smoke::smoke(&url, token.as_deref()).await;
    let mut failed = false;
    for check in &checks {
        println!("{}", check.line());
        failed |= check.outcome.is_err();
    }
    if token.is_none() {
        println!("(no --token: the tools and page images were not checked)");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
