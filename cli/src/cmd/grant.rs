//! `nib grant`: what users approved on the consent page (OAuth grants), listed and revoked.

use std::process::ExitCode;

use clap::Subcommand;
use nib::auth::oauth::scope_string;
use nib::services::DEFAULT_USER;

use super::{date, oauth, user_id};
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct GrantArgs {
    #[command(subcommand)]
    command: GrantCommand,
}

#[derive(Subcommand)]
enum GrantCommand {
    /// List a user's grants.
    List {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Revoke a grant: its access and refresh tokens stop working at once.
    Revoke {
        grant_id: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

pub(crate) async fn run(args: GrantArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let oauth = oauth(&app);
    match args.command {
        GrantCommand::List { user } => {
            let user = user_id(&user)?;
            println!(
                "{:<20} {:<11} {:<11} {:<11} {:<8} CLIENT",
                "ID", "SCOPE", "CREATED", "LAST USED", "STATE"
            );
            let now = app.clock.unix();
            for g in oauth.grants.list(&user).await? {
                let state = if g.revoked_at.is_some() {
                    "revoked"
                } else if g.is_active(now) {
                    "active"
                } else {
                    "expired"
                };
                println!(
                    "{:<20} {:<11} {:<11} {:<11} {:<8} {} ({})",
                    g.grant_id,
                    scope_string(g.scope),
                    date(g.created_at),
                    date(g.last_issued_at),
                    state,
                    g.client_name,
                    g.client_id
                );
            }
        }
        GrantCommand::Revoke { grant_id, user } => {
            let user = user_id(&user)?;
            match oauth
                .grants
                .revoke(&grant_id, Some(&user), "revoked with nib grant revoke")
                .await?
            {
                Some(g) => println!("revoked {}", g.grant_id),
                None => anyhow::bail!("user {user} has no grant {grant_id}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
