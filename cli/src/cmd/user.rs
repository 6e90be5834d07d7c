//! `nib user`: users' sign-in passwords, time zones, the list of users, deleting one, and a
//! deployment's first owner (`ensure-owner`).

use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use nib::domain::UserId;
use nib::services::DEFAULT_USER;

use super::{date, user_id};
use crate::{Backend, Target};

#[derive(clap::Args)]
pub(crate) struct UserArgs {
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create a user with a password (asked twice, or one line on stdin with --password-stdin).
    Create {
        name: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// Change a user's password.
    Passwd {
        name: String,
        #[arg(long)]
        password_stdin: bool,
    },
    /// List the users: name, created, owner, password, pages, active tokens and grants.
    List,
    /// Delete a user's account: its data key first (what remains cannot be opened), then its
    /// password, tokens, grants, pages, tasks and page images. Cannot be undone; running it
    /// again after an interruption finishes the job.
    Delete {
        name: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Show a user's time zone, or set it: an IANA name such as Europe/Berlin (default UTC).
    /// It decides which day is today for the user's notes (`add_note`, `nib notes add`).
    Timezone { name: String, zone: Option<String> },
    /// The first owner of a deployment (`make deploy` runs it): creates the user with a
    /// password unless it has one, then prints the connector URL and where to paste it.
    /// Re-running it changes nothing.
    EnsureOwner {
        #[arg(default_value = DEFAULT_USER)]
        name: String,
        /// The password on one line of stdin; without it a terminal is asked twice, and
        /// without a terminal a password is generated and printed once.
        #[arg(long)]
        password_stdin: bool,
    },
}

/// A new password: one line on stdin, or typed twice at a prompt that does not echo.
fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    if from_stdin {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the password from stdin")?;
        return Ok(line.trim_end_matches(['\n', '\r']).to_owned());
    }
    let first = rpassword::prompt_password("New password: ").context("cannot read the password")?;
    let again = rpassword::prompt_password("Again: ").context("cannot read the password")?;
    anyhow::ensure!(first == again, "the passwords differ");
    Ok(first)
}

pub(crate) async fn run(args: UserArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let (name, from_stdin, create) = match args.command {
        UserCommand::EnsureOwner {
            name,
            password_stdin,
        } => return ensure_owner(&user_id(&name)?, password_stdin, target).await,
        UserCommand::Create {
            name,
            password_stdin,
        } => (name, password_stdin, true),
        UserCommand::Passwd {
            name,
            password_stdin,
        } => (name, password_stdin, false),
        UserCommand::List => return user_list(target).await,
        UserCommand::Timezone { name, zone } => {
            return user_timezone(&user_id(&name)?, zone.as_deref(), target).await;
        }
        UserCommand::Delete { name, yes } => {
            return user_delete(&user_id(&name)?, yes, target).await;
        }
    };
    let user = user_id(&name)?;
    let app = target.open(nib::config::OcrChoice::Off).await?;
    if create {
        app.ensure_user(&user).await?;
    }
    let password = read_password(from_stdin)?;
    app.users().set_password(&user, &password, create).await?;
    eprintln!(
        "{} the password of user {user}",
        if create { "set" } else { "changed" }
    );
    Ok(ExitCode::SUCCESS)
}

/// `nib user timezone NAME [ZONE]`: prints the user's time zone, after setting it when a zone
/// is given. A name that is not a zone fails and changes nothing.
async fn user_timezone(
    user: &UserId,
    zone: Option<&str>,
    target: &Target,
) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let notebook = app.notebook();
    let zone = match zone {
        Some(z) => {
            let set = notebook.set_time_zone(user, z).await?;
            eprintln!("set the time zone of user {user}");
            set
        }
        None => notebook.time_zone(user).await?,
    };
    println!("{}", zone.name());
    Ok(ExitCode::SUCCESS)
}

/// `nib user list`: one line per user, the same on both back ends.
async fn user_list(target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let users = app.accounts().list().await?;
    println!(
        "{:<24} {:<10} {:<5} {:<8} {:>6} {:>6} {:>6}",
        "USER", "CREATED", "OWNER", "PASSWORD", "PAGES", "TOKENS", "GRANTS"
    );
    for u in users {
        let created = if u.deleting {
            "deleting".to_owned()
        } else {
            u.created_at.map(date).unwrap_or_default()
        };
        println!(
            "{:<24} {:<10} {:<5} {:<8} {:>6} {:>6} {:>6}",
            u.user.as_str(),
            created,
            if u.owner { "yes" } else { "no" },
            if u.has_password { "yes" } else { "no" },
            u.pages,
            u.tokens,
            u.grants
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `nib user delete`: asks for the user's name again unless `--yes`, then deletes step by step.
async fn user_delete(user: &UserId, yes: bool, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    if !yes {
        eprint!(
            "This deletes user {user} for good: the data key first, then the password, tokens, \
             grants, pages, tasks and page images. Type the user name to confirm: "
        );
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the confirmation")?;
        anyhow::ensure!(
            line.trim() == user.as_str(),
            "not confirmed: nothing deleted (pass --yes to skip the question)"
        );
    }
    let mut accounts = app.accounts();
    if target.backend == Backend::Local {
        // This process holds the data directory's lock, so no `nib serve` has a request in
        // flight that a second sweep would have to wait out.
        accounts = accounts.with_settle(std::time::Duration::ZERO);
    }
    let done = accounts
        .delete(user, |step| eprintln!("{user}: {}", step.describe()))
        .await
        .with_context(|| {
            format!("the deletion of user {user} stopped; run `nib user delete {user}` again to finish it")
        })?;
    println!(
        "deleted user {user}: {} credentials, {} page images, {} data keys, {} items",
        done.credentials, done.assets, done.keys, done.items
    );
    Ok(ExitCode::SUCCESS)
}

/// `nib user ensure-owner`: the first owner of a deployment, once.
async fn ensure_owner(
    user: &UserId,
    from_stdin: bool,
    target: &Target,
) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let connector = match target.backend {
        Backend::Aws => target.aws_config()?.public_url.map(|u| format!("{u}/mcp")),
        Backend::Local => None,
    };
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let users = app.users();
    if users.has_password(user).await? {
        println!("user {user} has a password already: nothing changed");
    } else {
        app.ensure_user(user).await?;
        let (password, generated) = if from_stdin || std::io::stdin().is_terminal() {
            (read_password(from_stdin)?, false)
        } else {
            (nib::auth::oauth::random_password(), true)
        };
        anyhow::ensure!(!password.is_empty(), "the password is empty");
        match users.set_password(user, &password, true).await {
            Ok(()) if generated => {
                println!("created user {user}; its password (shown only this once): {password}")
            }
            Ok(()) => println!("created user {user} with the password you gave"),
            // Another run created it meanwhile: theirs stands.
            Err(nib::auth::users::UserError::Exists(_)) => {
                println!("user {user} has a password already: nothing changed")
            }
            Err(e) => return Err(e.into()),
        }
    }
    app.ensure_user(user).await?;
    app.accounts().set_owner(user).await?;
    if let Some(url) = connector {
        println!("connector URL: {url}");
        println!(
            "  Claude (Settings > Connectors > Add custom connector) or ChatGPT (Settings > \
             Connectors, developer mode, Create): paste the URL, then sign in as {user}."
        );
    }
    Ok(ExitCode::SUCCESS)
}
