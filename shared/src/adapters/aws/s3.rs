//! `S3Assets`: page images in S3 behind the `Assets` port (DESIGN §7).
//!
//! Objects live at `u/{user}/pages/{page_id}.{pdf|png}` with the `Content-Type` of their kind,
//! so a presigned GET serves them as what they are. Readers get SigV4 presigned GET URLs
//! (`X-Amz-Expires` = the TTL, at most seven days); the function never proxies the bytes.
//! Uploads go straight to S3 under `uploads/{user}/...` through a presigned PUT whose signed
//! `Content-Type` the uploader must send (the ingest function picks them up from there).
//!
//! Presigning sends nothing: it runs on a second client built without the call counter, so
//! counted calls are requests that really went out.

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;

use crate::domain::{PageId, UserId};
use crate::ports::{AssetKind, Assets, AssetsError};

/// The S3 bucket of page images.
#[derive(Debug, Clone)]
pub struct S3Assets {
    client: Client,
    presigner: Client,
    bucket: String,
}

/// A presigned upload: PUT the file's bytes to `url` with these headers, before it expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresignedUpload {
    /// The object key the upload will have (`uploads/{user}/{id}.{ext}`).
    pub key: String,
    pub method: String,
    pub url: String,
    /// Headers the request must carry as signed (`content-type`).
    pub headers: Vec<(String, String)>,
}

/// The object key of a page's ink file.
pub fn object_key(user: &UserId, page: &PageId, kind: AssetKind) -> String {
    format!("u/{user}/pages/{page}.{}", kind.ext())
}

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> AssetsError {
    AssetsError::Unavailable(Box::new(e))
}

fn presigning(ttl_seconds: u64) -> Result<PresigningConfig, AssetsError> {
    PresigningConfig::expires_in(Duration::from_secs(ttl_seconds)).map_err(unavailable)
}

impl S3Assets {
    /// Assets in `bucket`: `client` sends requests, `presigner` only signs URLs (give it a
    /// client without interceptors that count or fail requests).
    pub fn new(client: Client, presigner: Client, bucket: impl Into<String>) -> S3Assets {
        S3Assets {
            client,
            presigner,
            bucket: bucket.into(),
        }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Puts a page file of an import folder under `uploads/{user}/{file_name}`, for the ingest
    /// function to import (`nib import --via-upload`); returns the object key. `file_name` is a
    /// file's name alone (`2026-06-19.pdf`), as `group_dir` found it.
    pub async fn put_upload(
        &self,
        user: &UserId,
        file_name: &str,
        bytes: Vec<u8>,
    ) -> Result<String, AssetsError> {
        let key = format!("uploads/{user}/{file_name}");
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(key)
    }

    /// A presigned PUT for a new upload of the user's, valid for `ttl_seconds`.
    pub async fn presign_upload(
        &self,
        user: &UserId,
        kind: AssetKind,
        ttl_seconds: u64,
    ) -> Result<PresignedUpload, AssetsError> {
        let key = format!("uploads/{user}/{}.{}", uuid::Uuid::now_v7(), kind.ext());
        let request = self
            .presigner
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .content_type(kind.content_type())
            .presigned(presigning(ttl_seconds)?)
            .await
            .map_err(unavailable)?;
        Ok(PresignedUpload {
            key,
            method: request.method().to_owned(),
            url: request.uri().to_owned(),
            headers: request
                .headers()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        })
    }
}

#[async_trait]
impl Assets for S3Assets {
    async fn put(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
        bytes: Vec<u8>,
    ) -> Result<(), AssetsError> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(object_key(user, page, kind))
            .content_type(kind.content_type())
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn get(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
    ) -> Result<Option<Vec<u8>>, AssetsError> {
        let answer = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(object_key(user, page, kind))
            .send()
            .await;
        match answer {
            Ok(object) => {
                let bytes = object.body.collect().await.map_err(unavailable)?;
                Ok(Some(bytes.into_bytes().to_vec()))
            }
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn signed_url(
        &self,
        user: &UserId,
        page: &PageId,
        kind: AssetKind,
        ttl_seconds: u64,
    ) -> Result<String, AssetsError> {
        let request = self
            .presigner
            .get_object()
            .bucket(&self.bucket)
            .key(object_key(user, page, kind))
            .presigned(presigning(ttl_seconds)?)
            .await
            .map_err(unavailable)?;
        Ok(request.uri().to_owned())
    }

    /// Deletes every object under `u/{user}/` and `uploads/{user}/`: one `ListObjectsV2` per
    /// 1,000 keys and one `DeleteObject` per key (no `DeleteObjects`, which needs a
    /// Content-MD5 and reports failures per key inside a 200).
    async fn delete_user(&self, user: &UserId) -> Result<u64, AssetsError> {
        let mut deleted = 0;
        for prefix in [format!("u/{user}/"), format!("uploads/{user}/")] {
            let mut token: Option<String> = None;
            loop {
                let page = self
                    .client
                    .list_objects_v2()
                    .bucket(&self.bucket)
                    .prefix(&prefix)
                    .set_continuation_token(token.take())
                    .send()
                    .await
                    .map_err(unavailable)?;
                for object in page.contents() {
                    let Some(key) = object.key() else { continue };
                    self.client
                        .delete_object()
                        .bucket(&self.bucket)
                        .key(key)
                        .send()
                        .await
                        .map_err(unavailable)?;
                    deleted += 1;
                }
                match page.next_continuation_token() {
                    Some(next) if page.is_truncated() == Some(true) => token = Some(next.into()),
                    _ => break,
                }
            }
        }
        Ok(deleted)
    }
}
