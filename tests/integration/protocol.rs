//! The MCP endpoint's rules over real HTTP: eras, lifecycle, limits, errors, auth, scopes.

use nib::auth::Scope;
use serde_json::{Value, json};

use crate::helpers::{LATEST_LEGACY, Options, TestApp, initialize};

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

fn stateless(method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] =
        json!({ META_VERSION: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} });
    json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params })
}

#[tokio::test]
async fn initialize_negotiates_each_legacy_era_and_issues_no_session() {
    let app = TestApp::spawn_empty().await;
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let r = app
            .post()
            .header("mcp-protocol-version", version)
            .json(&initialize(version))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(
            r.headers().get("mcp-session-id").is_none(),
            "stateless by default"
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["result"]["protocolVersion"], version);
        assert_eq!(body["result"]["serverInfo"]["name"], "nib");
        assert!(body["result"]["capabilities"]["tools"].is_object());
    }
    // A version we do not know gets one we speak.
    let r = app
        .post()
        .json(&initialize("2024-01-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let chosen = body["result"]["protocolVersion"].as_str().unwrap();
    assert!(
        ["2025-03-26", "2025-06-18", "2025-11-25"].contains(&chosen),
        "{chosen}"
    );
}

#[tokio::test]
async fn notifications_are_accepted_with_202_and_ping_answers() {
    let app = TestApp::spawn_empty().await;
    let r = app
        .post()
        .json(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let (status, body) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": "p", "method": "ping" }))
        .await;
    assert_eq!(
        (status, body["id"].clone(), body["result"].clone()),
        (200, json!("p"), json!({}))
    );
}

#[tokio::test]
async fn the_stateless_era_discovers_and_checks_headers_against_the_body() {
    let app = TestApp::spawn_empty().await;
    let send = |method: &'static str,
                header_method: &'static str,
                name: Option<&'static str>,
                body: Value| {
        let mut req = app
            .post()
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", header_method);
        if let Some(n) = name {
            req = req.header("mcp-name", n);
        }
        let _ = method;
        req.json(&body).send()
    };
    let r = send(
        "server/discover",
        "server/discover",
        None,
        stateless("server/discover", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let versions = body["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")) && versions.contains(&json!("2025-03-26")));
    assert!(
        !versions.contains(&json!("2024-11-05")),
        "only the four eras we speak"
    );

    let r = send(
        "tools/list",
        "tools/list",
        None,
        stateless("tools/list", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("mcp-session-id").is_none());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["tools"].as_array().unwrap().len(), 20);

    // Mcp-Method that contradicts the body: 400 with the spec's header-mismatch code.
    let r = send(
        "tools/list",
        "tools/call",
        None,
        stateless("tools/list", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32020);

    // Mcp-Name must name the tool being called.
    let call = stateless(
        "tools/call",
        json!({ "name": "list_pages", "arguments": {} }),
    );
    let r = send("tools/call", "tools/call", Some("get_page"), call.clone())
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], -32020);
    let r = send("tools/call", "tools/call", Some("list_pages"), call)
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["result"]["isError"], false);
}

#[tokio::test]
async fn protocol_version_header_rules() {
    let app = TestApp::spawn_empty().await;
    let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" });
    let r = app
        .post()
        .header("mcp-protocol-version", "1999-01-01")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1999-01-01"),
        "{body}"
    );
    // Missing header: taken as 2025-03-26, which is the only era with batches.
    let batch = json!([{ "jsonrpc": "2.0", "id": 1, "method": "ping" }, { "jsonrpc": "2.0", "method": "notifications/initialized" }, { "jsonrpc": "2.0", "id": 2, "method": "tools/list" }]);
    let r = app
        .client
        .post(&app.url)
        .bearer_auth(&app.token)
        .header("content-type", "application/json")
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let replies: Value = r.json().await.unwrap();
    let replies = replies.as_array().unwrap();
    assert_eq!(replies.len(), 2, "the notification gets no reply");
    assert_eq!(replies[0]["id"], 1);
    assert_eq!(replies[1]["id"], 2);
    assert!(replies[1]["result"]["tools"].is_array());
    // A batch of notifications only: 202.
    let r = app
        .post()
        .header("mcp-protocol-version", "2025-03-26")
        .json(&json!([{ "jsonrpc": "2.0", "method": "notifications/initialized" }]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    // Batches in later eras: -32600.
    for version in ["2025-06-18", LATEST_LEGACY, "2026-07-28"] {
        let r = app
            .post()
            .header("mcp-protocol-version", version)
            .json(&batch)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{version}");
        assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], -32600);
    }
}

#[tokio::test]
async fn malformed_input_gets_the_right_status_and_code() {
    let app = TestApp::spawn_empty().await;
    let r = app.post().body("{not json").send().await.unwrap();
    assert_eq!(r.status(), 400);
    let cid = r.headers()["x-correlation-id"].to_str().unwrap().to_owned();
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["error"]["data"]["correlationId"], cid.as_str());

    for not_rpc in [
        json!({ "hello": 1 }),
        json!({ "jsonrpc": "1.0", "id": 1, "method": "ping" }),
        json!(42),
        json!({ "jsonrpc": "2.0", "id": 1, "method": 5 }),
        json!([]),
    ] {
        let r = app
            .post()
            .header("mcp-protocol-version", "2025-03-26")
            .json(&not_rpc)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{not_rpc}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            -32600,
            "{not_rpc}"
        );
    }

    let (status, body) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 3, "method": "no/such/method" }))
        .await;
    assert_eq!(body["error"]["code"], -32601, "{status} {body}");

    let (_, body) = app.rpc(json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": { "name": "no_such_tool", "arguments": {} } })).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no_such_tool"),
        "{body}"
    );

    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let r = app
        .client
        .post(&app.url)
        .bearer_auth(&app.token)
        .header("content-type", "text/plain")
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415);
    assert!(
        r.json::<Value>().await.unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("application/json")
    );
    let r = app
        .client
        .post(&app.url)
        .bearer_auth(&app.token)
        .header("content-type", "application/json")
        .header("accept", "text/html")
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    assert!(r.json::<Value>().await.unwrap()["correlationId"].is_string());
}

#[tokio::test]
async fn bodies_over_two_million_bytes_are_refused_with_413() {
    let app = TestApp::spawn_empty().await;
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(2_000_001)
    );
    let r = app.post().body(big).send().await.unwrap();
    assert_eq!(r.status(), 413);
    // Just under the limit is parsed (and answered).
    let ok = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"_pad":"{}"}}}}"#,
        "x".repeat(1_999_000)
    );
    let r = app.post().body(ok).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn host_and_origin_must_be_allowed_before_anything_else() {
    let app = TestApp::spawn_empty().await;
    let r = app
        .post()
        .header("host", "attacker.example")
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = app
        .post()
        .header("origin", "http://attacker.example")
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Even without a token and with a huge body, the Host check answers first.
    let r = app
        .client
        .post(&app.url)
        .header("host", "attacker.example")
        .body("x".repeat(3_000_000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = app
        .post()
        .header("origin", "http://localhost:5173")
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "loopback origins are allowed");
}

#[tokio::test]
async fn unauthenticated_requests_get_the_challenge_and_get_is_405_only_after_auth() {
    let app = TestApp::spawn_empty().await;
    let r = app
        .post_anon()
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            app.base
        )),
        "{challenge}"
    );
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    assert!(body["message"].is_string() && body["correlationId"].is_string());

    let r = app
        .post_anon()
        .bearer_auth("nib_live_notarealtoken")
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );

    let r = app.client.get(&app.url).send().await.unwrap();
    assert_eq!(r.status(), 401, "an unauthenticated GET sees the challenge");
    let r = app
        .client
        .get(&app.url)
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    assert_eq!(r.headers()["allow"], "POST");
    let r = app
        .client
        .delete(&app.url)
        .bearer_auth(&app.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);

    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let meta: Value = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(meta["resource"], format!("{}/mcp", app.base));
        assert_eq!(
            meta["scopes_supported"],
            json!(["read", "edit", "write", "admin"])
        );
    }
}

#[tokio::test]
async fn revoked_tokens_stop_working() {
    let app = TestApp::spawn_empty().await;
    let token = app.token_for("default", Scope::Read).await;
    let (status, _) = app
        .rpc_with(
            &token,
            json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }),
        )
        .await;
    assert_eq!(status, 200);
    let user = nib::domain::UserId::parse("default").unwrap();
    let id = app
        .app
        .tokens
        .list(&user)
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.scope == Scope::Read)
        .unwrap()
        .token_id;
    app.app.tokens.revoke(&user, &id).await.unwrap();
    let (status, _) = app
        .rpc_with(
            &token,
            json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }),
        )
        .await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn tools_list_is_filtered_by_scope_and_calls_above_it_get_403() {
    let app = TestApp::spawn().await;
    let read = app.token_for("default", Scope::Read).await;
    let write = app.token_for("default", Scope::Write).await;
    let names = crate::helpers::tool_names;
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let (_, body) = app.rpc_with(&read, list.clone()).await;
    // In catalog order, each tool its scope allows.
    let catalog = |scope: Scope| -> Vec<String> {
        nib::tools::catalog()
            .iter()
            .filter(|t| scope.allows(t.scope))
            .map(|t| t.name.to_owned())
            .collect()
    };
    assert_eq!(names(&body), catalog(Scope::Read));
    assert_eq!(names(&body).len(), 11, "the eleven read tools");
    assert!(body["result"].get("nextCursor").is_none());
    let (_, body) = app.rpc_with(&write, list.clone()).await;
    assert_eq!(names(&body), catalog(Scope::Write));
    assert_eq!(names(&body).len(), nib::tools::catalog().len());
    // Deterministic: the same list twice.
    let (_, again) = app.rpc_with(&write, list.clone()).await;
    assert_eq!(body, again);
    // Every tool declares title, annotations and both schemas.
    for tool in body["result"]["tools"].as_array().unwrap() {
        for key in [
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
        ] {
            assert!(tool.get(key).is_some(), "{} lacks {key}", tool["name"]);
        }
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(
                tool["annotations"][hint].is_boolean(),
                "{} lacks {hint}",
                tool["name"]
            );
        }
    }
    let (_, bad) = app.rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "cursor": "bogus" } })).await;
    assert_eq!(bad["error"]["code"], -32602);

    let r = app
        .post_anon()
        .bearer_auth(&read)
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "create_task", "arguments": { "target_date": "2026-06-20", "text": "x" } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("edit"),
        "{challenge}"
    );
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"],
        "insufficient_scope"
    );
    // A read tool with the read token works.
    assert_eq!(
        app.call_raw(&read, "list_tasks", json!({})).await["isError"],
        false
    );

    // "No deletes" (edit): every tool but the destructive ones is listed and callable; a
    // delete is neither listed nor callable.
    let edit = app.token_for("default", Scope::Edit).await;
    let (_, body) = app.rpc_with(&edit, list.clone()).await;
    let listed = names(&body);
    assert_eq!(listed, catalog(Scope::Edit));
    let destructive: Vec<&str> = nib::tools::catalog()
        .iter()
        .filter(|t| t.annotations.destructive)
        .map(|t| t.name)
        .collect();
    assert_eq!(destructive, ["delete_page", "delete_task", "link_tasks"]);
    assert_eq!(
        listed.len() + destructive.len(),
        nib::tools::catalog().len(),
        "all but the deletes: {listed:?}"
    );
    for name in [
        "create_task",
        "update_task_status",
        "restore_page",
        "restore_task",
        "unlink_tasks",
    ] {
        assert!(listed.iter().any(|n| n == name), "{name} in {listed:?}");
    }
    let page = app.page_of("2026-06-17").await;
    let r = app
        .post_anon()
        .bearer_auth(&edit)
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "delete_page", "arguments": { "page_id": page } } }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    assert!(challenge.contains("write"), "{challenge}");
    let trash = app.call("list_trash", json!({})).await;
    assert_eq!(trash["items"], json!([]), "nothing was deleted");
    let created = app
        .call_raw(
            &edit,
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "written without deletes" }),
        )
        .await;
    assert_eq!(created["isError"], false, "{created}");
}

#[tokio::test]
async fn public_discovery_answers_discovery_without_a_token_and_nothing_else() {
    let app = TestApp::spawn_with(Options {
        public_discovery: true,
        ..Options::default()
    })
    .await;
    let r = app
        .post_anon()
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app
        .post_anon()
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    let tools = body["result"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 11, "what a read token would see");
    let r = app.post_anon().json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "list_pages", "arguments": {} } })).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = app.client.get(&app.url).send().await.unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn opt_in_sessions_are_signed_bound_to_the_user_and_checked() {
    let app = TestApp::spawn_with(Options {
        sessions: true,
        import_sample: false,
        ..Options::default()
    })
    .await;
    let r = app
        .post()
        .json(&initialize(LATEST_LEGACY))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let ping = json!({ "jsonrpc": "2.0", "id": 2, "method": "ping" });
    let r = app
        .post()
        .header("mcp-session-id", &session)
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = app.post().json(&ping).send().await.unwrap();
    assert_eq!(
        r.status(),
        400,
        "a session id is required once sessions are on"
    );
    let mut forged = session.clone();
    forged.replace_range(0..1, if forged.starts_with('A') { "B" } else { "A" });
    let r = app
        .post()
        .header("mcp-session-id", &forged)
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Another user's token with this user's session: 404 too.
    let other = app.token_for("someone-else", Scope::Read).await;
    let r = app
        .post_anon()
        .bearer_auth(&other)
        .header("mcp-session-id", &session)
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// With sessions on, each message of a 2025-03-26 batch is judged on its own: an `initialize`
/// in the batch excuses only itself, so the batch's other messages still need the session
/// (it used to excuse the whole batch).
#[tokio::test]
async fn with_sessions_an_initialize_in_a_batch_excuses_only_itself() {
    let app = TestApp::spawn_with(Options {
        sessions: true,
        ..Options::default()
    })
    .await;
    let batch = json!([
        initialize("2025-03-26"),
        { "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "list_pages", "arguments": { "limit": 1 } } },
    ]);
    let send = |session: Option<String>| {
        let mut req = app.post().header("mcp-protocol-version", "2025-03-26");
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.json(&batch).send()
    };
    let r = send(None).await.unwrap();
    assert_eq!(r.status(), 400, "the tools/call has no session");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "session_required", "{body}");

    // A lone initialize needs none, and with the session it hands out the batch is answered.
    let r = app
        .post()
        .header("mcp-protocol-version", "2025-03-26")
        .json(&initialize("2025-03-26"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let r = send(Some(session)).await.unwrap();
    assert_eq!(r.status(), 200);
    let replies: Value = r.json().await.unwrap();
    assert_eq!(replies[1]["result"]["isError"], false, "{replies}");
}

/// `Mcp-Method` and `Mcp-Name` are optional before 2026-07-28, but one that is sent must say
/// what the body says in every revision: an intermediary that routes or authorizes on the
/// header must not see one thing while nib runs another (they used to be ignored below
/// 2026-07-28). Matching headers are fine.
#[tokio::test]
async fn standard_headers_that_contradict_the_body_are_refused_in_every_revision() {
    let app = TestApp::spawn_empty().await;
    let call = json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": { "name": "list_pages", "arguments": {} } });
    for version in ["2025-03-26", "2025-06-18", LATEST_LEGACY] {
        let send = |method: &'static str, name: &'static str| {
            app.post()
                .header("mcp-protocol-version", version)
                .header("mcp-method", method)
                .header("mcp-name", name)
                .json(&call)
                .send()
        };
        for (method, name) in [("tools/list", "list_pages"), ("tools/call", "delete_page")] {
            let r = send(method, name).await.unwrap();
            assert_eq!(r.status(), 400, "{version} {method} {name}");
            let body: Value = r.json().await.unwrap();
            assert_eq!(body["error"]["code"], -32020, "{version}: {body}");
            assert_eq!(body["id"], 3);
        }
        let r = send("tools/call", "list_pages").await.unwrap();
        assert_eq!(r.status(), 200, "{version}");
        assert_eq!(r.json::<Value>().await.unwrap()["result"]["isError"], false);
    }
}

/// JSON-RPC ids are strings or integers that fit a signed 64-bit integer (what rmcp's model
/// holds): a larger one is an invalid request (-32600), not invalid params (-32602) as when
/// it got as far as the typed parse.
#[tokio::test]
async fn an_id_beyond_i64_is_an_invalid_request() {
    let app = TestApp::spawn_empty().await;
    for id in ["9223372036854775808", "18446744073709551615"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
        let r = app
            .post()
            .header("mcp-protocol-version", LATEST_LEGACY)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{id}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], -32600, "{id}: {body}");
    }
    let (status, body) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": i64::MAX, "method": "ping" }))
        .await;
    assert_eq!((status, body["id"].clone()), (200, json!(i64::MAX)));
}

/// What a profile of the workspace's Cargo.toml does on a panic: its own `panic`, else that of
/// the profile it inherits, else cargo's default (unwind).
fn panic_strategy(manifest: &str, profile: &str) -> String {
    let mut section = String::new();
    let (mut panic, mut inherits) = (None, None);
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(|c| c == '[' || c == ']').to_owned();
            continue;
        }
        if section != format!("profile.{profile}") {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim().trim_matches('"').to_owned();
            match key.trim() {
                "panic" => panic = Some(value),
                "inherits" => inherits = Some(value),
                _ => {}
            }
        }
    }
    match (panic, inherits) {
        (Some(p), _) => p,
        (None, Some(parent)) => panic_strategy(manifest, &parent),
        (None, None) => "unwind".to_owned(),
    }
}

/// `nib serve` is built with the release profile (`cargo build --release -p nib-cli`, the
/// benchmarks) or the `local` profile that inherits it (`make run`): it must unwind, or the request boundary that turns a handler's
/// panic into that request's 500 (`a_panicking_handler_answers_500_and_the_server_goes_on`)
/// never runs and one bad request aborts the server. The Lambda functions' profile may abort
/// (one request per instance). The release profile used to abort.
#[test]
fn the_profile_nib_serve_is_built_with_unwinds_on_panic() {
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml"),
    )
    .unwrap();
    assert_eq!(panic_strategy(&manifest, "release"), "unwind");
    assert_eq!(panic_strategy(&manifest, "local"), "unwind");
    assert_eq!(panic_strategy(&manifest, "dev"), "unwind");
}
