//! Who is calling and what they may do: scopes, the verified principal, API tokens, signed
//! session ids, user passwords, browser sessions (`web_sessions`), and the OAuth authorization server whose JWT access tokens the
//! MCP endpoint accepts beside API tokens. Credentials are verified here; the HTTP layer only
//! asks.

pub mod oauth;
pub mod sessions;
pub mod tokens;
pub mod users;
pub mod web_sessions;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::domain::UserId;

/// What a token allows. Ordered: each can do all the ones before it can.
///
/// `Edit` is "read and write, no deletes": everything `Write` can except the tools annotated
/// destructive (`delete_page`, `delete_task`), which need `Write` and are neither listed nor
/// callable below it. It sits between so that a `write` token or grant made before it keeps
/// what it had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Read,
    Edit,
    Write,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Edit, Scope::Write, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Edit => "edit",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    /// True when a caller holding `self` may use something that needs `needed`.
    pub fn allows(self, needed: Scope) -> bool {
        self >= needed
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verified caller of a request. Every storage access is scoped by `user`, which comes only
/// from a verified credential, never from tool arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    pub user: UserId,
    pub scope: Scope,
    /// The id of the credential (token id), for rate limits and logs. Never the secret.
    pub credential_id: String,
    /// The credential's name for the access record: the OAuth client's name, or the API
    /// token's label (none when it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}
