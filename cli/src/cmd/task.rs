//! `nib task`: one task shown (as get_task answers), two tasks linked or unlinked.

use std::process::ExitCode;

use clap::Subcommand;
use nib::services::DEFAULT_USER;

use super::user_id;
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    command: TaskCommand,
}

#[derive(Subcommand)]
enum TaskCommand {
    /// A task's text, status, every line it is written on, and who changed its status when
    /// (the get_task tool's answer).
    Show {
        task_link_id: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
        /// The get_task tool's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make task B the same task as A (link_tasks: one task, one status across their pages).
    Link {
        a: String,
        b: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Undo `nib task link A B` (unlink_tasks).
    Unlink {
        a: String,
        b: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

fn task_id(s: &str) -> anyhow::Result<nib::domain::TaskLinkId> {
    nib::domain::TaskLinkId::parse(s).map_err(|_| anyhow::anyhow!("not a task id: {s:?}"))
}

pub(crate) async fn run(args: TaskArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    match args.command {
        TaskCommand::Show {
            task_link_id,
            user,
            json,
        } => {
            let detail = notebook
                .task_detail(&user_id(&user)?, &task_id(&task_link_id)?)
                .await?;
            let out = nib::tools::get_task::task_out(detail);
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(ExitCode::SUCCESS);
            }
            let t = &out.task;
            println!("task:       {}", t.task_link_id);
            println!("text:       {}", t.text);
            println!("status:     {}", t.status.as_str());
            println!("first seen: {}", t.first_seen_date);
            if let Some(d) = t.completed_date {
                println!("completed:  {d}");
            }
            if let Some(u) = &t.notion_url {
                println!("notion:     {u}");
            }
            println!("pages:");
            for l in &out.pages {
                println!(
                    "  {} {} {} [{}] {}",
                    l.date,
                    l.page_id,
                    l.line_id,
                    serde_json::to_value(l.page_status)?
                        .as_str()
                        .unwrap_or_default(),
                    l.line_text.as_deref().unwrap_or("(line not found)")
                );
            }
            println!("history:");
            if out.history_truncated > 0 {
                println!("  ({} older changes not kept)", out.history_truncated);
            }
            for c in &out.history {
                println!("  {} {:<9} {}", c.at, c.status.as_str(), c.summary);
            }
        }
        TaskCommand::Link { a, b, user } => task_link(notebook, true, &a, &b, &user).await?,
        TaskCommand::Unlink { a, b, user } => task_link(notebook, false, &a, &b, &user).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `nib task link` / `unlink`.
async fn task_link(
    notebook: &nib::notebook::Notebook,
    linking: bool,
    a: &str,
    b: &str,
    user: &str,
) -> anyhow::Result<()> {
    let (user, a, b) = (user_id(user)?, task_id(a)?, task_id(b)?);
    let actor = nib::notebook::LinkActor {
        tool: if linking {
            "nib task link"
        } else {
            "nib task unlink"
        },
        client: None,
    };
    let done = if linking {
        notebook.link_tasks(&user, &a, &b, &actor).await?
    } else {
        notebook.unlink_tasks(&user, &a, &b, &actor).await?
    };
    match (linking, done.changed) {
        (true, true) => println!("linked {b} into {a}: one task"),
        (true, false) => println!("{b} was linked into {a} already"),
        (false, true) => println!("unlinked {b} from {a}: two tasks"),
        (false, false) => println!("{b} was not linked into {a}"),
    }
    Ok(())
}
