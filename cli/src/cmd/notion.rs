//! `nib notion`: a user's tasks pushed to a Notion database: connect it, see how pushing goes,
//! push what waits, disconnect.

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use nib::services::DEFAULT_USER;

use super::user_id;
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct NotionArgs {
    #[command(subcommand)]
    command: NotionCommand,
}

/// Which user a `nib notion` command works on (the back end is the global `--backend`).
#[derive(clap::Args)]
struct NotionTarget {
    #[arg(long, default_value = DEFAULT_USER)]
    user: String,
}

#[derive(Subcommand)]
enum NotionCommand {
    /// Connect a database: reads its schema and maps the task fields onto it. The integration
    /// token comes from NIB_NOTION_TOKEN or stdin (one line), never from an argument.
    Connect {
        /// The database id (32 hex digits, dashes optional), as in its Notion link.
        #[arg(long)]
        database: String,
        #[command(flatten)]
        target: NotionTarget,
    },
    /// The connected database, its mapping, the last error and what waits in the outbox.
    Status {
        #[command(flatten)]
        target: NotionTarget,
    },
    /// Forget the connection (and the outbox); pushed tasks keep their Notion links.
    Disconnect {
        #[command(flatten)]
        target: NotionTarget,
    },
    /// Push what waits in the outbox now (never before a Retry-After Notion asked for).
    Sync {
        #[command(flatten)]
        target: NotionTarget,
    },
}

/// The integration token: `NIB_NOTION_TOKEN`, else one line on stdin (a prompt that does not
/// echo when stdin is a terminal).
fn read_notion_token() -> anyhow::Result<nib::adapters::notion::NotionToken> {
    use std::io::IsTerminal;
    let raw = zeroize::Zeroizing::new(match std::env::var("NIB_NOTION_TOKEN") {
        Ok(v) if !v.trim().is_empty() => v,
        _ if std::io::stdin().is_terminal() => {
            rpassword::prompt_password("Notion integration token: ")
                .context("cannot read the token")?
        }
        _ => {
            let mut line = String::new();
            std::io::stdin()
                .read_line(&mut line)
                .context("cannot read the token from stdin")?;
            line
        }
    });
    nib::adapters::notion::NotionToken::parse(&raw)
        .ok_or_else(|| anyhow::anyhow!("no Notion token: set NIB_NOTION_TOKEN or give it on stdin"))
}

fn moment(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|d| {
            d.format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
            ))
            .ok()
        })
        .unwrap_or_default()
}

fn describe_mapping(m: &nib::adapters::notion::Mapping) -> String {
    use nib::adapters::notion::StatusMapping;
    let status = match &m.status {
        StatusMapping::Status {
            property,
            todo,
            done,
            cancelled,
        } => format!(
            "status -> '{property}' (todo: '{todo}', done: '{done}', cancelled: '{cancelled}')"
        ),
        StatusMapping::Checkbox { property } => {
            format!("status -> checkbox '{property}' (ticked when done)")
        }
    };
    let mut out = format!("text -> '{}'; {status}", m.title);
    if let Some(d) = &m.date {
        out.push_str(&format!("; page date -> '{d}'"));
    }
    if let Some(u) = &m.url {
        out.push_str(&format!("; source_url -> '{u}'"));
    }
    match &m.task_id {
        Some(t) => out.push_str(&format!("; task id -> '{t}'")),
        // A connection from before nib kept its ids in Notion: a push retried after its page
        // was created but not recorded can create a second page until this is mapped.
        None => out.push_str("; no task id property (nib notion connect again adds it)"),
    }
    out
}

pub(crate) async fn run(args: NotionArgs, target_of: &Target) -> anyhow::Result<ExitCode> {
    let command = args.command;
    let target = match &command {
        NotionCommand::Connect { target, .. }
        | NotionCommand::Status { target }
        | NotionCommand::Disconnect { target }
        | NotionCommand::Sync { target } => target,
    };
    let user = user_id(&target.user)?;
    let app = target_of.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    match command {
        NotionCommand::Connect { database, .. } => {
            let token = read_notion_token()?;
            app.ensure_user(&user).await?;
            let mapping = notebook
                .notion_connect(&user, &database, token)
                .await
                .context("cannot connect the Notion database")?;
            println!("connected the Notion database {database} for {user}");
            println!("mapping: {}", describe_mapping(&mapping));
        }
        NotionCommand::Status { .. } => match notebook.notion_status(&user).await? {
            None => println!("{user} has no Notion database connected"),
            Some(s) => {
                let now = app.clock.unix();
                println!("database:   {}", s.database_id);
                println!("connected:  {}", moment(s.connected_at));
                println!("mapping:    {}", describe_mapping(&s.mapping));
                match s.last_ok_at {
                    Some(at) => println!("last ok:    {}", moment(at)),
                    None => println!("last ok:    never"),
                }
                match &s.last_error {
                    Some((at, kind, message)) => {
                        println!("last error: {} {kind}: {message}", moment(*at))
                    }
                    None => println!("last error: none"),
                }
                if let Some(until) = s.retry_after_until.filter(|&u| u > now) {
                    println!(
                        "waiting:    Notion asked to wait until {} (Retry-After)",
                        moment(until)
                    );
                } else if let Some(until) = s.backoff_until.filter(|&u| u > now) {
                    println!("waiting:    backing off until {}", moment(until));
                }
                println!("pending:    {} task(s) in the outbox", s.pending);
            }
        },
        NotionCommand::Disconnect { .. } => {
            if notebook.notion_disconnect(&user).await? {
                println!("disconnected the Notion database of {user}");
            } else {
                println!("{user} had no Notion database connected");
            }
        }
        NotionCommand::Sync { .. } => {
            let r = notebook.notion_sync(&user).await?;
            println!(
                "created {}, updated {}, failed {}; {} task(s) still in the outbox",
                r.created, r.updated, r.failed, r.pending
            );
            if let Some(until) = r.retry_after_until {
                println!("Notion asked to wait until {} (Retry-After)", moment(until));
            }
            if r.pending > 0 {
                println!("see nib notion status for the last error");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
