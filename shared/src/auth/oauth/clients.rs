//! OAuth clients: dynamic registration (RFC 7591), pre-registered clients (`nib client add`),
//! and client ID metadata documents ([`super::cimd`]), behind one lookup.
//!
//! Redirect URIs are matched exactly, except that a loopback IP redirect may use any port
//! (RFC 8252 §7.3): native apps listen on a port the system picks at each sign-in.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use subtle::ConstantTimeEq;
use url::Url;

use super::cimd::{self, Fetcher};
use super::{OAuthError, random_secret, sha256_hex};
use crate::domain::UserId;
use crate::ports::{Clock, Cond, Item, MAX_TRANSACTION_ITEMS, Query, Store, Write};

/// The token endpoint authentication methods we accept (`private_key_jwt` is not one).
pub const AUTH_METHODS: [&str; 3] = ["none", "client_secret_post", "client_secret_basic"];
/// The grants a client may use; every client gets both, so it never has to reconnect by hand.
pub const GRANT_TYPES: [&str; 2] = ["authorization_code", "refresh_token"];
/// The longest client name kept.
const MAX_NAME_CHARS: usize = 100;
/// At most this many redirect URIs per client.
const MAX_REDIRECT_URIS: usize = 20;
const CLIENTS_PARTITION: &str = "CLIENTS";
/// The partition-key prefix of a client's items: `CLIENT#{client_id}`.
pub const CLIENT_PREFIX: &str = "CLIENT#";
/// The sort key of the old mark that some user approved a client (before approvals were per
/// user). It vouches for nothing any more: it is only deleted with its client.
const LEGACY_APPROVED_SK: &str = "APPROVED";
/// The sort-key prefix of a user's approval of a client: `APPROVED#{user}` in `CLIENT#{id}`.
const APPROVED_PREFIX: &str = "APPROVED#";

/// The index partition of the clients a user approved (so account deletion finds the marks).
pub fn approvals_partition(user: &UserId) -> String {
    format!("U#{user}#APPROVED")
}

fn client_pk(client_id: &str) -> String {
    format!("{CLIENT_PREFIX}{client_id}")
}

/// How a client came to be known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// Registered through the registration endpoint: its name is unverified.
    Dynamic,
    /// Added by the operator with `nib client add`.
    Preregistered,
    /// A client ID metadata document: the client_id is the HTTPS URL of its metadata.
    MetadataDocument,
}

/// What is stored for a client (never its secret, only the secret's hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRecord {
    pub client_id: String,
    pub kind: ClientKind,
    pub client_name: Option<String>,
    pub client_uri: Option<String>,
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<String>,
    pub token_endpoint_auth_method: String,
    pub application_type: String,
    pub scope: Option<String>,
    pub secret_hash: Option<String>,
    pub created_at: i64,
}

impl ClientRecord {
    /// A confidential client authenticates with its secret at the token endpoint.
    pub fn is_confidential(&self) -> bool {
        self.secret_hash.is_some()
    }

    /// True when `secret` is this client's secret (constant time).
    pub fn secret_matches(&self, secret: &str) -> bool {
        self.secret_hash
            .as_ref()
            .is_some_and(|h| bool::from(h.as_bytes().ct_eq(sha256_hex(secret).as_bytes())))
    }

    /// The registered redirect URI that `requested` matches, if any.
    pub fn redirect_uri_allowed(&self, requested: &str) -> bool {
        self.redirect_uris
            .iter()
            .any(|r| redirect_matches(r, requested))
    }

    /// The name to show on the consent page.
    pub fn display_name(&self) -> String {
        self.client_name
            .clone()
            .unwrap_or_else(|| self.client_id.clone())
    }

    /// True when the operator vouches for this client (`nib client add`); a dynamic client's
    /// name and a metadata document's name are whatever the client chose.
    pub fn is_verified(&self) -> bool {
        self.kind == ClientKind::Preregistered
    }

    /// The `host[:port]` a metadata-document client's id names, for the consent page: the one
    /// thing about such a client that someone answers for (whoever serves that host).
    pub fn document_host(&self) -> Option<String> {
        if self.kind != ClientKind::MetadataDocument {
            return None;
        }
        let url = Url::parse(&self.client_id).ok()?;
        let host = url.host_str()?;
        Some(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        })
    }
}

/// A client just registered: the secret (if any) is in `client_secret`, shown once.
#[derive(Debug, Clone)]
pub struct Registered {
    pub record: ClientRecord,
    pub client_secret: Option<String>,
}

impl Registered {
    /// The RFC 7591 registration response.
    pub fn response(&self) -> Value {
        let r = &self.record;
        let mut body = serde_json::json!({
            "client_id": r.client_id,
            "client_id_issued_at": r.created_at,
            "redirect_uris": r.redirect_uris,
            "grant_types": r.grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": r.token_endpoint_auth_method,
            "application_type": r.application_type,
        });
        let obj = body.as_object_mut().expect("object");
        if let Some(name) = &r.client_name {
            obj.insert("client_name".into(), name.clone().into());
        }
        if let Some(uri) = &r.client_uri {
            obj.insert("client_uri".into(), uri.clone().into());
        }
        if let Some(scope) = &r.scope {
            obj.insert("scope".into(), scope.clone().into());
        }
        if let Some(secret) = &self.client_secret {
            obj.insert("client_secret".into(), secret.clone().into());
            obj.insert("client_secret_expires_at".into(), 0.into());
        }
        body
    }
}

fn is_loopback_host(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// `requested` is `registered`, or both are loopback `http` URLs that differ only in the port.
pub fn redirect_matches(registered: &str, requested: &str) -> bool {
    if registered == requested {
        return true;
    }
    let (Ok(reg), Ok(req)) = (Url::parse(registered), Url::parse(requested)) else {
        return false;
    };
    reg.scheme() == "http"
        && req.scheme() == "http"
        && is_loopback_host(&reg)
        && reg.host() == req.host()
        && reg.path() == req.path()
        && reg.query() == req.query()
        && reg.username().is_empty()
        && req.username().is_empty()
        && req.password().is_none()
        && req.fragment().is_none()
}

/// Checks one redirect URI a client asks to register: absolute, no fragment, and `https`,
/// loopback `http`, or (native apps) a private-use scheme like `com.example.app:/cb`.
pub fn check_redirect_uri(uri: &str, application_type: &str) -> Result<(), OAuthError> {
    let bad = |why: &str| OAuthError::InvalidRedirectUri(format!("redirect URI {uri:?} {why}"));
    let url = Url::parse(uri).map_err(|_| bad("is not an absolute URL"))?;
    if url.fragment().is_some() {
        return Err(bad("has a fragment"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("has user information"));
    }
    match url.scheme() {
        "https" if url.host().is_some() => Ok(()),
        "http" if is_loopback_host(&url) => Ok(()),
        "http" => Err(bad("uses http for a host other than loopback")),
        "javascript" | "data" | "file" | "vbscript" | "blob" | "about" | "ftp" | "ws" | "wss" => {
            Err(bad("has a forbidden scheme"))
        }
        // Private-use URI schemes are for native apps and must look like reversed domain names.
        scheme if application_type == "native" && scheme.contains('.') => Ok(()),
        _ => Err(bad(
            "must use https, loopback http, or (native apps) a reverse-domain scheme",
        )),
    }
}

fn client_item(record: &ClientRecord, version: u64) -> Item {
    Item {
        pk: client_pk(&record.client_id),
        sk: "CLIENT".into(),
        gsi1: Some((
            CLIENTS_PARTITION.into(),
            format!("{:012}#{}", record.created_at, record.client_id),
        )),
        version,
        expires_at: None,
        body: serde_json::to_vec(record).expect("client record serializes"),
    }
}

/// The RFC 7591 registration request fields we read; others are ignored.
#[derive(Debug, Default, Deserialize)]
pub struct RegistrationRequest {
    #[serde(default)]
    pub redirect_uris: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    pub grant_types: Option<Vec<String>>,
    #[serde(default)]
    pub response_types: Option<Vec<String>>,
    #[serde(default)]
    pub client_name: Option<String>,
    #[serde(default)]
    pub client_uri: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub application_type: Option<String>,
}

/// The client registry.
pub struct Clients {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    fetcher: Fetcher,
}

impl Clients {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, fetcher: Fetcher) -> Self {
        Clients {
            store,
            clock,
            fetcher,
        }
    }

    /// Registers a client (RFC 7591), or pre-registers one for `nib client add`.
    pub async fn register(
        &self,
        request: RegistrationRequest,
        kind: ClientKind,
    ) -> Result<Registered, OAuthError> {
        let meta = |m: String| OAuthError::InvalidClientMetadata(m);
        let application_type = request.application_type.unwrap_or_else(|| "web".into());
        if application_type != "web" && application_type != "native" {
            return Err(meta("application_type must be web or native".into()));
        }
        let redirect_uris = request.redirect_uris.unwrap_or_default();
        if redirect_uris.is_empty() {
            return Err(OAuthError::InvalidRedirectUri(
                "redirect_uris must list at least one URI".into(),
            ));
        }
        if redirect_uris.len() > MAX_REDIRECT_URIS {
            return Err(OAuthError::InvalidRedirectUri(format!(
                "at most {MAX_REDIRECT_URIS} redirect URIs"
            )));
        }
        for uri in &redirect_uris {
            check_redirect_uri(uri, &application_type)?;
        }
        // RFC 7591's default is client_secret_basic.
        let method = request
            .token_endpoint_auth_method
            .unwrap_or_else(|| "client_secret_basic".into());
        if !AUTH_METHODS.contains(&method.as_str()) {
            return Err(meta(format!(
                "token_endpoint_auth_method must be one of {}",
                AUTH_METHODS.join(", ")
            )));
        }
        if let Some(types) = &request.response_types
            && types.iter().any(|t| t != "code")
        {
            return Err(meta("response_types may only be [\"code\"]".into()));
        }
        if let Some(grants) = &request.grant_types
            && let Some(other) = grants.iter().find(|g| !GRANT_TYPES.contains(&g.as_str()))
        {
            return Err(meta(format!("grant type {other} is not supported")));
        }
        if let Some(scope) = &request.scope {
            super::parse_scope(Some(scope), super::DEFAULT_SCOPE)
                .map_err(|e| meta(e.to_string()))?;
        }
        let client_name = request
            .client_name
            .map(|n| n.trim().chars().take(MAX_NAME_CHARS).collect::<String>())
            .filter(|n| !n.is_empty());
        let client_uri = request
            .client_uri
            .filter(|u| Url::parse(u).is_ok_and(|u| u.scheme() == "https" || u.scheme() == "http"));
        let client_secret = (method != "none").then(|| random_secret(32));
        let record = ClientRecord {
            client_id: format!("nib_client_{}", random_secret(16)),
            kind,
            client_name,
            client_uri,
            redirect_uris,
            // Always both: hosted connectors that ask only for authorization_code would
            // otherwise lose access every hour.
            grant_types: GRANT_TYPES.iter().map(|g| g.to_string()).collect(),
            token_endpoint_auth_method: method,
            application_type,
            scope: request.scope,
            secret_hash: client_secret.as_deref().map(sha256_hex),
            created_at: self.clock.unix(),
        };
        self.store
            .put(client_item(&record, 1), Cond::NotExists)
            .await?;
        Ok(Registered {
            record,
            client_secret,
        })
    }

    /// The client named by `client_id`: a stored client, or the metadata document at that URL.
    /// `None` when unknown.
    pub async fn resolve(&self, client_id: &str) -> Result<Option<ClientRecord>, OAuthError> {
        if cimd::looks_like_url(client_id) {
            return self.fetcher.fetch(client_id).await.map(Some);
        }
        if client_id.is_empty() || client_id.len() > 200 {
            return Ok(None);
        }
        match self.store.get(&client_pk(client_id), "CLIENT").await? {
            Some(item) => Ok(Some(serde_json::from_slice(&item.body)?)),
            None => Ok(None),
        }
    }

    /// True when resolving `client_id` would fetch a metadata document (not cached).
    pub fn would_fetch(&self, client_id: &str) -> bool {
        self.fetcher.would_fetch(client_id)
    }

    /// True once `user` approved `client_id` on the consent page. Until then nothing about
    /// the client is vouched for by that user, so the authorization endpoint shows its errors
    /// on a page instead of sending the browser to the client's redirect URI. Another user's
    /// approval says nothing to this one (whoever registers a client can approve it), and the
    /// old global mark ([`LEGACY_APPROVED_SK`]) is not read.
    pub async fn approved(&self, client_id: &str, user: &UserId) -> Result<bool, OAuthError> {
        Ok(self
            .store
            .get(&client_pk(client_id), &format!("{APPROVED_PREFIX}{user}"))
            .await?
            .is_some())
    }

    /// Marks `client_id` approved by `user` (one put; the first time or again).
    pub async fn mark_approved(&self, client_id: &str, user: &UserId) -> Result<(), OAuthError> {
        let item = Item {
            pk: client_pk(client_id),
            sk: format!("{APPROVED_PREFIX}{user}"),
            gsi1: Some((approvals_partition(user), client_id.to_owned())),
            version: 1,
            expires_at: None,
            body: serde_json::to_vec(&serde_json::json!({ "approved_at": self.clock.unix() }))
                .expect("json"),
        };
        Ok(self.store.put(item, Cond::None).await?)
    }

    /// Stored clients, oldest first (metadata-document clients are not stored).
    pub async fn list(&self) -> Result<Vec<ClientRecord>, OAuthError> {
        let items = self
            .store
            .query_all(Query::gsi1(CLIENTS_PARTITION, ""))
            .await?;
        Ok(items
            .iter()
            .map(|item| serde_json::from_slice(&item.body))
            .collect::<Result<_, _>>()?)
    }

    /// Forgets a stored client. Its grants stay until revoked or expired; its refresh tokens no
    /// longer work, since the token endpoint cannot authenticate an unknown client.
    pub async fn remove(&self, client_id: &str) -> Result<bool, OAuthError> {
        let key = client_pk(client_id);
        if self.store.get(&key, "CLIENT").await?.is_none() {
            return Ok(false);
        }
        // The users' approval marks first, the record last, so a run cut short can be repeated.
        let approved = self.store.query_all(Query::table(&key, APPROVED_PREFIX));
        let mut marks: Vec<String> = approved.await?.into_iter().map(|i| i.sk).collect();
        marks.push(LEGACY_APPROVED_SK.to_owned());
        for chunk in marks.chunks(MAX_TRANSACTION_ITEMS) {
            let writes = chunk
                .iter()
                .map(|sk| Write::delete(key.clone(), sk.clone(), Cond::None))
                .collect();
            self.store.transact(writes).await?;
        }
        self.store
            .transact(vec![Write::delete(key, "CLIENT", Cond::None)])
            .await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_redirects_may_change_port_only() {
        let reg = "http://127.0.0.1/callback";
        assert!(redirect_matches(reg, "http://127.0.0.1:53123/callback"));
        assert!(redirect_matches(
            "http://127.0.0.1:3000/callback",
            "http://127.0.0.1:4000/callback"
        ));
        assert!(redirect_matches(
            "http://localhost:6274/oauth/callback",
            "http://localhost:1/oauth/callback"
        ));
        assert!(!redirect_matches(reg, "http://127.0.0.1:5/other"));
        assert!(!redirect_matches(reg, "http://127.0.0.2:5/callback"));
        assert!(!redirect_matches(reg, "https://127.0.0.1:5/callback"));
        assert!(!redirect_matches(
            reg,
            "http://evil.com@127.0.0.1:5/callback"
        ));
        assert!(!redirect_matches(
            "https://app.example/cb",
            "https://app.example:444/cb"
        ));
        assert!(!redirect_matches(
            "https://app.example/cb",
            "https://app.example/cb/"
        ));
        assert!(redirect_matches(
            "https://app.example/cb",
            "https://app.example/cb"
        ));
    }

    #[test]
    fn redirect_uri_rules() {
        assert!(check_redirect_uri("https://claude.ai/api/mcp/auth_callback", "web").is_ok());
        assert!(check_redirect_uri("http://127.0.0.1:33418/cb", "native").is_ok());
        assert!(check_redirect_uri("http://localhost/cb", "web").is_ok());
        assert!(check_redirect_uri("com.example.app:/cb", "native").is_ok());
        assert!(check_redirect_uri("com.example.app:/cb", "web").is_err());
        assert!(check_redirect_uri("http://example.com/cb", "web").is_err());
        assert!(check_redirect_uri("javascript:alert(1)", "native").is_err());
        assert!(check_redirect_uri("https://a.example/cb#x", "web").is_err());
        assert!(check_redirect_uri("/relative", "web").is_err());
    }
}
