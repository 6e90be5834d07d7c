//! `nib client`: OAuth clients registered by hand, listed and removed.

use std::process::ExitCode;

use clap::Subcommand;
use nib::auth::oauth::clients::{ClientKind, RegistrationRequest};

use super::{date, oauth};
use crate::Target;

#[derive(clap::Args)]
pub(crate) struct ClientArgs {
    #[command(subcommand)]
    command: ClientCommand,
}

#[derive(Subcommand)]
enum ClientCommand {
    /// Register a client by hand (for apps that cannot register themselves); prints its id.
    Add {
        /// The name the consent page shows.
        #[arg(long)]
        name: String,
        /// An allowed redirect URI (repeat for more); loopback http URIs may vary the port.
        #[arg(long = "redirect-uri", required = true)]
        redirect_uris: Vec<String>,
        /// Issue a client secret (printed once); without it the client is public (PKCE only).
        #[arg(long)]
        confidential: bool,
        /// `native` for desktop apps with private-use URI schemes.
        #[arg(long, default_value = "web", value_parser = ["web", "native"])]
        application_type: String,
    },
    /// List the stored clients.
    List,
    /// Forget a client.
    Remove { client_id: String },
}

pub(crate) async fn run(args: ClientArgs, target: &Target) -> anyhow::Result<ExitCode> {
    let app = target.open(nib::config::OcrChoice::Off).await?;
    let oauth = oauth(&app);
    match args.command {
        ClientCommand::Add {
            name,
            redirect_uris,
            confidential,
            application_type,
        } => {
            let request = RegistrationRequest {
                redirect_uris: Some(redirect_uris),
                token_endpoint_auth_method: Some(
                    if confidential {
                        "client_secret_basic"
                    } else {
                        "none"
                    }
                    .into(),
                ),
                client_name: Some(name),
                application_type: Some(application_type),
                ..Default::default()
            };
            let registered = oauth
                .clients
                .register(request, ClientKind::Preregistered)
                .await
                .map_err(|e| anyhow::anyhow!("{}: {}", e.code(), e.description()))?;
            println!("{}", registered.record.client_id);
            if let Some(secret) = registered.client_secret {
                println!("{secret}");
                eprintln!("client id, then its secret (shown only once)");
            }
        }
        ClientCommand::List => {
            println!(
                "{:<40} {:<16} {:<11} NAME / REDIRECT URIS",
                "ID", "KIND", "CREATED"
            );
            for c in oauth.clients.list().await? {
                let kind = match c.kind {
                    ClientKind::Dynamic => "registered",
                    ClientKind::Preregistered => "pre-registered",
                    ClientKind::MetadataDocument => "metadata-doc",
                };
                println!(
                    "{:<40} {:<16} {:<11} {} {}",
                    c.client_id,
                    kind,
                    date(c.created_at),
                    c.display_name(),
                    c.redirect_uris.join(" ")
                );
            }
        }
        ClientCommand::Remove { client_id } => {
            anyhow::ensure!(
                oauth.clients.remove(&client_id).await?,
                "no client with id {client_id}"
            );
            println!("removed {client_id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
