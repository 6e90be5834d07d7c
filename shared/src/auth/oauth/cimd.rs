//! Client ID metadata documents (draft-ietf-oauth-client-id-metadata-document, MCP 2025-11-25):
//! a client whose `client_id` is an HTTPS URL publishes its metadata there, and we fetch it
//! instead of asking it to register.
//!
//! Fetching a URL a stranger names is a server-side request, so it is fenced in: HTTPS only
//! (plain `http` only for loopback, and only under an explicit development option), no
//! redirects, a 5 s timeout, an 8 KiB body limit, and no private, loopback or link-local
//! addresses, checked both for IP literals and after DNS resolution (our own resolver), so a
//! name that resolves to an internal address is refused too. The address checks use the
//! standard library's classification plus an explicit list of special-purpose ranges, IPv6
//! forms that embed an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible) included. Documents
//! are cached for five minutes per process; at most [`super::FETCH_SLOTS`] fetches run at once
//! ([`super::Gates`]), and one more is refused at once (`TemporarilyUnavailable`), not queued.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use serde_json::Value;
use url::Url;

use super::OAuthError;
use super::clients::{ClientKind, ClientRecord, GRANT_TYPES, check_redirect_uri};
use crate::ports::Clock;

/// The largest metadata document accepted.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const CACHE_SECS: i64 = 300;
const CACHE_ENTRIES: usize = 1000;
/// The longest URL client_id accepted (it also names the client's `CLIENT#` items).
const MAX_URL_CHARS: usize = 1000;
/// What a fetch refused for want of a free slot asks the client to wait.
const BUSY_RETRY_SECS: u64 = 5;

/// True when the client_id is meant as a metadata document URL.
pub fn looks_like_url(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// IPv4 ranges no metadata document is served from, beyond what the standard library
/// classifies (private, loopback, link-local, unspecified, broadcast, multicast, documentation).
const BLOCKED_V4: [(Ipv4Addr, u8); 6] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),      // "this network"
    (Ipv4Addr::new(100, 64, 0, 0), 10),  // shared address space (carrier-grade NAT)
    (Ipv4Addr::new(192, 0, 0, 0), 24),   // IETF protocol assignments
    (Ipv4Addr::new(192, 88, 99, 0), 24), // 6to4 relay anycast
    (Ipv4Addr::new(198, 18, 0, 0), 15),  // benchmarking
    (Ipv4Addr::new(240, 0, 0, 0), 4),    // reserved
];

/// IPv6 ranges refused beyond the standard library's classification (loopback, unspecified,
/// multicast, unique local `fc00::/7`, link-local `fe80::/10`). Several embed an IPv4 address
/// that a gateway on the way would reach (NAT64, 6to4, Teredo, IPv4-compatible), so they could
/// smuggle `10.0.0.1` past the IPv4 checks.
const BLOCKED_V6: [(Ipv6Addr, u8); 12] = [
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96), // IPv4-compatible (deprecated), ::, ::1
    (Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), 96), // IPv4-translated (SIIT)
    (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96), // NAT64
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // local-use NAT64
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64), // discard-only
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32), // Teredo
    (Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48), // benchmarking
    (Ipv6Addr::new(0x2001, 0x10, 0, 0, 0, 0, 0, 0), 28), // ORCHID (deprecated)
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16), // 6to4
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20), // documentation (RFC 9637)
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10), // site-local (deprecated)
];

fn in_v4(ip: Ipv4Addr, (net, len): (Ipv4Addr, u8)) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn in_v6(ip: Ipv6Addr, (net, len): (Ipv6Addr, u8)) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    u128::from(ip) & mask == u128::from(net) & mask
}

/// True for addresses a server-side fetch may reach: public unicast only (loopback too when
/// `allow_loopback`).
pub fn public_ip(ip: IpAddr, allow_loopback: bool) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_loopback() {
                return allow_loopback;
            }
            !(v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || BLOCKED_V4.iter().any(|&net| in_v4(v4, net)))
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                return allow_loopback;
            }
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public_ip(IpAddr::V4(v4), allow_loopback);
            }
            !(v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || BLOCKED_V6.iter().any(|&net| in_v6(v6, net)))
        }
    }
}

/// Resolves names like the system does, then drops every address [`public_ip`] refuses.
struct PublicResolver {
    allow_loopback: bool,
}

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_loopback = self.allow_loopback;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| public_ip(a.ip(), allow_loopback))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

pub struct Fetcher {
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
    allow_http_loopback: bool,
    cache: Mutex<HashMap<String, (i64, ClientRecord)>>,
    /// One permit per fetch in flight.
    slots: Arc<Semaphore>,
}

fn invalid(why: impl Into<String>) -> OAuthError {
    OAuthError::InvalidClientMetadata(why.into())
}

impl Fetcher {
    pub fn new(clock: Arc<dyn Clock>, allow_http_loopback: bool) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(PublicResolver {
                allow_loopback: allow_http_loopback,
            }))
            .user_agent(concat!("nib/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a plain reqwest client builds");
        Fetcher {
            http,
            clock,
            allow_http_loopback,
            cache: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(super::FETCH_SLOTS)),
        }
    }

    /// Shares these permits for fetches in flight ([`super::Gates::fetch`]).
    pub fn with_slots(mut self, slots: Arc<Semaphore>) -> Self {
        self.slots = slots;
        self
    }

    fn cached(&self, client_id: &str, now: i64) -> Option<ClientRecord> {
        self.cache
            .lock()
            .expect("cache lock")
            .get(client_id)
            .filter(|(at, _)| now - at < CACHE_SECS)
            .map(|(_, record)| record.clone())
    }

    /// True when resolving `client_id` would go out on the network: a fetchable URL that is
    /// not cached (what the HTTP layer limits per client address).
    pub fn would_fetch(&self, client_id: &str) -> bool {
        looks_like_url(client_id)
            && self.check_url(client_id).is_ok()
            && self.cached(client_id, self.clock.unix()).is_none()
    }

    /// Checks that `client_id` is a URL we may fetch as a metadata document.
    pub fn check_url(&self, client_id: &str) -> Result<Url, OAuthError> {
        if client_id.len() > MAX_URL_CHARS {
            return Err(invalid("client_id URL is too long"));
        }
        let url = Url::parse(client_id).map_err(|_| invalid("client_id is not a valid URL"))?;
        // The URL must be in its normal form: no dot segments, no default port, no case games.
        if url.as_str() != client_id {
            return Err(invalid("client_id URL is not in normal form"));
        }
        if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("client_id URL has a fragment or user information"));
        }
        if url.path() == "/" || url.path().is_empty() {
            return Err(invalid("client_id URL must have a path"));
        }
        let loopback = match url.host() {
            Some(url::Host::Ipv4(ip)) => {
                if !public_ip(IpAddr::V4(ip), self.allow_http_loopback) {
                    return Err(invalid("client_id URL names a private address"));
                }
                ip.is_loopback()
            }
            Some(url::Host::Ipv6(ip)) => {
                if !public_ip(IpAddr::V6(ip), self.allow_http_loopback) {
                    return Err(invalid("client_id URL names a private address"));
                }
                ip.is_loopback()
            }
            Some(url::Host::Domain(d)) => {
                let local = d.eq_ignore_ascii_case("localhost");
                if local && !self.allow_http_loopback {
                    return Err(invalid("client_id URL names a private address"));
                }
                local
            }
            None => return Err(invalid("client_id URL has no host")),
        };
        match url.scheme() {
            "https" => Ok(url),
            "http" if loopback && self.allow_http_loopback => Ok(url),
            _ => Err(invalid("client_id URL must use https")),
        }
    }

    /// The client described by the document at `client_id`, from the cache or fetched.
    pub async fn fetch(&self, client_id: &str) -> Result<ClientRecord, OAuthError> {
        let url = self.check_url(client_id)?;
        let now = self.clock.unix();
        if let Some(record) = self.cached(client_id, now) {
            return Ok(record);
        }
        let Ok(_slot) = self.slots.try_acquire() else {
            tracing::warn!("every metadata document fetch slot is taken; fetch refused");
            return Err(OAuthError::TemporarilyUnavailable {
                what: "too many client metadata documents are being fetched",
                retry_after_secs: BUSY_RETRY_SECS,
            });
        };
        let body = self.download(url).await?;
        let record = parse_document(client_id, &body, now)?;
        let mut cache = self.cache.lock().expect("cache lock");
        if cache.len() >= CACHE_ENTRIES {
            cache.retain(|_, (at, _)| now - *at < CACHE_SECS);
            if cache.len() >= CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(client_id.to_owned(), (now, record.clone()));
        Ok(record)
    }

    async fn download(&self, url: Url) -> Result<Vec<u8>, OAuthError> {
        let unreachable = |e: reqwest::Error| {
            tracing::info!(error = %e, "client metadata document fetch failed");
            invalid("the client metadata document could not be fetched")
        };
        let mut response = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(unreachable)?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(invalid(format!(
                "the client metadata document answered HTTP {}",
                response.status().as_u16()
            )));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64)
        {
            return Err(invalid("the client metadata document is too large"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(invalid("the client metadata document is too large"));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Checks a fetched document and makes it a public client.
pub fn parse_document(client_id: &str, body: &[u8], now: i64) -> Result<ClientRecord, OAuthError> {
    let doc: Value =
        serde_json::from_slice(body).map_err(|_| invalid("the client metadata is not JSON"))?;
    let doc = doc
        .as_object()
        .ok_or_else(|| invalid("the client metadata is not a JSON object"))?;
    if doc.get("client_id").and_then(Value::as_str) != Some(client_id) {
        return Err(invalid(
            "the client metadata's client_id is not the URL it was fetched from",
        ));
    }
    if doc.contains_key("client_secret") || doc.contains_key("client_secret_expires_at") {
        return Err(invalid("a client metadata document cannot carry a secret"));
    }
    match doc
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
    {
        None | Some("none") => {}
        Some(other) => {
            return Err(invalid(format!(
                "token_endpoint_auth_method {other} is not supported for metadata documents"
            )));
        }
    }
    let application_type = doc
        .get("application_type")
        .and_then(Value::as_str)
        .unwrap_or("web")
        .to_owned();
    let redirect_uris: Vec<String> = doc
        .get("redirect_uris")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if redirect_uris.is_empty() {
        return Err(invalid("the client metadata lists no redirect_uris"));
    }
    for uri in &redirect_uris {
        check_redirect_uri(uri, &application_type).map_err(|e| invalid(e.to_string()))?;
    }
    let text = |k: &str| {
        doc.get(k)
            .and_then(Value::as_str)
            .map(|s| s.trim().chars().take(100).collect::<String>())
            .filter(|s| !s.is_empty())
    };
    Ok(ClientRecord {
        client_id: client_id.to_owned(),
        kind: ClientKind::MetadataDocument,
        client_name: text("client_name"),
        client_uri: text("client_uri"),
        redirect_uris,
        grant_types: GRANT_TYPES.iter().map(|g| g.to_string()).collect(),
        token_endpoint_auth_method: "none".into(),
        application_type,
        scope: text("scope"),
        secret_hash: None,
        created_at: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ports::SystemClock;

    #[test]
    fn urls_are_fenced() {
        let strict = Fetcher::new(Arc::new(SystemClock), false);
        assert!(strict.check_url("https://app.example/client.json").is_ok());
        assert!(strict.check_url("http://app.example/client.json").is_err());
        assert!(strict.check_url("http://127.0.0.1:9/client.json").is_err());
        assert!(strict.check_url("https://127.0.0.1/client.json").is_err());
        assert!(strict.check_url("https://10.1.2.3/client.json").is_err());
        assert!(strict.check_url("https://169.254.169.254/latest").is_err());
        assert!(strict.check_url("https://[::1]/c").is_err());
        assert!(strict.check_url("https://[fd00::1]/c").is_err());
        assert!(strict.check_url("https://localhost/c").is_err());
        assert!(strict.check_url("https://app.example/").is_err());
        assert!(strict.check_url("https://app.example/a/../b").is_err());
        assert!(strict.check_url("https://user@app.example/c").is_err());
        assert!(strict.check_url("https://app.example/c#f").is_err());
        let dev = Fetcher::new(Arc::new(SystemClock), true);
        assert!(dev.check_url("http://127.0.0.1:9/client.json").is_ok());
        assert!(dev.check_url("http://app.example/client.json").is_err());
        assert!(dev.check_url("http://10.0.0.1/client.json").is_err());
    }

    /// Ranges that reach private networks or embed an IPv4 address are refused, whether named
    /// in the URL or resolved from a name; public addresses around them are not.
    #[test]
    fn special_purpose_addresses_are_not_public() {
        let refused = [
            "64:ff9b::a00:1",     // NAT64 of 10.0.0.1
            "64:ff9b::a9fe:a9fe", // NAT64 of 169.254.169.254
            "64:ff9b:1::a00:1",   // local-use NAT64
            "2002:a00:1::1",      // 6to4 of 10.0.0.1
            "2002:a9fe:a9fe::1",  // 6to4 of 169.254.169.254
            "::a00:1",            // IPv4-compatible 10.0.0.1
            "::7f00:1",           // IPv4-compatible 127.0.0.1
            "::ffff:0:a00:1",     // IPv4-translated
            "fec0::1",            // site-local
            "feff::1",            // site-local, top of the range
            "2001::1",            // Teredo
            "2001:db8::1",        // documentation
            "100::1",             // discard-only
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "198.18.0.1",
            "198.19.255.255",
            "100.64.0.1",
            "192.88.99.1",
            "0.1.2.3",
            "255.255.255.255",
            "169.254.169.254",
        ];
        for ip in refused {
            assert!(!public_ip(ip.parse().unwrap(), false), "{ip} is not public");
            assert!(
                !public_ip(ip.parse().unwrap(), true),
                "{ip} is not loopback"
            );
        }
        let allowed = [
            "8.8.8.8",
            "198.17.255.255",
            "198.20.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::1",
            "2003::1",
            "::ffff:8.8.8.8",
        ];
        for ip in allowed {
            assert!(public_ip(ip.parse().unwrap(), false), "{ip} is public");
        }
        assert!(public_ip("::1".parse().unwrap(), true));
        assert!(!public_ip("::1".parse().unwrap(), false));
        let strict = Fetcher::new(Arc::new(SystemClock), false);
        assert!(strict.check_url("https://[64:ff9b::a00:1]/c").is_err());
        assert!(strict.check_url("https://[2002:a00:1::1]/c").is_err());
        assert!(strict.check_url("https://198.18.0.1/c").is_err());
    }

    #[test]
    fn documents_are_checked() {
        let id = "https://app.example/client.json";
        let ok = serde_json::json!({
            "client_id": id, "client_name": "App", "redirect_uris": ["https://app.example/cb"]
        });
        let record = parse_document(id, ok.to_string().as_bytes(), 5).unwrap();
        assert_eq!(record.client_name.as_deref(), Some("App"));
        assert!(!record.is_confidential());
        let other_id = serde_json::json!({ "client_id": "https://evil.example/c", "redirect_uris": ["https://app.example/cb"] });
        assert!(parse_document(id, other_id.to_string().as_bytes(), 5).is_err());
        let no_uris = serde_json::json!({ "client_id": id });
        assert!(parse_document(id, no_uris.to_string().as_bytes(), 5).is_err());
        let secret = serde_json::json!({ "client_id": id, "client_secret": "x", "redirect_uris": ["https://app.example/cb"] });
        assert!(parse_document(id, secret.to_string().as_bytes(), 5).is_err());
        assert!(parse_document(id, b"not json", 5).is_err());
    }
}
