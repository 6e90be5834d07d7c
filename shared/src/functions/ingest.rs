//! The `ingest` function's work: an object created under `uploads/{user}/` becomes a page,
//! through the same path as `nib import`.
//!
//! An upload is named like a file of an import folder: `uploads/{user}/{stem}.{ext}`, with
//! `ext` one of pdf, png, md, markdown, txt, and the files of one page sharing the stem
//! (`uploads/alice/2026-06-19.pdf` + `uploads/alice/2026-06-19.md`). Each event reads every file
//! of its page that is there so far (concurrently) and imports the page with `read_page_with` +
//! `Notebook::import_page`, the checks and the write `nib import` uses, the keys standing for
//! the file names. A stem is one page, so the second file of a page updates the page the first
//! created; a redelivered event changes nothing.
//!
//! An object older than what its page took (a redelivered event, or one whose siblings were
//! read before a newer upload was imported) replaces nothing: each part of a page records the
//! `LastModified` of the object it came from (`Notebook::import_page`). An upload of only the
//! ink (the OCR upload expired after 7 days) updates the ink and keeps the page's OCR, lines
//! and tasks.
//!
//! A page file the upload form without script sent is under that form's own folder,
//! `uploads/{user}/form-{id}/{stem}.{ext}`, and its siblings are read from that folder only.
//!
//! A bundle the web app sent (`uploads/{user}/bundles/{id}.zip`, [`parse_bundle_key`]; never a
//! page file's key, and no page form can write there: the script's keys have no folder, the
//! form without script's are in its own) is imported whole with `Notebook::import_bundle`, as
//! `nib import --bundle` does, and only when it is stored as `application/zip`, the type the
//! bundle form's policy pins and no page form's allows; anything else there is refused unread.
//!
//! What became of each upload is recorded for the web app (`Notebook::record_upload_result`:
//! the outcome, the page, a refusal's reason), which shows it to the browser that sent it.
//!
//! Outcomes: a bad page (not a PDF, a PDF that does not parse, no date, not UTF-8) or a
//! refused bundle is [`IngestOutcome::Rejected`], logged and not retried (it would fail the
//! same way); a failure to read S3 or write the store is an
//! [`IngestError`], which fails the invocation so that Lambda retries it and, after the retries,
//! sends the event to the dead-letter queue. Log lines carry the user, the page id and the
//! file's extension, never the key ([`Ingest::record`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use aws_sdk_s3::operation::get_object::GetObjectError;
use serde::Serialize;

use crate::domain::UserId;
use crate::notebook::{
    BundleError, BundleImport, ImportFailure, Notebook, NotebookError, PAGE_EXTENSIONS, PageFiles,
    SavedPage, UploadResult, read_page_with,
};
use crate::uploads::{
    BUNDLE_CONTENT_TYPE, bundle_result_name, decode_event_key, parse_bundle_key, parse_upload_key,
    upload_folder,
};

/// Why an object could not be imported now (Lambda retries the event). The messages name the
/// user and the file's extension, never the key: it holds the file's name.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("cannot read an upload of user {user} (.{ext})")]
    Fetch {
        user: UserId,
        ext: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot store the page")]
    Store(#[source] NotebookError),
    #[error("cannot import the bundle of user {user}")]
    Bundle {
        user: UserId,
        #[source]
        source: BundleError,
    },
}

/// What became of one object.
#[derive(Debug)]
pub enum IngestOutcome {
    /// The pages were written (one per page of a multi-page PDF), or (`superseded`) already
    /// held newer versions of every file.
    Imported(Vec<SavedPage>),
    /// A bundle (`uploads/{user}/bundles/{id}.zip`) was imported into the user's notebook.
    Bundle(BundleImport),
    /// The page's files are not a valid page (the reason names the file), or the bundle was
    /// refused (not a bundle, damaged, the notebook not empty, a page in the trash).
    Rejected(ImportFailure),
    /// Not ours to import (another bucket, outside `uploads/{user}/`, not a page file).
    Ignored(&'static str),
}

/// What the objects of one event came to: the function's reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub imported: usize,
    pub rejected: usize,
    /// Uploads older than what their page had taken: nothing written.
    pub superseded: usize,
}

/// Imports uploads from one bucket.
pub struct Ingest {
    notebook: Arc<Notebook>,
    s3: aws_sdk_s3::Client,
    bucket: String,
}

impl Ingest {
    pub fn new(notebook: Arc<Notebook>, s3: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        Ingest {
            notebook,
            s3,
            bucket: bucket.into(),
        }
    }

    /// Imports one record's object (its key as the event spells it) and logs what became of
    /// it with ids only: the user, the page id, the file's extension. Never the key, which
    /// holds the file's name (stored elsewhere only as an HMAC), nor a reason that quotes the
    /// file. An `Err` is logged here with its cause chain and must fail the invocation.
    pub async fn record(
        &self,
        bucket: &str,
        key: &str,
        tally: &mut Tally,
    ) -> Result<(), IngestError> {
        let decoded = decode_event_key(key);
        let ids = parse_upload_key(&decoded)
            .map(|(user, _, ext)| (user, ext))
            .or_else(|| parse_bundle_key(&decoded).map(|(user, _)| (user, "zip")));
        let user = ids.as_ref().map(|(u, _)| u.as_str()).unwrap_or("-");
        let ext = ids.as_ref().map(|(_, e)| *e).unwrap_or("-");
        match self.object(bucket, key).await {
            Ok(IngestOutcome::Imported(pages)) => {
                for page in pages {
                    if page.superseded {
                        tally.superseded += 1;
                        tracing::info!(user, ext, page_id = %page.page_id, "upload superseded: the page holds newer files");
                    } else {
                        tally.imported += 1;
                        tracing::info!(user, ext, page_id = %page.page_id, created = page.created, "page imported");
                    }
                }
            }
            Ok(IngestOutcome::Bundle(report)) => {
                tally.imported += 1;
                tracing::info!(
                    user,
                    pages = report.pages,
                    tasks = report.tasks,
                    pages_present = report.pages_present,
                    tasks_present = report.tasks_present,
                    "bundle imported"
                );
            }
            Ok(IngestOutcome::Rejected(failure)) => {
                tally.rejected += 1;
                let at_fault = failure
                    .path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("-");
                tracing::warn!(
                    user,
                    ext,
                    file = at_fault,
                    reason = failure.kind.as_str(),
                    "upload rejected"
                );
            }
            Ok(IngestOutcome::Ignored(why)) => tracing::info!(why, "upload ignored"),
            Err(e) => {
                tracing::error!(user, ext, error = %crate::telemetry::chain(&e), "ingest failed");
                return Err(e);
            }
        }
        Ok(())
    }

    /// Imports the page the object `key` (as the S3 event spells it: URL-encoded) belongs to.
    pub async fn object(&self, bucket: &str, key: &str) -> Result<IngestOutcome, IngestError> {
        if bucket != self.bucket {
            return Ok(IngestOutcome::Ignored("not this function's bucket"));
        }
        let key = decode_event_key(key);
        if let Some((user, _)) = parse_bundle_key(&key) {
            return self.bundle(&user, &key).await;
        }
        let Some((user, stem, _ext)) = parse_upload_key(&key) else {
            return Ok(IngestOutcome::Ignored(
                "not uploads/{user}/{stem}.{pdf|png|jpg|jpeg|md|markdown|txt}",
            ));
        };
        // The object that fired the event must be there; its siblings may not be (yet). They
        // are read at once, and the page is read from them as `nib import` reads its files,
        // with the keys as the file names (so a bad page names the upload) and each object's
        // `LastModified` as its file's time (so an older object never replaces what the page
        // took from a newer one).
        // Siblings in the same folder only: a form's folder (`uploads/{user}/form-{id}/`) holds
        // what that form sent.
        let prefix = format!("{}{stem}.", upload_folder(&key));
        let siblings: Vec<String> = PAGE_EXTENSIONS
            .iter()
            .map(|ext| format!("{prefix}{ext}"))
            .collect();
        let fetched = futures::future::try_join_all(
            siblings
                .iter()
                .zip(PAGE_EXTENSIONS)
                .map(|(sibling, ext)| self.fetch(&user, sibling, ext, *sibling == key)),
        )
        .await?;
        let mut files = PageFiles {
            stem: stem.to_owned(),
            ..PageFiles::default()
        };
        let mut objects = HashMap::new();
        for ((sibling, ext), object) in siblings.iter().zip(PAGE_EXTENSIONS).zip(fetched) {
            if let Some(object) = object {
                files.set(ext, PathBuf::from(sibling));
                objects.insert(PathBuf::from(sibling), object);
            }
        }
        // When this upload was made: its result is told apart from an earlier upload's of the
        // same name by it (the web app's upload status).
        let uploaded_at = objects
            .get(std::path::Path::new(&key))
            .and_then(|(_, modified)| *modified)
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .unwrap_or_else(|| self.notebook_now_millis());
        // Checking the files (a PDF's streams inflated under their caps) runs in the work pool.
        let checked = self
            .notebook
            .work()
            .run(move || {
                read_page_with(&files, |path| {
                    objects
                        .get(path)
                        .cloned()
                        .ok_or_else(|| std::io::ErrorKind::NotFound.into())
                })
            })
            .await;
        let draft = match checked {
            Ok(draft) => draft,
            Err(failure) => {
                self.tell(&user, &key, uploaded_at, Err(&failure)).await?;
                return Ok(IngestOutcome::Rejected(failure));
            }
        };
        // Through the OCR step: ink alone is read (Textract on AWS), a PDF of several pages is
        // several pages, each PDF-only page gets a PNG.
        #[cfg(feature = "ocr")]
        let saved = self.notebook.import_draft(&user, draft, false).await;
        #[cfg(not(feature = "ocr"))]
        let saved = self
            .notebook
            .import_page(&user, draft)
            .await
            .map(|s| vec![s]);
        let outcome = match saved {
            Ok(saved) => IngestOutcome::Imported(saved),
            // The page is in the trash: it stays there (a delivery that must not be retried).
            Err(NotebookError::Invalid(reason) | NotebookError::InTrash(reason)) => {
                IngestOutcome::Rejected(ImportFailure::refused(&key, reason))
            }
            Err(e) => return Err(IngestError::Store(e)),
        };
        match &outcome {
            IngestOutcome::Imported(saved) => {
                self.tell(&user, &key, uploaded_at, Ok(saved)).await?
            }
            IngestOutcome::Rejected(failure) => {
                self.tell(&user, &key, uploaded_at, Err(failure)).await?;
            }
            IngestOutcome::Bundle(_) | IngestOutcome::Ignored(_) => {}
        }
        Ok(outcome)
    }

    /// Imports the bundle at `key` into `user`'s notebook with `Notebook::import_bundle`, as
    /// `nib import --bundle` does (the same checks, nothing written unless all of it can be),
    /// from a temporary file (the import seeks in the ZIP), and records the outcome for the
    /// web app (under the key's name below the user's prefix, `bundles/{id}.zip`). A
    /// redelivered event of an upload whose result is recorded changes nothing.
    async fn bundle(&self, user: &UserId, key: &str) -> Result<IngestOutcome, IngestError> {
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| IngestError::Fetch {
            user: user.clone(),
            ext: "zip",
            source,
        };
        let name = bundle_result_name(key);
        let out = self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| fail(Box::new(e)))?;
        let uploaded_at = out
            .last_modified
            .and_then(|t| SystemTime::try_from(t).ok())
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .unwrap_or_else(|| self.notebook_now_millis());
        let recorded = self
            .notebook
            .upload_result(user, name)
            .await
            .map_err(IngestError::Store)?;
        if recorded.is_some_and(|r| r.uploaded_at == uploaded_at) {
            return Ok(IngestOutcome::Ignored(
                "this bundle upload was imported before",
            ));
        }
        // Only the data screen's bundle form sends a bundle: its policy pins this key and
        // `application/zip`. A page form pins other types (the form without script
        // `application/octet-stream`, the script a page file's), so an object here of another
        // type came some other way and is refused unread.
        if out.content_type() != Some(BUNDLE_CONTENT_TYPE) {
            let reason = "not sent through the bundle form".to_owned();
            self.notebook
                .record_upload_result(
                    user,
                    name,
                    &UploadResult {
                        uploaded_at,
                        outcome: "refused".to_owned(),
                        page_id: None,
                        reason: Some(format!("Nothing was imported: {reason}.")),
                    },
                )
                .await
                .map_err(IngestError::Store)?;
            return Ok(IngestOutcome::Rejected(ImportFailure::refused(key, reason)));
        }
        // To a file in the function's /tmp chunk by chunk: a bundle may be larger than is
        // worth holding in memory beside the import.
        let mut file = tempfile::tempfile().map_err(|e| fail(Box::new(e)))?;
        let mut body = out.body;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| fail(Box::new(e)))?;
            std::io::Write::write_all(&mut file, &chunk).map_err(|e| fail(Box::new(e)))?;
        }
        std::io::Seek::rewind(&mut file).map_err(|e| fail(Box::new(e)))?;
        // Only the web app's form puts bundles here: the browser's cap.
        let imported = self
            .notebook
            .import_bundle_file(user, file, crate::notebook::MAX_APP_BUNDLE_BYTES)
            .await;
        let (outcome, result) = match imported {
            Ok(report) => {
                let message = format!(
                    "Imported {} pages and {} tasks; {} pages and {} tasks were there already.",
                    report.pages, report.tasks, report.pages_present, report.tasks_present
                );
                (IngestOutcome::Bundle(report), ("new", message))
            }
            Err(
                e @ (BundleError::Foreign(_)
                | BundleError::Damaged(_)
                | BundleError::NotEmpty(_)
                | BundleError::InTrash(_)),
            ) => {
                let message = format!("Nothing was imported: {e}.");
                (
                    IngestOutcome::Rejected(ImportFailure::refused(key, e.to_string())),
                    ("refused", message),
                )
            }
            Err(source) => {
                return Err(IngestError::Bundle {
                    user: user.clone(),
                    source,
                });
            }
        };
        let (kind, message) = result;
        self.notebook
            .record_upload_result(
                user,
                name,
                &UploadResult {
                    uploaded_at,
                    outcome: kind.to_owned(),
                    page_id: None,
                    reason: Some(message),
                },
            )
            .await
            .map_err(IngestError::Store)?;
        Ok(outcome)
    }

    /// Records what became of the upload `key` for the web app's upload status
    /// (`Notebook::record_upload_result`), under the file's name. A refusal caused by another
    /// file of the page (a sibling) names that file.
    async fn tell(
        &self,
        user: &UserId,
        key: &str,
        uploaded_at: i64,
        outcome: Result<&[SavedPage], &ImportFailure>,
    ) -> Result<(), IngestError> {
        let name = key.rsplit('/').next().unwrap_or_default();
        let result = match outcome {
            Ok(saved) => {
                let first = saved.first();
                let outcome = match first {
                    None => "unchanged",
                    Some(_) if saved.iter().all(|p| p.superseded) => "unchanged",
                    Some(_) if saved.iter().any(|p| p.created) => "new",
                    Some(_) => "updated",
                };
                UploadResult {
                    uploaded_at,
                    outcome: outcome.to_owned(),
                    page_id: first.map(|p| p.page_id.clone()),
                    reason: None,
                }
            }
            Err(failure) => {
                let at_fault = failure
                    .path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                let reason = if at_fault == name || at_fault.is_empty() {
                    failure.reason.clone()
                } else {
                    format!("{at_fault}: {}", failure.reason)
                };
                UploadResult {
                    uploaded_at,
                    outcome: "refused".to_owned(),
                    page_id: None,
                    reason: Some(reason),
                }
            }
        };
        self.notebook
            .record_upload_result(user, name, &result)
            .await
            .map_err(IngestError::Store)
    }

    fn notebook_now_millis(&self) -> i64 {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_millis()).ok())
            .unwrap_or(0)
    }

    /// The object's bytes and `LastModified`; `None` when it does not exist and `required` is
    /// false. Without `s3:ListBucket` (ingest's role has none) S3 answers a missing key with
    /// 403, not 404, so both mean "not uploaded" for a sibling.
    async fn fetch(
        &self,
        user: &UserId,
        key: &str,
        ext: &'static str,
        required: bool,
    ) -> Result<Option<(Vec<u8>, Option<SystemTime>)>, IngestError> {
        let fail = |source: Box<dyn std::error::Error + Send + Sync>| IngestError::Fetch {
            user: user.clone(),
            ext,
            source,
        };
        match self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => {
                let modified = out.last_modified.and_then(|t| SystemTime::try_from(t).ok());
                let bytes = out.body.collect().await.map_err(|e| fail(Box::new(e)))?;
                Ok(Some((bytes.into_bytes().to_vec(), modified)))
            }
            Err(e) if !required && is_absent(&e) => Ok(None),
            Err(e) => Err(fail(Box::new(e))),
        }
    }
}

fn is_absent(
    e: &aws_sdk_s3::error::SdkError<GetObjectError, aws_smithy_runtime_api::http::Response>,
) -> bool {
    if matches!(e.as_service_error(), Some(GetObjectError::NoSuchKey(_))) {
        return true;
    }
    e.raw_response()
        .is_some_and(|r| matches!(r.status().as_u16(), 403 | 404))
}
