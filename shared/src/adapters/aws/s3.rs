//! `S3Assets`: page images in S3 behind the `Assets` port (docs/design.md §7).
//!
//! Objects live at `u/{user}/pages/{page_id}.{pdf|png}` with the `Content-Type` of their kind,
//! so a presigned GET serves them as what they are. Readers get SigV4 presigned GET URLs
//! (`X-Amz-Expires` = the TTL, at most seven days); the function never proxies the bytes.
//! Uploads go straight to S3 under `uploads/{user}/...` (the ingest function picks them up from
//! there): through a presigned PUT whose signed `Content-Type` the uploader must send, or, for
//! the web app's browser uploads, a presigned POST ([`S3Assets::presigned_post`],
//! [`super::presigned_post`]) whose policy S3 checks: the exact key and `Content-Type` and at
//! most [`MAX_UPLOAD_BYTES`].
//!
//! **Exports.** `export_notebook` (pages function) writes the archive to
//! `exports/{user}/{random}.zip` and answers a presigned GET of it with a short TTL: a Lambda
//! response cannot carry a whole notebook. The lifecycle rule `expire-exports` deletes them a
//! day later.
//!
//! **Trash.** `trash` reads each of a page's objects' tags (`GetObjectTagging`) and copies
//! one not marked yet onto itself (`CopyObject`, same key, metadata and tags replaced: its
//! content type again, the tag [`TRASH_TAG`]); the copy is a new current version with a new
//! `LastModified`, so the bucket's lifecycle rule
//! `purge-trashed-images` (`infra/s3.tf`: current versions tagged `nib-trash=1` expire
//! [`crate::ports::ASSET_PURGE_DAYS`] days after their creation, noncurrent ones a day after
//! they stop being current) counts from the delete. `untrash` reads the tags
//! (`GetObjectTagging`) and, when the tag is there, copies the object onto itself again without
//! tags (the trashed version becomes noncurrent and goes a day later). No process of ours runs
//! for the purge.
//!
//! Presigning sends nothing: it runs on a second client built without the call counter, so
//! counted calls are requests that really went out.

use std::time::Duration;

use async_trait::async_trait;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_s3::Client;
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{MetadataDirective, TaggingDirective};

use super::presigned_post::{
    self, MAX_POST_TTL_SECONDS, MAX_SESSION_SECONDS, MIN_SESSION_SECONDS, PostCredentials,
    PostUpload,
};
use crate::domain::{PageId, UserId};
use crate::ports::{AssetKind, Assets, AssetsError, PresignedPost, UploadSigner};
use crate::uploads::{
    BUNDLE_CONTENT_TYPE, MAX_BUNDLE_UPLOAD_BYTES, MAX_UPLOAD_BYTES, UPLOAD_PREFIX, form_prefix,
    role_arn_partition,
};

/// The S3 bucket of page images.
#[derive(Debug, Clone)]
pub struct S3Assets {
    client: Client,
    presigner: Client,
    bucket: String,
    post: Option<PostSigning>,
}

/// What signing a POST policy takes that the SDK client does not expose: the credentials
/// provider (asked at each signature, since a Lambda role's credentials rotate), the region
/// and the bucket's URL.
#[derive(Debug, Clone)]
pub struct PostSigning {
    pub credentials: Option<SharedCredentialsProvider>,
    pub region: String,
    /// [`presigned_post::bucket_url`].
    pub bucket_url: String,
    /// The role each POST is signed as, assumed for that POST alone with a session policy of
    /// its keys (`NIB_UPLOAD_ROLE_ARN`); `None`: `credentials` sign it as they are.
    pub upload_role: Option<UploadRole>,
}

/// The uploads role (`infra/iam.tf`: `aws_iam_role.uploads`) and the STS client that assumes it.
#[derive(Debug, Clone)]
pub struct UploadRole {
    pub sts: aws_sdk_sts::Client,
    pub role_arn: String,
}

/// Why a presigned POST could not be signed (the process has no credentials or they fail).
#[derive(Debug, thiserror::Error)]
pub enum PostSigningError {
    #[error("no S3 client configured for presigned POST uploads")]
    NotConfigured,
    #[error("no AWS credentials to sign an upload with")]
    NoCredentials,
    #[error("cannot load the AWS credentials")]
    Credentials(#[source] aws_credential_types::provider::error::CredentialsError),
    #[error("NIB_UPLOAD_ROLE_ARN is not an IAM role ARN")]
    RoleArn,
    #[error("cannot assume the uploads role")]
    AssumeRole(#[source] Box<dyn std::error::Error + Send + Sync>),
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

/// Where exports are kept for download: `exports/{user}/{random}.zip` (`publish_export`).
pub const EXPORTS_PREFIX: &str = "exports/";

const EXPORT_CONTENT_TYPE: &str = "application/zip";

/// A new export's object key: random, so nobody can guess another export's.
fn export_key(user: &UserId) -> String {
    format!("{EXPORTS_PREFIX}{user}/{}.zip", uuid::Uuid::new_v4())
}

/// The key and value of the tag that marks a trashed page's object (`nib-trash=1`).
pub const TRASH_TAG: (&str, &str) = ("nib-trash", "1");

/// Whether an S3 error says the object (or the copy's source) does not exist.
fn is_missing<E: aws_sdk_s3::error::ProvideErrorMetadata>(e: &E) -> bool {
    matches!(e.code(), Some("NoSuchKey" | "NotFound"))
}

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> AssetsError {
    AssetsError::Unavailable(Box::new(e))
}

fn presigning(ttl_seconds: u64) -> Result<PresigningConfig, AssetsError> {
    PresigningConfig::expires_in(Duration::from_secs(ttl_seconds)).map_err(unavailable)
}

/// What one presigned POST fixes, before it is signed ([`S3Assets::sign_post`]).
struct PostFields<'a> {
    /// The keys the signing credentials may put (an exact key, or a prefix and `*`): the
    /// session policy's resource when the uploads role is assumed.
    grant: &'a str,
    key: &'a str,
    key_prefix: Option<&'a str>,
    redirect: Option<&'a str>,
    content_type: &'a str,
    max_bytes: u64,
    ttl_seconds: u64,
}

impl S3Assets {
    /// Copies the object onto itself with its content type and `tags` (a query string,
    /// `""` for none), a new current version; `false` when there is no such object.
    async fn retag(&self, key: &str, kind: AssetKind, tags: &str) -> Result<bool, AssetsError> {
        let answer = self
            .client
            .copy_object()
            .bucket(&self.bucket)
            .key(key)
            .copy_source(format!("{}/{key}", self.bucket))
            .metadata_directive(MetadataDirective::Replace)
            .content_type(kind.content_type())
            .tagging_directive(TaggingDirective::Replace)
            .set_tagging((!tags.is_empty()).then(|| tags.to_owned()))
            .send()
            .await;
        match answer {
            Ok(_) => Ok(true),
            Err(e) if e.as_service_error().is_some_and(is_missing) => Ok(false),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Whether the object carries the trash tag (`GetObjectTagging`); `None` when there is
    /// no such object.
    async fn marked(&self, key: &str) -> Result<Option<bool>, AssetsError> {
        match self
            .client
            .get_object_tagging()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(tags) => Ok(Some(tags.tag_set().iter().any(|t| t.key() == TRASH_TAG.0))),
            Err(e) if e.as_service_error().is_some_and(is_missing) => Ok(None),
            Err(e) => Err(unavailable(e)),
        }
    }

    /// Assets in `bucket`: `client` sends requests, `presigner` only signs URLs (give it a
    /// client without interceptors that count or fail requests).
    pub fn new(client: Client, presigner: Client, bucket: impl Into<String>) -> S3Assets {
        S3Assets {
            client,
            presigner,
            bucket: bucket.into(),
            post: None,
        }
    }

    /// These assets, able to sign presigned POST uploads with `signing`.
    pub fn with_post_signing(mut self, signing: PostSigning) -> S3Assets {
        self.post = Some(signing);
        self
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Signs one POST of `fields` for `user` with the credentials of now, valid for its
    /// lifetime (1 second to 7 days; with the uploads role, to its longest session, an hour);
    /// the callers check their own key, type and size first.
    async fn sign_post(
        &self,
        user: &UserId,
        fields: PostFields<'_>,
    ) -> Result<PresignedPost, AssetsError> {
        let longest = match self.post.as_ref().and_then(|p| p.upload_role.as_ref()) {
            Some(_) => MAX_SESSION_SECONDS,
            None => MAX_POST_TTL_SECONDS,
        };
        if !(1..=longest).contains(&fields.ttl_seconds) {
            return Err(AssetsError::InvalidUpload(
                "the lifetime is outside 1 second..the signing credentials' longest",
            ));
        }
        let (post, credentials) = self
            .post_credentials(user, fields.grant, fields.ttl_seconds)
            .await?;
        let now = time::OffsetDateTime::now_utc();
        let ttl = time::Duration::seconds(i64::try_from(fields.ttl_seconds).unwrap_or(i64::MAX));
        Ok(presigned_post::presign_post(
            &credentials,
            &post.region,
            &PostUpload {
                bucket: &self.bucket,
                url: &post.bucket_url,
                key: fields.key,
                key_prefix: fields.key_prefix,
                redirect: fields.redirect,
                content_type: fields.content_type,
                max_bytes: fields.max_bytes,
                signed_at: now,
                expires_at: now + ttl,
            },
        ))
    }

    /// The POST signing settings and the credentials to sign with now: with an uploads role,
    /// a session of it for `user` that may put `grant` only and outlives `ttl_seconds` (one
    /// STS `AssumeRole`); else the process's own.
    async fn post_credentials(
        &self,
        user: &UserId,
        grant: &str,
        ttl_seconds: u64,
    ) -> Result<(&PostSigning, PostCredentials), AssetsError> {
        let post = self
            .post
            .as_ref()
            .ok_or_else(|| unavailable(PostSigningError::NotConfigured))?;
        if let Some(role) = &post.upload_role {
            let partition = role_arn_partition(&role.role_arn)
                .ok_or_else(|| unavailable(PostSigningError::RoleArn))?;
            let policy =
                presigned_post::upload_session_policy(partition, &self.bucket, grant, &post.region);
            let seconds = ttl_seconds.clamp(MIN_SESSION_SECONDS, MAX_SESSION_SECONDS);
            // The session's name shows in CloudTrail: whose upload it signed.
            let mut name = format!("upload-{user}");
            name.truncate(64);
            let assumed = role
                .sts
                .assume_role()
                .role_arn(&role.role_arn)
                .role_session_name(name)
                .policy(policy)
                .duration_seconds(i32::try_from(seconds).unwrap_or(i32::MAX))
                .send()
                .await
                .map_err(|e| unavailable(PostSigningError::AssumeRole(Box::new(e))))?;
            let session = assumed
                .credentials()
                .ok_or_else(|| unavailable(PostSigningError::NoCredentials))?;
            let credentials = PostCredentials::new(
                session.access_key_id(),
                session.secret_access_key(),
                Some(session.session_token().to_owned()),
            );
            return Ok((post, credentials));
        }
        let provider = post
            .credentials
            .as_ref()
            .ok_or_else(|| unavailable(PostSigningError::NoCredentials))?;
        let loaded = provider
            .provide_credentials()
            .await
            .map_err(|e| unavailable(PostSigningError::Credentials(e)))?;
        let credentials = PostCredentials::new(
            loaded.access_key_id(),
            loaded.secret_access_key(),
            loaded.session_token().map(str::to_owned),
        );
        Ok((post, credentials))
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
impl UploadSigner for S3Assets {
    /// The origin (`scheme://host[:port]`) presigned POST uploads go to, for the web app's
    /// Content-Security-Policy (`form-action`, `connect-src`); `None` without POST signing.
    fn upload_origin(&self) -> Option<String> {
        let post = self.post.as_ref()?;
        Some(crate::mcp::viewer::origin_of(&post.bucket_url))
    }

    /// A presigned POST for the browser to upload one page file as
    /// `uploads/{user}/{file_name}` (the ingest function imports it from there), valid for
    /// `ttl_seconds`. S3 refuses an upload whose key or `Content-Type` differs from these, or
    /// that is empty or over `max_bytes` (at most [`MAX_UPLOAD_BYTES`]). Signing sends nothing
    /// to S3; it asks the SDK's credentials provider chain each time (not the clients' identity
    /// cache), which on Lambda reads the role's credentials from the environment.
    ///
    /// `InvalidUpload` when `file_name` is not a page file's name alone that ingest imports
    /// (a `/`, `..`, a control character, another extension), the content type is not printable
    /// ASCII, or `max_bytes` or `ttl_seconds` is out of range.
    async fn presigned_post(
        &self,
        user: &UserId,
        file_name: &str,
        content_type: &str,
        max_bytes: u64,
        ttl_seconds: u64,
    ) -> Result<PresignedPost, AssetsError> {
        let key =
            presigned_post::upload_key(user, file_name).map_err(AssetsError::InvalidUpload)?;
        if !presigned_post::valid_content_type(content_type) {
            return Err(AssetsError::InvalidUpload(
                "the content type is not printable ASCII of 1 to 255 bytes",
            ));
        }
        if !(1..=MAX_UPLOAD_BYTES).contains(&max_bytes) {
            return Err(AssetsError::InvalidUpload(
                "the size limit is outside 1 byte..MAX_UPLOAD_BYTES",
            ));
        }
        let grant = format!("{UPLOAD_PREFIX}{user}/*");
        self.sign_post(
            user,
            PostFields {
                grant: &grant,
                key: &key,
                key_prefix: None,
                redirect: None,
                content_type,
                max_bytes,
                ttl_seconds,
            },
        )
        .await
    }

    /// A presigned POST for one bundle upload from the web app's data screen: the exact key
    /// `uploads/{user}/bundles/{id}.zip` (`functions::ingest::bundle_key`, which the ingest
    /// function imports as a bundle), `Content-Type` `application/zip`, 1 byte to
    /// [`MAX_BUNDLE_UPLOAD_BYTES`], then S3 sends the browser to `redirect`. `id` is the
    /// caller's fresh id (letters, digits, `-`, `_`).
    async fn presigned_bundle_post(
        &self,
        user: &UserId,
        id: &str,
        redirect: &str,
        ttl_seconds: u64,
    ) -> Result<PresignedPost, AssetsError> {
        let key = crate::uploads::bundle_key(user, id);
        if crate::uploads::parse_bundle_key(&key).is_none() {
            return Err(AssetsError::InvalidUpload("not a bundle id"));
        }
        if !presigned_post::valid_content_type(redirect) {
            return Err(AssetsError::InvalidUpload(
                "the redirect is not printable ASCII of 1 to 255 bytes",
            ));
        }
        self.sign_post(
            user,
            PostFields {
                grant: &key,
                key: &key,
                key_prefix: None,
                redirect: Some(redirect),
                content_type: BUNDLE_CONTENT_TYPE,
                max_bytes: MAX_BUNDLE_UPLOAD_BYTES,
                ttl_seconds,
            },
        )
        .await
    }

    /// A presigned POST for the upload form that works without script: one file, any name,
    /// under the form's own folder `uploads/{user}/form-{id}/`, `{id}` new for each form (the
    /// form's key is `uploads/{user}/form-{id}/${filename}`, which S3 fills with the chosen
    /// file's name; the policy takes any key under that folder, and the signing credentials
    /// may put nothing else), stored as
    /// `application/octet-stream` (S3 checks the form's `Content-Type` field, which a page
    /// without script cannot set per file; ingest goes by the name's extension, and by the
    /// bytes), 1 byte to `max_bytes`, then S3 sends the browser to `redirect`. What is not a
    /// page file is refused by the ingest function's checks, as on the script's path.
    async fn presigned_form_post(
        &self,
        user: &UserId,
        redirect: &str,
        max_bytes: u64,
        ttl_seconds: u64,
    ) -> Result<PresignedPost, AssetsError> {
        if !presigned_post::valid_content_type(redirect) {
            return Err(AssetsError::InvalidUpload(
                "the redirect is not printable ASCII of 1 to 255 bytes",
            ));
        }
        if !(1..=MAX_UPLOAD_BYTES).contains(&max_bytes) {
            return Err(AssetsError::InvalidUpload(
                "the size limit is outside 1 byte..MAX_UPLOAD_BYTES",
            ));
        }
        let prefix = form_prefix(user, &uuid::Uuid::new_v4().simple().to_string());
        let key = format!("{prefix}{}", presigned_post::FILENAME);
        let grant = format!("{prefix}*");
        self.sign_post(
            user,
            PostFields {
                grant: &grant,
                key: &key,
                key_prefix: Some(&prefix),
                redirect: Some(redirect),
                content_type: presigned_post::FORM_CONTENT_TYPE,
                max_bytes,
                ttl_seconds,
            },
        )
        .await
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

    /// One `GetObjectTagging` per kind, and a `CopyObject` for each object not marked yet
    /// (copying a marked one again would restart its purge; a missing object is skipped).
    async fn trash(
        &self,
        user: &UserId,
        page: &PageId,
        kinds: &[AssetKind],
    ) -> Result<(), AssetsError> {
        let tag = format!("{}={}", TRASH_TAG.0, TRASH_TAG.1);
        for kind in kinds {
            let key = object_key(user, page, *kind);
            if self.marked(&key).await? == Some(false) {
                self.retag(&key, *kind, &tag).await?;
            }
        }
        Ok(())
    }

    /// One `GetObjectTagging` per kind, and a `CopyObject` for each object still marked.
    async fn untrash(
        &self,
        user: &UserId,
        page: &PageId,
        kinds: &[AssetKind],
    ) -> Result<(), AssetsError> {
        for kind in kinds {
            let key = object_key(user, page, *kind);
            if self.marked(&key).await? == Some(true) {
                self.retag(&key, *kind, "").await?;
            }
        }
        Ok(())
    }

    fn keeps_exports(&self) -> bool {
        true
    }

    /// One `PutObject` of the archive (streamed from the file) at
    /// `exports/{user}/{random}.zip`, and a presigned GET that names the download
    /// (`response-content-disposition`). The key is random per export, so a URL opens only
    /// the export it was made for; the lifecycle rule `expire-exports` (`infra/s3.tf`) deletes
    /// it a day later.
    async fn publish_export(
        &self,
        user: &UserId,
        path: &std::path::Path,
        file_name: &str,
        ttl_seconds: u64,
    ) -> Result<String, AssetsError> {
        let key = export_key(user);
        let body = ByteStream::from_path(path).await.map_err(unavailable)?;
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(&key)
            .content_type(EXPORT_CONTENT_TYPE)
            .body(body)
            .send()
            .await
            .map_err(unavailable)?;
        // The name is ours (user id, date, format): plain ASCII, no quote to escape.
        let request = self
            .presigner
            .get_object()
            .bucket(&self.bucket)
            .key(&key)
            .response_content_type(EXPORT_CONTENT_TYPE)
            .response_content_disposition(format!("attachment; filename=\"{file_name}\""))
            .presigned(presigning(ttl_seconds)?)
            .await
            .map_err(unavailable)?;
        Ok(request.uri().to_owned())
    }

    /// Deletes every object under `u/{user}/`, `uploads/{user}/` and `exports/{user}/`, every
    /// version of it (a
    /// versioned bucket keeps deleted objects as noncurrent versions: those go too) and the
    /// delete markers: one `ListObjectVersions` per 1,000 and one `DeleteObject` with the version
    /// id each (no `DeleteObjects`, which needs a Content-MD5 and reports failures per key
    /// inside a 200). The number of objects and versions deleted.
    async fn delete_user(&self, user: &UserId) -> Result<u64, AssetsError> {
        let mut deleted = 0;
        // Exports expire a day after they are made, but the account goes now.
        for prefix in [
            format!("u/{user}/"),
            format!("uploads/{user}/"),
            format!("{EXPORTS_PREFIX}{user}/"),
        ] {
            let mut key_marker: Option<String> = None;
            let mut version_marker: Option<String> = None;
            loop {
                let page = self
                    .client
                    .list_object_versions()
                    .bucket(&self.bucket)
                    .prefix(&prefix)
                    .set_key_marker(key_marker.take())
                    .set_version_id_marker(version_marker.take())
                    .send()
                    .await
                    .map_err(unavailable)?;
                let versions = page
                    .versions()
                    .iter()
                    .map(|v| (v.key(), v.version_id()))
                    .chain(
                        page.delete_markers()
                            .iter()
                            .map(|m| (m.key(), m.version_id())),
                    );
                for (key, version) in versions {
                    let Some(key) = key else { continue };
                    self.client
                        .delete_object()
                        .bucket(&self.bucket)
                        .key(key)
                        .set_version_id(version.map(str::to_owned))
                        .send()
                        .await
                        .map_err(unavailable)?;
                    deleted += 1;
                }
                if page.is_truncated() != Some(true) {
                    break;
                }
                key_marker = page.next_key_marker().map(str::to_owned);
                version_marker = page.next_version_id_marker().map(str::to_owned);
                if key_marker.is_none() {
                    break;
                }
            }
        }
        Ok(deleted)
    }
}
