//! `nib notes`: typed notes added to a day's page, listed, and their tags counted.

use std::process::ExitCode;

use clap::Subcommand;
use nib::services::DEFAULT_USER;

use super::user_id;
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct NotesArgs {
    #[command(subcommand)]
    command: NotesCommand,
}

#[derive(Subcommand)]
enum NotesCommand {
    /// Add a typed note to the page of a day (today in the user's time zone by default), as
    /// add_note does.
    Add {
        text: String,
        #[arg(long, value_name = "YYYY-MM-DD")]
        date: Option<String>,
        /// A tag (repeat for more).
        #[arg(long = "tag")]
        tags: Vec<String>,
        #[arg(long)]
        source_url: Option<String>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// List notes, newest first: date, tags, text.
    List {
        #[arg(long)]
        tag: Option<String>,
        #[arg(long, value_name = "YYYY-MM-DD")]
        from: Option<String>,
        #[arg(long, value_name = "YYYY-MM-DD")]
        to: Option<String>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Every tag with how many notes carry it.
    Tags {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

fn cli_date(arg: &str, s: Option<&str>) -> anyhow::Result<Option<nib::domain::Date>> {
    s.map(|s| {
        nib::domain::Date::parse(s)
            .map_err(|_| anyhow::anyhow!("--{arg} must be a date, YYYY-MM-DD (got {s:?})"))
    })
    .transpose()
}

/// `nib notes add|list|tags`.
pub(crate) async fn run(args: NotesArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    match args.command {
        NotesCommand::Add {
            text,
            date,
            tags,
            source_url,
            user,
        } => {
            let user = user_id(&user)?;
            let date = match cli_date("date", date.as_deref())? {
                Some(d) => d,
                None => notebook.today_for(&user).await?,
            };
            let note = notebook
                .add_note(&user, date, &text, &tags, source_url.as_deref())
                .await?;
            println!(
                "added note {} on the page of {} ({}){}",
                note.line_id,
                note.date,
                note.page_id,
                if note.tags.is_empty() {
                    String::new()
                } else {
                    format!(", tags {}", note.tags.join(", "))
                }
            );
        }
        NotesCommand::List {
            tag,
            from,
            to,
            user,
        } => {
            let (from, to) = (
                cli_date("from", from.as_deref())?,
                cli_date("to", to.as_deref())?,
            );
            let user = user_id(&user)?;
            let mut after: Option<(nib::domain::Date, nib::domain::PageId, String)> = None;
            loop {
                let (notes, more) = notebook
                    .list_notes(
                        &user,
                        tag.as_deref(),
                        from,
                        to,
                        after.as_ref().map(|(d, p, l)| (*d, p, l.as_str())),
                        200,
                    )
                    .await?;
                for n in &notes {
                    let tags: Vec<String> = n.tags.iter().map(|t| format!("#{t}")).collect();
                    println!("{}  {:<24} {}", n.date, tags.join(" "), n.text);
                }
                match notes.last() {
                    Some(n) if more => {
                        after = Some((n.date, n.page_id.clone(), n.line_id.clone()));
                    }
                    _ => break,
                }
            }
        }
        NotesCommand::Tags { user } => {
            for (tag, count) in notebook.list_tags(&user_id(&user)?).await? {
                println!("{count:>6}  {tag}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
