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
//! Outcomes: a bad page (not a PDF, no date, not UTF-8) is [`IngestOutcome::Rejected`], logged
//! and not retried (it would fail the same way); a failure to read S3 or write the store is an
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
    ImportFailure, Notebook, NotebookError, PAGE_EXTENSIONS, PageFiles, SavedPage, read_page_with,
};

/// The prefix the bucket notification fires on.
pub const UPLOAD_PREFIX: &str = "uploads/";

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
}

/// What became of one object.
#[derive(Debug)]
pub enum IngestOutcome {
    /// The pages were written (one per page of a multi-page PDF), or (`superseded`) already
    /// held newer versions of every file.
    Imported(Vec<SavedPage>),
    /// The page's files are not a valid page; the reason names the file.
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
        let ids = parse_upload_key(&decoded).map(|(user, _, ext)| (user, ext));
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
        let prefix = format!("{UPLOAD_PREFIX}{user}/{stem}.");
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
        let draft = match read_page_with(&files, |path| {
            objects
                .get(path)
                .cloned()
                .ok_or_else(|| std::io::ErrorKind::NotFound.into())
        }) {
            Ok(draft) => draft,
            Err(failure) => return Ok(IngestOutcome::Rejected(failure)),
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
        match saved {
            Ok(saved) => Ok(IngestOutcome::Imported(saved)),
            // The page is in the trash: it stays there (a delivery that must not be retried).
            Err(NotebookError::Invalid(reason) | NotebookError::InTrash(reason)) => {
                Ok(IngestOutcome::Rejected(ImportFailure::refused(key, reason)))
            }
            Err(e) => Err(IngestError::Store(e)),
        }
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

/// `(user, stem, ext)` of `uploads/{user}/{stem}.{ext}`; `None` for anything else (folders,
/// hidden files, other extensions, an invalid user id).
pub fn parse_upload_key(key: &str) -> Option<(UserId, &str, &str)> {
    let rest = key.strip_prefix(UPLOAD_PREFIX)?;
    let (user, file) = rest.split_once('/')?;
    let user = UserId::parse(user).ok()?;
    if file.contains('/') || file.starts_with('.') {
        return None;
    }
    let (stem, ext) = file.rsplit_once('.')?;
    let ext_known = PAGE_EXTENSIONS.contains(&ext);
    (!stem.is_empty() && ext_known).then_some((user, stem, ext))
}

/// S3 event keys are URL-encoded the form way: `+` is a space, `%XX` a byte.
pub fn decode_event_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upload_keys_name_a_user_and_a_page_file() {
        let (user, stem, ext) = parse_upload_key("uploads/alice/2026-06-19.md").unwrap();
        assert_eq!((user.as_str(), stem, ext), ("alice", "2026-06-19", "md"));
        let (_, stem, ext) = parse_upload_key("uploads/bob/2026-06-19 standup.pdf").unwrap();
        assert_eq!((stem, ext), ("2026-06-19 standup", "pdf"));
        for key in [
            "u/alice/pages/x.png",
            "uploads/alice/",
            "uploads/alice/notes.docx",
            "uploads/alice/sub/2026-06-19.md",
            "uploads/alice/.hidden.md",
            "uploads/Alice/2026-06-19.md",
            "uploads/2026-06-19.md",
        ] {
            assert!(parse_upload_key(key).is_none(), "{key}");
        }
    }

    #[test]
    fn event_keys_are_url_decoded() {
        assert_eq!(
            decode_event_key("uploads/alice/2026-06-19+standup.md"),
            "uploads/alice/2026-06-19 standup.md"
        );
        assert_eq!(decode_event_key("a%2Bb%20c"), "a+b c");
        assert_eq!(decode_event_key("100%"), "100%");
        assert_eq!(decode_event_key("bad%zz"), "bad%zz");
    }
}
