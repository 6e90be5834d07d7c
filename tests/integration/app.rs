//! The owner's web app (`/app`, `shared/src/http/app`) over HTTP, as a browser without
//! JavaScript uses it, locally and through the Lambda functions: sign-in and its two cookies,
//! the screens, the task checkbox seen over MCP, tokens and OAuth grants revoked and then
//! refused on `/mcp`, the trash, sign out everywhere, and the refusals: a form without its
//! token, from another origin or without the strict cookie changes nothing, and another user's
//! page, grant, token and trash ids are not found. The same screens in headless Chromium are
//! `browser.rs`.

use nib::domain::UserId;
use serde_json::json;

use crate::helpers::{Options, TestApp};
use crate::oauth::{Env, PASSWORD};
pub(crate) use crate::pages::{field, unescape};

/// A browser without JavaScript: its own cookies (session and strict), no redirects followed.
pub(crate) struct Browser {
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
    pub(crate) session: String,
    pub(crate) strict: String,
}

/// The `csrf_token` of the form holding the input `marker` (`back`, `everywhere`): each form
/// has its token before its other fields.
pub(crate) fn token_before(html: &str, marker: &str) -> Option<String> {
    let at = html.find(&format!("name=\"{marker}\""))?;
    let start = html[..at].rfind("name=\"csrf_token\"")?;
    field(&html[start..], "csrf_token")
}

/// Every value of the attribute `attr` in `html` (`data-grant="..."`).
fn attributes(html: &str, attr: &str) -> Vec<String> {
    let marker = format!("{attr}=\"");
    html.match_indices(&marker)
        .filter_map(|(i, _)| {
            let rest = &html[i + marker.len()..];
            Some(unescape(&rest[..rest.find('"')?]))
        })
        .collect()
}

/// The `Set-Cookie` header named `name`, whole.
fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

fn pair(cookie: &str) -> String {
    cookie.split(';').next().unwrap().to_owned()
}

pub(crate) async fn with_password(app: &TestApp, user: &str) {
    let user = UserId::parse(user).unwrap();
    app.app.ensure_user(&user).await.unwrap();
    app.app
        .users()
        .set_password(&user, PASSWORD, true)
        .await
        .unwrap();
}

impl Browser {
    /// Opens `/app` and signs in as a person would: the redirect to sign-in, the form, back to
    /// `/app` with the session cookie (`Lax`, every path) and the strict one (`Strict`, `/app`).
    pub(crate) async fn sign_in(base: &str, user: &str) -> Browser {
        Browser::sign_in_with(base, user, PASSWORD).await
    }

    /// [`Browser::sign_in`] with `password` (the one a first `nib serve` prints).
    pub(crate) async fn sign_in_with(base: &str, user: &str, password: &str) -> Browser {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let r = http.get(format!("{base}/app")).send().await.unwrap();
        assert_eq!(r.status(), 303, "no session: sent to sign in");
        let location = r.headers()["location"].to_str().unwrap().to_owned();
        assert_eq!(location, "/oauth/signin?next=%2Fapp");
        let r = http.get(format!("{base}{location}")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let csrf_cookie = pair(&set_cookie(&r, "nib_csrf").expect("a CSRF cookie"));
        let html = r.text().await.unwrap();
        let r = http
            .post(format!("{base}/oauth/signin"))
            .header("cookie", csrf_cookie)
            .form(&[
                ("next", field(&html, "next").unwrap().as_str()),
                ("csrf_token", field(&html, "csrf_token").unwrap().as_str()),
                ("username", user),
                ("password", password),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303);
        assert_eq!(r.headers()["location"], "/app");
        let session = set_cookie(&r, "nib_session").expect("a session cookie");
        let strict = set_cookie(&r, "nib_change").expect("the strict cookie");
        assert!(
            session.contains("HttpOnly") && session.contains("SameSite=Lax"),
            "{session}"
        );
        assert!(
            strict.contains("HttpOnly")
                && strict.contains("SameSite=Strict")
                && strict.contains("Path=/;"),
            "{strict}"
        );
        assert_eq!(
            pair(&session).split_once('=').unwrap().1,
            pair(&strict).split_once('=').unwrap().1,
            "both cookies name the one session"
        );
        Browser {
            base: base.to_owned(),
            http,
            session: pair(&session),
            strict: pair(&strict),
        }
    }

    /// A GET from this browser: status and body.
    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", format!("{}; {}", self.session, self.strict))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.text().await.unwrap())
    }

    /// A GET that must show a screen: its HTML.
    pub(crate) async fn screen(&self, path: &str) -> String {
        let (status, html) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {html}");
        html
    }

    /// A file uploaded on the upload screen as its script sends it (`accept: application/json`):
    /// the answer's entry for the file (`outcome`, `message`, `page_id`).
    pub(crate) async fn upload_file(&self, name: &str, bytes: &[u8]) -> serde_json::Value {
        self.upload_files(&[(name, bytes)]).await["files"][0].take()
    }

    /// Files uploaded in one request on the upload screen, as its script sends them: the
    /// whole answer (`files`, one entry each).
    pub(crate) async fn upload_files(&self, files: &[(&str, &[u8])]) -> serde_json::Value {
        let page = self.screen("/app/upload").await;
        let token = token_before(&page, "back").unwrap();
        let (kind, body) = multipart(&[("csrf_token", &token), ("back", "/app/upload")], files);
        let r = self
            .http
            .post(format!("{}/app/upload", self.base))
            .header("cookie", format!("{}; {}", self.session, self.strict))
            .header("accept", "application/json")
            .header("content-type", kind)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// A form posted from a page of this site: the strict cookie, our `Origin`, the token of
    /// `page` (a screen's HTML) unless `token` says otherwise.
    pub(crate) async fn post(
        &self,
        path: &str,
        page: &str,
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        let token = token_before(page, "back").expect("the screen has an app form");
        self.post_as(path, fields, Some(&token), true, Some(&self.base))
            .await
    }

    pub(crate) async fn post_as(
        &self,
        path: &str,
        fields: &[(&str, &str)],
        token: Option<&str>,
        strict: bool,
        origin: Option<&str>,
    ) -> reqwest::Response {
        let mut form: Vec<(&str, &str)> = fields.to_vec();
        if let Some(t) = token {
            form.push(("csrf_token", t));
        }
        let cookie = if strict {
            format!("{}; {}", self.session, self.strict)
        } else {
            self.session.clone()
        };
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .form(&form);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        req.send().await.unwrap()
    }
}

/// A task's status as `list_tasks` says (over MCP, with the default user's token).
pub(crate) async fn status_of(app: &TestApp, task: &str) -> String {
    let listed = app
        .call("list_tasks", json!({ "status": "all", "limit": 200 }))
        .await;
    listed["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task_link_id"] == task)
        .map(|t| t["status"].as_str().unwrap().to_owned())
        .expect("the task is listed")
}

async fn the_web_app_serves_its_owner(env: Env) {
    let app = &env.app;
    with_password(app, "default").await;
    with_password(app, "mallory").await;
    let owner = Browser::sign_in(&app.base, "default").await;

    // The pages by day, with the app's headers.
    let r = owner
        .http
        .get(format!("{}/app", app.base))
        .header("cookie", &owner.session)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    for part in [
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    let home = r.text().await.unwrap();
    let page_ids = attributes(&home, "href")
        .into_iter()
        .filter_map(|h| h.strip_prefix("/app/pages/").map(str::to_owned))
        .collect::<Vec<_>>();
    let listed = app.call("list_pages", json!({ "limit": 30 })).await;
    assert_eq!(
        page_ids,
        listed["pages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["page_id"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>(),
        "the pages, newest first, as list_pages has them"
    );

    // A page with an open task: its checkbox is a form.
    let open = app.call("list_tasks", json!({ "status": "open" })).await;
    let task = open["tasks"][0].clone();
    let task_id = task["task_link_id"].as_str().unwrap();
    let page_id = task["source_page_id"].as_str().unwrap();
    let page = owner.screen(&format!("/app/pages/{page_id}")).await;
    let action = format!("/app/tasks/{task_id}");
    assert!(page.contains(&format!("action=\"{action}\"")), "{page}");
    assert!(unescape(&page).contains(task["text"].as_str().unwrap()));
    let back = format!("/app/pages/{page_id}");
    let fields = [("status", "done"), ("back", back.as_str())];

    // Forms that did not come from our page change nothing.
    let token = token_before(&page, "back").unwrap();
    for (why, token, strict, origin) in [
        ("no token", None, true, Some(app.base.as_str())),
        (
            "another session's token",
            Some("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
            true,
            None,
        ),
        (
            "another origin",
            Some(token.as_str()),
            true,
            Some("https://evil.example"),
        ),
        ("no strict cookie", Some(token.as_str()), false, None),
    ] {
        let r = owner.post_as(&action, &fields, token, strict, origin).await;
        assert_eq!(r.status(), 403, "{why}");
        assert_eq!(status_of(app, task_id).await, "todo", "{why}");
    }
    // The checkbox, then the task over MCP.
    let r = owner.post(&action, &page, &fields).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], back.as_str());
    assert_eq!(status_of(app, task_id).await, "done");
    let done = owner.screen("/app/tasks?status=done").await;
    assert!(done.contains(&format!("action=\"{action}\"")));

    // A typed note on that page is marked typed, with its tags and its source linked; the
    // page's ink lines are not marked, and a source that is not an http(s) URL is no link.
    let date = app.call("get_page", json!({ "page_id": page_id })).await["date"].clone();
    for (text, source) in [
        ("Ask about the warranty", "https://example.com/chat/7"),
        ("Check the receipt", "javascript:alert(1)"),
    ] {
        let added = app
            .call(
                "add_note",
                json!({ "date": date, "text": text, "tags": ["Home Repairs"], "source_url": source }),
            )
            .await;
        assert_eq!(added["page_id"], page_id, "{added}");
    }
    let page = owner.screen(&back).await;
    assert_eq!(page.matches("class=\"typed-mark\"").count(), 2, "{page}");
    let plain = unescape(&page);
    let note = &plain[plain.find("Ask about the warranty").unwrap()..];
    let note = &note[..note.find("</li>").unwrap()];
    assert!(note.contains("class=\"typed-mark\""), "{note}");
    assert!(note.contains("#home-repairs"), "{note}");
    assert!(
        note.contains("href=\"https://example.com/chat/7\""),
        "{note}"
    );
    assert!(!plain.contains("href=\"javascript:"), "{page}");
    let ink = &plain[plain.find(task["text"].as_str().unwrap()).unwrap()..];
    assert!(
        !ink[..ink.find("</li>").unwrap()].contains("typed-mark"),
        "an ink line is not typed"
    );

    // Search: hybrid, the query's words marked in the snippets.
    let word = task["text"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .find(|w| w.len() >= 4 && w.chars().all(char::is_alphabetic))
        .unwrap()
        .to_owned();
    let found = owner.screen(&format!("/app/search?q={word}")).await;
    assert!(found.contains("<mark>"), "{found}");
    assert!(found.contains(&format!("/app/pages/{page_id}")), "{found}");

    // A token: created (shown once), used, listed, revoked, refused.
    let account = owner.screen("/app/account").await;
    let r = owner
        .post(
            "/app/account/tokens",
            &account,
            &[
                ("label", "laptop"),
                ("preset", "read"),
                ("back", "/app/account"),
            ],
        )
        .await;
    assert_eq!(r.status(), 200);
    let shown = r.text().await.unwrap();
    assert!(
        shown.contains("<title>Connections · nib</title>"),
        "{shown}"
    );
    let token_secret = shown
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("nib_live_"))
        .expect("the new token is shown")
        .to_owned();
    assert_eq!(
        env.call(&token_secret, "list_pages", json!({})).await.0,
        200
    );
    let account = owner.screen("/app/account").await;
    assert!(!account.contains(&token_secret), "shown only once");
    assert!(account.contains("laptop"));
    // The laptop's row (the test's own token is listed too).
    let token_ids: Vec<String> = account
        .split("data-token=\"")
        .skip(1)
        .filter(|row| row[..row.find("</tr>").unwrap()].contains("laptop"))
        .map(|row| row[..row.find('"').unwrap()].to_owned())
        .collect();
    assert_eq!(token_ids.len(), 1, "{account}");

    // The "no deletes" preset: a token that changes tasks but cannot delete.
    let r = owner
        .post(
            "/app/account/tokens",
            &account,
            &[
                ("label", "assistant"),
                ("preset", "edit"),
                ("back", "/app/account"),
            ],
        )
        .await;
    let shown = r.text().await.unwrap();
    let editor = shown
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|w| w.starts_with("nib_live_"))
        .expect("the new token is shown")
        .to_owned();
    let (status, challenge, _) = env
        .call(&editor, "delete_page", json!({ "page_id": page_id }))
        .await;
    assert_eq!(status, 403, "{challenge}");
    let (status, _, body) = env
        .call(
            &editor,
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "from the no-deletes token" }),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // An OAuth connection: listed with its unverified name and host, revoked, refused.
    let (_, tokens) = env.tokens().await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(env.call(access, "list_pages", json!({})).await.0, 200);
    let account = owner.screen("/app/account").await;
    assert!(account.contains("Test Client") && account.contains("unverified name"));
    let grants = attributes(&account, "data-grant");
    assert_eq!(grants.len(), 1, "{account}");

    // Another user finds none of these ids.
    let mallory = Browser::sign_in(&app.base, "mallory").await;
    assert_eq!(mallory.get(&format!("/app/pages/{page_id}")).await.0, 404);
    let theirs = mallory.screen("/app/account").await;
    assert!(attributes(&theirs, "data-grant").is_empty());
    for path in [
        format!("/app/account/grants/{}/revoke", grants[0]),
        format!("/app/account/tokens/{}/revoke", token_ids[0]),
        format!("/app/tasks/{task_id}"),
    ] {
        let r = mallory
            .post(
                &path,
                &theirs,
                &[("back", "/app/account"), ("status", "todo")],
            )
            .await;
        assert_eq!(r.status(), 404, "{path}");
    }
    assert_eq!(env.call(access, "list_pages", json!({})).await.0, 200);
    assert_eq!(
        env.call(&token_secret, "list_pages", json!({})).await.0,
        200
    );
    assert_eq!(status_of(app, task_id).await, "done");

    // The owner revokes both.
    for path in [
        format!("/app/account/grants/{}/revoke", grants[0]),
        format!("/app/account/tokens/{}/revoke", token_ids[0]),
    ] {
        let r = owner
            .post(&path, &account, &[("back", "/app/account")])
            .await;
        assert_eq!(r.status(), 303, "{path}");
    }
    // (The challenge header is API Gateway's renamed one through the functions: the status.)
    assert_eq!(env.call(access, "list_pages", json!({})).await.0, 401);
    assert_eq!(
        env.call(&token_secret, "list_pages", json!({})).await.0,
        401
    );
    let account = owner.screen("/app/account").await;
    assert!(attributes(&account, "data-grant").is_empty());

    // The trash: a deleted page, its purge date, restored by its owner only.
    app.call("delete_page", json!({ "page_id": page_id })).await;
    let data = owner.screen("/app/data").await;
    assert!(data.contains(&format!("data-id=\"{page_id}\"")), "{data}");
    let restore = format!("/app/data/restore/page/{page_id}");
    let r = mallory
        .post(&restore, &theirs, &[("back", "/app/data")])
        .await;
    assert_eq!(r.status(), 404);
    assert!(!mallory.screen("/app/data").await.contains(page_id));
    let r = owner.post(&restore, &data, &[("back", "/app/data")]).await;
    assert_eq!(r.status(), 303);
    owner.screen(&format!("/app/pages/{page_id}")).await;

    // Sign out everywhere: every browser of the owner is signed out, mallory's is not.
    let second = Browser::sign_in(&app.base, "default").await;
    second.screen("/app").await;
    let account = owner.screen("/app/account").await;
    let signout = token_before(&account, "everywhere").unwrap();
    let r = owner
        .post_as(
            "/oauth/signout",
            &[("everywhere", "1")],
            Some(&signout),
            true,
            None,
        )
        .await;
    assert_eq!(r.status(), 200);
    for b in [&owner, &second] {
        assert_eq!(b.get("/app").await.0, 303, "an old cookie is refused");
    }
    mallory.screen("/app").await;

    // A password change (the authorization server's form): refused without its token or with
    // the wrong current password; then every other browser is signed out, this one goes on.
    let here = Browser::sign_in(&app.base, "default").await;
    let other = Browser::sign_in(&app.base, "default").await;
    let account = here.screen("/app/account").await;
    let token = token_before(&account, "current").unwrap();
    let change = |token: Option<String>, current: &'static str| {
        let token = token.clone();
        let here = &here;
        async move {
            let mut fields = vec![
                ("current", current),
                ("new", "a brand new passphrase"),
                ("repeat", "a brand new passphrase"),
            ];
            let t;
            if let Some(tok) = token {
                t = tok;
                fields.push(("csrf_token", t.as_str()));
            }
            here.post_as("/oauth/password", &fields, None, true, None)
                .await
        }
    };
    assert_eq!(change(None, PASSWORD).await.status(), 403);
    assert_eq!(
        change(Some(token.clone()), "not the password")
            .await
            .status(),
        401
    );
    other.screen("/app").await;
    let r = change(Some(token), PASSWORD).await;
    assert_eq!(r.status(), 200);
    let fresh = Browser {
        base: app.base.clone(),
        http: here.http.clone(),
        session: pair(&set_cookie(&r, "nib_session").unwrap()),
        strict: pair(&set_cookie(&r, "nib_change").unwrap()),
    };
    fresh.screen("/app").await;
    assert_eq!(
        other.get("/app").await.0,
        303,
        "other browsers are signed out"
    );
    assert_eq!(here.get("/app").await.0, 303, "the old session ended too");
}

/// A `multipart/form-data` body of `fields` then `files` (name, bytes), as a browser sends a
/// form, with its boundary.
pub(crate) fn multipart(fields: &[(&str, &str)], files: &[(&str, &[u8])]) -> (String, Vec<u8>) {
    let boundary = "nib-test-boundary-7d1f0c";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    for (file, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Upload with JavaScript off (`nib serve`): the form posts every chosen file at once and the
/// answer lists each file's result; without the form's token nothing is imported.
#[tokio::test]
async fn files_uploaded_without_javascript_are_imported_each_with_its_result() {
    let env = Env::around(
        TestApp::spawn_with(Options {
            import_sample: false,
            ..Options::default()
        })
        .await,
    );
    let app = &env.app;
    with_password(app, "default").await;
    let owner = Browser::sign_in(&app.base, "default").await;
    let page = owner.screen("/app/upload").await;
    assert!(page.contains("enctype=\"multipart/form-data\""));
    let token = token_before(&page, "back").unwrap();
    let files: [(&str, &[u8]); 3] = [
        ("2026-07-01.md", b"## Monday\n- [ ] Call the plumber\n"),
        ("2026-07-02.txt", b"Notes of Tuesday"),
        ("report.docx", b"PK\x03\x04"),
    ];
    let post = |fields: Vec<(&'static str, String)>| {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (kind, body) = multipart(&fields, &files);
        owner
            .http
            .post(format!("{}/app/upload", app.base))
            .header("cookie", format!("{}; {}", owner.session, owner.strict))
            .header("content-type", kind)
            .body(body)
            .send()
    };
    let r = post(vec![("back", "/app/upload".into())]).await.unwrap();
    assert_eq!(r.status(), 403, "no token: nothing read");
    let listed = app.call("list_pages", json!({})).await;
    assert_eq!(listed["pages"], json!([]));
    let r = post(vec![("csrf_token", token), ("back", "/app/upload".into())])
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let html = unescape(&r.text().await.unwrap());
    let row = |name: &str| {
        let at = html.find(&format!("data-name=\"{name}\"")).unwrap();
        html[at..at + html[at..].find("</li>").unwrap()].to_owned()
    };
    assert!(
        row("2026-07-01.md").contains("new page (2 lines, 1 tasks)"),
        "{html}"
    );
    assert!(row("2026-07-02.txt").contains("new page"), "{html}");
    assert!(
        row("report.docx").contains("refused: not a page file"),
        "{html}"
    );
    let listed = app.call("list_pages", json!({})).await;
    assert_eq!(listed["pages"].as_array().unwrap().len(), 2);
}

/// "Delete my account" (`nib serve`): refused unless the user name and the password are typed,
/// then the same deletion as `nib user delete`: the session, the tokens and the notebook are gone, another
/// user's notebook is not touched.
#[tokio::test]
async fn an_owner_deletes_the_account_after_typing_the_user_name() {
    let env = Env::around(TestApp::spawn().await);
    let app = &env.app;
    with_password(app, "carol").await;
    let carol_token = app.token_for("carol", nib::auth::Scope::Write).await;
    let (status, _, created) = env
        .call(
            &carol_token,
            "create_task",
            json!({ "target_date": "2026-07-01", "text": "Water the plants" }),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let carol = Browser::sign_in(&app.base, "carol").await;
    let account = carol.screen("/app/account").await;
    let r = carol
        .post(
            "/app/account/delete",
            &account,
            &[("back", "/app/account"), ("confirm", "default")],
        )
        .await;
    assert_eq!(r.status(), 400, "another name deletes nothing");
    assert_eq!(env.call(&carol_token, "list_pages", json!({})).await.0, 200);
    // The password again: an open session alone deletes nothing (issue 48).
    for password in ["", "not her password"] {
        let r = carol
            .post(
                "/app/account/delete",
                &account,
                &[
                    ("back", "/app/account"),
                    ("confirm", "carol"),
                    ("password", password),
                ],
            )
            .await;
        assert_eq!(r.status(), 403, "{password:?} deletes nothing");
        assert_eq!(env.call(&carol_token, "list_pages", json!({})).await.0, 200);
    }
    assert_eq!(carol.get("/app").await.0, 200, "the session is still there");
    let r = carol
        .post(
            "/app/account/delete",
            &account,
            &[
                ("back", "/app/account"),
                ("confirm", "carol"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(r.status(), 200);
    assert!(set_cookie(&r, "nib_session").is_some_and(|c| c.contains("Max-Age=0")));
    assert_eq!(carol.get("/app").await.0, 303, "the session is gone");
    assert_eq!(env.call(&carol_token, "list_pages", json!({})).await.0, 401);
    let users = app.app.accounts().list().await.unwrap();
    assert!(!users.iter().any(|u| u.user.as_str() == "carol"));
    // The default user's notebook is untouched.
    let listed = app.call("list_pages", json!({})).await;
    assert!(!listed["pages"].as_array().unwrap().is_empty());
}

/// "Delete my account" on AWS: the front, after the same checks, invokes the `account`
/// function (the app operation `delete_account`, which no MCP client reaches). The same answer
/// as `nib serve`'s; then the session and the token are refused, nothing of the user is left in
/// the emulator's table or bucket (every object version included), and another user's items
/// are exactly as they were.
#[tokio::test]
async fn an_owner_deletes_the_account_through_the_functions() {
    let env = Env::around(TestApp::spawn_with(Options::lambda()).await);
    let app = &env.app;
    let config = app.aws_config.clone().unwrap();
    crate::account::version_bucket(&config).await;
    with_password(app, "carol").await;
    let carol = UserId::parse("carol").unwrap();
    let (pages, _) = nib::notebook::group_dir(&crate::helpers::sample_dir()).unwrap();
    let inked = pages.iter().find(|p| p.pdf.is_some()).unwrap();
    app.app
        .notebook()
        .import_files(&carol, inked)
        .await
        .unwrap();
    let carol_token = app.token_for("carol", nib::auth::Scope::Write).await;
    let (status, _, created) = env
        .call(
            &carol_token,
            "create_task",
            json!({ "target_date": "2026-07-01", "text": "Water the plants" }),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let now = app.app.clock.unix();
    let carols = crate::account::aws_remains(&config, now, "carol").await;
    assert!(
        carols.iter().any(|k| k.starts_with("u/carol/")),
        "carol's page image is in the bucket: {carols:?}"
    );
    let defaults = crate::account::aws_remains(&config, now, "default").await;
    assert!(!defaults.is_empty());

    // The operation is the web app's alone: a token cannot call it over MCP.
    let (_, _, called) = env.call(&carol_token, "delete_account", json!({})).await;
    assert!(
        called.get("error").is_some() || called["result"]["isError"] == true,
        "{called}"
    );
    let browser = Browser::sign_in(&app.base, "carol").await;
    let account = browser.screen("/app/account").await;
    assert!(account.contains("id=\"delete-account\""), "{account}");
    let r = browser
        .post(
            "/app/account/delete",
            &account,
            &[("back", "/app/account"), ("confirm", "default")],
        )
        .await;
    assert_eq!(r.status(), 400, "another name deletes nothing");
    let (status, _, listed) = env.call(&carol_token, "list_pages", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        listed["result"]["structuredContent"]["pages"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "the inked page and the task's day: {listed}"
    );

    let r = browser
        .post(
            "/app/account/delete",
            &account,
            &[
                ("back", "/app/account"),
                ("confirm", "carol"),
                ("password", "not her password"),
            ],
        )
        .await;
    assert_eq!(r.status(), 403, "a wrong password deletes nothing");
    assert_eq!(env.call(&carol_token, "list_pages", json!({})).await.0, 200);
    let r = browser
        .post(
            "/app/account/delete",
            &account,
            &[
                ("back", "/app/account"),
                ("confirm", "carol"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(r.status(), 200);
    assert!(set_cookie(&r, "nib_session").is_some_and(|c| c.contains("Max-Age=0")));
    let said = unescape(&r.text().await.unwrap());
    assert!(said.contains("Your account is deleted"), "{said}");
    assert_eq!(browser.get("/app").await.0, 303, "the session is gone");
    assert_eq!(env.call(&carol_token, "list_pages", json!({})).await.0, 401);
    assert_eq!(
        crate::account::aws_remains(&config, now, "carol").await,
        Vec::<String>::new(),
        "nothing of carol in the table or the bucket"
    );
    let users = app.app.accounts().list().await.unwrap();
    assert!(!users.iter().any(|u| u.user.as_str() == "carol"));
    // The default user's items and objects are as they were, and still open.
    assert_eq!(
        crate::account::aws_remains(&config, now, "default").await,
        defaults
    );
    let listed = app.call("list_pages", json!({})).await;
    assert!(!listed["pages"].as_array().unwrap().is_empty());
}

/// The Notion connection in the web app, through the functions (the tasks function holds the
/// Notion client; the stand-in is Notion): a wrong token is refused with Notion's own reason and
/// nothing is stored; the right one connects and tasks are pushed; disconnect forgets it. The
/// app operations behind it are no MCP tools: not listed, not callable with a token.
#[tokio::test]
async fn the_owner_connects_and_disconnects_notion_through_the_functions() {
    let env = Env::around(
        TestApp::spawn_with(Options {
            import_sample: false,
            ..Options::lambda()
        })
        .await,
    );
    let app = &env.app;
    with_password(app, "default").await;
    let stack = app.lambda.clone().unwrap();
    let db = stack.notion.add_task_database();
    let owner = Browser::sign_in(&app.base, "default").await;
    let data = owner.screen("/app/data").await;
    assert!(data.contains("Not connected"), "{data}");
    let r = owner
        .post(
            "/app/data/notion/connect",
            &data,
            &[
                ("back", "/app/data"),
                ("database", db.as_str()),
                ("token", "ntn_not_the_token"),
            ],
        )
        .await;
    assert_eq!(r.status(), 400);
    let said = unescape(&r.text().await.unwrap());
    assert!(said.contains("Notion refused the token"), "{said}");
    assert!(!said.contains("ntn_not_the_token"));
    assert!(owner.screen("/app/data").await.contains("Not connected"));
    let r = owner
        .post(
            "/app/data/notion/connect",
            &data,
            &[
                ("back", "/app/data"),
                ("database", db.as_str()),
                ("token", crate::lambda::NOTION_TOKEN),
            ],
        )
        .await;
    assert_eq!(r.status(), 303);
    let data = owner.screen("/app/data").await;
    assert!(
        data.contains("Tasks are pushed to the Notion database"),
        "{data}"
    );
    assert!(!data.contains(crate::lambda::NOTION_TOKEN));
    let created = app
        .call(
            "create_task",
            json!({ "target_date": "2026-06-20", "text": "Draft the launch post" }),
        )
        .await;
    assert_eq!(created["notion_pushed"], true, "{created}");
    // No MCP client sees or reaches the app operations.
    let (_, listed) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .await;
    let names = crate::helpers::tool_names(&listed);
    assert!(!names.iter().any(|n| n.starts_with("notion_")), "{names:?}");
    let (_, called) = app
        .rpc(json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": { "name": "notion_status", "arguments": {} } }))
        .await;
    assert!(
        called.get("error").is_some() || called["result"]["isError"] == true,
        "{called}"
    );
    assert!(!called.to_string().contains(&db), "{called}");
    let r = owner
        .post(
            "/app/data/notion/disconnect",
            &data,
            &[("back", "/app/data")],
        )
        .await;
    assert_eq!(r.status(), 303);
    assert!(owner.screen("/app/data").await.contains("Not connected"));
}

#[tokio::test]
async fn the_web_app_serves_its_owner_locally() {
    the_web_app_serves_its_owner(Env::around(TestApp::spawn().await)).await;
}

#[tokio::test]
async fn the_web_app_serves_its_owner_through_the_functions() {
    the_web_app_serves_its_owner(Env::around(TestApp::spawn_with(Options::lambda()).await)).await;
}

/// A form of `html` that posts to S3 (its `id`): its action and its hidden fields in order,
/// and whether the file field comes after them.
pub(crate) fn storage_form(html: &str, id: &str) -> (String, Vec<(String, String)>, bool) {
    let start = html.find(&format!("id=\"{id}\"")).expect("the form");
    let start = html[..start].rfind("<form").unwrap();
    let form = &html[start..start + html[start..].find("</form>").unwrap()];
    let action = attributes(form, "action").remove(0);
    let mut fields = Vec::new();
    for (at, _) in form.match_indices("<input type=\"hidden\"") {
        let input = &form[at..at + form[at..].find('>').unwrap()];
        fields.push((
            attributes(input, "name").remove(0),
            attributes(input, "value").remove(0),
        ));
    }
    let file_last = form.rfind("type=\"hidden\"") < form.find("name=\"file\"");
    (action, fields, file_last)
}

/// Posts the form's `fields`, then the file `name` last, to `action` as a browser does
/// (`multipart/form-data`, the file part with its own type); S3's answer, redirects not
/// followed. moto stores the form's `key` as it comes, so the `${filename}` in it is replaced
/// with the file's name here, as S3 does (S3's "Browser-Based Uploads Using POST").
pub(crate) async fn post_to_storage(
    action: &str,
    fields: &[(String, String)],
    name: &str,
    bytes: &[u8],
) -> reqwest::Response {
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| (k.clone(), v.replace("${filename}", name)))
        .collect();
    let boundary = "nib-test-boundary-3e9a41";
    let mut body = Vec::new();
    for (k, v) in &fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n")
                .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .post(action)
        .header(
            "content-type",
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Upload with JavaScript off through the functions: the upload page's form posts one file
/// straight to S3 (a presigned POST for any name under the owner's prefix, its CSP allowing
/// the bucket as a form target), S3 sends the browser back to the app with the object's key,
/// and the page shows "being read" until the ingest function has imported it, then the new
/// page. A PDF that does not parse is refused by ingest with its reason and makes no page
/// (before, ingest kept it as ink without text); a file that is no page file is refused on the
/// page back and ingest leaves it alone.
#[tokio::test]
async fn files_uploaded_without_javascript_on_aws_go_to_storage_and_show_their_result() {
    let env = Env::around(
        TestApp::spawn_with(Options {
            import_sample: false,
            ..Options::lambda()
        })
        .await,
    );
    let app = &env.app;
    with_password(app, "default").await;
    let stack = app.lambda.clone().unwrap();
    let config = app.aws_config.clone().unwrap();
    let owner = Browser::sign_in(&app.base, "default").await;
    let r = owner
        .http
        .get(format!("{}/app/upload", app.base))
        .header("cookie", format!("{}; {}", owner.session, owner.strict))
        .send()
        .await
        .unwrap();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    let page = r.text().await.unwrap();
    let (action, fields, file_last) = storage_form(&page, "upload-form");
    let endpoint = config.endpoint_url.clone().unwrap();
    assert_eq!(action, format!("{endpoint}/{}", config.bucket));
    let origin = endpoint.trim_end_matches('/');
    assert!(
        csp.contains(&format!("form-action 'self' {origin}")),
        "{csp}"
    );
    assert!(file_last, "the file goes after the signed fields: {page}");
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names[..3],
        ["key", "Content-Type", "success_action_redirect"],
        "{names:?}"
    );
    assert!(!names.contains(&"csrf_token"), "S3 refuses unsigned fields");
    // The form's own folder (issue 48 item 10): `uploads/default/form-{id}/`.
    let folder = fields[0]
        .1
        .strip_suffix("${filename}")
        .expect("S3 fills in the file's name")
        .to_owned();
    assert!(folder.starts_with("uploads/default/form-"), "{folder}");

    // A page's text: sent, being read, then the new page.
    let r = post_to_storage(
        &action,
        &fields,
        "2026-07-01.md",
        b"## Monday\n- [ ] Call the plumber\n",
    )
    .await;
    assert_eq!(r.status(), 303, "{:?}", r.text().await);
    let back = r.headers()["location"].to_str().unwrap().to_owned();
    let back = back.strip_prefix(&app.base).expect("back to the app");
    assert!(back.starts_with("/app/upload/sent?"), "{back}");
    let reading = unescape(&owner.screen(back).await);
    assert!(reading.contains("sent, and being read"), "{reading}");
    let again = unescape(
        &attributes(&reading, "href")
            .into_iter()
            .find(|h| h.starts_with("/app/upload/sent?"))
            .expect("a link to look again"),
    );
    let key = format!("{folder}2026-07-01.md");
    let (_, reply) = stack
        .invoke("ingest", &crate::lambda::s3_event(&config.bucket, &key))
        .await;
    assert_eq!(reply["imported"], 1, "{reply}");
    let done = unescape(&owner.screen(&again).await);
    assert!(
        done.contains("upload new") && done.contains("new page"),
        "{done}"
    );
    assert!(done.contains("href=\"/app/pages/"), "{done}");

    // A PDF that does not parse: refused by ingest, with its reason, and no page.
    let r = post_to_storage(
        &action,
        &fields,
        "2026-07-02.pdf",
        b"%PDF-1.7\n1 0 obj << /Type /Catalog >> broken",
    )
    .await;
    assert_eq!(r.status(), 303);
    let back = r.headers()["location"].to_str().unwrap().to_owned();
    let (_, reply) = stack
        .invoke(
            "ingest",
            &crate::lambda::s3_event(&config.bucket, &format!("{folder}2026-07-02.pdf")),
        )
        .await;
    assert_eq!(
        reply,
        json!({ "imported": 0, "rejected": 1, "superseded": 0 })
    );
    let refused = unescape(&owner.screen(back.strip_prefix(&app.base).unwrap()).await);
    assert!(
        refused.contains("refused: the PDF cannot be read"),
        "{refused}"
    );
    // The script's status says the same for an upload made since it signed, and nothing for
    // an upload made later than the one recorded (an earlier upload's result is not this one's).
    let (status, said) = owner
        .get("/app/upload/status?name=2026-07-02.pdf&since=0")
        .await;
    assert_eq!(status, 200, "{said}");
    let said: serde_json::Value = serde_json::from_str(&said).unwrap();
    assert_eq!(said["result"]["outcome"], "refused", "{said}");
    assert!(
        said["result"]["message"]
            .as_str()
            .unwrap()
            .contains("PDF cannot be read"),
        "{said}"
    );
    let later = (std::time::SystemTime::now() + std::time::Duration::from_secs(3600))
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let (_, said) = owner
        .get(&format!(
            "/app/upload/status?name=2026-07-02.pdf&since={later}"
        ))
        .await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&said).unwrap()["result"],
        json!(null)
    );

    // Not a page file: S3 takes it (the policy cannot know the name), the page back refuses
    // it, and ingest leaves it alone.
    let r = post_to_storage(&action, &fields, "report.docx", b"PK\x03\x04").await;
    assert_eq!(r.status(), 303);
    let back = r.headers()["location"].to_str().unwrap().to_owned();
    let refused = unescape(&owner.screen(back.strip_prefix(&app.base).unwrap()).await);
    assert!(refused.contains("refused: not a page file"), "{refused}");
    let (_, reply) = stack
        .invoke(
            "ingest",
            &crate::lambda::s3_event(&config.bucket, &format!("{folder}report.docx")),
        )
        .await;
    assert_eq!(
        reply,
        json!({ "imported": 0, "rejected": 0, "superseded": 0 })
    );

    let listed = app.call("list_pages", json!({})).await;
    let pages = listed["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 1, "{listed}");
    assert_eq!(pages[0]["date"], "2026-07-01");
}

/// A signed form's policy (the base64 `Policy` field, decoded).
fn form_policy(fields: &[(String, String)]) -> serde_json::Value {
    use base64::Engine as _;
    let policy = &fields.iter().find(|(n, _)| n == "Policy").unwrap().1;
    let json = base64::engine::general_purpose::STANDARD
        .decode(policy)
        .unwrap();
    serde_json::from_slice(&json).unwrap()
}

/// A field of a signed form.
fn form_field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    &fields.iter().find(|(n, _)| n == name).unwrap().1
}

/// How long the policy is accepted after it was signed, in seconds: its `expiration` less its
/// `x-amz-date` (both in the policy, so no clock is read here).
fn policy_lifetime(policy: &serde_json::Value) -> i64 {
    use time::format_description::well_known::Rfc3339;
    let conditions = policy["conditions"].as_array().unwrap();
    let d = conditions
        .iter()
        .find_map(|c| c["x-amz-date"].as_str())
        .unwrap();
    let signed = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &d[0..4],
        &d[4..6],
        &d[6..8],
        &d[9..11],
        &d[11..13],
        &d[13..15]
    );
    let signed = time::OffsetDateTime::parse(&signed, &Rfc3339).unwrap();
    let expires =
        time::OffsetDateTime::parse(policy["expiration"].as_str().unwrap(), &Rfc3339).unwrap();
    (expires - signed).whole_seconds()
}

/// The STS session moto made for the access key a form was signed with (moto's
/// `/moto-api/data.json` lists its `AssumedRole`s, the session policy each was given
/// included): `(role ARN, session policy)`.
async fn assumed_session(
    endpoint: &str,
    fields: &[(String, String)],
) -> (String, serde_json::Value) {
    let credential = form_field(fields, "X-Amz-Credential");
    let key_id = credential.split('/').next().unwrap();
    assert_ne!(
        key_id, "testing",
        "signed with the process's own credentials"
    );
    let data: serde_json::Value = reqwest::get(format!(
        "{}/moto-api/data.json",
        endpoint.trim_end_matches('/')
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let session = data["sts"]["AssumedRole"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["access_key_id"] == key_id)
        .unwrap_or_else(|| panic!("no assumed-role session has the key {key_id}"))
        .clone();
    assert_eq!(
        form_field(fields, "X-Amz-Security-Token"),
        session["session_token"].as_str().unwrap(),
        "the form carries the session's token"
    );
    let policy = serde_json::from_str(session["policy"].as_str().expect("a session policy"))
        .expect("the session policy is JSON");
    (session["role_arn"].as_str().unwrap().to_owned(), policy)
}

/// The one S3 resource a session policy lets its credentials put.
fn session_put_resource(policy: &serde_json::Value) -> String {
    let statements = policy["Statement"].as_array().unwrap();
    let puts: Vec<&serde_json::Value> = statements
        .iter()
        .filter(|s| s["Action"] == "s3:PutObject")
        .collect();
    assert_eq!(puts.len(), 1, "{policy}");
    assert!(
        statements
            .iter()
            .all(|s| s["Effect"] == "Allow" && !s["Action"].to_string().contains("s3:*")),
        "{policy}"
    );
    puts[0]["Resource"].as_str().unwrap().to_owned()
}

/// Issue 48 items 9 and 10, through the functions. Each upload is signed as a session of the
/// uploads role (not the mcp role, which may no longer put anything), assumed for that upload
/// with a session policy naming its keys only: the form without script its own folder, the
/// script's page file the user's page keys, the bundle form its exact key. The form without
/// script lives ten minutes (it lived an hour) and has a folder of its own per form (it took
/// any key under `uploads/{user}/`, the bundle key space included). Ingest takes a bundle only
/// as the bundle form sends it: one under `bundles/` of the page form's type is refused unread,
/// and what a page form can write in its folder is never a bundle.
///
/// moto signs and stores but enforces neither POST policies nor session policies, so what S3
/// and IAM would refuse is shown here by the documents they would judge: the form's policy
/// and the session policy moto's STS was sent.
#[tokio::test]
async fn uploads_are_signed_as_narrowed_sessions_with_short_lived_forms_of_their_own() {
    let app = TestApp::spawn_with(Options {
        import_sample: false,
        ..Options::lambda()
    })
    .await;
    with_password(&app, "default").await;
    let stack = app.lambda.clone().unwrap();
    let config = app.aws_config.clone().unwrap();
    let endpoint = config.endpoint_url.clone().unwrap();
    let bucket = &config.bucket;
    let owner = Browser::sign_in(&app.base, "default").await;

    // The form without script: ten minutes, its own folder, a session for that folder only.
    let page = owner.screen("/app/upload").await;
    let (action, fields, _) = storage_form(&page, "upload-form");
    let folder = form_field(&fields, "key")
        .strip_suffix("${filename}")
        .unwrap()
        .to_owned();
    let id = folder
        .strip_prefix("uploads/default/form-")
        .and_then(|rest| rest.strip_suffix('/'))
        .expect("uploads/default/form-{id}/");
    assert_eq!(id.len(), 32, "{folder}");
    let policy = form_policy(&fields);
    assert_eq!(policy_lifetime(&policy), 600, "{policy}");
    assert!(
        policy["conditions"]
            .as_array()
            .unwrap()
            .contains(&json!(["starts-with", "$key", folder])),
        "{policy}"
    );
    let (role, session) = assumed_session(&endpoint, &fields).await;
    assert_eq!(role, crate::lambda::UPLOAD_ROLE_ARN);
    assert_eq!(
        session_put_resource(&session),
        format!("arn:aws:s3:::{bucket}/{folder}*")
    );
    // Another form, another folder and another session.
    let again = owner.screen("/app/upload").await;
    let (_, other, _) = storage_form(&again, "upload-form");
    assert_ne!(form_field(&other, "key"), form_field(&fields, "key"));
    assert_ne!(
        form_field(&other, "X-Amz-Credential"),
        form_field(&fields, "X-Amz-Credential")
    );

    // The script's page file: its exact key, a session for the user's page keys.
    // The script's token is the form's `data-csrf`.
    let token = unescape(&attributes(&page, "data-csrf").remove(0));
    let r = owner
        .post_as(
            "/app/upload/sign",
            &[
                ("back", "/app/upload"),
                ("name", "2026-07-03.md"),
                ("size", "20"),
            ],
            Some(&token),
            true,
            Some(&app.base),
        )
        .await;
    let status = r.status();
    let signed: serde_json::Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{signed}");
    assert_eq!(signed["key"], "uploads/default/2026-07-03.md");
    let script: Vec<(String, String)> = serde_json::from_value(signed["fields"].clone()).unwrap();
    assert_eq!(policy_lifetime(&form_policy(&script)), 900);
    let (_, session) = assumed_session(&endpoint, &script).await;
    assert_eq!(
        session_put_resource(&session),
        format!("arn:aws:s3:::{bucket}/uploads/default/*")
    );

    // The bundle form: ten minutes, its exact key, a session for that key only.
    let data = owner.screen("/app/data").await;
    let (bundle_action, bundle_fields, _) = storage_form(&data, "import-storage");
    let bundle_key = form_field(&bundle_fields, "key").to_owned();
    assert!(
        bundle_key.starts_with("uploads/default/bundles/"),
        "{bundle_key}"
    );
    let policy = form_policy(&bundle_fields);
    assert_eq!(policy_lifetime(&policy), 600, "{policy}");
    assert!(
        policy["conditions"]
            .as_array()
            .unwrap()
            .contains(&json!(["eq", "$key", bundle_key])),
        "{policy}"
    );
    let (_, session) = assumed_session(&endpoint, &bundle_fields).await;
    assert_eq!(
        session_put_resource(&session),
        format!("arn:aws:s3:::{bucket}/{bundle_key}")
    );

    // A page form whose key field is changed to a bundle's key (what S3 and the session
    // policy refuse on AWS; moto stores it): ingest refuses it unread, as not the bundle
    // form's (it has the page form's type), and records why.
    let forged_key = "uploads/default/bundles/forged.zip";
    let forged: Vec<(String, String)> = fields
        .iter()
        .map(|(n, v)| {
            let v = if n == "key" {
                forged_key.to_owned()
            } else {
                v.clone()
            };
            (n.clone(), v)
        })
        .collect();
    let r = post_to_storage(&action, &forged, "notebook.nib.zip", b"PK\x03\x04 a bundle").await;
    assert!(
        r.status().is_success() || r.status() == 303,
        "{:?}",
        r.status()
    );
    let (_, reply) = stack
        .invoke("ingest", &crate::lambda::s3_event(bucket, forged_key))
        .await;
    assert_eq!(
        reply,
        json!({ "imported": 0, "rejected": 1, "superseded": 0 })
    );
    let (status, said) = owner.get("/app/data/import/sent?id=forged").await;
    let said = unescape(&said);
    assert_eq!(status, 422, "a refused import");
    assert!(
        said.contains("Nothing was imported: not sent through the bundle form"),
        "{said}"
    );

    // What the page form may write in its own folder is never a bundle, nor is a page file
    // under `bundles/` a page: ingest leaves both alone.
    for (key, name) in [
        (format!("{folder}bundles/x.zip"), "x.zip"),
        (
            "uploads/default/bundles/2026-07-04.md".to_owned(),
            "2026-07-04.md",
        ),
    ] {
        let mut forged = fields.clone();
        forged[0].1 = key.clone();
        let r = post_to_storage(&action, &forged, name, b"## Friday\n- [ ] Call\n").await;
        assert!(r.status().is_success() || r.status() == 303, "{key}");
        let (_, reply) = stack
            .invoke("ingest", &crate::lambda::s3_event(bucket, &key))
            .await;
        assert_eq!(
            reply,
            json!({ "imported": 0, "rejected": 0, "superseded": 0 }),
            "{key}"
        );
    }

    // The bundle form itself still reaches the import (its bytes are no bundle: refused as
    // damaged, by the import, not by the form check).
    let r = post_to_storage(
        &bundle_action,
        &bundle_fields,
        "n.zip",
        b"PK\x03\x04 a bundle",
    )
    .await;
    assert_eq!(r.status(), 303);
    let (_, reply) = stack
        .invoke("ingest", &crate::lambda::s3_event(bucket, &bundle_key))
        .await;
    assert_eq!(reply["rejected"], 1, "{reply}");
    let id = bundle_key
        .strip_prefix("uploads/default/bundles/")
        .and_then(|k| k.strip_suffix(".zip"))
        .unwrap();
    let (status, said) = owner.get(&format!("/app/data/import/sent?id={id}")).await;
    let said = unescape(&said);
    assert_eq!(status, 422, "a refused import");
    assert!(
        said.contains("Nothing was imported: the bundle is damaged")
            && !said.contains("bundle form"),
        "{said}"
    );

    let listed = app.call("list_pages", json!({})).await;
    assert_eq!(listed["pages"], json!([]), "{listed}");
}

/// Issue 48: on an https public URL every cookie is `__Host-` prefixed, with `Secure`,
/// `Path=/` and no `Domain` (what browsers require of the prefix), so a sibling subdomain
/// cannot plant one: a plain-named session cookie is not a session there. The requests go
/// straight to the router, which serves `https://nib.example` as the TLS front would.
#[tokio::test]
async fn cookies_are_host_prefixed_on_https() {
    use tower::ServiceExt;

    let app = TestApp::spawn_empty().await;
    with_password(&app, "default").await;
    let public = "https://nib.example";
    let send = |req: axum::http::request::Builder, body: String| {
        let router = app
            .app
            .router(nib::http::HttpConfig::local(public.to_owned()));
        let mut req = req.body(axum::body::Body::from(body)).unwrap();
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                40000,
            ))));
        async move {
            let r = router.oneshot(req).await.unwrap();
            let status = r.status().as_u16();
            let cookies: Vec<String> = r
                .headers()
                .get_all("set-cookie")
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect();
            let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
            (status, cookies, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let named = |cookies: &[String], name: &str| -> String {
        let c = cookies
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {cookies:?}"))
            .clone();
        assert!(
            c.contains("; Secure") && c.contains("; Path=/;") && !c.contains("Domain"),
            "{c}"
        );
        pair(&c)
    };

    let (status, cookies, html) = send(
        axum::http::Request::get("/oauth/signin?next=%2Fapp"),
        String::new(),
    )
    .await;
    assert_eq!(status, 200);
    let csrf = named(&cookies, "__Host-nib_csrf");
    let form: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("next", &field(&html, "next").unwrap())
        .append_pair("csrf_token", &field(&html, "csrf_token").unwrap())
        .append_pair("username", "default")
        .append_pair("password", PASSWORD)
        .finish();
    let (status, cookies, _) = send(
        axum::http::Request::post("/oauth/signin")
            .header("cookie", &csrf)
            .header("origin", public)
            .header("content-type", "application/x-www-form-urlencoded"),
        form,
    )
    .await;
    assert_eq!(status, 303, "{cookies:?}");
    let session = named(&cookies, "__Host-nib_session");
    let strict = named(&cookies, "__Host-nib_change");

    let (status, _, _) = send(
        axum::http::Request::get("/app").header("cookie", format!("{session}; {strict}")),
        String::new(),
    )
    .await;
    assert_eq!(status, 200, "the prefixed session is the session");
    // The same id under the plain name (what a sibling subdomain could set) is none.
    let planted = session.trim_start_matches("__Host-");
    let (status, _, _) = send(
        axum::http::Request::get("/app").header("cookie", planted),
        String::new(),
    )
    .await;
    assert_eq!(status, 303, "a plain-named cookie is no session on https");
}

/// Issue 48: the page list names each page as a person would, by its heading or first line
/// (`list_pages`' `title`), and by its date only when it has no text.
#[tokio::test]
async fn the_page_list_names_pages_by_heading_or_first_line() {
    let app = TestApp::spawn().await;
    with_password(&app, "default").await;
    let owner = Browser::sign_in(&app.base, "default").await;
    let home = unescape(&owner.screen("/app").await);
    let link = |page_id: &str| {
        let at = home
            .find(&format!("href=\"/app/pages/{page_id}\">"))
            .unwrap_or_else(|| panic!("{page_id} listed: {home}"));
        let rest = &home[at..];
        let start = rest.find('>').unwrap() + 1;
        rest[start..rest.find("</a>").unwrap()].to_owned()
    };
    assert_eq!(
        link(&app.page_of("2026-06-18").await),
        "Met with Dana about the roadmap."
    );
    assert_eq!(
        link(&app.page_of("2026-06-19").await),
        "Tasks",
        "its heading"
    );
    assert_eq!(
        link(&app.page_of("2026-06-20").await),
        "Page of 2026-06-20",
        "ink without text"
    );
    let listed = app.call("list_pages", json!({ "to": "2026-06-18" })).await;
    assert_eq!(
        listed["pages"][0]["title"], "Met with Dana about the roadmap.",
        "{listed}"
    );
}

/// Issue 48 item 1: a small PDF whose content stream inflates past the per-stream cap is
/// refused as damaged, by name, before any PDF library inflates it, and nothing is kept; one
/// under the cap is a page. (Before, the PDF libraries inflated it whole on a request worker:
/// 1.5 MB took the server to 1.7 GB.) `nib import` refuses it the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_that_inflates_past_its_cap_is_refused_by_name_and_nothing_is_kept() {
    use std::io::Read as _;
    let cap = nib::ocr::raster::MAX_PDF_STREAM_BYTES as usize;
    let bomb = nib_testkit::pdf::flate_bomb(cap + (1 << 20));
    assert!(bomb.len() < 1 << 20, "small: {}", bomb.len());
    // It is what it claims: its stream inflates past the cap.
    let start = bomb.windows(7).position(|w| w == b"stream\n").unwrap() + 7;
    let mut inflated = 0u64;
    let mut decoder = flate2::read::ZlibDecoder::new(&bomb[start..]);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = decoder.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        inflated += n as u64;
    }
    assert!(inflated > cap as u64, "{inflated}");
    let small = nib_testkit::pdf::flate_bomb(1 << 20);

    let env = Env::around(
        TestApp::spawn_with(Options {
            import_sample: false,
            ..Options::default()
        })
        .await,
    );
    let app = &env.app;
    with_password(app, "default").await;
    let owner = Browser::sign_in(&app.base, "default").await;
    let answer = owner
        .upload_files(&[("2026-07-03.pdf", &bomb), ("2026-07-04.pdf", &small)])
        .await;
    let files = answer["files"].as_array().unwrap();
    let of = |name: &str| files.iter().find(|f| f["name"] == name).unwrap().clone();
    let refused = of("2026-07-03.pdf");
    assert_eq!(refused["outcome"], "refused", "{answer}");
    let why = refused["message"].as_str().unwrap();
    assert!(
        why.contains("damaged") && why.contains("MiB"),
        "a clear reason: {why}"
    );
    assert_eq!(of("2026-07-04.pdf")["outcome"], "new", "{answer}");
    let listed = app.call("list_pages", json!({})).await;
    let dates: Vec<_> = listed["pages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["date"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(dates, ["2026-07-04"], "nothing of the refused PDF is kept");

    // `nib import` names the file and the reason too.
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("2026-07-03.pdf"), &bomb).unwrap();
    let out = std::process::Command::new(crate::helpers::nib_exe())
        .arg("--data-dir")
        .arg(data.path())
        .args(["import", "--ocr", "off"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("2026-07-03.pdf") && l.contains("damaged")),
        "{stderr}"
    );
}
