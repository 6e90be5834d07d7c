//! Your data: export (the bundle and the Markdown ZIP, as downloads), bundle import, the trash
//! (restore, purge dates) and the access record (who read what, when).
//!
//! **Export.** `GET /app/data/export?format=bundle|markdown` is a link, not a form: it changes
//! nothing. Locally the process has the notebook: it writes the archive to a temporary file and
//! streams it out as an attachment (`nib-{user}-{date}.nib.zip`). On AWS the mcp front has no
//! notebook and a Lambda response cannot carry one: it calls `export_notebook`, which the pages
//! function answers with a presigned GET of the archive it put in S3, and redirects there (303).
//! Either way it takes the strict cookie too, so a link on another site cannot make the
//! owner's browser run exports (each one reads the whole notebook); without it the owner is
//! shown this screen instead.
//!
//! **Import.** `POST /app/data/import` (multipart: `csrf_token` first, then `bundle`), locally:
//! the file goes to a temporary file and through `Notebook::import_bundle`, as
//! `nib import --bundle` does; the screen says what was imported or why the bundle was
//! refused (not a bundle, damaged, the notebook not empty, a page or task in the trash). On
//! AWS the mcp front has no notebook: the screen's form posts the bundle straight to S3 (a
//! presigned POST for the exact key `uploads/{user}/bundles/{id}.zip`, up to
//! `MAX_BUNDLE_UPLOAD_BYTES`, `S3Assets::presigned_bundle_post`), the ingest function imports
//! it with the same `Notebook::import_bundle` and records the outcome, and S3 sends the
//! browser to `/app/data/import/sent?id=`, which shows it (or that it is being imported, with
//! a link to look again). No script is involved. Larger bundles: `nib import --bundle
//! --backend aws`.

use std::io::{Seek, Write};
use std::sync::Arc;

use askama::Template;
use axum::body::{Body, Bytes};
use axum::extract::{Multipart, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    APP_CLIENT, APP_CREDENTIAL, Chrome, Visitor, args, back_to, call, changer, message, not_found,
    render, tool_failure, visitor,
};
use crate::domain::UserId;
use crate::http::HttpState;
use crate::http::oauth::see_other;
use crate::notebook::{BundleError, ExportFormat, Notebook};
use crate::ports::{RateDecision, Window};
use crate::telemetry;

/// The largest bundle the web app takes (larger ones: `nib import --bundle`).
pub(super) const MAX_IMPORT_REQUEST: usize = 2 << 30;

/// Access records per screen.
const RECORDS_PER_SCREEN: u64 = 50;

struct TrashRow {
    kind: String,
    id: String,
    title: String,
    date: String,
    deleted_on: String,
    purge_on: String,
    tasks: u64,
}

/// The Notion connection as the screen shows it.
struct NotionView {
    connected: bool,
    database_id: String,
    last_ok: Option<String>,
    last_error: Option<String>,
    pending: u64,
}

struct AccessRow {
    at: String,
    client: String,
    credential_id: String,
    tool: String,
    pages: Vec<String>,
    tasks: usize,
}

/// What a bundle import did, shown above the form.
struct ImportResult {
    imported: bool,
    message: String,
}

/// A presigned POST form's action and hidden fields, in order (the file goes last).
struct BundlePost {
    url: String,
    fields: Vec<(String, String)>,
}

/// How long the bundle form on AWS may be used after the screen was made: as the upload
/// form's, minutes (reloading the screen signs a new one).
const BUNDLE_FORM_TTL_SECONDS: u64 = crate::uploads::FORM_TTL_SECONDS;

#[derive(Template)]
#[template(path = "app/data.html")]
struct DataScreen {
    chrome: Chrome,
    here: &'static str,
    /// Whether this process imports bundles from the browser (locally).
    import_here: bool,
    import_result: Option<ImportResult>,
    /// On AWS: the form that posts a bundle straight to S3 for the ingest function to import.
    bundle_post: Option<BundlePost>,
    /// Where to look again while a bundle sent to S3 is being imported.
    import_refresh: Option<String>,
    /// The largest bundle the form on AWS takes, in MiB.
    bundle_max_mb: u64,
    trash: Vec<TrashRow>,
    records: Vec<AccessRow>,
    next_records: Option<String>,
    notion: NotionView,
    /// The user's time zone (IANA name) and today in it.
    time_zone: String,
    today: String,
}

fn moment(unix: Option<i64>) -> Option<String> {
    unix.map(|t| {
        let s = crate::tools::rfc3339_ms(t.saturating_mul(1000));
        format!(
            "{} {} UTC",
            s.get(..10).unwrap_or(&s),
            s.get(11..16).unwrap_or("")
        )
    })
}

#[derive(Deserialize)]
pub(super) struct DataQuery {
    access_cursor: Option<String>,
}

fn s(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

/// `GET /app/data`.
pub(super) async fn show(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<DataQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/data").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    screen(&st, &v, &q.access_cursor, None).await
}

#[derive(Deserialize)]
pub(super) struct SentQuery {
    id: Option<String>,
}

/// `GET /app/data/import/sent?id=` (S3 adds `bucket`, `key` and `etag`): where S3 sends the
/// browser after the bundle form on AWS uploaded a bundle. Shows what the ingest function
/// recorded for it (`upload_result` of `bundles/{id}.zip`), or that it is being imported,
/// with a link to look again. Each form has its own id, so a result is never an earlier
/// upload's.
pub(super) async fn import_sent(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<SentQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/data").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let key = crate::uploads::bundle_key(&v.user, q.id.as_deref().unwrap_or_default());
    let Some((_, id)) = crate::uploads::parse_bundle_key(&key) else {
        return not_found();
    };
    let name = crate::uploads::bundle_result_name(&key);
    let found = match call(&st, &v, "upload_result", json!({ "name": name })).await {
        Ok(f) => f,
        Err(e) => return tool_failure(e, "upload_result"),
    };
    if found["found"] == true {
        let result = ImportResult {
            imported: found["outcome"] != "refused",
            message: found["reason"].as_str().unwrap_or_default().to_owned(),
        };
        return screen_with(&st, &v, &None, Some(result), None).await;
    }
    let pending = ImportResult {
        imported: true,
        message: "The bundle was sent and is being imported.".into(),
    };
    let again = format!("/app/data/import/sent?id={id}");
    screen_with(&st, &v, &None, Some(pending), Some(again)).await
}

/// The screen, with the result of an import when there was one.
async fn screen(
    st: &HttpState,
    v: &Visitor,
    access_cursor: &Option<String>,
    import_result: Option<ImportResult>,
) -> Response {
    screen_with(st, v, access_cursor, import_result, None).await
}

/// The bundle form on AWS, signed now for a fresh bundle id: S3 sends the browser back to
/// `/app/data/import/sent?id=`. `None` where the process imports itself, or signing failed
/// (the screen then names the command line).
async fn bundle_post(st: &HttpState, v: &Visitor) -> Option<BundlePost> {
    let signer = match (&st.notebook, &st.upload_signer) {
        (None, Some(signer)) => signer,
        _ => return None,
    };
    let id = uuid::Uuid::new_v4().simple().to_string();
    let redirect = format!(
        "{}/app/data/import/sent?id={id}",
        st.config.public_url.trim_end_matches('/')
    );
    match signer
        .presigned_bundle_post(&v.user, &id, &redirect, BUNDLE_FORM_TTL_SECONDS)
        .await
    {
        Ok(post) => Some(BundlePost {
            url: post.url,
            fields: post.fields,
        }),
        Err(e) => {
            tracing::error!(error = %telemetry::chain(&e), "bundle form signing failed");
            None
        }
    }
}

async fn screen_with(
    st: &HttpState,
    v: &Visitor,
    access_cursor: &Option<String>,
    import_result: Option<ImportResult>,
    import_refresh: Option<String>,
) -> Response {
    let trash = match call(st, v, "list_trash", json!({ "limit": 200 })).await {
        Ok(t) => t,
        Err(e) => return tool_failure(e, "list_trash"),
    };
    let a = args(&[
        ("limit", Some(json!(RECORDS_PER_SCREEN))),
        (
            "cursor",
            super::notebook::cursor_arg(access_cursor).map(Value::String),
        ),
    ]);
    let access = match call(st, v, "list_access", a).await {
        Ok(a) => a,
        Err(e) => return tool_failure(e, "list_access"),
    };
    let notion = match call(st, v, "notion_status", json!({})).await {
        Ok(n) => n,
        Err(e) => return tool_failure(e, "notion_status"),
    };
    let time_zone = match call(st, v, "time_zone_get", json!({})).await {
        Ok(z) => z,
        Err(e) => return tool_failure(e, "time_zone_get"),
    };
    let notion = NotionView {
        connected: notion["connected"].as_bool().unwrap_or(false),
        database_id: s(&notion, "database_id"),
        last_ok: moment(notion["last_ok_at"].as_i64()),
        last_error: notion["last_error"].as_str().map(|e| {
            format!(
                "{} ({})",
                e,
                moment(notion["last_error_at"].as_i64()).unwrap_or_default()
            )
        }),
        pending: notion["pending"].as_u64().unwrap_or(0),
    };
    let trash = trash["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| TrashRow {
            kind: s(i, "kind"),
            id: s(i, "id"),
            title: s(i, "title"),
            date: s(i, "date"),
            deleted_on: s(i, "deleted_on"),
            purge_on: s(i, "purge_on"),
            tasks: i["tasks"].as_u64().unwrap_or(0),
        })
        .collect();
    let records = access["records"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let at = s(r, "at");
            AccessRow {
                at: format!(
                    "{} {} UTC",
                    at.get(..10).unwrap_or(&at),
                    at.get(11..19).unwrap_or("")
                ),
                client: r["client"].as_str().unwrap_or("(no name)").to_owned(),
                credential_id: s(r, "credential_id"),
                tool: s(r, "tool"),
                pages: r["page_ids"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                tasks: r["task_ids"].as_array().map_or(0, Vec::len),
            }
        })
        .collect();
    let status = match &import_result {
        Some(r) if !r.imported => StatusCode::UNPROCESSABLE_ENTITY,
        _ => StatusCode::OK,
    };
    let mut page = render(
        st,
        &DataScreen {
            chrome: Chrome::new(v, "data"),
            here: "/app/data",
            import_here: st.notebook.is_some(),
            import_result,
            bundle_post: bundle_post(st, v).await,
            import_refresh,
            bundle_max_mb: crate::uploads::MAX_BUNDLE_UPLOAD_BYTES >> 20,
            trash,
            records,
            next_records: access["next_cursor"].as_str().map(str::to_owned),
            notion,
            time_zone: s(&time_zone, "zone"),
            today: s(&time_zone, "today"),
        },
    );
    if page.status() == StatusCode::OK {
        *page.status_mut() = status;
    }
    page
}

/// `POST /app/data/restore/{kind}/{id}`: `restore_page` or `restore_task`.
pub(super) async fn restore(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Path((kind, id)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let (tool, a) = match kind.as_str() {
        "page" => ("restore_page", json!({ "page_id": id })),
        "task" => ("restore_task", json!({ "task_link_id": id })),
        _ => return not_found(),
    };
    match call(&st, &v, tool, a).await {
        Ok(_) => back_to(&form),
        // "Not in the trash": what another user's trash id is too.
        Err(crate::tools::ToolError::Rejected(_)) => not_found(),
        Err(e) => tool_failure(e, tool),
    }
}

/// `POST /app/data/notion/connect` (`database`, `token`): what `nib notion connect` does; Notion's
/// refusal (a wrong token, a database not shared with the integration) is shown as it is.
pub(super) async fn notion_connect(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let a = json!({
        "database": form.get("database").unwrap_or_default(),
        "token": form.get("token").unwrap_or_default(),
    });
    settle(
        &st,
        &v,
        &form,
        "notion_connect",
        a,
        "Notion is not connected",
    )
    .await
}

/// Runs a form's operation and goes back where the form came from; an argument the operation
/// refuses is a 400 page saying why (nothing changed), anything else `tool_failure`'s answer.
async fn settle(
    st: &HttpState,
    v: &Visitor,
    form: &super::Form,
    op: &'static str,
    args: Value,
    refused: &str,
) -> Response {
    match call(st, v, op, args).await {
        Ok(_) => back_to(form),
        Err(crate::tools::ToolError::Rejected(why))
        | Err(crate::tools::ToolError::InvalidArgument { reason: why, .. }) => {
            super::message(axum::http::StatusCode::BAD_REQUEST, refused, &why)
        }
        Err(e) => tool_failure(e, op),
    }
}

/// `POST /app/data/notion/disconnect`.
pub(super) async fn notion_disconnect(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    match call(&st, &v, "notion_disconnect", json!({})).await {
        Ok(_) => back_to(&form),
        Err(e) => tool_failure(e, "notion_disconnect"),
    }
}

/// `POST /app/data/timezone` (`zone`): what `nib user timezone` does; a name that is not a zone
/// is refused, saying so, and changes nothing.
pub(super) async fn time_zone_set(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let a = json!({ "zone": form.get("zone").unwrap_or_default() });
    settle(
        &st,
        &v,
        &form,
        "time_zone_set",
        a,
        "The time zone is unchanged",
    )
    .await
}

#[derive(Deserialize)]
pub(super) struct ExportQuery {
    format: Option<String>,
}

/// `GET /app/data/export?format=bundle|markdown`: the archive as a download (locally), or a
/// redirect to the presigned GET `export_notebook` answers (on AWS).
pub(super) async fn export(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<ExportQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/data").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(format) = q.format.as_deref().and_then(ExportFormat::parse) else {
        return not_found();
    };
    if !v.same_site {
        // Followed from another site: the owner starts the export from here.
        return see_other("/app/data");
    }
    if let Err(r) = export_limit(&st, &v.user).await {
        return r;
    }
    match &st.notebook {
        Some(notebook) => stream_export(notebook, &v, format).await,
        None => {
            let a = json!({ "format": format.as_str() });
            match call(&st, &v, "export_notebook", a).await {
                Ok(out) => match out["download_url"].as_str() {
                    Some(url) => see_other(url),
                    None => export_failed(&std::io::Error::other(
                        "export_notebook answered no download_url",
                    )),
                },
                Err(e) => tool_failure(e, "export_notebook"),
            }
        }
    }
}

/// The most exports a user starts in an hour.
pub const EXPORTS_PER_HOUR: u64 = 10;

/// Exports count against a limit of their own, whatever the request limits (also when they
/// are off): each reads the whole notebook and, on AWS, writes a copy of it to S3. A person
/// downloading their data needs a few. A limiter that cannot be reached lets the export
/// through, as every request limit does.
async fn export_limit(st: &HttpState, user: &UserId) -> Result<(), Response> {
    let windows = [Window {
        secs: 3600,
        max: EXPORTS_PER_HOUR,
    }];
    match st.limiter.hit(&format!("export#{user}"), &windows).await {
        Ok(RateDecision::Allowed) => Ok(()),
        Ok(RateDecision::Limited {
            retry_after_secs, ..
        }) => {
            let minutes = retry_after_secs.div_ceil(60);
            let mut r = message(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many exports",
                &format!("At most {EXPORTS_PER_HOUR} exports an hour. Try again in {minutes} min."),
            );
            if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            Err(r)
        }
        Err(e) => {
            tracing::warn!(user = user.as_str(), error = %crate::telemetry::chain(&e), "rate limiter unavailable");
            Ok(())
        }
    }
}

/// The export written to a temporary file, then streamed from it (the file is unlinked once
/// open, so nothing is left behind however the download ends).
async fn stream_export(notebook: &Notebook, v: &Visitor, format: ExportFormat) -> Response {
    let (temp, file_name, report) = match notebook.export_to_temp(&v.user, format).await {
        Ok(done) => done,
        Err(e) => return export_failed(&e),
    };
    let opened = temp.reopen().and_then(|mut f| {
        let len = f.seek(std::io::SeekFrom::End(0))?;
        f.rewind()?;
        Ok((f, len))
    });
    drop(temp);
    let (file, len) = match opened {
        Ok(opened) => opened,
        Err(e) => return export_failed(&e),
    };
    // As the app's `export_notebook` does on AWS: the access record names what was exported.
    notebook.access_log().record_all(
        &v.user,
        APP_CREDENTIAL,
        Some(APP_CLIENT),
        "export_notebook",
        &report.page_ids,
        &report.task_ids,
    );
    tracing::info!(
        user = v.user.as_str(),
        format = format.as_str(),
        pages = report.pages,
        bytes = len,
        "web app export"
    );
    let body = Body::from_stream(chunks(tokio::fs::File::from_std(file)));
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(d) = HeaderValue::from_str(&format!("attachment; filename=\"{file_name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, d);
    }
    r
}

/// The file's bytes, 64 KiB at a time; a read error ends the stream with that error.
fn chunks(
    file: tokio::fs::File,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(Some(file), |file| async move {
        use tokio::io::AsyncReadExt;
        let mut file = file?;
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

fn export_failed(e: &(dyn std::error::Error + 'static)) -> Response {
    super::failure(
        e,
        "web app export failed",
        StatusCode::INTERNAL_SERVER_ERROR,
        "The export could not be made",
    )
}

/// `POST /app/data/import` (multipart: `csrf_token`, then `bundle`): a bundle into the
/// notebook, locally.
pub(super) async fn import(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    let v = match visitor(&st, &headers, "/app/data").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(notebook) = st.notebook.clone() else {
        return message(
            StatusCode::NOT_FOUND,
            "Bundles are imported from the command line here",
            "Import a bundle with nib import --bundle FILE --backend aws.",
        );
    };
    let mut allowed = false;
    let mut received: Option<std::fs::File> = None;
    loop {
        let hint = format!(
            "The web app takes bundles up to {} GiB (larger ones: nib import --bundle); try again.",
            MAX_IMPORT_REQUEST >> 30
        );
        let mut field = match super::next_part(&mut form, "bundle", &hint).await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(r) => return r,
        };
        match field.name().unwrap_or_default() {
            "csrf_token" => {
                let Some(token) = super::token_field(&mut field).await else {
                    return super::refused_form();
                };
                allowed = super::may_change(&st, &headers, &v, &token);
            }
            "bundle" => {
                // The token comes first in the form: a file before it is never read.
                if !allowed {
                    return super::refused_form();
                }
                let mut file = match tempfile::tempfile() {
                    Ok(f) => f,
                    Err(e) => return import_failed(&e),
                };
                loop {
                    match field.chunk().await {
                        Ok(Some(chunk)) => {
                            if let Err(e) = file.write_all(&chunk) {
                                return import_failed(&e);
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(error = %telemetry::chain(&e), "import cut short");
                            return message(
                                StatusCode::BAD_REQUEST,
                                "The bundle did not arrive whole",
                                "Nothing was imported; try again.",
                            );
                        }
                    }
                }
                if let Err(e) = file.rewind() {
                    return import_failed(&e);
                }
                received = Some(file);
            }
            _ => {}
        }
    }
    if !allowed {
        return super::refused_form();
    }
    let Some(file) = received else {
        let result = ImportResult {
            imported: false,
            message: "Choose a bundle file (.zip) to import.".into(),
        };
        return screen(&st, &v, &None, Some(result)).await;
    };
    let outcome = notebook
        .import_bundle_file(&v.user, file, crate::notebook::MAX_APP_BUNDLE_BYTES)
        .await;
    let result = match outcome {
        Ok(r) => {
            tracing::info!(
                user = v.user.as_str(),
                pages = r.pages,
                tasks = r.tasks,
                "web app bundle import"
            );
            ImportResult {
                imported: true,
                message: format!(
                    "Imported {} pages and {} tasks; {} pages and {} tasks were there already.",
                    r.pages, r.tasks, r.pages_present, r.tasks_present
                ),
            }
        }
        Err(
            e @ (BundleError::Foreign(_)
            | BundleError::Damaged(_)
            | BundleError::NotEmpty(_)
            | BundleError::InTrash(_)),
        ) => {
            // The kind and the entry only: the message may quote the bundle's content.
            tracing::info!(
                user = v.user.as_str(),
                kind = e.kind(),
                entry = e.entry().unwrap_or("-"),
                "web app bundle import refused"
            );
            ImportResult {
                imported: false,
                message: format!("Nothing was imported: {e}."),
            }
        }
        Err(e) => return import_failed(&e),
    };
    screen(&st, &v, &None, Some(result)).await
}

fn import_failed(e: &(dyn std::error::Error + 'static)) -> Response {
    super::failure(
        e,
        "web app import failed",
        StatusCode::INTERNAL_SERVER_ERROR,
        "The bundle could not be imported",
    )
}
