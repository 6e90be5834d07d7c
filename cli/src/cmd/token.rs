//! `nib token`: API tokens created, listed and revoked.

use std::process::ExitCode;

use clap::Subcommand;
use nib::auth::Scope;
use nib::services::DEFAULT_USER;

use super::{date, user_id};
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a token and print it (it is shown only this once).
    Create {
        /// read; edit (read and write, no deletes); write; admin.
        #[arg(long, value_parser = ["read", "edit", "write", "admin"])]
        scope: String,
        #[arg(long)]
        label: Option<String>,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// List a user's tokens (never the secrets).
    List {
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
    /// Revoke a token by its id (from `nib token list`).
    Revoke {
        token_id: String,
        #[arg(long, default_value = DEFAULT_USER)]
        user: String,
    },
}

pub(crate) async fn run(args: TokenArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    match args.command {
        TokenCommand::Create { scope, label, user } => {
            let user = user_id(&user)?;
            app.ensure_user(&user).await?;
            let scope = Scope::parse(&scope).expect("clap checked the scope");
            let t = app.tokens.create(&user, scope, label).await?;
            println!("{}", t.token);
            eprintln!(
                "token {} for user {} with scope {} (shown only once)",
                t.record.token_id, user, scope
            );
        }
        TokenCommand::List { user } => {
            let user = user_id(&user)?;
            println!(
                "{:<18} {:<6} {:<8} {:<20} LABEL",
                "ID", "SCOPE", "STATE", "CREATED"
            );
            for t in app.tokens.list(&user).await? {
                let created = date(t.created_at);
                let state = if t.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!(
                    "{:<18} {:<6} {:<8} {:<20} {}",
                    t.token_id,
                    t.scope,
                    state,
                    created,
                    t.label.unwrap_or_default()
                );
            }
        }
        TokenCommand::Revoke { token_id, user } => {
            let user = user_id(&user)?;
            let t = app.tokens.revoke(&user, &token_id).await?;
            println!("revoked {}", t.token_id);
        }
    }
    Ok(ExitCode::SUCCESS)
}
