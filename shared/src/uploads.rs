//! Where uploads go in the bucket, and how large they may be: the keys the web app's presigned
//! POSTs (`adapters::aws::presigned_post`), `nib import --via-upload` and the ingest function
//! (`functions::ingest`) agree on, and the size limits S3 enforces. Plain strings and numbers,
//! so the web app's handlers use them in a build without the AWS back end too.
//!
//! A page file is `uploads/{user}/{stem}.{ext}` ([`parse_upload_key`]); a bundle the web app
//! sent is `uploads/{user}/bundles/{id}.zip` ([`bundle_key`]).

use crate::domain::UserId;
use crate::notebook::PAGE_EXTENSIONS;

/// The prefix the bucket notification fires on.
pub const UPLOAD_PREFIX: &str = "uploads/";

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

/// The folder under a user's upload prefix that bundles go to: `uploads/{user}/bundles/`.
/// Page files are never there (their keys have no folder below the user's).
pub const BUNDLE_FOLDER: &str = "bundles";

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
    let ok = (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ok.then_some((user, id))
}

/// The name a bundle upload's result is recorded under (`Notebook::record_upload_result`):
/// its key below the user's prefix, `bundles/{id}.zip`, which no page file's name can be.
pub fn bundle_result_name(key: &str) -> &str {
    key.find(&format!("/{BUNDLE_FOLDER}/"))
        .map_or(key, |at| &key[at + 1..])
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
