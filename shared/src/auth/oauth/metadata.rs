//! The discovery documents: RFC 8414 authorization server metadata (also served at the OpenID
//! discovery path, which some clients try first) and RFC 9728 protected resource metadata.

use serde_json::{Value, json};

use super::OAuthConfig;
use super::clients::{AUTH_METHODS, GRANT_TYPES};
use crate::auth::Scope;

/// Where each endpoint lives, below the issuer.
pub const AUTHORIZE_PATH: &str = "/oauth/authorize";
pub const TOKEN_PATH: &str = "/oauth/token";
pub const REGISTER_PATH: &str = "/oauth/register";
pub const REVOKE_PATH: &str = "/oauth/revoke";
pub const JWKS_PATH: &str = "/oauth/jwks.json";

fn scopes() -> Vec<&'static str> {
    Scope::ALL.iter().map(|s| s.as_str()).collect()
}

/// RFC 8414 authorization server metadata.
pub fn authorization_server(config: &OAuthConfig) -> Value {
    json!({
        "issuer": config.issuer,
        "authorization_endpoint": config.endpoint(AUTHORIZE_PATH),
        "token_endpoint": config.endpoint(TOKEN_PATH),
        "registration_endpoint": config.endpoint(REGISTER_PATH),
        "revocation_endpoint": config.endpoint(REVOKE_PATH),
        "jwks_uri": config.endpoint(JWKS_PATH),
        "scopes_supported": scopes(),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": GRANT_TYPES,
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
        "resource_indicators_supported": true,
    })
}

/// RFC 9728 protected resource metadata for `{public_url}/mcp`. `issuer` is `None` when the
/// server runs without its authorization server (API tokens only).
pub fn protected_resource(public_url: &str, issuer: Option<&str>) -> Value {
    json!({
        "resource": format!("{public_url}/mcp"),
        "authorization_servers": issuer.into_iter().collect::<Vec<_>>(),
        "scopes_supported": scopes(),
        "bearer_methods_supported": ["header"],
        "resource_name": "nib notebook",
    })
}
