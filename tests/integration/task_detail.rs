//! `get_task` (a task's pages and status history) and `link_tasks` / `unlink_tasks` over the
//! sample notebook plus pages written by each test.
//!
//! `task_detail_tests!` declares the tests over a back end: here over the embedded one, in
//! `aws.rs` over DynamoDB/S3/KMS on the emulator and in `lambda.rs` through the functions.

use nib::auth::Scope;
use nib::domain::UserId;
use serde_json::{Value, json};

use crate::helpers::TestApp;

macro_rules! task_detail_tests {
    ($options:expr) => {
        $crate::task_detail::task_detail_tests!(@each $options;
            the_history_says_who_changed_a_task_a_named_client_or_a_page,
            linked_tasks_reconcile_as_one_and_unlinking_gives_back_two,
        );
    };
    (@each $options:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let app = $crate::helpers::TestApp::spawn_with($options).await;
                $crate::task_detail::$name(&app).await;
            }
        )*
    };
}
pub(crate) use task_detail_tests;

mod local {
    super::task_detail_tests!(crate::helpers::Options::default());
}

/// Imports `md` as the page file `{date}.md` of the default user (again: a re-import of that
/// page), as `nib import` does; its page id.
async fn import(app: &TestApp, date: &str, md: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{date}.md")), md).unwrap();
    let (pages, _) = nib::notebook::group_dir(dir.path()).unwrap();
    let user = UserId::parse("default").unwrap();
    app.app
        .notebook()
        .import_files(&user, &pages[0])
        .await
        .unwrap()
        .page_id
        .to_string()
}

/// The id of the task listed (status `all`) with this text.
async fn task_id(app: &TestApp, text: &str) -> String {
    let all = app
        .call("list_tasks", json!({ "status": "all", "limit": 200 }))
        .await;
    all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["text"] == text)
        .unwrap_or_else(|| panic!("no task {text:?} in {all}"))["task_link_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The tasks listed (status `all`) among `texts`, as `text status`.
async fn listed(app: &TestApp, texts: &[&str]) -> Vec<String> {
    let all = app
        .call("list_tasks", json!({ "status": "all", "limit": 200 }))
        .await;
    all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| texts.contains(&t["text"].as_str().unwrap()))
        .map(|t| {
            format!(
                "{} {}",
                t["text"].as_str().unwrap(),
                t["status"].as_str().unwrap()
            )
        })
        .collect()
}

/// A token of the default user with `scope`, labelled `label` (the client name it records).
async fn labelled(app: &TestApp, scope: Scope, label: &str) -> String {
    app.app
        .tokens
        .create(
            &UserId::parse("default").unwrap(),
            scope,
            Some(label.into()),
        )
        .await
        .unwrap()
        .token
}

/// Each history entry as `status kind detail`.
fn history(task: &Value) -> Vec<String> {
    task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let by = &c["by"];
            let detail = match by["kind"].as_str().unwrap() {
                "tool" => format!(
                    "{} {}",
                    by["tool"].as_str().unwrap(),
                    by["client"].as_str().unwrap_or("-")
                ),
                "link" => by["tool"].as_str().unwrap().to_owned(),
                _ => by["date"].as_str().unwrap().to_owned(),
            };
            format!(
                "{} {} {detail}",
                c["status"].as_str().unwrap(),
                by["kind"].as_str().unwrap()
            )
        })
        .collect()
}

/// Each page line of a task as `date line_text page_status`.
fn pages(task: &Value) -> Vec<String> {
    task["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            format!(
                "{} {} {}",
                l["date"].as_str().unwrap(),
                l["line_text"].as_str().unwrap(),
                l["page_status"].as_str().unwrap()
            )
        })
        .collect()
}

/// A tool call by another user's token: its error text.
async fn as_other_user(app: &TestApp, tool: &str, args: Value) -> String {
    let other = app.token_for("someone-else", Scope::Write).await;
    let r = app.call_raw(&other, tool, args).await;
    assert_eq!(r["isError"], true, "{tool}: {r}");
    r["content"][0]["text"].as_str().unwrap().to_owned()
}

pub async fn the_history_says_who_changed_a_task_a_named_client_or_a_page(app: &TestApp) {
    let first = import(app, "2026-07-01", "## Tasks\n- [ ] Call the plumber\n").await;
    let second = import(app, "2026-07-02", "## Tasks\n- [ ] Call the plumber.\n").await;
    let id = task_id(app, "Call the plumber").await;
    // Ticked on the later page, by a re-import of that page.
    import(app, "2026-07-02", "## Tasks\n- [x] Call the plumber.\n").await;
    // Opened again by a client named on its token.
    let claude = labelled(app, Scope::Edit, "Claude").await;
    let r = app
        .call_raw(
            &claude,
            "update_task_status",
            json!({ "task_link_id": id, "status": "todo" }),
        )
        .await;
    assert_eq!(r["isError"], false, "{r}");

    let task = app.call("get_task", json!({ "task_link_id": id })).await;
    assert_eq!(task["task_link_id"], id.as_str());
    assert_eq!(task["text"], "Call the plumber");
    assert_eq!(task["status"], "todo");
    assert_eq!(task["first_seen_date"], "2026-07-01");
    assert_eq!(task["notion_url"], Value::Null);
    assert_eq!(
        pages(&task),
        [
            "2026-07-01 Call the plumber open",
            "2026-07-02 Call the plumber. done"
        ]
    );
    assert_eq!(task["pages"][0]["page_id"], first.as_str());
    assert_eq!(task["pages"][1]["page_id"], second.as_str());
    assert_eq!(
        history(&task),
        [
            "todo page 2026-07-01",
            "done page 2026-07-02",
            "todo tool update_task_status Claude"
        ]
    );
    assert_eq!(task["history"][1]["by"]["page_id"], second.as_str());
    assert_eq!(task["history_truncated"], 0);
    assert!(
        task["history"][2]["summary"]
            .as_str()
            .unwrap()
            .contains("update_task_status by \"Claude\""),
        "{task}"
    );

    // Done again by the tool, then the page that ticked it goes to the trash and comes back:
    // neither changes the status (the update is later than both pages).
    app.call(
        "update_task_status",
        json!({ "task_link_id": id, "status": "done" }),
    )
    .await;
    app.call("delete_page", json!({ "page_id": second })).await;
    app.call("restore_page", json!({ "page_id": second })).await;
    let task = app.call("get_task", json!({ "task_link_id": id })).await;
    assert_eq!(history(&task).len(), 4, "{task}");
    assert_eq!(task["status"], "done");

    // A task whose status only its pages decide: the ticked page's deletion and restore are
    // recorded as such.
    import(app, "2026-07-03", "## Tasks\n- [ ] Water the ferns\n").await;
    let ticked = import(app, "2026-07-04", "## Tasks\n- [x] Water the ferns\n").await;
    let ferns = task_id(app, "Water the ferns").await;
    app.call("delete_page", json!({ "page_id": ticked })).await;
    app.call("restore_page", json!({ "page_id": ticked })).await;
    let task = app.call("get_task", json!({ "task_link_id": ferns })).await;
    assert_eq!(
        history(&task),
        [
            "todo page 2026-07-03",
            "done page 2026-07-04",
            "todo page_deleted 2026-07-04",
            "done page_restored 2026-07-04"
        ]
    );

    // Another user's task is not found; a made-up one neither.
    let error = as_other_user(app, "get_task", json!({ "task_link_id": id })).await;
    assert!(error.contains("not found"), "{error}");
    let missing = app
        .call_error(
            "get_task",
            json!({ "task_link_id": "01890000-0000-7000-8000-000000000000" }),
        )
        .await;
    assert_eq!(missing, error);
}

pub async fn linked_tasks_reconcile_as_one_and_unlinking_gives_back_two(app: &TestApp) {
    let texts = ["call dentist", "Call the dentist re: filling"];
    import(app, "2026-07-01", "## Tasks\n- [ ] call dentist\n").await;
    let later = import(
        app,
        "2026-07-03",
        "## Tasks\n- [ ] Call the dentist re: filling\n",
    )
    .await;
    let kept = task_id(app, texts[0]).await;
    let merged = task_id(app, texts[1]).await;

    // Another user cannot link them (nor learn that they exist).
    let error = as_other_user(
        app,
        "link_tasks",
        json!({ "task_link_id": kept, "same_as": merged }),
    )
    .await;
    assert!(error.contains("not found"), "{error}");

    let r = app
        .call(
            "link_tasks",
            json!({ "task_link_id": kept, "same_as": merged }),
        )
        .await;
    assert_eq!(r["changed"], true, "{r}");
    assert_eq!(listed(app, &texts).await, ["call dentist todo"]);
    let task = app.call("get_task", json!({ "task_link_id": kept })).await;
    assert_eq!(
        pages(&task),
        [
            "2026-07-01 call dentist open",
            "2026-07-03 Call the dentist re: filling open"
        ]
    );
    // The later page's line names the kept task.
    let page = app.call("get_page", json!({ "page_id": later })).await;
    let line = page["structure_json"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["text"] == texts[1])
        .unwrap()
        .clone();
    assert_eq!(line["task_link_id"], kept.as_str());
    // Linking again changes nothing.
    let again = app
        .call(
            "link_tasks",
            json!({ "task_link_id": kept, "same_as": merged }),
        )
        .await;
    assert_eq!(again["changed"], false);

    // Ticking the other wording on a re-import of its page completes the one task.
    import(
        app,
        "2026-07-03",
        "## Tasks\n- [x] Call the dentist re: filling\n",
    )
    .await;
    assert_eq!(listed(app, &texts).await, ["call dentist done"]);
    let task = app.call("get_task", json!({ "task_link_id": kept })).await;
    assert_eq!(task["completed_date"], "2026-07-03");
    assert_eq!(
        history(&task),
        [
            "todo page 2026-07-01",
            "todo link link_tasks",
            "done page 2026-07-03"
        ]
    );

    // Unlinking gives back two tasks, each reconciled from its own lines.
    let r = app
        .call(
            "unlink_tasks",
            json!({ "task_link_id": kept, "same_as": merged }),
        )
        .await;
    assert_eq!(r["changed"], true, "{r}");
    let mut two = listed(app, &texts).await;
    two.sort();
    assert_eq!(
        two,
        ["Call the dentist re: filling done", "call dentist todo"]
    );
    let back = app
        .call("get_task", json!({ "task_link_id": merged }))
        .await;
    assert_eq!(
        pages(&back),
        ["2026-07-03 Call the dentist re: filling done"]
    );
    let task = app.call("get_task", json!({ "task_link_id": kept })).await;
    assert_eq!(pages(&task), ["2026-07-01 call dentist open"]);
    // A re-import of the page keeps the line on its own task again.
    import(
        app,
        "2026-07-03",
        "## Tasks\n- [x] Call the dentist re: filling\n",
    )
    .await;
    assert_eq!(task_id(app, texts[1]).await, merged);
    let error = as_other_user(
        app,
        "unlink_tasks",
        json!({ "task_link_id": kept, "same_as": merged }),
    )
    .await;
    assert!(error.contains("not found"), "{error}");
}
