//! Destructive tools ask first (`mcp/confirm.rs`): a 2026-07-28 client that declares the
//! elicitation capability gets an `InputRequiredResult` naming what would change; decline,
//! cancel, a state that belongs to another call and a tampered state change nothing; accept
//! runs the tool. A client without the capability, and the older revisions, delete as before.
//! Locally here and through the functions in `lambda.rs`; the official Python SDK's client
//! answers the question in tests/clients.

use serde_json::{Value, json};

use crate::helpers::TestApp;

macro_rules! confirm_tests {
    ($options:expr) => {
        #[tokio::test]
        async fn destructive_tools_ask_first_and_a_refusal_changes_nothing() {
            let app = $crate::helpers::TestApp::spawn_with($options).await;
            $crate::confirm::destructive_tools_ask_first_and_a_refusal_changes_nothing(&app).await;
        }
    };
}
pub(crate) use confirm_tests;

mod local {
    super::confirm_tests!(crate::helpers::Options::default());
}

/// A 2026-07-28 `tools/call`; `elicits` declares the elicitation capability. The whole body.
async fn call(app: &TestApp, elicits: bool, tool: &str, params: Value) -> Value {
    let mut params = params;
    params["name"] = json!(tool);
    let caps = if elicits {
        json!({ "elicitation": {} })
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": { "name": "nib-tests", "version": "1" },
    });
    let r = app
        .post()
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{tool}: {body}");
    body
}

fn answer(action: &str) -> Value {
    json!({ "confirm": { "action": action } })
}

async fn in_trash(app: &TestApp, page: &str) -> bool {
    let trash = app.call("list_trash", json!({})).await;
    trash["items"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["id"] == page)
}

pub async fn destructive_tools_ask_first_and_a_refusal_changes_nothing(app: &TestApp) {
    let page = app.page_of("2026-06-17").await;
    let other = app.page_of("2026-06-16").await;
    let args = json!({ "page_id": page });

    // The question names the page's day and its first line.
    let asked =
        call(app, true, "delete_page", json!({ "arguments": args })).await["result"].clone();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let request = &asked["inputRequests"]["confirm"];
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    assert_eq!(request["params"]["mode"], "form", "{asked}");
    assert_eq!(request["params"]["requestedSchema"]["type"], "object");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("2026-06-17") && message.contains("trash"),
        "{message}"
    );
    let state = asked["requestState"].as_str().unwrap().to_owned();

    // Decline and cancel: a result that says so, and the page stays.
    for (action, word) in [("decline", "declined"), ("cancel", "cancelled")] {
        let r = call(
            app,
            true,
            "delete_page",
            json!({ "arguments": args, "inputResponses": answer(action), "requestState": state }),
        )
        .await["result"]
            .clone();
        assert_eq!(r["isError"], true, "{r}");
        assert!(
            r["content"][0]["text"].as_str().unwrap().contains(word),
            "{r}"
        );
        assert!(!in_trash(app, &page).await, "{action} deleted nothing");
    }

    // A tampered state, and this page's state used for another page: refused as invalid.
    for (target, s) in [
        (&page, format!("{state}-TAMPERED")),
        (&other, state.clone()),
    ] {
        let r = call(
            app,
            true,
            "delete_page",
            json!({ "arguments": { "page_id": target }, "inputResponses": answer("accept"), "requestState": s }),
        )
        .await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
    }
    assert!(!in_trash(app, &page).await && !in_trash(app, &other).await);

    // Accept: the page goes to the trash.
    let done = call(
        app,
        true,
        "delete_page",
        json!({ "arguments": args, "inputResponses": answer("accept"), "requestState": state }),
    )
    .await["result"]
        .clone();
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(done["structuredContent"]["deleted"], true, "{done}");
    assert!(in_trash(app, &page).await);

    // delete_task names the task's text.
    let tasks = app.call("list_tasks", json!({ "limit": 1 })).await;
    let task = &tasks["tasks"][0];
    let asked = call(
        app,
        true,
        "delete_task",
        json!({ "arguments": { "task_link_id": task["task_link_id"] } }),
    )
    .await["result"]
        .clone();
    let message = asked["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains(task["text"].as_str().unwrap()),
        "{message}"
    );

    // link_tasks names both tasks' texts; declined, it links nothing.
    let tasks = app.call("list_tasks", json!({ "limit": 2 })).await;
    let (kept, merged) = (&tasks["tasks"][0], &tasks["tasks"][1]);
    let args = json!({ "task_link_id": kept["task_link_id"], "same_as": merged["task_link_id"] });
    let asked = call(app, true, "link_tasks", json!({ "arguments": args })).await["result"].clone();
    let message = asked["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap();
    for t in [kept, merged] {
        assert!(message.contains(t["text"].as_str().unwrap()), "{message}");
    }
    let declined = call(
        app,
        true,
        "link_tasks",
        json!({ "arguments": args, "inputResponses": answer("decline"), "requestState": asked["requestState"] }),
    )
    .await["result"]
        .clone();
    assert_eq!(declined["isError"], true, "{declined}");
    let after = app.call("list_tasks", json!({ "limit": 2 })).await;
    assert_eq!(after["tasks"], tasks["tasks"], "nothing was linked");

    // An id that names nothing is not asked about: the tool says not found.
    let r = call(
        app,
        true,
        "delete_page",
        json!({ "arguments": { "page_id": "00000000000000000000000000" } }),
    )
    .await["result"]
        .clone();
    assert_eq!(r["isError"], true, "{r}");

    // A client that cannot ask its user: the tool runs as before.
    let r = call(
        app,
        false,
        "delete_page",
        json!({ "arguments": { "page_id": other } }),
    )
    .await["result"]
        .clone();
    assert_eq!(r["structuredContent"]["deleted"], true, "{r}");
    assert!(in_trash(app, &other).await);
}
