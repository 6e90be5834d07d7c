//! `nib doctor`: a deployment checked, one line per check.

use std::process::ExitCode;

#[cfg(feature = "aws")]
use crate::Backend;
use crate::Target;

/// `nib doctor`: the checks of `nib::doctor`, one line each.
#[cfg(feature = "aws")]
pub(crate) async fn run(target: &Target) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        target.backend == Backend::Aws,
        "nib doctor checks a deployment (the table, bucket, keys and connector), so it needs \
         --backend aws or --from-terraform; locally, `nib serve` says what is wrong as it starts"
    );
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let config = app.settings.aws_config().expect("an AWS target");
    let checks = nib::doctor::check_aws(config, &app).await;
    let mut failed = false;
    for check in &checks {
        println!("{}", check.line());
        failed |= check.outcome.is_err();
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(not(feature = "aws"))]
pub(crate) async fn run(_target: &Target) -> anyhow::Result<ExitCode> {
    Err(nib::services::ServicesError::NoAws.into())
}
