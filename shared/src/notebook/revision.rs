//! Unchanged reads (issue 14): the revisions `get_page`, `list_pages` and `list_tasks` answer
//! with, so that a client that passes one back as `if_revision` hears "unchanged" instead of
//! the whole answer, and nothing is opened to say so.
//!
//! A revision is a token: a hash of what the answer depends on. For a list, the notebook's
//! revision item ([`records::REVISION_SK`], replaced by every write in its transaction) and the
//! call's arguments; for a page, its item (random `rev`, version), the notebook's revision
//! (task statuses and Notion links shown on the page change elsewhere) and, for a page with
//! ink, the half of the signed URLs' lifetime we are in, so a page said to be unchanged never
//! sends a client back to URLs with less than half their lifetime left. A token of other
//! arguments, of another page or made up is simply not the current one: the full answer.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use super::records::{self, PageHead, PageRevisionHead, decode, page_sk, user_pk};
use super::{Notebook, NotebookError, PageView};
use crate::domain::{PageId, UserId};

/// The revision token of an answer that depends on `parts`.
pub fn revision_token(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    format!("r1.{}", URL_SAFE_NO_PAD.encode(&h.finalize()[..16]))
}

impl Notebook {
    /// The notebook's revision now: one item read, nothing opened.
    pub async fn notebook_revision(&self, user: &UserId) -> Result<u64, NotebookError> {
        let item = self.store.get(&user_pk(user), records::REVISION_SK).await?;
        Ok(records::revision_of(item.as_ref()))
    }

    /// A page's item and its current revision: the page and revision items in one batch,
    /// nothing opened. [`Notebook::page_view`] opens it when the whole answer is wanted.
    pub async fn page_revision(
        &self,
        user: &UserId,
        page_id: &PageId,
    ) -> Result<PageAtRevision, NotebookError> {
        let pk = user_pk(user);
        let keys = [
            (pk.clone(), page_sk(page_id)),
            (pk, records::REVISION_SK.to_owned()),
        ];
        let mut found = self.store.batch_get(&keys).await?.into_iter();
        let Some(item) = found.next().flatten() else {
            return Err(self.page_missing(user, page_id).await);
        };
        let notebook = records::revision_of(found.next().flatten().as_ref());
        let head: PageRevisionHead = decode("page", &item.body)?;
        let half_ttl = (self.config.asset_ttl_seconds / 2).max(1) as i64;
        let url_window = if head.has_pdf || head.has_png {
            (self.clock.unix() / half_ttl).to_string()
        } else {
            String::new()
        };
        let revision = revision_token(&[
            "page",
            &head.page_id.to_string(),
            &head.rev.to_string(),
            &item.version.to_string(),
            &notebook.to_string(),
            &url_window,
        ]);
        Ok(PageAtRevision {
            body: item.body,
            revision,
        })
    }

    /// The whole page of a [`Notebook::page_revision`] read.
    pub async fn page_view(
        &self,
        user: &UserId,
        page: PageAtRevision,
    ) -> Result<PageView, NotebookError> {
        let head: PageHead = decode("page", &page.body)?;
        self.open_page(user, head).await
    }
}

/// A page item read, not decoded past what its revision needs, and its revision token.
pub struct PageAtRevision {
    body: Vec<u8>,
    pub revision: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_depend_on_every_part_and_its_boundaries() {
        let a = revision_token(&["list_pages", "1", "2026-06-19"]);
        assert_eq!(a, revision_token(&["list_pages", "1", "2026-06-19"]));
        assert!(a.starts_with("r1."));
        assert_ne!(a, revision_token(&["list_pages", "2", "2026-06-19"]));
        assert_ne!(a, revision_token(&["list_tasks", "1", "2026-06-19"]));
        // Parts are length-prefixed: moving a boundary is another token.
        assert_ne!(revision_token(&["ab", "c"]), revision_token(&["a", "bc"]));
    }
}
