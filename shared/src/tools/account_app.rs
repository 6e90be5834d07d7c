//! Account deletion as the owner's web app asks for it: `delete_account {password}` deletes
//! the principal's own account, when `password` is theirs, with [`crate::account::Accounts::delete`] (what `nib user delete`
//! runs). An app operation ([`super::app_operations`]), not a tool: only the web app's principal
//! ([`super::APP_CREDENTIAL`]) reaches it, after the app checked the session, the form's token
//! and the typed user name. On AWS it runs in the `account` function, the one role that reaches
//! everything a deletion removes (`functions::PARTITIONS`); locally in process.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::output_schema;
use super::{Annotations, Ctx, Output, ToolClass, ToolDef, ToolError, object_schema, output};
use crate::account::AccountError;
use crate::auth::Scope;
use crate::notebook::NotebookError;

/// What one run removed (`account::Deletion`).
#[derive(Serialize, JsonSchema)]
struct Deleted {
    credentials: usize,
    assets: u64,
    keys: usize,
    items: usize,
}

pub fn delete_def() -> ToolDef {
    ToolDef {
        name: "delete_account",
        title: "Delete my account",
        description: "The web app's: delete the principal's account and everything in it.",
        scope: Scope::Write,
        class: ToolClass::Account,
        // Idempotent as `Accounts::delete` is: a run after a failure finishes the job.
        annotations: Annotations::DESTRUCTIVE,
        input_schema: object_schema(
            json!({ "password": { "type": "string", "description": "The user's password, typed again." } }),
            &["password"],
        ),
        output_schema: output_schema::<Deleted>(),
        handler: |ctx| Box::pin(delete(ctx)),
    }
}

/// The failures as a tool's: an unknown user as not found, the rest internal (their cause is
/// logged where they happened, `invocation::ToolReply::from_outcome` or the app's page).
fn failed(e: AccountError) -> ToolError {
    let internal = match e {
        AccountError::Unknown(_) => return ToolError::NotFound("account"),
        AccountError::Deleting(user) => NotebookError::Invalid(format!("{user} is being deleted")),
        AccountError::NotEmpty(user) => {
            NotebookError::Invalid(format!("{user}'s partition is not empty"))
        }
        AccountError::Store(e) => NotebookError::Store(e),
        AccountError::Assets(e) => NotebookError::Assets(e),
        AccountError::Keys(e) => NotebookError::Crypto(e),
        AccountError::Corrupt(e) => NotebookError::Corrupt(e.to_string()),
        AccountError::Hash => NotebookError::Corrupt("password hashing failed".into()),
    };
    ToolError::Internal(internal)
}

/// How long after its marker a deletion asked in the web app sweeps again.
const WEB_SETTLE: std::time::Duration = std::time::Duration::from_secs(10);

/// What a wrong password is answered (a refusal: nothing was deleted).
pub const WRONG_PASSWORD: &str = "the password is not right";

async fn delete(ctx: Ctx<'_>) -> Result<Output, ToolError> {
    let password = ctx.args.opt_str("password")?.unwrap_or_default();
    // Answered through the front (API Gateway's 29 s): the second sweep comes sooner than
    // `nib user delete`'s.
    let accounts = ctx.notebook.accounts().with_settle(WEB_SETTLE);
    if !accounts
        .password_matches(&ctx.principal.user, password)
        .await
        .map_err(failed)?
    {
        return Err(ToolError::Rejected(WRONG_PASSWORD.into()));
    }
    let done = accounts
        .delete(&ctx.principal.user, |_| {})
        .await
        .map_err(failed)?;
    output(&Deleted {
        credentials: done.credentials,
        assets: done.assets,
        keys: done.keys,
        items: done.items,
    })
}
