//! Upload: page files from the browser (PNG, JPEG, PDF, and the markdown/OCR text files
//! `nib import` reads), each with its own result.
//!
//! - **Locally** (`nib serve`, a process with the notebook) the files are posted to
//!   `POST /app/upload` (one multipart form; the script sends one file per request for its
//!   progress bar) and go through the same import as `nib import`, OCR included: a page's files
//!   are the files of one stem, a PDF of several pages is several pages.
//! - **On AWS** the mcp function has no notebook: for each file the script asks
//!   `POST /app/upload/sign` for a presigned POST (`adapters::aws::presigned_post`: the exact
//!   key `uploads/{user}/{name}`, the type its extension names, 1 byte to
//!   [`MAX_UPLOAD_BYTES`]), posts the file straight to S3, and the ingest function imports it;
//!   the script shows "reading" and asks `GET /app/upload/status?date=` until a page of that
//!   date is new or changed, then links it.
//!
//! Before anything is stored each file is checked here: a page file's name, its size, and that
//! its bytes are what its extension says (a PNG's signature, a PDF's header, text in UTF-8).
//! What the import refuses (a PDF that does not parse, an image over the pixel limit) comes
//! back as that file's refusal; a refused file changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Multipart, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Chrome, Visitor, call, changer, may_change, message, render, visitor};
use crate::domain::Date;
use crate::http::HttpState;
use crate::notebook::{PageFiles, SavedPage, is_page_extension};
use crate::telemetry;
use crate::uploads::MAX_UPLOAD_BYTES;

/// How long a presigned POST may be used (a Lambda role's credentials outlive it).
const POST_TTL_SECONDS: u64 = 900;
/// How long the upload form without script may be used after the page was made (a page left
/// open longer gets S3's refusal; reloading it signs a new form, with a folder of its own).
const FORM_TTL_SECONDS: u64 = crate::uploads::FORM_TTL_SECONDS;
/// The most files one form may carry (the script sends one per request).
pub(super) const MAX_FILES_PER_FORM: usize = 32;
/// The largest upload request: one form's files.
pub(super) const MAX_UPLOAD_REQUEST: usize = 256 << 20;

/// What happened to one file.
#[derive(Debug, Clone, Serialize)]
pub(super) struct FileResult {
    pub name: String,
    /// `new`, `updated`, `unchanged` or `refused`.
    pub outcome: &'static str,
    pub page_id: Option<String>,
    pub message: String,
}

impl FileResult {
    fn refused(name: &str, why: impl Into<String>) -> FileResult {
        FileResult {
            name: name.to_owned(),
            outcome: "refused",
            page_id: None,
            message: why.into(),
        }
    }
}

#[derive(Template)]
#[template(path = "app/upload.html")]
struct UploadScreen {
    chrome: Chrome,
    here: &'static str,
    /// `local` (post the files here) or `s3` (sign, then post to S3).
    mode: &'static str,
    max_mb: u64,
    results: Vec<FileResult>,
    /// On AWS: the form that posts one file straight to S3 without script (its action and
    /// hidden fields, in order; the file goes last).
    form_post: Option<FormPost>,
    /// Where to look again for a result still being read (JavaScript off, on AWS).
    refresh: Option<String>,
}

struct FormPost {
    url: String,
    fields: Vec<(String, String)>,
}

fn mode(st: &HttpState) -> Option<&'static str> {
    if st.notebook.is_some() {
        Some("local")
    } else if st.upload_signer.is_some() {
        Some("s3")
    } else {
        None
    }
}

fn screen(st: &HttpState, v: &Visitor, results: Vec<FileResult>) -> Response {
    screen_with(st, v, results, None, None)
}

fn screen_with(
    st: &HttpState,
    v: &Visitor,
    results: Vec<FileResult>,
    form_post: Option<FormPost>,
    refresh: Option<String>,
) -> Response {
    let Some(mode) = mode(st) else {
        return message(
            StatusCode::NOT_FOUND,
            "Uploads are not available here",
            "This server takes no uploads.",
        );
    };
    render(
        st,
        &UploadScreen {
            chrome: Chrome::new(v, "upload"),
            here: "/app/upload",
            mode,
            max_mb: MAX_UPLOAD_BYTES >> 20,
            results,
            form_post,
            refresh,
        },
    )
}

/// The upload screen; on AWS with the form that posts to S3 without script, signed now for
/// this visitor (`S3Assets::presigned_form_post`): S3 sends the browser back to
/// `/app/upload/sent` with the object's key. Without it (signing failed) the form posts here,
/// which says to turn the script on.
async fn screen_for(
    st: &HttpState,
    v: &Visitor,
    results: Vec<FileResult>,
    refresh: Option<String>,
) -> Response {
    let form_post = match (&st.notebook, &st.upload_signer) {
        (None, Some(signer)) => {
            let since = st.clock.unix().saturating_mul(1000);
            let redirect = format!(
                "{}/app/upload/sent?since={since}",
                st.config.public_url.trim_end_matches('/')
            );
            match signer
                .presigned_form_post(&v.user, &redirect, MAX_UPLOAD_BYTES, FORM_TTL_SECONDS)
                .await
            {
                Ok(post) => Some(FormPost {
                    url: post.url,
                    fields: post.fields,
                }),
                Err(e) => {
                    tracing::error!(error = %telemetry::chain(&e), "upload form signing failed");
                    None
                }
            }
        }
        _ => None,
    };
    screen_with(st, v, results, form_post, refresh)
}

/// `GET /app/upload`.
pub(super) async fn show(State(st): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    match visitor(&st, &headers, "/app/upload").await {
        Ok(v) => screen_for(&st, &v, Vec::new(), None).await,
        Err(r) => r,
    }
}

#[derive(Deserialize)]
pub(super) struct SentQuery {
    since: Option<i64>,
    key: Option<String>,
}

/// `GET /app/upload/sent?since=&bucket=&key=&etag=`: where S3 sends the browser after the
/// form without script uploaded a file (S3 adds `bucket`, `key` and `etag`). Shows what the
/// ingest function made of the file when it is known, else that it is being read, with a link
/// to look again; and the form, for the next file.
pub(super) async fn sent(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<SentQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/upload").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let since = q.since.unwrap_or(0);
    // Only a key in a form folder under this visitor's own prefix is asked about
    // (`uploads/{user}/form-{id}/{name}`).
    let user_prefix = format!("{}{}/", crate::uploads::UPLOAD_PREFIX, v.user);
    let Some((folder, raw)) = q
        .key
        .as_deref()
        .and_then(|k| k.strip_prefix(&user_prefix))
        .and_then(|rest| rest.split_once('/'))
        .filter(|(folder, name)| {
            folder
                .strip_prefix(crate::uploads::FORM_FOLDER)
                .is_some_and(crate::uploads::valid_id)
                && !name.contains('/')
        })
    else {
        return screen_for(&st, &v, Vec::new(), None).await;
    };
    let prefix = format!("{user_prefix}{folder}/");
    let mut refresh = None;
    let result = match page_file_name(raw) {
        // Stored, but not a file ingest imports: it is left alone (and expires with
        // `uploads/`).
        Err(why) => FileResult::refused(raw, why),
        Ok((name, _, _)) => match recorded_result(&st, &v, &name, since).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                let again: String = url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("since", &since.to_string())
                    .append_pair("key", &format!("{prefix}{name}"))
                    .finish();
                refresh = Some(format!("/app/upload/sent?{again}"));
                FileResult {
                    name,
                    outcome: "reading",
                    page_id: None,
                    message: "sent, and being read".to_owned(),
                }
            }
            Err(e) => return super::tool_failure(e, "upload_result"),
        },
    };
    screen_for(&st, &v, vec![result], refresh).await
}

/// The file's own name (a browser may send a path), when it is one a page can have:
/// `(name, stem, extension)`.
fn page_file_name(raw: &str) -> Result<(String, String, String), &'static str> {
    let name = raw.rsplit(['/', '\\']).next().unwrap_or_default().trim();
    if name.is_empty()
        || name.starts_with('.')
        || name.chars().any(char::is_control)
        || name.len() > 255
    {
        return Err("this file name cannot be a page's");
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return Err(NOT_A_PAGE_FILE);
    };
    if stem.is_empty() || !is_page_extension(ext) {
        return Err(NOT_A_PAGE_FILE);
    }
    Ok((name.to_owned(), stem.to_owned(), ext.to_ascii_lowercase()))
}

const NOT_A_PAGE_FILE: &str =
    "not a page file: PNG, JPEG or PDF ink, or its text (.md, .markdown, .txt)";

/// The `Content-Type` a page file is stored with, by its extension.
fn content_type(ext: &str) -> &'static str {
    match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "pdf" => "application/pdf",
        "md" | "markdown" => "text/markdown; charset=utf-8",
        _ => "text/plain; charset=utf-8",
    }
}

/// Whether the bytes are what the extension says; why not, when they are not.
fn sniff(ext: &str, bytes: &[u8]) -> Result<(), String> {
    let (ok, kind) = match ext {
        "png" => (bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG image"),
        "jpg" | "jpeg" => (bytes.starts_with(&[0xFF, 0xD8, 0xFF]), "a JPEG image"),
        "pdf" => (bytes.starts_with(b"%PDF-"), "a PDF"),
        _ => (std::str::from_utf8(bytes).is_ok(), "text in UTF-8"),
    };
    if !ok {
        return Err(format!("its contents are not {kind}"));
    }
    // What the page's reading would find later, found now: a PDF that does not parse, an image
    // whose header is broken or claims more pixels than a page may have.
    #[cfg(feature = "ocr")]
    match ext {
        "pdf" => {
            if let Some(why) = crate::notebook::pdf_refusal(bytes) {
                return Err(why);
            }
        }
        "png" | "jpg" | "jpeg" => {
            crate::ocr::raster::check_image(bytes)
                .map_err(|e| format!("the image cannot be read: {e}"))?;
        }
        _ => {}
    }
    Ok(())
}

/// `POST /app/upload` (multipart: `csrf_token`, then `files`): the local import.
pub(super) async fn receive(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    mut form: Multipart,
) -> Response {
    let v = match visitor(&st, &headers, "/app/upload").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(notebook) = st.notebook.clone() else {
        return message(
            StatusCode::NOT_FOUND,
            "Uploads go to storage here",
            "Upload from the upload page, with JavaScript on.",
        );
    };
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    let dir = match tempfile::Builder::new().prefix("nib-upload-").tempdir() {
        Ok(d) => d,
        Err(e) => return upload_failed(&e),
    };
    let mut results: Vec<FileResult> = Vec::new();
    let mut pages: BTreeMap<String, (PageFiles, Vec<String>)> = BTreeMap::new();
    let mut allowed = false;
    loop {
        let hint = format!(
            "Send at most {MAX_FILES_PER_FORM} files, {} MiB each, and try again.",
            MAX_UPLOAD_BYTES >> 20
        );
        let mut field = match super::next_part(&mut form, "upload", &hint).await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(r) => return r,
        };
        match field.name().unwrap_or_default() {
            "csrf_token" => {
                let Some(token) = super::token_field(&mut field).await else {
                    return super::refused_form();
                };
                allowed = may_change(&st, &headers, &v, &token);
            }
            "files" => {
                // The token comes first in the form: files before it are never read.
                if !allowed {
                    return super::refused_form();
                }
                let raw = field.file_name().unwrap_or_default().to_owned();
                if raw.is_empty() {
                    continue; // the form sent with no file chosen
                }
                if results.len() + pages.values().map(|p| p.1.len()).sum::<usize>()
                    >= MAX_FILES_PER_FORM
                {
                    results.push(FileResult::refused(
                        &raw,
                        format!("more than {MAX_FILES_PER_FORM} files in one upload"),
                    ));
                    continue;
                }
                let (name, stem, ext) = match page_file_name(&raw) {
                    Ok(parts) => parts,
                    Err(why) => {
                        results.push(FileResult::refused(&raw, why));
                        continue;
                    }
                };
                let mut bytes = Vec::new();
                let mut too_big = false;
                loop {
                    match field.chunk().await {
                        Ok(Some(chunk)) => {
                            if too_big {
                                continue;
                            }
                            if bytes.len() + chunk.len() > MAX_UPLOAD_BYTES as usize {
                                too_big = true;
                                bytes = Vec::new();
                            } else {
                                bytes.extend_from_slice(&chunk);
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::warn!(error = %telemetry::chain(&e), "upload cut short");
                            return message(
                                StatusCode::BAD_REQUEST,
                                "The upload did not arrive whole",
                                "Nothing was imported; try again.",
                            );
                        }
                    }
                }
                let refusal = if too_big {
                    Some(format!(
                        "over the upload limit of {} MiB",
                        MAX_UPLOAD_BYTES >> 20
                    ))
                } else if bytes.is_empty() {
                    Some("the file is empty".to_owned())
                } else if pages.values().any(|p| p.1.contains(&name)) {
                    Some("the same file name came twice".to_owned())
                } else {
                    // A PDF's streams are inflated to be checked: in the notebook's work pool,
                    // off the request workers.
                    let kind = ext.clone();
                    let (checked, refusal) = notebook
                        .work()
                        .run(move || {
                            let refusal = sniff(&kind, &bytes).err();
                            (bytes, refusal)
                        })
                        .await;
                    bytes = checked;
                    refusal
                };
                if let Some(why) = refusal {
                    results.push(FileResult::refused(&name, why));
                    continue;
                }
                let path = dir.path().join(&name);
                if let Err(e) = tokio::fs::write(&path, &bytes).await {
                    return upload_failed(&e);
                }
                let page = pages.entry(stem.clone()).or_insert_with(|| {
                    (
                        PageFiles {
                            stem,
                            ..PageFiles::default()
                        },
                        Vec::new(),
                    )
                });
                page.0.set(&ext, path);
                page.1.push(name);
            }
            _ => {}
        }
    }
    if !allowed {
        return super::refused_form();
    }
    for (files, names) in pages.into_values() {
        let outcome = notebook.import_files_read(&v.user, &files, false).await;
        for name in names {
            results.push(match &outcome {
                Ok(saved) => saved_result(&name, saved),
                Err(failure) => FileResult::refused(&name, failure.reason.clone()),
            });
        }
    }
    tracing::info!(
        user = v.user.as_str(),
        files = results.len(),
        refused = results.iter().filter(|r| r.outcome == "refused").count(),
        "web app upload"
    );
    if wants_json {
        return axum::Json(json!({ "files": results })).into_response();
    }
    screen(&st, &v, results)
}

fn saved_result(name: &str, saved: &[SavedPage]) -> FileResult {
    let first = saved.first();
    let (outcome, message) = match saved {
        [] => ("unchanged", "nothing to import".to_owned()),
        [one] if one.superseded => ("unchanged", "the page already has newer files".to_owned()),
        [one] if one.created => (
            "new",
            format!("new page ({} lines, {} tasks)", one.lines, one.tasks),
        ),
        [one] => (
            "updated",
            format!("page updated ({} lines, {} tasks)", one.lines, one.tasks),
        ),
        many => (
            if many.iter().any(|p| p.created) {
                "new"
            } else {
                "updated"
            },
            format!("{} pages", many.len()),
        ),
    };
    FileResult {
        name: name.to_owned(),
        outcome,
        page_id: first.map(|p| p.page_id.to_string()),
        message,
    }
}

fn upload_failed(e: &(dyn std::error::Error + 'static)) -> Response {
    super::failure(
        e,
        "upload could not be kept",
        StatusCode::INTERNAL_SERVER_ERROR,
        "Nothing was imported",
    )
}

fn json_error(status: StatusCode, why: &str) -> Response {
    (status, axum::Json(json!({ "error": why }))).into_response()
}

/// `POST /app/upload/sign` (`csrf_token`, `back`, `name`, `size`): a presigned POST for one
/// file, as JSON `{url, fields: [[name, value], ..]}`, or `{error}` naming why not.
pub(super) async fn sign(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (v, form) = match changer(&st, &headers, &body).await {
        Ok(found) => found,
        Err(r) => return r,
    };
    let Some(signer) = &st.upload_signer else {
        return json_error(
            StatusCode::NOT_FOUND,
            "this server takes no uploads to storage",
        );
    };
    let raw = form.get("name").unwrap_or_default();
    let (name, _, ext) = match page_file_name(raw) {
        Ok(parts) => parts,
        Err(why) => return json_error(StatusCode::BAD_REQUEST, why),
    };
    let size: u64 = form.get("size").and_then(|s| s.parse().ok()).unwrap_or(0);
    if size == 0 {
        return json_error(StatusCode::BAD_REQUEST, "the file is empty");
    }
    if size > MAX_UPLOAD_BYTES {
        return json_error(
            StatusCode::BAD_REQUEST,
            &format!("over the upload limit of {} MiB", MAX_UPLOAD_BYTES >> 20),
        );
    }
    match signer
        .presigned_post(
            &v.user,
            &name,
            content_type(&ext),
            MAX_UPLOAD_BYTES,
            POST_TTL_SECONDS,
        )
        .await
    {
        Ok(post) => axum::Json(json!({
            // The status tells this upload's result from an earlier one's by it.
            "signed_at": st.clock.unix().saturating_mul(1000),
            "url": post.url,
            "key": post.key,
            "fields": post.fields,
            "content_type": content_type(&ext),
        }))
        .into_response(),
        Err(crate::ports::AssetsError::InvalidUpload(why)) => {
            json_error(StatusCode::BAD_REQUEST, why)
        }
        Err(e) => {
            let cid = telemetry::correlation_id();
            tracing::error!(correlation_id = %cid, error = %telemetry::chain(&e), "upload signing failed");
            json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the upload could not be prepared (correlation id {cid})"),
            )
        }
    }
}

#[derive(Deserialize)]
pub(super) struct StatusQuery {
    date: Option<String>,
    /// A file's name: the result the ingest function recorded for its latest upload.
    name: Option<String>,
    /// Unix milliseconds (the sign answer's `signed_at`): an upload's result older than this
    /// is an earlier upload's.
    since: Option<i64>,
}

/// The result the ingest function recorded for the latest upload of `name`, when it is of an
/// upload made at `since` (unix milliseconds) or later: `{outcome, page_id, message}`.
/// S3's `LastModified` has whole seconds, so `since` is taken to its second.
async fn recorded_result(
    st: &HttpState,
    v: &Visitor,
    name: &str,
    since: i64,
) -> Result<Option<FileResult>, crate::tools::ToolError> {
    let found = call(st, v, "upload_result", json!({ "name": name })).await?;
    let uploaded_at = found["uploaded_at"].as_i64().unwrap_or(i64::MIN);
    if found["found"] != true || uploaded_at < since - since.rem_euclid(1000) {
        return Ok(None);
    }
    let outcome = match found["outcome"].as_str() {
        Some("new") => "new",
        Some("updated") => "updated",
        Some("unchanged") => "unchanged",
        _ => "refused",
    };
    let message = match outcome {
        "new" => "new page".to_owned(),
        "updated" => "page updated".to_owned(),
        "unchanged" => "the page already has these files".to_owned(),
        _ => found["reason"]
            .as_str()
            .unwrap_or("the file could not be imported")
            .to_owned(),
    };
    Ok(Some(FileResult {
        name: name.to_owned(),
        outcome,
        page_id: found["page_id"].as_str().map(str::to_owned),
        message,
    }))
}

/// `GET /app/upload/status?date=YYYY-MM-DD&name=&since=`: the pages of that date with their
/// revisions, as JSON `{pages: [{page_id, revision}], result}`; the script compares them with
/// what it saw before the upload to tell when the ingest function has read the file. With a
/// `name`, `result` is what the ingest function recorded for that file's upload made since
/// `since` (a refusal and its reason included), or null while there is none.
pub(super) async fn status(
    State(st): State<Arc<HttpState>>,
    headers: HeaderMap,
    Query(q): Query<StatusQuery>,
) -> Response {
    let v = match visitor(&st, &headers, "/app/upload").await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let result = match q.name.as_deref().map(page_file_name) {
        Some(Ok((name, _, _))) => {
            match recorded_result(&st, &v, &name, q.since.unwrap_or(0)).await {
                Ok(found) => found,
                Err(e) => return super::tool_failure(e, "upload_result"),
            }
        }
        Some(Err(why)) => return json_error(StatusCode::BAD_REQUEST, why),
        None => None,
    };
    let date = match q.date {
        Some(d) if Date::parse(&d).is_ok() => Some(d),
        Some(_) => return json_error(StatusCode::BAD_REQUEST, "date is YYYY-MM-DD"),
        None if q.name.is_some() => None,
        None => return json_error(StatusCode::BAD_REQUEST, "date is YYYY-MM-DD"),
    };
    let mut pages = Vec::new();
    if let Some(date) = date {
        let listed = match call(&st, &v, "list_pages", json!({ "from": date, "to": date })).await {
            Ok(l) => l,
            Err(e) => return super::tool_failure(e, "list_pages"),
        };
        for p in listed["pages"].as_array().into_iter().flatten() {
            let id = p["page_id"].as_str().unwrap_or_default();
            // The page's revision (a kept answer when nothing changed since the last read).
            let read = call(&st, &v, "get_page", json!({ "page_id": id })).await;
            if let Ok(page) = read {
                pages.push(json!({
                    "page_id": id,
                    "revision": page["revision"],
                    "has_ocr": p["has_ocr"],
                }));
            }
        }
    }
    axum::Json(json!({ "pages": pages, "result": result })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_page_files_are_taken_by_their_own_name() {
        assert_eq!(
            page_file_name("C:\\scans\\2026-06-19.PDF").unwrap(),
            ("2026-06-19.PDF".into(), "2026-06-19".into(), "pdf".into())
        );
        assert!(page_file_name("notes.docx").is_err());
        assert!(page_file_name(".hidden.png").is_err());
        assert!(page_file_name("noext").is_err());
        assert!(page_file_name("a\u{7}.md").is_err());
    }

    #[test]
    fn a_files_bytes_must_be_what_its_extension_says() {
        assert!(sniff("png", b"%PDF-1.7").is_err());
        assert!(sniff("jpeg", b"\x89PNG\r\n\x1a\n").is_err());
        assert!(sniff("md", b"# Hello").is_ok());
        assert!(sniff("txt", &[0xFF, 0xFE, 0x00]).is_err());
    }

    /// A real PDF and PNG pass; a PDF that does not parse and a PNG whose header claims
    /// 100,000 x 100,000 pixels (an image bomb: a few hundred bytes) are refused.
    #[cfg(feature = "ocr")]
    #[test]
    fn damaged_pdfs_and_image_bombs_are_refused_before_anything_is_kept() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/ocr/");
        let pdf = std::fs::read(format!("{data}2025-03-21.pdf")).unwrap();
        assert!(sniff("pdf", &pdf).is_ok());
        let png = std::fs::read(format!("{data}2025-03-17.png")).unwrap();
        assert!(sniff("png", &png).is_ok());
        let why = sniff("pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >> broken").unwrap_err();
        assert!(why.contains("cannot be read"), "{why}");
        // The PNG header with its width and height changed (its CRC too, so it still reads).
        let mut bomb = png[..33].to_vec();
        bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc32(&bomb[12..29]);
        bomb[29..33].copy_from_slice(&crc.to_be_bytes());
        bomb.extend_from_slice(&png[33..]);
        let why = sniff("png", &bomb).unwrap_err();
        assert!(why.contains("more than"), "{why}");
    }

    /// CRC-32 as PNG chunks carry it.
    #[cfg(feature = "ocr")]
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xFFFF_FFFFu32;
        for b in bytes {
            crc ^= u32::from(*b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
}
