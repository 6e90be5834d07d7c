//! `nib access`: who opened a user's notebook, from the access record.

use std::process::ExitCode;

use clap::Subcommand;
use nib::services::DEFAULT_USER;

use super::user_id;
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct AccessArgs {
    #[command(subcommand)]
    command: AccessCommand,
}

#[derive(Subcommand)]
enum AccessCommand {
    /// List the access record, newest first: when, which tool, which token or client, and the
    /// ids of the pages and tasks opened.
    List {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        /// Only records from this day on (YYYY-MM-DD, UTC).
        #[arg(long, value_name = "YYYY-MM-DD")]
        since: Option<String>,
        /// One JSON object per line (the fields of the list_access tool).
        #[arg(long)]
        json: bool,
    },
}

pub(crate) async fn run(args: AccessArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let AccessCommand::List { user, since, json } = args.command;
    let (user, since) = (&user_id(&user)?, since.as_deref());
    let since_ms = match since {
        Some(s) => {
            let day = nib::domain::Date::parse(s)
                .map_err(|_| anyhow::anyhow!("--since must be a date, YYYY-MM-DD (got {s:?})"))?;
            Some(day.inner().midnight().assume_utc().unix_timestamp() * 1000)
        }
        None => None,
    };
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let log = app.notebook().access_log();
    if !json {
        println!(
            "{:<24} {:<18} {:<40} {:<24} IDS",
            "AT (UTC)", "TOOL", "CREDENTIAL", "CLIENT"
        );
    }
    let mut before = None;
    loop {
        let (records, more) = log.list(user, since_ms, before, 200).await?;
        for (_, r) in &records {
            if json {
                println!(
                    "{}",
                    serde_json::to_string(&nib::tools::AccessRecordView::of(r))?
                );
                continue;
            }
            let ids: Vec<String> = r
                .page_ids
                .iter()
                .map(|p| format!("page:{p}"))
                .chain(r.task_ids.iter().map(|t| format!("task:{t}")))
                .collect();
            println!(
                "{:<24} {:<18} {:<40} {:<24} {}",
                nib::tools::rfc3339_ms(r.at_ms),
                r.tool,
                r.credential_id,
                r.client.as_deref().unwrap_or("-"),
                if ids.is_empty() {
                    "-".to_owned()
                } else {
                    ids.join(",")
                }
            );
        }
        match records.last() {
            Some((position, _)) if more => before = Some(*position),
            _ => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}
