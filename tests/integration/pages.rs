//! Page links: every page has a stable URL (`{public_url}/pages/{id}`, the `url` of `search`
//! and `fetch`), and opening it in a browser shows the page to its owner after sign-in, locally
//! and through the Lambda functions (front + pages + oauth behind the API Gateway stand-in).

use nib::domain::UserId;
use serde_json::{Value, json};

use crate::helpers::{Options, TestApp};

const PASSWORD: &str = "correct horse battery staple";

/// A browser that does not follow redirects, so each hop can be checked.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// `html` with the entities an HTML escaper writes turned back into characters.
pub(crate) fn unescape(html: &str) -> String {
    [
        ("&#34;", "\""),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&#x27;", "'"),
        ("&#60;", "<"),
        ("&lt;", "<"),
        ("&#62;", ">"),
        ("&gt;", ">"),
        ("&#47;", "/"),
        ("&#x2f;", "/"),
        ("&#38;", "&"),
        ("&amp;", "&"),
    ]
    .iter()
    .fold(html.to_owned(), |s, (from, to)| s.replace(from, to))
}

/// The value of the hidden input `name` in `html`.
pub(crate) fn field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let rest = &html[html.find(&marker)? + marker.len()..];
    Some(unescape(&rest[..rest.find('"')?]))
}

/// `name=value` of a `Set-Cookie` named `name`.
fn set_cookie(r: &reqwest::Response, name: &str) -> Option<String> {
    r.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_owned())
}

async fn with_password(app: &TestApp, user: &str) {
    let user = UserId::parse(user).unwrap();
    app.app.ensure_user(&user).await.unwrap();
    app.app
        .users()
        .set_password(&user, PASSWORD, true)
        .await
        .unwrap();
}

/// Follows a page link as a person would: the redirect to sign-in, the form, the password, the
/// redirect back. Returns the session cookie.
async fn sign_in(app: &TestApp, page_url: &str, user: &str, password: &str) -> Result<String, u16> {
    let http = browser();
    let r = http.get(page_url).send().await.unwrap();
    assert_eq!(r.status(), 303, "no session: sent to sign in");
    let location = r.headers()["location"].to_str().unwrap().to_owned();
    assert!(
        location.starts_with("/oauth/signin?next=%2Fpages%2F"),
        "{location}"
    );
    let r = http
        .get(format!("{}{location}", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let csrf_cookie = set_cookie(&r, "nib_csrf").expect("a CSRF cookie");
    let html = r.text().await.unwrap();
    let csrf = field(&html, "csrf_token").expect("a csrf_token field");
    let next = field(&html, "next").expect("a next field");
    assert_eq!(format!("{}{next}", app.base), page_url);
    let r = http
        .post(format!("{}/oauth/signin", app.base))
        .header("cookie", &csrf_cookie)
        .form(&[
            ("next", next.as_str()),
            ("csrf_token", csrf.as_str()),
            ("username", user),
            ("password", password),
        ])
        .send()
        .await
        .unwrap();
    if r.status() != 303 {
        assert!(
            set_cookie(&r, "nib_session").is_none(),
            "no session on failure"
        );
        return Err(r.status().as_u16());
    }
    assert_eq!(r.headers()["location"], next.as_str());
    let session = set_cookie(&r, "nib_session").expect("a session cookie");
    let attributes = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    // Path=/: /oauth/authorize reads it too; Lax: a citation link from another site carries it.
    assert!(
        attributes.contains("HttpOnly")
            && attributes.contains("Path=/;")
            && attributes.contains("SameSite=Lax"),
        "{attributes}"
    );
    let id = session.strip_prefix("nib_session=").unwrap();
    assert!(
        id.len() >= 22 && !id.contains('.'),
        "a random id (>= 128 bits), not a token: {id}"
    );
    Ok(session)
}

/// Posts the page's sign-out form with this cookie and token.
async fn sign_out(app: &TestApp, session: &str, token: Option<&str>) -> reqwest::Response {
    let form: Vec<(&str, &str)> = token.map(|t| ("csrf_token", t)).into_iter().collect();
    browser()
        .post(format!("{}/oauth/signout", app.base))
        .header("cookie", session)
        .form(&form)
        .send()
        .await
        .unwrap()
}

async fn open(page_url: &str, session: &str) -> reqwest::Response {
    browser()
        .get(page_url)
        .header("cookie", session)
        .send()
        .await
        .unwrap()
}

/// `search` and `fetch` answer a string `url` for every page, ink or not: the page's own
/// link, the same in both tools, and not a signed URL that expires.
#[tokio::test]
async fn search_and_fetch_give_every_page_its_stable_link() {
    for options in [Options::default(), Options::aws()] {
        let app = TestApp::spawn_with(options).await;
        let results = app.call("search", json!({ "query": "API spec" })).await;
        let results = results["results"].as_array().unwrap().clone();
        assert!(!results.is_empty());
        for r in &results {
            let id = r["id"].as_str().unwrap();
            assert_eq!(r["url"], json!(format!("{}/pages/{id}", app.base)), "{r}");
            let page = app.call("fetch", json!({ "id": id })).await;
            assert_eq!(page["url"], r["url"]);
        }
        // The page tools carry the same link as page_url.
        let link = |id: &Value| json!(format!("{}/pages/{}", app.base, id.as_str().unwrap()));
        let listed = app.call("list_pages", json!({})).await;
        for p in listed["pages"].as_array().unwrap() {
            assert_eq!(p["page_url"], link(&p["page_id"]), "{p}");
        }
        let found = app
            .call("search_pages", json!({ "query": "API spec" }))
            .await;
        for h in found["results"].as_array().unwrap() {
            assert_eq!(h["page_url"], link(&h["page_id"]), "{h}");
        }
        let page = app
            .call("get_page", json!({ "page_id": results[0]["id"] }))
            .await;
        assert_eq!(page["page_url"], results[0]["url"]);
        // A page without ink has a link too (it used to be null).
        let inkless = app.page_of("2026-06-16").await;
        let page = app.call("fetch", json!({ "id": inkless })).await;
        assert_eq!(page["url"], json!(format!("{}/pages/{inkless}", app.base)));
    }
}

async fn page_link_shows_the_page_to_its_owner(app: TestApp) {
    with_password(&app, "default").await;
    let page_id = app.page_of("2026-06-18").await;
    let url = format!("{}/pages/{page_id}", app.base);
    let fetched = app.call("fetch", json!({ "id": page_id })).await;
    assert_eq!(
        fetched["url"],
        json!(url),
        "the link the class function makes"
    );

    // A wrong password gets the form again, and no session.
    assert_eq!(sign_in(&app, &url, "default", "wrong").await, Err(401));

    let session = sign_in(&app, &url, "default", PASSWORD).await.unwrap();
    let r = open(&url, &session).await;
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("script-src"),
        "{csp}"
    );
    let html = r.text().await.unwrap();
    let shown = unescape(&html);
    let page = app.call("get_page", json!({ "page_id": page_id })).await;
    let lines = page["structure_json"]["lines"].as_array().unwrap();
    assert!(!lines.is_empty());
    for line in lines {
        let text = line["text"].as_str().unwrap();
        assert!(shown.contains(text), "the page shows {text:?}");
    }
    assert!(html.contains("<img class=\"ink\""), "the page image");
    assert!(!html.contains("<script"), "no JavaScript");

    // A tampered session is no session.
    let tampered = format!("{session}x");
    assert_eq!(open(&url, &tampered).await.status(), 303);
    // An access token in the cookie is no session either, nor an id nobody issued.
    let r = open(&url, &format!("nib_session={}", app.token)).await;
    assert_eq!(r.status(), 303);
    let forged = format!("nib_session={}", "A".repeat(43));
    assert_eq!(open(&url, &forged).await.status(), 303);

    // Another user's session: the same 404 as a page that does not exist.
    with_password(&app, "other").await;
    let theirs = sign_in(&app, &url, "other", PASSWORD).await.unwrap();
    let r = open(&url, &theirs).await;
    assert_eq!(r.status(), 404);
    let missing = format!("{}/pages/{}", app.base, uuid::Uuid::now_v7());
    assert_eq!(open(&missing, &session).await.status(), 404);
    assert_eq!(
        open(&format!("{}/pages/not-a-page", app.base), &session)
            .await
            .status(),
        404
    );
}

/// Sessions are kept in the store, so they end: sign-out deletes the one it is posted with (its
/// cookie is refused from then on, the user's other sessions live on), a password change ends
/// every session of the user (not another user's), and one user's session never opens
/// another's page.
async fn page_sessions_end_at_sign_out_and_password_change(app: TestApp) {
    with_password(&app, "default").await;
    with_password(&app, "other").await;
    let page_id = app.page_of("2026-06-18").await;
    let url = format!("{}/pages/{page_id}", app.base);
    let first = sign_in(&app, &url, "default", PASSWORD).await.unwrap();
    let second = sign_in(&app, &url, "default", PASSWORD).await.unwrap();
    let theirs = sign_in(&app, &url, "other", PASSWORD).await.unwrap();
    assert_ne!(first, second);

    let r = open(&url, &first).await;
    assert_eq!(r.status(), 200);
    let html = r.text().await.unwrap();
    assert!(
        html.contains("action=\"/oauth/signout\""),
        "a sign-out form"
    );
    let token = field(&html, "csrf_token").expect("the sign-out form's token");

    // Without the form's token, or with another session's, nothing ends.
    assert_eq!(sign_out(&app, &first, None).await.status(), 403);
    assert_eq!(sign_out(&app, &second, Some(&token)).await.status(), 403);
    assert_eq!(open(&url, &first).await.status(), 200);
    assert_eq!(open(&url, &second).await.status(), 200);

    let r = sign_out(&app, &first, Some(&token)).await;
    assert_eq!(r.status(), 200);
    let cleared = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cleared.starts_with("nib_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    // The old cookie, kept by whoever copied it, is refused: back to sign-in.
    assert_eq!(open(&url, &first).await.status(), 303);
    assert_eq!(open(&url, &second).await.status(), 200, "the other session");

    // Another user's session: valid (the page is not theirs: 404, not a sign-in) and no key
    // to this user's pages.
    assert_eq!(open(&url, &theirs).await.status(), 404);

    // A password change ends every session of that user, and only theirs.
    let user = UserId::parse("default").unwrap();
    app.app
        .users()
        .set_password(&user, "a brand new passphrase", false)
        .await
        .unwrap();
    assert_eq!(open(&url, &second).await.status(), 303);
    assert_eq!(open(&url, &theirs).await.status(), 404, "still signed in");
    let again = sign_in(&app, &url, "default", "a brand new passphrase")
        .await
        .unwrap();
    assert_eq!(open(&url, &again).await.status(), 200);
}

#[tokio::test]
async fn page_sessions_end_at_sign_out_and_password_change_locally() {
    page_sessions_end_at_sign_out_and_password_change(TestApp::spawn().await).await;
}

#[tokio::test]
async fn page_sessions_end_through_the_lambda_functions() {
    page_sessions_end_at_sign_out_and_password_change(TestApp::spawn_with(Options::lambda()).await)
        .await;
}

#[tokio::test]
async fn a_page_link_shows_the_page_to_its_owner_after_sign_in() {
    page_link_shows_the_page_to_its_owner(TestApp::spawn().await).await;
}

#[tokio::test]
async fn a_page_link_works_through_the_lambda_functions() {
    page_link_shows_the_page_to_its_owner(TestApp::spawn_with(Options::lambda()).await).await;
}

/// Sign-in returns only to a page of this server: anything else is refused with a page, not
/// a redirect (no open redirect).
#[tokio::test]
async fn sign_in_never_redirects_off_the_pages() {
    let app = TestApp::spawn_empty().await;
    for next in [
        "https://evil.example/",
        "//evil.example",
        "/oauth/authorize",
        "",
    ] {
        let r = browser()
            .get(format!("{}/oauth/signin", app.base))
            .query(&[("next", next)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{next}");
        assert!(r.headers().get("location").is_none());
    }
    let page: Value = app.call("list_pages", json!({})).await;
    assert_eq!(page["pages"], json!([]));
}
