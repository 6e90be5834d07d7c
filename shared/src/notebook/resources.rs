//! Reads for the MCP resources (`resources/read`): a page's image bytes and one task by id.
//! The page's markdown comes from [`Notebook::get_page`]. Like every read, each touches only
//! the verified user's items, so another user's id reads as not found.

use super::Notebook;
use super::NotebookError;
use super::records::{self, TaskRecord, decode, task_sk, user_pk};
use crate::domain::{PageId, TaskLinkId, UserId};
use crate::ports::AssetKind;

/// A page's image as a resource can carry it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageImage {
    /// The PNG's bytes (at most the cap asked for).
    Png(Vec<u8>),
    /// Larger than the cap: a signed URL to it, valid for `ttl_seconds`.
    Url { url: String, ttl_seconds: u64 },
}

/// One task, as `resources/read` of `nib://tasks/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskResource {
    pub task_link_id: TaskLinkId,
    pub text: String,
    pub status: crate::domain::TaskStatus,
    pub first_seen_date: crate::domain::Date,
    pub completed_date: Option<crate::domain::Date>,
    pub source_page_id: PageId,
}

impl Notebook {
    /// The page's PNG: its bytes when at most `cap` bytes, else a signed URL. `NotFound` when
    /// the page does not exist for this user or has no PNG.
    pub async fn page_image(
        &self,
        user: &UserId,
        page_id: &PageId,
        cap: usize,
    ) -> Result<PageImage, NotebookError> {
        let page = self
            .load_page_head(user, page_id)
            .await?
            .ok_or(NotebookError::NotFound("page"))?;
        if !page.has_png {
            return Err(NotebookError::NotFound("page image"));
        }
        let bytes = self
            .assets
            .get(user, page_id, AssetKind::Png)
            .await?
            .ok_or(NotebookError::NotFound("page image"))?;
        if bytes.len() <= cap {
            return Ok(PageImage::Png(bytes));
        }
        let ttl_seconds = self.config.asset_ttl_seconds;
        let url = self
            .assets
            .signed_url(user, page_id, AssetKind::Png, ttl_seconds)
            .await?;
        Ok(PageImage::Url { url, ttl_seconds })
    }

    /// One task of this user, by id.
    pub async fn get_task(
        &self,
        user: &UserId,
        task: &TaskLinkId,
    ) -> Result<TaskResource, NotebookError> {
        let pk = user_pk(user);
        let sk = task_sk(task);
        let item = self
            .store
            .get(&pk, &sk)
            .await?
            .ok_or(NotebookError::NotFound("task"))?;
        let t: TaskRecord = decode("task", &item.body)?;
        let keys = self.vault.user_keys(user).await?;
        let text = records::open_string(&keys, user, &pk, &sk, "text", &t.text)?;
        Ok(TaskResource {
            task_link_id: t.task_link_id,
            text,
            status: t.status,
            first_seen_date: t.first_seen_date,
            completed_date: t.completed_date,
            source_page_id: t.source_page_id,
        })
    }
}
