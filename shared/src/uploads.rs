//! Where uploads go in the bucket, and how large they may be: the keys the web app's presigned
//! POSTs (`adapters::aws::presigned_post`), `nib import --via-upload` and the ingest function
//! (`functions::ingest`) agree on, and the size limits S3 enforces. Plain strings and numbers,
//! so the web app's handlers use them in a build without the AWS back end too.
//!
//! Three key spaces under a user's prefix, one per way in, so that what one form may write is
//! never what another's ingest path takes:
//!
//! - a page file the script (or `nib import --via-upload`) sent: `uploads/{user}/{stem}.{ext}`,
//!   an exact key per presigned POST;
//! - a page file the upload form without script sent: `uploads/{user}/form-{id}/{stem}.{ext}`,
//!   `{id}` fresh for each form ([`form_prefix`]): the form's policy takes any name, but only
//!   under its own folder, for a few minutes;
//! - a bundle the web app's data screen sent: `uploads/{user}/bundles/{id}.zip`
//!   ([`bundle_key`]), an exact key per form.
//!
//! [`parse_upload_key`] takes the first two and nothing in `bundles/`; [`parse_bundle_key`]
//! only the third. A form's folder cannot reach `bundles/` (its prefix ends in its own folder),
//! and the bundle form's exact key holds no page file's name.

use crate::domain::UserId;
use crate::notebook::PAGE_EXTENSIONS;

/// The prefix the bucket notification fires on.
pub const UPLOAD_PREFIX: &str = "uploads/";

/// How long a form the web app signs for the browser to post straight to S3 (the upload form
/// without script, the bundle form) is accepted after it was signed: ten minutes, long enough
/// to pick a file and send it, short enough that a form left in a page (or a history, or a
/// cache) is soon worth nothing. Reloading the page signs a new one.
pub const FORM_TTL_SECONDS: u64 = 600;

/// The largest page file a browser may upload (64 MiB), enforced by S3 through the policy's
/// `content-length-range`. The ingest function reads a page's files whole into memory (up to
/// seven of them, one per extension) and rasterises a PDF's pages, within its 1,536 MB; a
/// scanned notebook page is a few MB, a PDF of a whole notebook some tens.
pub const MAX_UPLOAD_BYTES: u64 = 64 << 20;

/// The largest bundle the web app uploads for the ingest function to import (256 MiB),
/// enforced by S3 through the policy's `content-length-range`: ingest keeps the bundle in its
/// /tmp (512 MB on Lambda by default) while it imports it. Larger bundles go through
/// `nib import --bundle --backend aws`.
pub const MAX_BUNDLE_UPLOAD_BYTES: u64 = 256 << 20;

/// `(user, stem, ext)` of `uploads/{user}/{stem}.{ext}` or
/// `uploads/{user}/form-{id}/{stem}.{ext}` (the form without script's folder); `None` for
/// anything else (other folders, `bundles/` among them, hidden files, other extensions, an
/// invalid user id).
pub fn parse_upload_key(key: &str) -> Option<(UserId, &str, &str)> {
    let rest = key.strip_prefix(UPLOAD_PREFIX)?;
    let (user, file) = rest.split_once('/')?;
    let user = UserId::parse(user).ok()?;
    let file = match file.split_once('/') {
        Some((folder, file)) => {
            folder.strip_prefix(FORM_FOLDER).filter(|id| valid_id(id))?;
            file
        }
        None => file,
    };
    if file.contains('/') || file.starts_with('.') {
        return None;
    }
    let (stem, ext) = file.rsplit_once('.')?;
    let ext_known = PAGE_EXTENSIONS.contains(&ext);
    (!stem.is_empty() && ext_known).then_some((user, stem, ext))
}

/// The folder of an upload's page files: the key up to its last `/` (`uploads/{user}/` or
/// `uploads/{user}/form-{id}/`). A page's files are read together only from one folder.
pub fn upload_folder(key: &str) -> &str {
    key.rfind('/').map_or("", |at| &key[..=at])
}

/// What the folder of one upload form without script starts with: `form-{id}`.
pub const FORM_FOLDER: &str = "form-";

/// The prefix one upload form without script may write under: `uploads/{user}/form-{id}/`.
/// `id` is the form's fresh id ([`valid_id`]).
pub fn form_prefix(user: &UserId, id: &str) -> String {
    format!("{UPLOAD_PREFIX}{user}/{FORM_FOLDER}{id}/")
}

/// Whether `id` may name a form or a bundle upload: 1 to 64 letters, digits, `-` and `_`.
pub fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The folder under a user's upload prefix that bundles go to: `uploads/{user}/bundles/`.
/// Page files are never there (their keys have no folder below the user's).
pub const BUNDLE_FOLDER: &str = "bundles";

/// The `Content-Type` the bundle form's policy pins, and the only one ingest takes a bundle
/// with.
pub const BUNDLE_CONTENT_TYPE: &str = "application/zip";

/// The key a bundle uploaded from the browser gets: `uploads/{user}/bundles/{id}.zip`.
pub fn bundle_key(user: &UserId, id: &str) -> String {
    format!("{UPLOAD_PREFIX}{user}/{BUNDLE_FOLDER}/{id}.zip")
}

/// `(user, id)` of `uploads/{user}/bundles/{id}.zip`, `id` of 1 to 64 letters, digits, `-`
/// and `_`; `None` for anything else.
pub fn parse_bundle_key(key: &str) -> Option<(UserId, &str)> {
    let rest = key.strip_prefix(UPLOAD_PREFIX)?;
    let (user, rest) = rest.split_once('/')?;
    let user = UserId::parse(user).ok()?;
    let id = rest
        .strip_prefix(BUNDLE_FOLDER)?
        .strip_prefix('/')?
        .strip_suffix(".zip")?;
    valid_id(id).then_some((user, id))
}

/// The name a bundle upload's result is recorded under (`Notebook::record_upload_result`):
/// its key below the user's prefix, `bundles/{id}.zip`, which no page file's name can be.
pub fn bundle_result_name(key: &str) -> &str {
    key.find(&format!("/{BUNDLE_FOLDER}/"))
        .map_or(key, |at| &key[at + 1..])
}

/// The partition (`aws`, `aws-cn`, `aws-us-gov`) of an IAM role ARN,
/// `arn:{partition}:iam::{account}:role/{path/}{name}`; `None` when `arn` is not one.
pub fn role_arn_partition(arn: &str) -> Option<&str> {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(partition), Some("iam"), Some(""), Some(account), Some(resource)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let named = resource
        .strip_prefix("role/")
        .is_some_and(|name| !name.is_empty() && !name.ends_with('/'));
    let ok = partition.starts_with("aws")
        && !account.is_empty()
        && account.bytes().all(|b| b.is_ascii_digit())
        && named;
    ok.then_some(partition)
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
            "uploads/alice/bundles/2026-06-19.md",
            "uploads/alice/form-/2026-06-19.md",
            "uploads/alice/form-a b/2026-06-19.md",
            "uploads/alice/form-1/sub/2026-06-19.md",
            "uploads/alice/form-1/.hidden.md",
            "uploads/alice/.hidden.md",
            "uploads/Alice/2026-06-19.md",
            "uploads/2026-06-19.md",
        ] {
            assert!(parse_upload_key(key).is_none(), "{key}");
        }
    }

    /// The form without script writes under its own folder; its page files are page files,
    /// read with the siblings of that folder only.
    #[test]
    fn form_keys_are_page_files_in_the_forms_folder() {
        let alice = UserId::parse("alice").unwrap();
        let prefix = form_prefix(&alice, "0b6f41c2");
        assert_eq!(prefix, "uploads/alice/form-0b6f41c2/");
        let key = format!("{prefix}2026-06-19.pdf");
        let (user, stem, ext) = parse_upload_key(&key).unwrap();
        assert_eq!((user.as_str(), stem, ext), ("alice", "2026-06-19", "pdf"));
        assert_eq!(upload_folder(&key), prefix);
        assert_eq!(
            upload_folder("uploads/alice/2026-06-19.pdf"),
            "uploads/alice/"
        );
        // Nothing a form may write is a bundle, and no bundle key is a page file.
        for key in [
            format!("{prefix}x.zip"),
            format!("{prefix}bundles/x.zip"),
            format!("{prefix}../bundles/x.zip"),
        ] {
            assert!(parse_bundle_key(&key).is_none(), "{key}");
            assert!(parse_upload_key(&key).is_none(), "{key}");
        }
    }

    #[test]
    fn bundle_keys_are_told_apart_from_page_files() {
        let alice = UserId::parse("alice").unwrap();
        let key = bundle_key(&alice, "0b6f-41c2_9");
        assert_eq!(key, "uploads/alice/bundles/0b6f-41c2_9.zip");
        let (user, id) = parse_bundle_key(&key).unwrap();
        assert_eq!((user.as_str(), id), ("alice", "0b6f-41c2_9"));
        assert!(parse_upload_key(&key).is_none(), "never a page file");
        assert_eq!(bundle_result_name(&key), "bundles/0b6f-41c2_9.zip");
        for key in [
            "uploads/alice/bundles/.zip",
            "uploads/alice/bundles/a b.zip",
            "uploads/alice/bundles/x.pdf",
            "uploads/alice/bundles/sub/x.zip",
            "uploads/alice/x.zip",
            "uploads/Alice/bundles/x.zip",
            "uploads/bundles/x.zip",
        ] {
            assert!(parse_bundle_key(key).is_none(), "{key}");
        }
        assert!(
            parse_bundle_key(&format!("uploads/alice/bundles/{}.zip", "a".repeat(65))).is_none()
        );
    }

    #[test]
    fn role_arns_name_their_partition() {
        assert_eq!(
            role_arn_partition("arn:aws:iam::123456789012:role/nib-uploads-role"),
            Some("aws")
        );
        assert_eq!(
            role_arn_partition("arn:aws-cn:iam::123456789012:role/p/nib"),
            Some("aws-cn")
        );
        for arn in [
            "",
            "nib-uploads-role",
            "arn:aws:iam::123456789012:user/nib",
            "arn:aws:s3:::bucket",
            "arn:aws:iam::x:role/nib",
            "arn:aws:iam::123456789012:role/",
        ] {
            assert!(role_arn_partition(arn).is_none(), "{arn}");
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
