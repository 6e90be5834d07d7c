//! MCP resources, resource links and prompts over HTTP against the sample notebook, in every
//! protocol era. Like `notebook.rs`, each test is a body taking a `TestApp`; `resource_tests!`
//! runs them over the embedded back end here, over AWS (emulator) in `aws.rs`, and through the
//! Lambda front in `lambda.rs` (where the front lists and the pages function reads).

use base64::Engine;
use nib::auth::Scope;
use serde_json::{Value, json};

use crate::helpers::TestApp;

macro_rules! resource_tests {
    ($options:expr) => {
        $crate::resources::resource_tests!(@each $options;
            resources_list_read_in_every_era,
            resources_are_the_callers_own,
            page_tools_link_their_pages_after_the_text,
            the_page_viewer_is_declared_and_allows_only_the_image_host,
            prompts_embed_the_pages_as_resources,
        );
    };
    (@each $options:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($options).await;
                $crate::resources::$name(&app).await;
            }
        )*
    };
}
pub(crate) use resource_tests;

mod local {
    super::resource_tests!(crate::helpers::Options::default());
}

const ERAS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

/// One JSON-RPC request at protocol `version` with `token`; the whole response body.
async fn rpc_at(app: &TestApp, token: &str, version: &str, method: &str, params: Value) -> Value {
    let mut params = params;
    let mut req = app.post_anon().bearer_auth(token);
    if version == "2026-07-28" {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { "name": "nib-tests", "version": "1" },
        });
        req = req.header("mcp-method", method);
        if let Some(name) = params
            .get("uri")
            .or(params.get("name"))
            .and_then(Value::as_str)
        {
            req = req.header("mcp-name", name);
        }
    }
    if version != "2025-03-26" {
        req = req.header("mcp-protocol-version", version);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 3, "method": method, "params": params });
    let r = req.json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{method} at {version}: {v}");
    v
}

async fn result(app: &TestApp, version: &str, method: &str, params: Value) -> Value {
    let v = rpc_at(app, &app.token, version, method, params).await;
    v.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{method} at {version}: {v}"))
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {v}"))
}

pub async fn resources_list_read_in_every_era(app: &TestApp) {
    let pages = app.call("list_pages", json!({})).await["pages"].clone();
    let pages = pages.as_array().unwrap();
    let by_date = |d: &str| {
        pages.iter().find(|p| p["date"] == d).unwrap()["page_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    let task = &tasks["tasks"][0];
    for era in ERAS {
        let stateless = era == "2026-07-28";
        // The list: one entry per page, newest first, as list_pages orders them.
        let list = result(app, era, "resources/list", json!({})).await;
        let all = list["resources"].as_array().unwrap();
        assert_eq!(
            all[0]["uri"], "ui://nib/page-viewer",
            "the viewer comes first"
        );
        let resources = &all[1..];
        assert_eq!(resources.len(), pages.len(), "{era}: {list}");
        for (r, p) in resources.iter().zip(pages) {
            assert_eq!(
                r["uri"],
                format!("nib://pages/{}", p["page_id"].as_str().unwrap())
            );
            assert_eq!(r["name"], p["date"]);
            assert_eq!(r["mimeType"], "text/markdown");
        }
        assert!(list.get("nextCursor").is_none(), "{era}: {list}");
        let templates = result(app, era, "resources/templates/list", json!({})).await;
        let uris: Vec<&str> = templates["resourceTemplates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["uriTemplate"].as_str().unwrap())
            .collect();
        assert_eq!(
            uris,
            [
                "nib://pages/{page_id}",
                "nib://pages/{page_id}/image.png",
                "nib://tasks/{task_link_id}"
            ]
        );

        // A page: its markdown.
        let uri = format!("nib://pages/{}", by_date("2026-06-16"));
        let read = result(app, era, "resources/read", json!({ "uri": uri })).await;
        let c = &read["contents"][0];
        assert_eq!(
            (c["uri"].as_str(), c["mimeType"].as_str()),
            (Some(uri.as_str()), Some("text/markdown"))
        );
        assert!(
            c["text"]
                .as_str()
                .unwrap()
                .contains("- [ ] Follow up on API spec"),
            "{read}"
        );
        if stateless {
            for r in [&list, &templates, &read] {
                assert!(
                    r["ttlMs"].is_u64() && r["cacheScope"].is_string(),
                    "{era}: {r}"
                );
            }
            assert_eq!(read["cacheScope"], "private");
        }

        // The image, inline: the very bytes imported.
        let uri = format!("nib://pages/{}/image.png", by_date("2026-06-18"));
        let read = result(app, era, "resources/read", json!({ "uri": uri })).await;
        let c = &read["contents"][0];
        assert_eq!(c["mimeType"], "image/png");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(c["blob"].as_str().unwrap())
            .unwrap();
        let file = std::fs::read(crate::helpers::sample_dir().join("2026-06-18.png")).unwrap();
        assert_eq!(bytes, file);

        // A task, as JSON.
        let uri = format!("nib://tasks/{}", task["task_link_id"].as_str().unwrap());
        let read = result(app, era, "resources/read", json!({ "uri": uri })).await;
        let c = &read["contents"][0];
        assert_eq!(c["mimeType"], "application/json");
        let t: Value = serde_json::from_str(c["text"].as_str().unwrap()).unwrap();
        assert_eq!((&t["text"], &t["status"]), (&task["text"], &task["status"]));
        assert_eq!(
            t["source_page_uri"],
            format!("nib://pages/{}", task["source_page_id"].as_str().unwrap())
        );
    }
    // A page create_task made has no markdown of its own: its lines are the markdown.
    let made = app
        .call(
            "create_task",
            json!({ "target_date": "2026-07-01", "text": "Water the plants" }),
        )
        .await;
    let uri = format!("nib://pages/{}", made["page_id"].as_str().unwrap());
    let read = result(app, "2025-11-25", "resources/read", json!({ "uri": uri })).await;
    assert_eq!(
        read["contents"][0]["text"], "- [ ] Water the plants",
        "{read}"
    );
    // A cursor that is not list_pages's is a protocol error.
    let v = rpc_at(
        app,
        &app.token,
        "2025-11-25",
        "resources/list",
        json!({ "cursor": "bogus" }),
    )
    .await;
    assert_eq!(error_code(&v), -32602, "{v}");
}

pub async fn resources_are_the_callers_own(app: &TestApp) {
    let page = app.page_of("2026-06-16").await;
    let mine = format!("nib://pages/{page}");
    let reader = app.token_for("default", Scope::Read).await;
    let v = rpc_at(
        app,
        &reader,
        "2025-11-25",
        "resources/read",
        json!({ "uri": mine }),
    )
    .await;
    assert!(
        v["result"]["contents"][0]["text"].is_string(),
        "read scope reads: {v}"
    );

    let other = app.token_for("mallory", Scope::Admin).await;
    let missing = "nib://pages/01900000-0000-7000-8000-000000000000".to_owned();
    let no_image = format!("nib://pages/{page}/image.png"); // a markdown page, no PNG
    for (era, code) in [("2025-11-25", -32002), ("2026-07-28", -32602)] {
        let foreign = rpc_at(app, &other, era, "resources/read", json!({ "uri": mine })).await;
        let absent = rpc_at(
            app,
            &app.token,
            era,
            "resources/read",
            json!({ "uri": missing }),
        )
        .await;
        let malformed = rpc_at(
            app,
            &app.token,
            era,
            "resources/read",
            json!({ "uri": "nib://pages/../x" }),
        )
        .await;
        let imageless = rpc_at(
            app,
            &app.token,
            era,
            "resources/read",
            json!({ "uri": no_image }),
        )
        .await;
        for v in [&foreign, &absent, &malformed, &imageless] {
            assert_eq!(error_code(v), code, "{era}: {v}");
            assert_eq!(v["error"]["message"], "resource not found");
        }
        assert_eq!(foreign["error"]["data"]["uri"], mine.as_str());
    }
    let theirs = rpc_at(app, &other, "2025-11-25", "resources/list", json!({})).await;
    let theirs: Vec<&str> = theirs["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(theirs, ["ui://nib/page-viewer"], "no page of another user");
    // No token: the challenge, not a read.
    let r = app
        .post_anon()
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": { "uri": mine } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

pub async fn page_tools_link_their_pages_after_the_text(app: &TestApp) {
    let id = app.page_of("2026-06-18").await; // has a PNG
    let call = |era: &'static str, tool: &'static str, args: Value| {
        let params = json!({ "name": tool, "arguments": args });
        async move { result(app, era, "tools/call", params).await }
    };
    for era in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        let r = call(era, "get_page", json!({ "page_id": id })).await;
        let content = r["content"].as_array().unwrap();
        let text: Value = serde_json::from_str(content[0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, r["structuredContent"], "the text block is unchanged");
        assert_eq!(
            content[1],
            json!({ "type": "resource_link", "uri": format!("nib://pages/{id}"), "name": "2026-06-18",
                    "title": "Page of 2026-06-18", "mimeType": "text/markdown" })
        );
        assert_eq!(content[2]["uri"], format!("nib://pages/{id}/image.png"));
        assert_eq!(content[2]["mimeType"], "image/png");
        assert_eq!(content.len(), 3);

        let r = call(era, "list_pages", json!({})).await;
        let links: Vec<&Value> = r["content"].as_array().unwrap()[1..].iter().collect();
        let pages = r["structuredContent"]["pages"].as_array().unwrap();
        assert_eq!(links.len(), pages.len());
        for (l, p) in links.iter().zip(pages) {
            assert_eq!(
                l["uri"],
                format!("nib://pages/{}", p["page_id"].as_str().unwrap())
            );
        }
        let r = call(era, "search_pages", json!({ "query": "printer" })).await;
        let n = r["structuredContent"]["results"].as_array().unwrap().len();
        assert_eq!(r["content"].as_array().unwrap().len(), 1 + n);
        let r = call(era, "fetch", json!({ "id": id })).await;
        assert_eq!(r["content"][1]["uri"], format!("nib://pages/{id}"));
        // Task tools name no page.
        let r = call(era, "list_tasks", json!({})).await;
        assert_eq!(r["content"].as_array().unwrap().len(), 1);
    }
    // 2025-03-26 has no resource links: the result is as before.
    let r = call("2025-03-26", "get_page", json!({ "page_id": id })).await;
    assert_eq!(r["content"].as_array().unwrap().len(), 1, "{r}");
}

fn texts(messages: &Value) -> String {
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"]["type"] == "text")
        .map(|m| m["content"]["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

fn embedded(messages: &Value) -> Vec<&Value> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["content"]["type"] == "resource")
        .map(|m| &m["content"]["resource"])
        .collect()
}

pub async fn prompts_embed_the_pages_as_resources(app: &TestApp) {
    let list = result(app, "2025-11-25", "prompts/list", json!({})).await;
    let names: Vec<&str> = list["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["daily_review", "weekly_review", "carry_forward"]);

    let day = app.page_of("2026-06-16").await;
    for era in ERAS {
        let r = result(
            app,
            era,
            "prompts/get",
            json!({ "name": "daily_review", "arguments": { "date": "2026-06-16" } }),
        )
        .await;
        let pages = embedded(&r["messages"]);
        assert_eq!(pages.len(), 1, "{era}: {r}");
        assert_eq!(pages[0]["uri"], format!("nib://pages/{day}"));
        assert_eq!(pages[0]["mimeType"], "text/markdown");
        assert!(
            pages[0]["text"]
                .as_str()
                .unwrap()
                .contains("Order a new desk chair")
        );
        let text = texts(&r["messages"]);
        assert!(text.contains("Tasks open on 2026-06-16"), "{text}");
        assert!(text.contains("Follow up on API spec"), "{text}");
        // Not pasted: the page's own lines are only in the embedded resource.
        assert!(!text.contains("Dana owns the onboarding emails"), "{text}");
    }

    // The week of 2026-06-15: every sample page (7) is in it.
    let r = result(
        app,
        "2025-11-25",
        "prompts/get",
        json!({ "name": "weekly_review", "arguments": { "week": "2026-W25" } }),
    )
    .await;
    assert_eq!(embedded(&r["messages"]).len(), 7, "{r}");
    let text = texts(&r["messages"]);
    assert!(text.contains("2026-06-15 to 2026-06-21"), "{text}");
    let done = app.call("list_tasks", json!({ "status": "done" })).await;
    let done_text = done["tasks"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("- {done_text}")),
        "{done_text}: {text}"
    );

    // carry_forward: the sample's open tasks are months old.
    let r = result(
        app,
        "2025-11-25",
        "prompts/get",
        json!({ "name": "carry_forward", "arguments": { "days": "3" } }),
    )
    .await;
    let text = texts(&r["messages"]);
    let open = app.call("list_tasks", json!({ "status": "open" })).await;
    for t in open["tasks"].as_array().unwrap() {
        assert!(text.contains(t["text"].as_str().unwrap()), "{t}: {text}");
        let source = format!("nib://pages/{}", t["source_page_id"].as_str().unwrap());
        assert!(
            embedded(&r["messages"])
                .iter()
                .any(|p| p["uri"] == source.as_str())
        );
    }

    // Bad arguments and unknown prompts are protocol errors.
    for (name, args) in [
        ("daily_review", json!({ "date": "june" })),
        ("weekly_review", json!({ "week": "2026-W99" })),
        ("carry_forward", json!({ "days": "-1" })),
        ("no_such_prompt", json!({})),
    ] {
        let v = rpc_at(
            app,
            &app.token,
            "2025-11-25",
            "prompts/get",
            json!({ "name": name, "arguments": args }),
        )
        .await;
        assert_eq!(error_code(&v), -32602, "{name}: {v}");
    }
}

pub async fn the_page_viewer_is_declared_and_allows_only_the_image_host(app: &TestApp) {
    let id = app.page_of("2026-06-18").await; // has a PNG
    for era in ERAS {
        let read = result(
            app,
            era,
            "resources/read",
            json!({ "uri": "ui://nib/page-viewer" }),
        )
        .await;
        let c = &read["contents"][0];
        assert_eq!(c["mimeType"], "text/html;profile=mcp-app");
        let html = c["text"].as_str().unwrap();
        assert!(html.starts_with("<!doctype html>") && !html.contains("<script src"));
        // The CSP names exactly the origin signed image URLs come from, on every back end.
        let page = app.call("get_page", json!({ "page_id": id })).await;
        let png = page["png_url"].as_str().unwrap();
        let origin = nib::mcp::viewer::origin_of(png);
        assert_eq!(
            c["_meta"]["ui"]["csp"]["resourceDomains"],
            json!([origin]),
            "{era}"
        );
        assert_eq!(c["_meta"]["ui"]["csp"]["connectDomains"], json!([]));

        let tools = result(app, era, "tools/list", json!({})).await;
        for t in tools["tools"].as_array().unwrap() {
            let meta = &t["_meta"];
            let name = t["name"].as_str().unwrap();
            if ["get_page", "search_pages"].contains(&name) {
                assert_eq!(meta["ui"]["resourceUri"], "ui://nib/page-viewer", "{name}");
                assert_eq!(meta["ui"]["visibility"], json!(["model", "app"]));
                assert_eq!(meta["openai/outputTemplate"], "ui://nib/page-viewer");
            } else {
                assert!(meta.get("ui").is_none(), "{name}: {meta}");
            }
            assert!(
                t["icons"][0]["src"]
                    .as_str()
                    .unwrap()
                    .starts_with("data:image/svg+xml;base64,")
            );
        }
    }
    // The result says whether the viewer may tick boxes.
    let reader = app.token_for("default", Scope::Read).await;
    let params = json!({ "name": "get_page", "arguments": { "page_id": id } });
    let ro = rpc_at(app, &reader, "2025-11-25", "tools/call", params.clone()).await;
    assert_eq!(ro["result"]["_meta"]["nib/canWrite"], false);
    let rw = rpc_at(app, &app.token, "2025-11-25", "tools/call", params).await;
    assert_eq!(rw["result"]["_meta"]["nib/canWrite"], true);
    // Task lines name their task, so the viewer (or a model) can update it.
    let day = app.page_of("2026-06-16").await;
    let page = app.call("get_page", json!({ "page_id": day })).await;
    let tasks = app.call("list_tasks", json!({ "status": "all" })).await;
    let ids: Vec<&Value> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["task_link_id"])
        .collect();
    for line in page["structure_json"]["lines"].as_array().unwrap() {
        if line["notation"] == "task" {
            assert!(ids.contains(&&line["task_link_id"]), "{line}");
        } else {
            assert!(line["task_link_id"].is_null(), "{line}");
        }
    }
}

/// More pages than one `resources/list` page holds: the cursor walks them all, newest first,
/// each once.
#[tokio::test]
async fn resources_list_pages_through_cursors() {
    let app = TestApp::spawn().await;
    for day in 1..=55 {
        let date = format!("2026-08-{:02}", (day - 1) % 31 + 1);
        let date = if day > 31 {
            format!("2026-09-{:02}", day - 31)
        } else {
            date
        };
        app.call(
            "create_task",
            json!({ "target_date": date, "text": format!("Task {day}") }),
        )
        .await;
    }
    let mut uris: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let list = result(&app, "2025-11-25", "resources/list", params).await;
        pages += 1;
        for r in list["resources"].as_array().unwrap() {
            let uri = r["uri"].as_str().unwrap();
            if uri.starts_with("nib://") {
                uris.push(uri.to_owned());
            }
        }
        match list["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let all = app.call("list_pages", json!({ "limit": 200 })).await;
    let expected: Vec<String> = all["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| format!("nib://pages/{}", p["page_id"].as_str().unwrap()))
        .collect();
    assert_eq!(expected.len(), 62, "55 new pages and the sample's 7");
    assert_eq!(pages, 2, "50 a page");
    assert_eq!(uris, expected);
}
