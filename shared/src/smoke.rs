//! `nib smoke URL [--token T]`: a read-only end-to-end check of a live connector, as a client
//! sees it. Without a token only the anonymous part runs (the 401 challenge and the OAuth
//! metadata chain); with a read token also every protocol era, the tools and a page image.
//! It writes nothing, so a monitor may run it every few minutes.

use serde_json::{Value, json};

use crate::doctor::Check;

const LEGACY_ERAS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
const STATELESS_ERA: &str = "2026-07-28";

type Outcome = Result<(), (String, String)>;

fn fail<T>(cause: impl Into<String>, fix: &str) -> Result<T, (String, String)> {
    Err((cause.into(), fix.into()))
}

fn check(name: &str, outcome: Outcome) -> Check {
    if let Err((cause, _)) = &outcome {
        tracing::warn!(check = name, %cause, "smoke check failed");
    }
    Check {
        name: name.into(),
        outcome,
    }
}

struct Client {
    http: reqwest::Client,
    mcp: String,
    token: Option<String>,
}

impl Client {
    async fn post(&self, version: &str, body: Value) -> Result<(u16, Value), (String, String)> {
        let mut req = self
            .http
            .post(&self.mcp)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .json(&body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if version == STATELESS_ERA
            && let Some(m) = body["method"].as_str()
        {
            req = req.header("mcp-method", m);
        }
        let r = req.send().await.map_err(|e| {
            (
                format!(
                    "{} does not answer: {}",
                    self.mcp,
                    crate::telemetry::chain(&e)
                ),
                "check the URL and that the deployment is up".to_owned(),
            )
        })?;
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_default();
        // An SSE answer carries the message on its `data:` line.
        let json = serde_json::from_str(&text).ok().or_else(|| {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .find_map(|d| serde_json::from_str(d.trim()).ok())
        });
        Ok((status, json.unwrap_or(Value::Null)))
    }

    /// A tool's structured result (in the latest legacy era).
    async fn tool(&self, name: &str, args: Value) -> Result<Value, (String, String)> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": name, "arguments": args } });
        let (status, answer) = self.post(LEGACY_ERAS[2], body).await?;
        let result = &answer["result"];
        if status != 200 || result["isError"] != json!(false) {
            return fail(
                format!(
                    "{name} answered {status}: {}",
                    answer["error"]["message"]
                        .as_str()
                        .or(result["content"][0]["text"].as_str())
                        .unwrap_or("no result")
                ),
                "check the token (read scope, not revoked) and the function logs",
            );
        }
        Ok(result["structuredContent"].clone())
    }
}

/// Every check against the connector `mcp_url` (ending in `/mcp`).
pub async fn smoke(mcp_url: &str, token: Option<&str>) -> Vec<Check> {
    let client = Client {
        http: reqwest::Client::new(),
        mcp: mcp_url.trim_end_matches('/').to_owned(),
        token: token.map(str::to_owned),
    };
    let mut checks = vec![check("OAuth metadata chain", metadata_chain(&client).await)];
    if client.token.is_none() {
        return checks;
    }
    for era in LEGACY_ERAS {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": { "protocolVersion": era, "capabilities": {}, "clientInfo": { "name": "nib-smoke", "version": "1" } } });
        let outcome = match client.post(era, body).await {
            Ok((200, a)) if a["result"]["protocolVersion"] == json!(era) => Ok(()),
            Ok((s, a)) => fail(
                format!("initialize answered {s}: {a}"),
                "check that the front runs this nib",
            ),
            Err(e) => Err(e),
        };
        checks.push(check(&format!("initialize {era}"), outcome));
    }
    let discover = json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": { "_meta": { "io.modelcontextprotocol/protocolVersion": STATELESS_ERA, "io.modelcontextprotocol/clientCapabilities": {} } } });
    let outcome = match client.post(STATELESS_ERA, discover).await {
        Ok((200, a))
            if a["result"]["supportedVersions"]
                .as_array()
                .is_some_and(|v| v.contains(&json!(STATELESS_ERA))) =>
        {
            Ok(())
        }
        Ok((s, a)) => fail(
            format!("server/discover answered {s}: {a}"),
            "check that the front runs this nib",
        ),
        Err(e) => Err(e),
    };
    checks.push(check(&format!("server/discover {STATELESS_ERA}"), outcome));
    let tools = match client
        .post(
            LEGACY_ERAS[2],
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }),
        )
        .await
    {
        Ok((200, a))
            if a["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "get_page")) =>
        {
            Ok(())
        }
        Ok((s, a)) => fail(format!("tools/list answered {s}: {a}"), "check the token"),
        Err(e) => Err(e),
    };
    checks.push(check("tools/list", tools));
    let pages = client.tool("list_pages", json!({})).await;
    let listed: Vec<Value> = pages
        .as_ref()
        .ok()
        .and_then(|p| p["pages"].as_array().cloned())
        .unwrap_or_default();
    checks.push(check("list_pages", pages.map(|_| ())));
    let first = listed.first().and_then(|p| p["page_id"].as_str());
    let page = match first {
        Some(id) => client.tool("get_page", json!({ "page_id": id })).await,
        None => fail(
            "the notebook has no page to read",
            "import one (nib import) or use a token of a user with pages",
        ),
    };
    checks.push(check(
        "get_page",
        page.as_ref().map(|_| ()).map_err(Clone::clone),
    ));
    let inked = listed
        .iter()
        .find(|p| p["has_ink"] == json!(true))
        .and_then(|p| p["page_id"].as_str());
    let image = match inked {
        Some(id) => match client.tool("get_page", json!({ "page_id": id })).await {
            Ok(p) => match p["png_url"].as_str().or(p["pdf_url"].as_str()) {
                Some(url) => signed_image(&client.http, url).await,
                None => fail(
                    "a page with ink has no signed image URL",
                    "check the bucket (NIB_BUCKET) and the pages function's S3 access",
                ),
            },
            Err(e) => Err(e),
        },
        None => fail(
            "no listed page has ink to fetch",
            "import a page with an image to check signed URLs",
        ),
    };
    checks.push(check("signed page image (200, then 403 tampered)", image));
    // A word of the page read above, so the search has something to find.
    let word = page
        .as_ref()
        .ok()
        .and_then(|p| p["text"].as_str())
        .and_then(|t| {
            t.split(|c: char| !c.is_alphabetic())
                .find(|w| w.chars().count() >= 5)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "notebook".to_owned());
    let search = client.tool("search_pages", json!({ "query": word })).await;
    checks.push(check("search_pages", search.map(|_| ())));
    checks
}

/// The unauthenticated 401, its `resource_metadata`, the authorization server it names, and
/// that server's issuer.
async fn metadata_chain(client: &Client) -> Outcome {
    let anonymous = Client {
        http: client.http.clone(),
        mcp: client.mcp.clone(),
        token: None,
    };
    let r = anonymous
        .http
        .post(&anonymous.mcp)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .map_err(|e| {
            (
                format!(
                    "{} does not answer: {}",
                    anonymous.mcp,
                    crate::telemetry::chain(&e)
                ),
                "check the URL".to_owned(),
            )
        })?;
    if r.status() != 401 {
        return fail(
            format!("an unauthenticated POST got {}, not 401", r.status()),
            "check that /mcp reaches the front with OAuth on",
        );
    }
    let Some(metadata) = crate::doctor::resource_metadata(r.headers()) else {
        return fail(
            "the 401 names no resource_metadata",
            "set NIB_PUBLIC_URL on the front",
        );
    };
    let get = |url: String| async move {
        let r = client.http.get(&url).send().await.map_err(|e| {
            (
                format!("{url}: {}", crate::telemetry::chain(&e)),
                "check the well-known routes".to_owned(),
            )
        })?;
        if !r.status().is_success() {
            return fail(
                format!("{url} answered {}", r.status()),
                "check the well-known routes reach the oauth function",
            );
        }
        r.json::<Value>().await.map_err(|_| {
            (
                format!("{url} is not JSON"),
                "check the well-known routes".to_owned(),
            )
        })
    };
    let resource = get(metadata.to_owned()).await?;
    let Some(server) = resource["authorization_servers"][0].as_str() else {
        return fail(
            format!("{metadata} names no authorization server"),
            "check NIB_PUBLIC_URL",
        );
    };
    let doc = get(format!(
        "{}/.well-known/oauth-authorization-server",
        server.trim_end_matches('/')
    ))
    .await?;
    if doc["issuer"].as_str().map(|i| i.trim_end_matches('/')) != Some(server.trim_end_matches('/'))
    {
        return fail(
            format!("the issuer {} is not {server}", doc["issuer"]),
            "set NIB_PUBLIC_URL to the connector's base URL on every function",
        );
    }
    if doc["token_endpoint"].as_str().is_none() || doc["authorization_endpoint"].as_str().is_none()
    {
        return fail(
            "the authorization server's metadata lacks its endpoints",
            "check the oauth function",
        );
    }
    Ok(())
}

/// A signed image URL answers 200 with an image, and 403 once its signature is tampered with.
async fn signed_image(http: &reqwest::Client, url: &str) -> Outcome {
    let r = http.get(url).send().await.map_err(|e| {
        (
            format!(
                "the image URL does not answer: {}",
                crate::telemetry::chain(&e)
            ),
            "check the bucket".to_owned(),
        )
    })?;
    let kind = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if r.status() != 200 || !(kind.starts_with("image/") || kind == "application/pdf") {
        return fail(
            format!("the image URL answered {} ({kind})", r.status()),
            "check the bucket and its objects under u/",
        );
    }
    // Flip the last character of the URL (the end of its signature).
    let mut tampered = url.to_owned();
    let last = tampered.pop().unwrap_or('0');
    tampered.push(if last == '0' { '1' } else { '0' });
    let r = http.get(&tampered).send().await.map_err(|e| {
        (
            format!(
                "the tampered URL does not answer: {}",
                crate::telemetry::chain(&e)
            ),
            "check the bucket".to_owned(),
        )
    })?;
    if r.status() != 403 {
        return fail(
            format!("a tampered image URL answered {}, not 403", r.status()),
            "page images must be reachable only through signed URLs: block public access on the bucket",
        );
    }
    Ok(())
}
