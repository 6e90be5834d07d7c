//! Presigned POST uploads: the browser sends a page file straight to S3 as an HTML form
//! (`multipart/form-data`), authorised by a POST policy we sign with SigV4 (S3's "Browser-Based
//! Uploads Using POST"). The Rust SDK presigns GET and PUT but not POST, so the policy and its
//! signature are built here.
//!
//! Why POST rather than a presigned PUT: a POST policy's conditions are checked by S3 itself
//! on the upload, so an upload outside them is refused before anything is stored. Ours pin the
//! bucket, the exact key (`uploads/{user}/{file}`), the exact `Content-Type` and a
//! `content-length-range` of 1 to [`MAX_UPLOAD_BYTES`]; a presigned PUT cannot bound the size.
//! The upload page's form without script cannot know its file when the page is made: its
//! policy takes any key under the form's own folder `uploads/{user}/form-{id}/` (the form's
//! key is `uploads/{user}/form-{id}/${filename}`, which S3 fills in; `{id}` is new for each
//! form, `crate::uploads::form_prefix`), one `Content-Type` ([`FORM_CONTENT_TYPE`]), pins the
//! `success_action_redirect` back to the app, and lives [`crate::uploads::FORM_TTL_SECONDS`]; the ingest
//! function's checks refuse what is not a page file.
//!
//! **Whose credentials.** S3 authorises a POST as the principal whose credentials signed it.
//! On AWS that is never the mcp function's role (which has no S3 permission): each POST is
//! signed with credentials of the uploads role assumed for it alone (STS `AssumeRole`), with a
//! session policy ([`upload_session_policy`]) that narrows them to the upload's own keys: the
//! user's page files (`uploads/{user}/*`), the form's folder, or the bundle's exact key. A
//! leaked form, or a tampered key field, can write nowhere else.
//!
//! The signature is SigV4's with the base64 of the policy as the string to sign: the signing
//! key is the HMAC-SHA256 chain of `"AWS4" + secret` over the date, the region, `s3` and
//! `aws4_request`, and the signature is the hex HMAC of the policy under it. The unit tests
//! reproduce AWS's documented example ("Example: Browser-Based Upload using HTTP POST (Using
//! AWS Signature Version 4)") to the byte.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use time::OffsetDateTime;
use zeroize::Zeroizing;

use crate::domain::UserId;
use crate::ports::PresignedPost;
use crate::uploads::{UPLOAD_PREFIX, parse_upload_key};

/// The longest file name an upload may have, in bytes (a file system's usual limit; S3 keys
/// may be 1,024).
pub const MAX_FILE_NAME_BYTES: usize = 255;

/// The longest policy lifetime: SigV4's seven days, as for presigned URLs.
pub const MAX_POST_TTL_SECONDS: u64 = 7 * 24 * 3600;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// What S3 replaces in a form's `key` with the name of the file the browser sends.
pub const FILENAME: &str = "${filename}";

/// The shortest an assumed role's session may be (STS `DurationSeconds`), and so the
/// credentials a POST is signed with: a policy must expire before its credentials do.
pub const MIN_SESSION_SECONDS: u64 = 900;

/// The longest an assumed role's session may be when a role assumes it (role chaining, as a
/// Lambda function does).
pub const MAX_SESSION_SECONDS: u64 = 3600;

/// The session policy of the credentials one upload is signed with: `s3:PutObject` on
/// `arn:{partition}:s3:::{bucket}/{keys}` only (`keys` an exact key, or a prefix ending in
/// `*`), and the storage key's encryption through S3 in `region` (SSE-KMS on the bucket). The
/// credentials may do what both this and the role's own policy allow, no more.
pub fn upload_session_policy(partition: &str, bucket: &str, keys: &str, region: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ThisUploadOnly",
                "Effect": "Allow",
                "Action": "s3:PutObject",
                "Resource": format!("arn:{partition}:s3:::{bucket}/{keys}"),
            },
            {
                "Sid": "EncryptThroughS3",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey*", "kms:Encrypt"],
                "Resource": "*",
                "Condition": {
                    "StringEquals": { "kms:ViaService": format!("s3.{region}.amazonaws.com") }
                },
            },
        ],
    })
    .to_string()
}

/// The `Content-Type` of the form without script: one for every file, since S3 checks the
/// form's field (not the file part's type) and a page without script cannot set it per file.
pub const FORM_CONTENT_TYPE: &str = "application/octet-stream";

/// The credentials a policy is signed with. `Debug` shows the access key id only.
#[derive(Clone)]
pub struct PostCredentials {
    pub access_key_id: String,
    pub secret_access_key: Zeroizing<String>,
    /// Temporary credentials' token (a Lambda role's); it goes in the policy and the form.
    pub session_token: Option<String>,
}

impl PostCredentials {
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> PostCredentials {
        PostCredentials {
            access_key_id: access_key_id.into(),
            secret_access_key: Zeroizing::new(secret_access_key.into()),
            session_token,
        }
    }
}

impl std::fmt::Debug for PostCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"[redacted]")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// What one upload may be.
#[derive(Debug, Clone)]
pub struct PostUpload<'a> {
    pub bucket: &'a str,
    /// The bucket's URL ([`bucket_url`]).
    pub url: &'a str,
    /// The object key: exactly this, or (with `key_prefix`) what the form's `key` field says,
    /// S3 replacing `${filename}` in it with the chosen file's name.
    pub key: &'a str,
    /// When set, the policy takes any key that starts with it (`["starts-with", "$key", ..]`)
    /// instead of `key` exactly: the form without script, whose file is not known when the
    /// page is made.
    pub key_prefix: Option<&'a str>,
    /// Where S3 sends the browser after the upload (`success_action_redirect`, with `bucket`,
    /// `key` and `etag` added to its query), pinned by the policy.
    pub redirect: Option<&'a str>,
    /// The `Content-Type` the form must send, exactly (S3 stores it with the object).
    pub content_type: &'a str,
    /// The largest file accepted, in bytes (the smallest is 1).
    pub max_bytes: u64,
    /// When it is signed (`x-amz-date` and the credential scope's date).
    pub signed_at: OffsetDateTime,
    /// When the policy stops being accepted (`expiration`).
    pub expires_at: OffsetDateTime,
}

/// The URL a form posts to: `{endpoint}/{bucket}` (path-style, as emulators need) when an
/// endpoint URL is set, else the bucket's virtual-hosted endpoint in `region` (the host of
/// `AwsConfig::asset_origin`).
pub fn bucket_url(bucket: &str, region: &str, endpoint_url: Option<&str>) -> String {
    match endpoint_url {
        Some(endpoint) => format!("{}/{bucket}", endpoint.trim_end_matches('/')),
        None => format!("https://{bucket}.s3.{region}.amazonaws.com/"),
    }
}

/// `uploads/{user}/{file_name}` when `file_name` is a page file's name alone that the ingest
/// function imports (no `/`, `..`, control character or `${`); else why not (a reason without
/// the name, fit for a log line).
pub fn upload_key(user: &UserId, file_name: &str) -> Result<String, &'static str> {
    if file_name.is_empty() {
        return Err("the file name is empty");
    }
    if file_name.len() > MAX_FILE_NAME_BYTES {
        return Err("the file name is longer than 255 bytes");
    }
    if file_name.contains(['/', '\\']) {
        return Err("the file name holds a path separator");
    }
    if file_name.contains("..") {
        return Err("the file name holds '..'");
    }
    if file_name.chars().any(char::is_control) {
        return Err("the file name holds a control character");
    }
    // S3 replaces `${filename}` in a form's key with the name of the file the browser sends.
    if file_name.contains("${") {
        return Err("the file name holds '${'");
    }
    let key = format!("{UPLOAD_PREFIX}{user}/{file_name}");
    if parse_upload_key(&key).is_none() {
        return Err("not a page file name (stem.pdf|png|jpg|jpeg|md|markdown|txt)");
    }
    Ok(key)
}

/// Whether `content_type` may go in a policy and a form field: printable ASCII, not empty,
/// at most 255 bytes.
pub fn valid_content_type(content_type: &str) -> bool {
    !content_type.is_empty()
        && content_type.len() <= 255
        && content_type.bytes().all(|b| (b' '..=b'~').contains(&b))
}

/// `20151229T000000Z`.
fn amz_date(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// `2015-12-30T12:00:00.000Z`, the policy's `expiration` (whole seconds).
fn expiration(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.000Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

fn hmac(key: &[u8], data: &str) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The hex SigV4 signature of `string_to_sign` (for a POST, the base64 policy) for S3 in
/// `region` on `date` (`YYYYMMDD`).
pub fn sign(secret_access_key: &str, date: &str, region: &str, string_to_sign: &str) -> String {
    let secret = Zeroizing::new(format!("AWS4{secret_access_key}"));
    let key = Zeroizing::new(hmac(secret.as_bytes(), date));
    let key = Zeroizing::new(hmac(key.as_ref(), region));
    let key = Zeroizing::new(hmac(key.as_ref(), "s3"));
    let key = Zeroizing::new(hmac(key.as_ref(), "aws4_request"));
    hex::encode(hmac(key.as_ref(), string_to_sign))
}

/// The policy document (JSON) of `upload`, signed with `credential` at `amz_date`.
fn policy_document(
    upload: &PostUpload<'_>,
    credential: &str,
    amz_date: &str,
    session_token: Option<&str>,
) -> String {
    let key = match upload.key_prefix {
        Some(prefix) => serde_json::json!(["starts-with", "$key", prefix]),
        None => serde_json::json!(["eq", "$key", upload.key]),
    };
    let mut conditions = vec![
        serde_json::json!({ "bucket": upload.bucket }),
        key,
        serde_json::json!(["eq", "$Content-Type", upload.content_type]),
        serde_json::json!(["content-length-range", 1, upload.max_bytes]),
    ];
    if let Some(redirect) = upload.redirect {
        conditions.push(serde_json::json!({ "success_action_redirect": redirect }));
    }
    conditions.extend([
        serde_json::json!({ "x-amz-algorithm": ALGORITHM }),
        serde_json::json!({ "x-amz-credential": credential }),
        serde_json::json!({ "x-amz-date": amz_date }),
    ]);
    if let Some(token) = session_token {
        conditions.push(serde_json::json!({ "x-amz-security-token": token }));
    }
    serde_json::json!({
        "expiration": expiration(upload.expires_at),
        "conditions": conditions,
    })
    .to_string()
}

/// Signs `upload` with `credentials` for S3 in `region`. Pure: no clock, no I/O.
pub fn presign_post(
    credentials: &PostCredentials,
    region: &str,
    upload: &PostUpload<'_>,
) -> PresignedPost {
    let amz_date = amz_date(upload.signed_at);
    let date = &amz_date[..8];
    let credential = format!(
        "{}/{date}/{region}/s3/aws4_request",
        credentials.access_key_id
    );
    let token = credentials.session_token.as_deref();
    let policy = STANDARD.encode(policy_document(upload, &credential, &amz_date, token));
    let signature = sign(&credentials.secret_access_key, date, region, &policy);
    let mut fields = vec![
        ("key".to_owned(), upload.key.to_owned()),
        ("Content-Type".to_owned(), upload.content_type.to_owned()),
    ];
    if let Some(redirect) = upload.redirect {
        fields.push(("success_action_redirect".to_owned(), redirect.to_owned()));
    }
    fields.extend([
        ("X-Amz-Algorithm".to_owned(), ALGORITHM.to_owned()),
        ("X-Amz-Credential".to_owned(), credential),
        ("X-Amz-Date".to_owned(), amz_date),
    ]);
    if let Some(token) = token {
        fields.push(("X-Amz-Security-Token".to_owned(), token.to_owned()));
    }
    fields.push(("Policy".to_owned(), policy));
    fields.push(("X-Amz-Signature".to_owned(), signature));
    PresignedPost {
        url: upload.url.to_owned(),
        key: upload.key.to_owned(),
        fields,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uploads::MAX_UPLOAD_BYTES;
    use time::macros::datetime;

    const EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    /// AWS's documented example policy, line for line; the documented base64 is of its text
    /// with CRLF line ends.
    const EXAMPLE_POLICY: [&str; 16] = [
        r#"{ "expiration": "2015-12-30T12:00:00.000Z","#,
        r#"  "conditions": ["#,
        r#"    {"bucket": "sigv4examplebucket"},"#,
        r#"    ["starts-with", "$key", "user/user1/"],"#,
        r#"    {"acl": "public-read"},"#,
        r#"    {"success_action_redirect": "http://sigv4examplebucket.s3.amazonaws.com/successful_upload.html"},"#,
        r#"    ["starts-with", "$Content-Type", "image/"],"#,
        r#"    {"x-amz-meta-uuid": "14365123651274"},"#,
        r#"    {"x-amz-server-side-encryption": "AES256"},"#,
        r#"    ["starts-with", "$x-amz-meta-tag", ""],"#,
        "",
        r#"    {"x-amz-credential": "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request"},"#,
        r#"    {"x-amz-algorithm": "AWS4-HMAC-SHA256"},"#,
        r#"    {"x-amz-date": "20151229T000000Z" }"#,
        "  ]",
        "}",
    ];

    const EXAMPLE_BASE64: &str = "eyAiZXhwaXJhdGlvbiI6ICIyMDE1LTEyLTMwVDEyOjAwOjAwLjAwMFoiLA0KICAiY29uZGl0aW9ucyI6IFsNCiAgICB7ImJ1Y2tldCI6ICJzaWd2NGV4YW1wbGVidWNrZXQifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRrZXkiLCAidXNlci91c2VyMS8iXSwNCiAgICB7ImFjbCI6ICJwdWJsaWMtcmVhZCJ9LA0KICAgIHsic3VjY2Vzc19hY3Rpb25fcmVkaXJlY3QiOiAiaHR0cDovL3NpZ3Y0ZXhhbXBsZWJ1Y2tldC5zMy5hbWF6b25hd3MuY29tL3N1Y2Nlc3NmdWxfdXBsb2FkLmh0bWwifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRDb250ZW50LVR5cGUiLCAiaW1hZ2UvIl0sDQogICAgeyJ4LWFtei1tZXRhLXV1aWQiOiAiMTQzNjUxMjM2NTEyNzQifSwNCiAgICB7IngtYW16LXNlcnZlci1zaWRlLWVuY3J5cHRpb24iOiAiQUVTMjU2In0sDQogICAgWyJzdGFydHMtd2l0aCIsICIkeC1hbXotbWV0YS10YWciLCAiIl0sDQoNCiAgICB7IngtYW16LWNyZWRlbnRpYWwiOiAiQUtJQUlPU0ZPRE5ON0VYQU1QTEUvMjAxNTEyMjkvdXMtZWFzdC0xL3MzL2F3czRfcmVxdWVzdCJ9LA0KICAgIHsieC1hbXotYWxnb3JpdGhtIjogIkFXUzQtSE1BQy1TSEEyNTYifSwNCiAgICB7IngtYW16LWRhdGUiOiAiMjAxNTEyMjlUMDAwMDAwWiIgfQ0KICBdDQp9";

    const EXAMPLE_SIGNATURE: &str =
        "8afdbf4008c03f22c2cd3cdb72e4afbb1f6a588f3255ac628749a66d7f09699e";

    fn user(name: &str) -> UserId {
        UserId::parse(name).unwrap()
    }

    fn upload<'a>(key: &'a str) -> PostUpload<'a> {
        PostUpload {
            bucket: "ink",
            url: "https://ink.s3.eu-west-1.amazonaws.com/",
            key,
            key_prefix: None,
            redirect: None,
            content_type: "application/pdf",
            max_bytes: MAX_UPLOAD_BYTES,
            signed_at: datetime!(2026-06-19 08:05:09 UTC),
            expires_at: datetime!(2026-06-19 08:20:09.75 UTC),
        }
    }

    fn credentials(token: Option<&str>) -> PostCredentials {
        PostCredentials {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: Zeroizing::new(EXAMPLE_SECRET.into()),
            session_token: token.map(str::to_owned),
        }
    }

    fn field<'a>(post: &'a PresignedPost, name: &str) -> &'a str {
        &post.fields.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn decoded_policy(post: &PresignedPost) -> serde_json::Value {
        let json = STANDARD.decode(field(post, "Policy")).unwrap();
        serde_json::from_slice(&json).unwrap()
    }

    #[test]
    fn presign_reproduces_the_documented_example_signature() {
        let policy = EXAMPLE_POLICY.join("\r\n");
        let encoded = STANDARD.encode(&policy);
        assert_eq!(
            encoded, EXAMPLE_BASE64,
            "the documented policy, CRLF line ends"
        );
        assert_eq!(
            sign(EXAMPLE_SECRET, "20151229", "us-east-1", &encoded),
            EXAMPLE_SIGNATURE
        );
        // The date and region are part of the key: another one signs differently.
        assert_ne!(
            sign(EXAMPLE_SECRET, "20151230", "us-east-1", &encoded),
            EXAMPLE_SIGNATURE
        );
        assert_ne!(
            sign(EXAMPLE_SECRET, "20151229", "eu-west-1", &encoded),
            EXAMPLE_SIGNATURE
        );
    }

    #[test]
    fn presign_pins_the_key_the_type_the_size_and_the_signer() {
        let post = presign_post(
            &credentials(Some("FQoGZXIvYXdzEXAMPLE")),
            "eu-west-1",
            &upload("uploads/alice/2026-06-19.pdf"),
        );
        assert_eq!(post.url, "https://ink.s3.eu-west-1.amazonaws.com/");
        assert_eq!(
            crate::mcp::viewer::origin_of(&post.url),
            "https://ink.s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(post.key, "uploads/alice/2026-06-19.pdf");
        let names: Vec<&str> = post.fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "key",
                "Content-Type",
                "X-Amz-Algorithm",
                "X-Amz-Credential",
                "X-Amz-Date",
                "X-Amz-Security-Token",
                "Policy",
                "X-Amz-Signature"
            ]
        );
        let credential = "AKIAIOSFODNN7EXAMPLE/20260619/eu-west-1/s3/aws4_request";
        assert_eq!(field(&post, "key"), "uploads/alice/2026-06-19.pdf");
        assert_eq!(field(&post, "Content-Type"), "application/pdf");
        assert_eq!(field(&post, "X-Amz-Algorithm"), "AWS4-HMAC-SHA256");
        assert_eq!(field(&post, "X-Amz-Credential"), credential);
        assert_eq!(field(&post, "X-Amz-Date"), "20260619T080509Z");
        assert_eq!(field(&post, "X-Amz-Security-Token"), "FQoGZXIvYXdzEXAMPLE");
        assert_eq!(
            decoded_policy(&post),
            serde_json::json!({
                "expiration": "2026-06-19T08:20:09.000Z",
                "conditions": [
                    {"bucket": "ink"},
                    ["eq", "$key", "uploads/alice/2026-06-19.pdf"],
                    ["eq", "$Content-Type", "application/pdf"],
                    ["content-length-range", 1, 64 * 1024 * 1024],
                    {"x-amz-algorithm": "AWS4-HMAC-SHA256"},
                    {"x-amz-credential": credential},
                    {"x-amz-date": "20260619T080509Z"},
                    {"x-amz-security-token": "FQoGZXIvYXdzEXAMPLE"},
                ]
            })
        );
        // The signature is of the policy field exactly, under the scope's date and region.
        assert_eq!(
            field(&post, "X-Amz-Signature"),
            sign(
                EXAMPLE_SECRET,
                "20260619",
                "eu-west-1",
                field(&post, "Policy")
            )
        );
        let shown = format!("{:?}", credentials(Some("FQoGZXIvYXdzEXAMPLE")));
        assert!(
            !shown.contains(EXAMPLE_SECRET) && !shown.contains("FQoG"),
            "{shown}"
        );
    }

    /// The form without script: any name under the user's prefix (S3 fills `${filename}`),
    /// one `Content-Type` for every file (S3 checks the form's field, which the form sets),
    /// the size range, and the redirect back to the app, each pinned by the policy; every
    /// field the form sends is in the policy, the file goes last.
    #[test]
    fn presign_the_form_without_script_takes_any_name_under_the_users_prefix() {
        let redirect = "https://nib.example/app/upload/sent?since=1781856309000";
        let post = presign_post(
            &credentials(None),
            "eu-west-1",
            &PostUpload {
                key_prefix: Some("uploads/alice/form-0b6f41c2/"),
                redirect: Some(redirect),
                content_type: FORM_CONTENT_TYPE,
                ..upload("uploads/alice/form-0b6f41c2/${filename}")
            },
        );
        let names: Vec<&str> = post.fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "key",
                "Content-Type",
                "success_action_redirect",
                "X-Amz-Algorithm",
                "X-Amz-Credential",
                "X-Amz-Date",
                "Policy",
                "X-Amz-Signature"
            ]
        );
        assert_eq!(
            field(&post, "key"),
            "uploads/alice/form-0b6f41c2/${filename}"
        );
        assert_eq!(field(&post, "Content-Type"), "application/octet-stream");
        assert_eq!(field(&post, "success_action_redirect"), redirect);
        let credential = "AKIAIOSFODNN7EXAMPLE/20260619/eu-west-1/s3/aws4_request";
        assert_eq!(
            decoded_policy(&post),
            serde_json::json!({
                "expiration": "2026-06-19T08:20:09.000Z",
                "conditions": [
                    {"bucket": "ink"},
                    ["starts-with", "$key", "uploads/alice/form-0b6f41c2/"],
                    ["eq", "$Content-Type", "application/octet-stream"],
                    ["content-length-range", 1, 64 * 1024 * 1024],
                    {"success_action_redirect": redirect},
                    {"x-amz-algorithm": "AWS4-HMAC-SHA256"},
                    {"x-amz-credential": credential},
                    {"x-amz-date": "20260619T080509Z"},
                ]
            })
        );
        // The script's form keeps its exact key.
        let exact = presign_post(
            &credentials(None),
            "eu-west-1",
            &upload("uploads/alice/2026-06-19.pdf"),
        );
        assert_eq!(
            decoded_policy(&exact)["conditions"][1],
            serde_json::json!(["eq", "$key", "uploads/alice/2026-06-19.pdf"])
        );
        assert!(
            exact
                .fields
                .iter()
                .all(|(n, _)| n != "success_action_redirect")
        );
    }

    /// Issue 48 item 9: the credentials an upload is signed with may put that upload's keys
    /// and nothing else (before, the mcp role itself signed, and may put under every user's
    /// `uploads/`).
    #[test]
    fn presign_session_policy_allows_only_the_uploads_keys() {
        let policy: serde_json::Value = serde_json::from_str(&upload_session_policy(
            "aws",
            "ink",
            "uploads/alice/form-0b6f41c2/*",
            "eu-west-1",
        ))
        .unwrap();
        assert_eq!(
            policy,
            serde_json::json!({
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "ThisUploadOnly",
                        "Effect": "Allow",
                        "Action": "s3:PutObject",
                        "Resource": "arn:aws:s3:::ink/uploads/alice/form-0b6f41c2/*",
                    },
                    {
                        "Sid": "EncryptThroughS3",
                        "Effect": "Allow",
                        "Action": ["kms:GenerateDataKey*", "kms:Encrypt"],
                        "Resource": "*",
                        "Condition": {
                            "StringEquals": { "kms:ViaService": "s3.eu-west-1.amazonaws.com" }
                        },
                    },
                ],
            })
        );
        let ttl = crate::uploads::FORM_TTL_SECONDS;
        assert!(ttl <= 15 * 60 && ttl <= MIN_SESSION_SECONDS);
    }

    #[test]
    fn presign_without_a_session_token_names_none() {
        let post = presign_post(
            &credentials(None),
            "eu-west-1",
            &upload("uploads/alice/notes.md"),
        );
        assert!(post.fields.iter().all(|(n, _)| n != "X-Amz-Security-Token"));
        let policy = decoded_policy(&post).to_string();
        assert!(!policy.contains("x-amz-security-token"), "{policy}");
        assert_eq!(post.fields.last().unwrap().0, "X-Amz-Signature");
    }

    #[test]
    fn presign_bucket_urls_are_path_style_on_an_endpoint() {
        assert_eq!(
            bucket_url("ink", "us-east-1", Some("http://127.0.0.1:5000/")),
            "http://127.0.0.1:5000/ink"
        );
        assert_eq!(
            bucket_url("ink", "eu-west-1", None),
            "https://ink.s3.eu-west-1.amazonaws.com/"
        );
    }

    #[test]
    fn presign_upload_keys_are_what_ingest_imports() {
        let alice = user("alice");
        for name in [
            "2026-06-19.pdf",
            "2026-06-19.png",
            "scan 3.jpeg",
            "notes.md",
            "Tagebuch ü.txt",
        ] {
            let key = upload_key(&alice, name).unwrap();
            assert_eq!(key, format!("uploads/alice/{name}"));
            let (who, stem, _) = parse_upload_key(&key).unwrap();
            assert_eq!(
                (who.as_str(), stem),
                ("alice", name.rsplit_once('.').unwrap().0)
            );
        }
        for name in [
            "",
            "a/b.pdf",
            "a\\b.pdf",
            "../x.pdf",
            "x..pdf",
            "x\n.pdf",
            "x\u{7f}.pdf",
            "${filename}.pdf",
            ".hidden.pdf",
            "page.exe",
            "page",
            ".pdf",
        ] {
            assert!(upload_key(&alice, name).is_err(), "{name:?}");
        }
        assert!(upload_key(&alice, &format!("{}.pdf", "x".repeat(251))).is_ok());
        assert!(upload_key(&alice, &format!("{}.pdf", "x".repeat(252))).is_err());
        assert!(valid_content_type("application/pdf"));
        assert!(!valid_content_type(""));
        assert!(!valid_content_type("text/plain\r\nX-Evil: 1"));
    }
}
