//! `nib::adapters::aws` against moto's server (`nib_testkit::emulator`): the store conformance
//! suite, the exact requests each port operation sends, assets with presigned URLs, KMS keys,
//! access tokens signed by KMS, and the ingest function's log lines.
//!
//! One server per test binary (per test process under nextest), a fresh table and bucket per
//! test. moto checks neither signatures nor expiry, so presigned URLs are checked for their
//! `X-Amz-*` parameters and fetched for their bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;

use nib::adapters::aws::{AwsClients, CallCounts};
use nib::config::AwsConfig;
use nib::crypto::{Aad, Vault};
use nib::domain::{PageId, UserId};
use nib::ports::{
    AssetKind, Assets, Cond, Item, Keys, KeysError, Query, Store, StoreError, UploadSigner, Write,
};
use nib_testkit::emulator::Emulator;
use nib_testkit::store_suite;

async fn emulator() -> &'static Emulator {
    Emulator::shared().await.unwrap_or_else(|e| panic!("{e}"))
}

async fn fresh() -> (AwsConfig, AwsClients) {
    let config = emulator().await.fresh().await.unwrap();
    let clients = AwsClients::connect(&config).await;
    (config, clients)
}

/// Every item of the table. Tests only: nothing on a request path scans.
async fn scan(clients: &AwsClients, table: &str) -> Vec<HashMap<String, AttributeValue>> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let out = clients
            .dynamodb
            .scan()
            .table_name(table)
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return items,
        }
    }
}

fn counts(expected: &[(&str, &str, u64)]) -> CallCounts {
    expected
        .iter()
        .map(|(s, o, n)| (((*s).to_owned(), (*o).to_owned()), *n))
        .collect()
}

fn item(pk: &str, sk: &str) -> Item {
    store_suite::item(pk, sk)
}

fn user(name: &str) -> UserId {
    UserId::parse(name).unwrap()
}

/// Runs `$op` and asserts the requests it sent, exactly.
macro_rules! assert_calls {
    ($clients:expr, $op:expr, [$(($s:expr, $o:expr, $n:expr)),* $(,)?]) => {{
        let before = $clients.calls.snapshot();
        let out = $op;
        assert_eq!(
            $clients.calls.since(&before),
            counts(&[$(($s, $o, $n)),*]),
            "{}",
            stringify!($op)
        );
        out
    }};
}

// ---- DynamoStore ----------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dynamo_store_conforms_to_the_store_suite() {
    let emulator = emulator().await;
    store_suite::run_all(|clock| {
        // The suite's factory is synchronous; each check gets its own new table.
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                let config = emulator.fresh().await.unwrap();
                let clients = AwsClients::connect(&config).await;
                Arc::new(clients.store(&config).with_clock(clock)) as Arc<dyn Store>
            })
        })
    })
    .await;
}

/// Starts `emulator.py zygote` on a socket in `dir` and waits for its "ready" line.
fn start_zygote(dir: &std::path::Path) -> (std::process::Child, std::path::PathBuf) {
    use std::io::BufRead;
    let socket = dir.join("zygote.sock");
    let mut child =
        std::process::Command::new(nib_testkit::emulator::venv_dir().join("bin/python"))
            .arg(nib_testkit::emulator::script())
            .arg("zygote")
            .arg(&socket)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    (child, socket)
}

/// Whether anything accepts connections at `endpoint` (`http://127.0.0.1:PORT`).
fn accepts(endpoint: &str) -> bool {
    std::net::TcpStream::connect(endpoint.trim_start_matches("http://")).is_ok()
}

#[tokio::test]
async fn a_server_forked_from_the_zygote_is_a_server_of_its_own_and_stops_when_told() {
    use nib_testkit::emulator::Launch;
    let dir = tempfile::tempdir().unwrap();
    let (mut zygote, socket) = start_zygote(dir.path());
    let own = Emulator::start_with(Launch::Process).await.unwrap();
    let one = Emulator::start_with(Launch::Zygote(socket.clone()))
        .await
        .unwrap();
    let two = Emulator::start_with(Launch::Zygote(socket)).await.unwrap();

    // Each answers, with state of its own: a table made on one is not on the other, and
    // moto's random source is not the zygote's copy (keys, like any id, differ).
    for emulator in [&own, &one, &two] {
        let config = emulator.fresh().await.unwrap();
        let clients = AwsClients::connect(&config).await;
        let tables = clients.dynamodb.list_tables().send().await.unwrap();
        assert_eq!(tables.table_names(), std::slice::from_ref(&config.table));
    }
    let keys = [own.kms_key_id(), one.kms_key_id(), two.kms_key_id()];
    assert!(
        keys[0] != keys[1] && keys[1] != keys[2] && keys[0] != keys[2],
        "{keys:?}"
    );

    // Once stop returns, nothing listens on a stopped server's port; the others go on.
    one.stop();
    assert!(!accepts(one.endpoint()));
    assert!(accepts(two.endpoint()));
    own.stop();
    assert!(!accepts(own.endpoint()));
    zygote.kill().unwrap();
    zygote.wait().unwrap();
    // A forked server outlives its zygote until its own connection closes.
    assert!(two.fresh().await.is_ok());
    two.stop();
    assert!(!accepts(two.endpoint()));
}

#[tokio::test]
async fn each_store_operation_sends_the_fewest_requests() {
    let (config, clients) = fresh().await;
    let store = clients.store(&config);

    // One write: PutItem / DeleteItem with a condition, not a transaction.
    assert_calls!(
        clients,
        store.put(item("P", "a"), Cond::NotExists).await.unwrap(),
        [("DynamoDB", "PutItem", 1)]
    );
    assert_calls!(
        clients,
        store
            .transact(vec![Write::delete("P", "a", Cond::Exists)])
            .await
            .unwrap(),
        [("DynamoDB", "DeleteItem", 1)]
    );
    // A failed single condition is one request and no retry.
    store.put(item("P", "a"), Cond::NotExists).await.unwrap();
    let failed = assert_calls!(
        clients,
        store.put(item("P", "a"), Cond::NotExists).await,
        [("DynamoDB", "PutItem", 1)]
    );
    assert!(matches!(
        failed,
        Err(StoreError::ConditionFailed { index: 0 })
    ));
    // Several writes, or a lone check: one TransactWriteItems.
    assert_calls!(
        clients,
        store
            .transact(vec![
                Write::put(item("P", "b"), Cond::NotExists),
                Write::put(item("P", "c"), Cond::None),
            ])
            .await
            .unwrap(),
        [("DynamoDB", "TransactWriteItems", 1)]
    );
    assert_calls!(
        clients,
        store
            .transact(vec![Write::Check {
                pk: "P".into(),
                sk: "b".into(),
                cond: Cond::Exists,
            }])
            .await
            .unwrap(),
        [("DynamoDB", "TransactWriteItems", 1)]
    );
    assert_calls!(clients, store.transact(vec![]).await.unwrap(), []);

    // Reads.
    assert_calls!(
        clients,
        store.get("P", "a").await.unwrap(),
        [("DynamoDB", "GetItem", 1)]
    );
    assert_calls!(
        clients,
        store.query(&Query::table("P", "")).await.unwrap(),
        [("DynamoDB", "Query", 1)]
    );
    assert_calls!(clients, store.batch_get(&[]).await.unwrap(), []);
    // 150 keys with repeats: 120 distinct keys, two requests of at most 100.
    let keys: Vec<(String, String)> = (0..150)
        .map(|i| ("P".to_owned(), format!("{:03}", i % 120)))
        .collect();
    let got = assert_calls!(
        clients,
        store.batch_get(&keys).await.unwrap(),
        [("DynamoDB", "BatchGetItem", 2)]
    );
    assert_eq!(got.len(), 150);

    // A live counter is one UpdateItem; an expired one takes a second to start over.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert_calls!(
        clients,
        store.increment("C", "C", 1, now + 3600).await.unwrap(),
        [("DynamoDB", "UpdateItem", 1)]
    );
    store.increment("D", "D", 1, now - 100).await.unwrap();
    let restarted = assert_calls!(
        clients,
        store.increment("D", "D", 5, now + 3600).await.unwrap(),
        [("DynamoDB", "UpdateItem", 2)]
    );
    assert_eq!(restarted, 5);
}

#[tokio::test]
async fn a_cancelled_transaction_names_its_write_and_leaves_the_table_as_it_was() {
    let (config, clients) = fresh().await;
    let store = clients.store(&config);
    store
        .put(store_suite::item("P", "taken"), Cond::NotExists)
        .await
        .unwrap();
    let before = scan(&clients, &config.table).await;
    let writes = vec![
        Write::put(store_suite::item("P", "a"), Cond::NotExists),
        Write::put(store_suite::item("P", "b"), Cond::None),
        Write::delete("P", "taken", Cond::Version(7)),
        Write::put(store_suite::item("P", "c"), Cond::None),
    ];
    let result = assert_calls!(
        clients,
        store.transact(writes).await,
        [("DynamoDB", "TransactWriteItems", 1)]
    );
    assert!(
        matches!(result, Err(StoreError::ConditionFailed { index: 2 })),
        "{result:?}"
    );
    assert_eq!(scan(&clients, &config.table).await, before);
}

#[tokio::test]
async fn items_are_stored_in_the_documented_attribute_layout() {
    let (config, clients) = fresh().await;
    let store = clients.store(&config);
    let it = Item {
        pk: "U#a".into(),
        sk: "PAGE#1".into(),
        gsi1: Some(("U#a#PAGES".into(), "2026-06-16#1".into())),
        version: 3,
        expires_at: Some(4_000_000_000),
        body: vec![1, 2, 3],
    };
    store.put(it, Cond::None).await.unwrap();
    store
        .increment("RL#t#1", "RL", 2, 4_000_000_000)
        .await
        .unwrap();
    let mut items = scan(&clients, &config.table).await;
    items.sort_by_key(|i| format!("{:?}", i["pk"]));
    let names = |i: &HashMap<String, AttributeValue>| {
        let mut n: Vec<String> = i.keys().cloned().collect();
        n.sort();
        n
    };
    assert_eq!(
        names(&items[1]),
        [
            "body",
            "expires_at",
            "gsi1pk",
            "gsi1sk",
            "pk",
            "sk",
            "version"
        ]
    );
    assert_eq!(items[1]["body"], AttributeValue::B(vec![1, 2, 3].into()));
    assert_eq!(items[1]["version"], AttributeValue::N("3".into()));
    assert_eq!(
        items[1]["expires_at"],
        AttributeValue::N("4000000000".into())
    );
    assert_eq!(
        names(&items[0]),
        ["count", "expires_at", "pk", "sk", "version"]
    );
    assert_eq!(items[0]["count"], AttributeValue::N("2".into()));
}

// ---- S3Assets -------------------------------------------------------------------------------

const INK: &[u8] = b"\x89PNG\r\n\x1a\n the page's ink";

#[tokio::test]
async fn a_presigned_get_serves_the_object_and_carries_its_expiry_and_signature() {
    let (config, clients) = fresh().await;
    let assets = clients.assets(&config);
    let (alice, page) = (user("alice"), PageId::new());
    assert_calls!(
        clients,
        assets
            .put(&alice, &page, AssetKind::Png, INK.to_vec())
            .await
            .unwrap(),
        [("S3", "PutObject", 1)]
    );
    // Presigning is local: it sends nothing.
    let url = assert_calls!(
        clients,
        assets
            .signed_url(&alice, &page, AssetKind::Png, 600)
            .await
            .unwrap(),
        []
    );
    let path = format!("/{}/u/alice/pages/{page}.png?", config.bucket);
    assert!(
        url.starts_with(&format!("{}{path}", emulator().await.endpoint())),
        "{url}"
    );
    let query = url.split_once('?').unwrap().1;
    let params: HashMap<&str, &str> = query
        .split('&')
        .map(|kv| kv.split_once('=').unwrap())
        .collect();
    assert_eq!(params["X-Amz-Expires"], "600");
    assert_eq!(params["X-Amz-Algorithm"], "AWS4-HMAC-SHA256");
    assert_eq!(params["X-Amz-Signature"].len(), 64, "{url}");
    assert!(
        params["X-Amz-Credential"].starts_with("testing%2F"),
        "{url}"
    );

    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().as_ref(), INK);

    // The TTL is the caller's.
    let hour = assets
        .signed_url(&alice, &page, AssetKind::Pdf, 3600)
        .await
        .unwrap();
    assert!(hour.contains("X-Amz-Expires=3600&"), "{hour}");
    assert!(hour.contains(&format!("/u/alice/pages/{page}.pdf?")));
}

#[tokio::test]
async fn a_presigned_put_uploads_under_the_users_upload_prefix_with_its_content_type() {
    let (config, clients) = fresh().await;
    let assets = clients.assets(&config);
    let upload = assert_calls!(
        clients,
        assets
            .presign_upload(&user("alice"), AssetKind::Pdf, 900)
            .await
            .unwrap(),
        []
    );
    assert!(upload.key.starts_with("uploads/alice/"), "{}", upload.key);
    assert!(upload.key.ends_with(".pdf"));
    assert_eq!(upload.method, "PUT");
    assert!(upload.url.contains("X-Amz-Expires=900&"), "{}", upload.url);
    assert!(upload.url.contains("X-Amz-Signature="));
    assert!(
        upload
            .url
            .contains("X-Amz-SignedHeaders=content-type%3Bhost"),
        "the content type is signed: {}",
        upload.url
    );
    assert!(
        upload
            .headers
            .contains(&("content-type".into(), "application/pdf".into())),
        "{:?}",
        upload.headers
    );

    let mut request = reqwest::Client::new().put(&upload.url);
    for (name, value) in &upload.headers {
        request = request.header(name, value);
    }
    let r = request.body(b"%PDF-1.7".to_vec()).send().await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let head = clients
        .s3
        .head_object()
        .bucket(&config.bucket)
        .key(&upload.key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("application/pdf"));
    assert_eq!(head.content_length(), Some(8));
}

/// `fields` in order, then the file last, as a browser sends an upload form
/// (`multipart/form-data`); the body and its `Content-Type`.
fn upload_form(fields: &[(String, String)], file_type: &str, file: &[u8]) -> (String, Vec<u8>) {
    let boundary = format!("nib-form-{}", uuid::Uuid::new_v4().simple());
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"page\"\r\n\
             Content-Type: {file_type}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(file);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Posts `post`'s form with the file, as the browser does; the status and the body.
async fn post_upload(post: &nib::ports::PresignedPost, file: &[u8]) -> (u16, String) {
    let (content_type, body) = upload_form(&post.fields, "application/octet-stream", file);
    let r = reqwest::Client::new()
        .post(&post.url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The web app's upload path on AWS: the mcp front's services sign a presigned POST (sending
/// nothing), the browser's form puts the file at exactly that key with exactly that content
/// type, and the ingest function imports it from the S3 event's key.
///
/// moto (5.2.5) checks none of a POST policy's conditions: tried here, it stored a form whose
/// key (another name, another user's prefix), `Content-Type`, size (over the range, or
/// empty), signature (tampered) or expiration (an hour past) broke the policy, with 204 each
/// time. So no refusal is asserted against it; the policy's conditions and its signature are
/// pinned by the unit tests of `adapters::aws::presigned_post` instead (the signature to AWS's
/// documented example).
#[tokio::test]
async fn a_presigned_post_uploads_at_its_key_with_its_type_and_ingest_imports_it() {
    use nib::config::OcrChoice;
    use nib::functions::ingest::Tally;
    use nib::services::{Role, Services, Settings};
    use nib::uploads::{MAX_UPLOAD_BYTES, parse_upload_key};

    let emulator = emulator().await;
    let (key_arn, pem) = emulator.create_signing_key().await.unwrap();
    let mut config = emulator.fresh().await.unwrap();
    config.signing_key_id = Some(key_arn);
    config.signing_public_key_pem = Some(pem);
    let front = Services::open(&Settings::aws(config.clone(), Role::Front, OcrChoice::Off))
        .await
        .unwrap();
    let signer = front
        .upload_signer()
        .expect("the front signs uploads on AWS");
    assert_eq!(signer.upload_origin().as_deref(), Some(emulator.endpoint()));

    let alice = user("alice");
    let calls = front.aws_calls().unwrap();
    let before = calls.snapshot();
    let post = signer
        .presigned_post(
            &alice,
            "2026-06-19 fitting.md",
            "text/markdown",
            MAX_UPLOAD_BYTES,
            900,
        )
        .await
        .unwrap();
    assert_eq!(calls.since(&before), counts(&[]), "signing sends nothing");
    assert_eq!(
        post.url,
        format!("{}/{}", emulator.endpoint(), config.bucket)
    );
    assert_eq!(nib::mcp::viewer::origin_of(&post.url), emulator.endpoint());
    assert_eq!(post.key, "uploads/alice/2026-06-19 fitting.md");
    let (who, stem, ext) = parse_upload_key(&post.key).unwrap();
    assert_eq!(
        (who, stem, ext),
        (alice.clone(), "2026-06-19 fitting", "md")
    );

    let page = b"## Tasks\n- [ ] Collect the costume\n";
    let (status, text) = post_upload(&post, page).await;
    assert_eq!(status, 204, "{text}");
    let head = front
        .aws
        .as_ref()
        .unwrap()
        .s3
        .head_object()
        .bucket(&config.bucket)
        .key(&post.key)
        .send()
        .await
        .unwrap();
    assert_eq!(head.content_type(), Some("text/markdown"));
    assert_eq!(head.content_length(), Some(page.len() as i64));

    let ingest_services =
        Services::open(&Settings::aws(config.clone(), Role::Ingest, OcrChoice::Off))
            .await
            .unwrap();
    let ingest = nib::functions::ingest(&ingest_services).unwrap();
    let mut tally = Tally::default();
    // The key as the S3 event spells it: URL-encoded the form way.
    ingest
        .record(
            &config.bucket,
            "uploads/alice/2026-06-19+fitting.md",
            &mut tally,
        )
        .await
        .unwrap();
    assert_eq!(tally.imported, 1, "{tally:?}");
    let pages = ingest_services
        .notebook()
        .list_pages(&alice, None, None, 10)
        .await
        .unwrap();
    assert_eq!(pages.len(), 1);
}

/// A file name ingest would not import, a content type that is not printable ASCII, and a
/// size limit or lifetime out of range are refused before anything is signed or sent.
#[tokio::test]
async fn a_presigned_post_is_refused_for_what_ingest_would_not_import() {
    use nib::ports::AssetsError;
    use nib::uploads::MAX_UPLOAD_BYTES;

    let (config, clients) = fresh().await;
    let assets = clients.assets(&config);
    let alice = user("alice");
    let refused = |name: &'static str, content_type: &'static str, max: u64, ttl: u64| {
        let assets = assets.clone();
        let alice = alice.clone();
        async move {
            let answer = assets
                .presigned_post(&alice, name, content_type, max, ttl)
                .await;
            matches!(answer, Err(AssetsError::InvalidUpload(_)))
        }
    };
    let before = clients.calls.snapshot();
    for name in [
        "a/b.pdf", "../b.pdf", "b..pdf", "b\r.pdf", ".b.pdf", "b.exe", "b",
    ] {
        assert!(
            refused(name, "application/pdf", MAX_UPLOAD_BYTES, 900).await,
            "{name:?}"
        );
    }
    assert!(refused("b.pdf", "application/pdf\r\nX-Evil: 1", 1, 900).await);
    assert!(refused("b.pdf", "", 1, 900).await);
    assert!(refused("b.pdf", "application/pdf", 0, 900).await);
    assert!(refused("b.pdf", "application/pdf", MAX_UPLOAD_BYTES + 1, 900).await);
    assert!(refused("b.pdf", "application/pdf", 1, 0).await);
    assert!(refused("b.pdf", "application/pdf", 1, 7 * 24 * 3600 + 1).await);
    assert!(!refused("b.pdf", "application/pdf", 1, 7 * 24 * 3600).await);
    assert_eq!(clients.calls.since(&before), counts(&[]));
}

// ---- KmsKeys --------------------------------------------------------------------------------

#[tokio::test]
async fn data_keys_unwrap_only_for_their_user() {
    let (config, clients) = fresh().await;
    let keys = clients.keys(&config);
    let (alice, bob) = (user("alice"), user("bob"));
    let (key, wrapped) = assert_calls!(
        clients,
        keys.generate(&alice).await.unwrap(),
        [("KMS", "GenerateDataKey", 1)]
    );
    assert_ne!(&wrapped.0[..], &key.0[..]);
    let again = assert_calls!(
        clients,
        keys.unwrap(&alice, &wrapped).await.unwrap(),
        [("KMS", "Decrypt", 1)]
    );
    assert_eq!(&again.0[..], &key.0[..]);
    // Another user's encryption context does not open it.
    assert!(matches!(
        keys.unwrap(&bob, &wrapped).await,
        Err(KeysError::Unwrap)
    ));
    // Nor does a tampered blob.
    let mut tampered = wrapped.clone();
    let last = tampered.0.len() - 1;
    tampered.0[last] ^= 1;
    assert!(matches!(
        keys.unwrap(&alice, &tampered).await,
        Err(KeysError::Unwrap)
    ));
    // Real KMS also refuses a blob of another key, since `Decrypt` names the key
    // (IncorrectKeyException, mapped to `Unwrap`); moto does not check that, so it is not
    // asserted here.
}

/// The vault over DynamoDB and KMS: one KMS call per user and cache lifetime, rotation, and no
/// plaintext key in the table.
#[tokio::test]
async fn the_vault_over_kms_caches_rotates_and_stores_only_wrapped_keys() {
    let (config, clients) = fresh().await;
    let store: Arc<dyn Store> = Arc::new(clients.store(&config));
    let keys = Arc::new(clients.keys(&config));
    let alice = user("alice");
    let vault = Vault::new(store.clone(), keys.clone(), 10, Duration::from_secs(3600));
    let aad = Aad {
        user: &alice,
        pk: "U#alice",
        sk: "PAGE#1",
        field: "text",
    };

    // First use: read the (absent) key items, generate, store (in a transaction that also
    // checks the account is not being deleted: `notebook::guard`).
    let v1 = assert_calls!(
        clients,
        vault.user_keys(&alice).await.unwrap(),
        [
            ("DynamoDB", "Query", 1),
            ("KMS", "GenerateDataKey", 1),
            ("DynamoDB", "TransactWriteItems", 1),
        ]
    );
    let old = v1.seal(&aad, b"old");
    // Cached: nothing at all.
    assert_calls!(clients, vault.user_keys(&alice).await.unwrap(), []);
    // Another process: one Query, one Decrypt, then cached.
    let other = Vault::new(store.clone(), keys.clone(), 10, Duration::from_secs(3600));
    assert_calls!(
        clients,
        other.user_keys(&alice).await.unwrap(),
        [("DynamoDB", "Query", 1), ("KMS", "Decrypt", 1)]
    );
    assert_calls!(clients, other.user_keys(&alice).await.unwrap(), []);

    // Rotation: a second KEY# version encrypts new values; old values still open.
    assert_eq!(vault.rotate(&alice).await.unwrap(), 2);
    let v2 = vault.user_keys(&alice).await.unwrap();
    assert_eq!(v2.current_version(), 2);
    let new = v2.seal(&aad, b"new");
    assert_eq!(&new[1..5], &2u32.to_be_bytes());
    assert_eq!(v2.open(&aad, &old).unwrap(), b"old");
    assert_eq!(v2.blind("term", "milk"), v1.blind("term", "milk"));
    let third = Vault::new(store.clone(), keys.clone(), 10, Duration::from_secs(3600));
    let both = assert_calls!(
        clients,
        third.user_keys(&alice).await.unwrap(),
        [("DynamoDB", "Query", 1), ("KMS", "Decrypt", 2)]
    );
    assert_eq!(both.open(&aad, &old).unwrap(), b"old");
    assert_eq!(both.open(&aad, &new).unwrap(), b"new");

    // The key items hold KMS ciphertext only: no plaintext data key (nor its base64) is in
    // the table. The keyring is checked through what it derives, since it never gives out
    // its bytes: a data key found in the table would open the sealed value.
    let items = scan(&clients, &config.table).await;
    let key_items: Vec<_> = items
        .iter()
        .filter(|i| matches!(&i["sk"], AttributeValue::S(s) if s.starts_with("KEY#")))
        .collect();
    assert_eq!(key_items.len(), 2);
    for (n, item) in key_items.iter().enumerate() {
        let AttributeValue::B(body) = &item["body"] else {
            panic!("body is binary")
        };
        let record: serde_json::Value = serde_json::from_slice(body.as_ref()).unwrap();
        let wrapped = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            record["wrapped"].as_str().unwrap(),
        )
        .unwrap();
        // It is what KMS gave, and KMS opens it for Alice only.
        let key = keys
            .unwrap(&alice, &nib::ports::WrappedKey(wrapped.clone()))
            .await
            .unwrap();
        assert!(
            keys.unwrap(&user("bob"), &nib::ports::WrappedKey(wrapped))
                .await
                .is_err()
        );
        let plain = &key.0[..];
        let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, plain);
        let hex = hex::encode(plain);
        let encodings: [&[u8]; 3] = [plain, b64.as_bytes(), hex.as_bytes()];
        for stored in &items {
            for value in stored.values() {
                let bytes: &[u8] = match value {
                    AttributeValue::S(s) => s.as_bytes(),
                    AttributeValue::B(b) => b.as_ref(),
                    _ => continue,
                };
                for needle in encodings {
                    assert!(
                        !bytes.windows(needle.len()).any(|w| w == needle),
                        "data key {n} in the table in clear (or base64/hex)"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn a_server_secret_is_made_once_and_shared() {
    let (config, clients) = fresh().await;
    let store = clients.store(&config);
    let keys = clients.keys(&config);
    let first = assert_calls!(
        clients,
        keys.server_secret(&store, "session-ids").await.unwrap(),
        [
            ("DynamoDB", "GetItem", 1),
            ("KMS", "GenerateDataKey", 1),
            ("DynamoDB", "PutItem", 1),
        ]
    );
    let again = assert_calls!(
        clients,
        keys.server_secret(&store, "session-ids").await.unwrap(),
        [("DynamoDB", "GetItem", 1), ("KMS", "Decrypt", 1)]
    );
    assert_eq!(*first, *again);
    let other = keys.server_secret(&store, "other").await.unwrap();
    assert_ne!(*first, *other);
}

/// `Services::open_aws` sizes the vault's cache from the config (the vault is the only key cache).
#[tokio::test]
async fn open_aws_takes_the_key_cache_size_and_lifetime_from_the_config() {
    let (alice, bob) = (user("alice"), user("bob"));
    let reload = counts(&[("DynamoDB", "Query", 1), ("KMS", "Decrypt", 1)]);

    let mut config = emulator().await.fresh().await.unwrap();
    config.key_cache_size = 1;
    let app = nib::services::Services::open_aws(config.clone())
        .await
        .unwrap();
    let calls = app.aws_calls().cloned().unwrap();
    app.vault().user_keys(&alice).await.unwrap();
    app.vault().user_keys(&bob).await.unwrap();
    let before = calls.snapshot();
    app.vault().user_keys(&bob).await.unwrap();
    assert_eq!(calls.since(&before), counts(&[]), "cached");
    // Bob pushed Alice out of a cache of one.
    let before = calls.snapshot();
    app.vault().user_keys(&alice).await.unwrap();
    assert_eq!(calls.since(&before), reload);

    // A lifetime shorter than any request: every use asks KMS again.
    config.key_cache_size = 10;
    config.key_cache_ttl = Duration::from_nanos(1);
    let app = nib::services::Services::open_aws(config).await.unwrap();
    let calls = app.aws_calls().cloned().unwrap();
    for _ in 0..2 {
        let before = calls.snapshot();
        app.vault().user_keys(&alice).await.unwrap();
        assert_eq!(calls.since(&before), reload);
    }
}

// ---------------------------------------------------------------------------------------------
// Access tokens signed by KMS (adapters/aws/signing.rs)

mod signing {
    use std::collections::HashMap;
    use std::sync::Arc;

    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use sha2::Digest;

    use super::{counts, emulator, fresh};
    use nib::adapters::aws::AwsClients;
    use nib::adapters::aws::CallCounts;
    use nib::adapters::aws::signing::{KmsSigner, OAuthKeys, verify_only};
    use nib::auth::oauth::authorize::AuthorizeParams;
    use nib::auth::oauth::clients::{ClientKind, RegistrationRequest};
    use nib::auth::oauth::jwt::{
        self, AccessClaims, LocalSigner, SignError, TokenSigner, Verifier, public_key_from_der,
        public_key_from_pem,
    };
    use nib::auth::oauth::{OAuth, OAuthConfig, OAuthError};
    use nib::config::AwsConfig;
    use nib::domain::UserId;
    use nib::ports::{Clock, SystemClock};
    use nib::services::Services;
    use nib_testkit::emulator::Faults;

    const ISSUER: &str = "https://nib.example";

    fn claims() -> AccessClaims {
        let now = SystemClock.unix();
        AccessClaims {
            iss: ISSUER.into(),
            sub: "default".into(),
            aud: format!("{ISSUER}/mcp"),
            exp: now + 600,
            iat: now,
            jti: "j".into(),
            scope: "read".into(),
            client_id: "c".into(),
            gid: "g".into(),
        }
    }

    /// A fresh table and bucket, with the deployment's signing configuration: a KMS P-256 key
    /// (`NIB_SIGNING_KEY_ID`) and its public half as PEM (`NIB_SIGNING_PUBLIC_KEY`).
    async fn deployed_config() -> AwsConfig {
        let emulator = emulator().await;
        let (key_arn, pem) = emulator.create_signing_key().await.unwrap();
        let mut config = emulator.fresh().await.unwrap();
        config.signing_key_id = Some(key_arn);
        config.signing_public_key_pem = Some(pem);
        config.validate().unwrap();
        config
    }

    /// What the deployment does: oauth signs with `kms:Sign`; the mcp front verifies with the
    /// PEM alone.
    #[tokio::test]
    async fn a_kms_signed_token_verifies_with_the_public_key_alone() {
        let config = deployed_config().await;
        let clients = AwsClients::connect(&config).await;
        let key_id = config.signing_key_id.clone().unwrap();
        let pem = config.signing_public_key_pem.clone().unwrap();

        // Without the PEM, one GetPublicKey at start; with it, no call at all.
        let asked = assert_calls!(
            clients,
            KmsSigner::new(clients.kms.clone(), &key_id, None)
                .await
                .unwrap(),
            [("KMS", "GetPublicKey", 1)]
        );
        let signer = assert_calls!(
            clients,
            KmsSigner::new(
                clients.kms.clone(),
                &key_id,
                Some(public_key_from_pem(&pem).unwrap())
            )
            .await
            .unwrap(),
            []
        );
        assert_eq!(asked.public_key(), signer.public_key());
        assert_eq!(asked.kid(), signer.kid());

        // The front: a verifier from the PEM alone.
        let front = verify_only(&config).unwrap();
        assert_eq!(front.kid(), signer.kid());
        let store = Arc::new(clients.store(&config));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let verifier = Verifier::new(
            front.public_key(),
            &OAuthConfig::new(ISSUER),
            nib::auth::oauth::grants::Grants::new(store, clock.clone()),
            clock,
        );
        // KMS returns DER signatures with a high S about half the time (moto signs with
        // OpenSSL, which does not normalize): every token comes out raw, low S, and verifies.
        for _ in 0..8 {
            let token = assert_calls!(
                clients,
                jwt::sign_token(&signer, &claims()).await.unwrap(),
                [("KMS", "Sign", 1)]
            );
            assert_eq!(verifier.claims(&token).unwrap().gid, "g");
            let raw = URL_SAFE_NO_PAD
                .decode(token.rsplit('.').next().unwrap())
                .unwrap();
            let signature = p256::ecdsa::Signature::from_slice(&raw).unwrap();
            assert!(signature.normalize_s().is_none(), "high S in {token}");
        }

        // The JWKS is the KMS key's public point.
        let der = clients
            .kms
            .get_public_key()
            .key_id(&key_id)
            .send()
            .await
            .unwrap()
            .public_key
            .unwrap();
        let kms_public = public_key_from_der(der.as_ref()).unwrap();
        let point =
            p256::elliptic_curve::sec1::ToEncodedPoint::to_encoded_point(&kms_public, false);
        let jwks = jwt::jwks(&signer);
        let key = &jwks["keys"][0];
        let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(key[name].as_str().unwrap()).unwrap();
        assert_eq!(coordinate("x"), point.x().unwrap().to_vec());
        assert_eq!(coordinate("y"), point.y().unwrap().to_vec());
        assert_eq!(key["kid"], signer.kid());
        assert_eq!(jwt::jwks(&front), jwks);
    }

    #[tokio::test]
    async fn a_wrong_key_or_a_failing_kms_issues_no_token() {
        let config = deployed_config().await;
        let clients = AwsClients::connect(&config).await;
        let key_id = config.signing_key_id.clone().unwrap();

        // A configured public key of another key: refused before the token leaves.
        let other = LocalSigner::from_seed(&[1; 32]).public_key().to_owned();
        let wrong = KmsSigner::new(clients.kms.clone(), &key_id, Some(other))
            .await
            .unwrap();
        assert!(matches!(
            jwt::sign_token(&wrong, &claims()).await,
            Err(SignError::KeyMismatch)
        ));
        // The symmetric data key cannot sign: KMS refuses.
        let public = verify_only(&config).unwrap().public_key().to_owned();
        let symmetric = KmsSigner::new(clients.kms.clone(), &config.kms_key_id, Some(public))
            .await
            .unwrap();
        assert!(matches!(
            jwt::sign_token(&symmetric, &claims()).await,
            Err(SignError::Unavailable(_))
        ));
        // Nor has it a P-256 public key to ask for.
        assert!(
            KmsSigner::new(clients.kms.clone(), &config.kms_key_id, None)
                .await
                .is_err()
        );
    }

    /// A client through the authorization server over AWS, tokens signed by KMS; the front's
    /// verify-only server accepts them; a refresh while KMS fails is a bare `server_error` and
    /// leaves the refresh token usable.
    #[tokio::test]
    async fn the_token_endpoint_signs_with_kms_and_the_front_verifies() {
        let config = deployed_config().await;
        let faults = Faults::new();
        let clients = AwsClients::connect_with(&config, vec![faults.interceptor()]).await;
        let app = Services::open_aws_with(config.clone(), clients)
            .await
            .unwrap();
        let calls = app.aws_calls().cloned().unwrap();
        let oauth = app.oauth(OAuthConfig::new(ISSUER));
        let user = UserId::parse("default").unwrap();

        let client = oauth
            .clients
            .register(
                RegistrationRequest {
                    redirect_uris: Some(vec!["https://client.example/cb".into()]),
                    token_endpoint_auth_method: Some("none".into()),
                    ..Default::default()
                },
                ClientKind::Dynamic,
            )
            .await
            .unwrap()
            .record
            .client_id;
        let verifier = "v".repeat(43);
        let challenge = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()));
        let request = oauth
            .validate_authorize(
                &AuthorizeParams {
                    response_type: Some("code".into()),
                    client_id: Some(client.clone()),
                    redirect_uri: Some("https://client.example/cb".into()),
                    scope: Some("read".into()),
                    state: None,
                    code_challenge: Some(challenge),
                    code_challenge_method: Some("S256".into()),
                    resource: Some(format!("{ISSUER}/mcp")),
                },
                None,
            )
            .await
            .unwrap();
        let location = oauth.approve(&request, &user).await.unwrap();
        let code = url::Url::parse(&location)
            .unwrap()
            .query_pairs()
            .find(|(k, _)| k == "code")
            .unwrap()
            .1
            .into_owned();
        let form = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let before = calls.snapshot();
        let tokens = oauth
            .token(
                &form(&[
                    ("grant_type", "authorization_code"),
                    ("code", &code),
                    ("code_verifier", &verifier),
                    ("redirect_uri", "https://client.example/cb"),
                    ("client_id", &client),
                ]),
                None,
            )
            .await
            .unwrap();
        let kms_calls: CallCounts = calls
            .since(&before)
            .into_iter()
            .filter(|((service, _), _)| service == "KMS")
            .collect();
        assert_eq!(
            kms_calls,
            counts(&[("KMS", "Sign", 1)]),
            "one kms:Sign per token, nothing else of KMS"
        );

        // The mcp front: the public key from the configuration, no secret, no KMS.
        let front = OAuth::verify_only(
            OAuthConfig::new(ISSUER),
            app.store.clone(),
            app.clock.clone(),
            verify_only(&config).unwrap(),
        );
        assert_eq!(front.jwks(), oauth.jwks());
        let principal = front.verifier.verify(&tokens.access_token).await.unwrap();
        assert_eq!(principal.user, user);
        assert!(matches!(
            front.sign_access_token(&claims()).await,
            Err(SignError::NotASigner)
        ));

        // KMS fails during a refresh: a server error that says nothing of its cause...
        let refresh = form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &tokens.refresh_token),
            ("client_id", &client),
        ]);
        faults.fail("KMS", "Sign");
        let error = oauth.token(&refresh, None).await.unwrap_err();
        assert!(matches!(
            error,
            OAuthError::Signing(SignError::Unavailable(_))
        ));
        assert_eq!(error.code(), "server_error");
        assert_eq!(error.description(), "internal error");
        // ...and the refresh token was not spent: it works once KMS is back.
        faults.clear();
        let next = oauth.token(&refresh, None).await.unwrap();
        assert_ne!(next.refresh_token, tokens.refresh_token);
        front.verifier.verify(&next.access_token).await.unwrap();
    }

    /// `Services::open_aws` without `NIB_SIGNING_KEY_ID` (an emulator, `nib serve --backend aws`):
    /// a key derived from `SECRET#oauth`, the same for every process on the table.
    #[tokio::test]
    async fn without_a_signing_key_the_derived_key_is_shared_by_processes() {
        let (config, clients) = fresh().await;
        let store = clients.store(&config);
        let first = OAuthKeys::load(&config, &clients, &store).await.unwrap();
        let second = assert_calls!(
            clients,
            OAuthKeys::load(&config, &clients, &store).await.unwrap(),
            [("DynamoDB", "GetItem", 1), ("KMS", "Decrypt", 1)]
        );
        assert_eq!(first.signer.public_key(), second.signer.public_key());
        assert_eq!(*first.csrf_key, *second.csrf_key);
        // A verify-only front needs the public key configured.
        assert!(verify_only(&config).is_err());

        // With a signing key and its PEM: the same secret read, and no KMS call for the key.
        let mut deployed = config.clone();
        let (key_arn, pem) = emulator().await.create_signing_key().await.unwrap();
        deployed.signing_key_id = Some(key_arn);
        deployed.signing_public_key_pem = Some(pem);
        let kms = assert_calls!(
            clients,
            OAuthKeys::load(&deployed, &clients, &store).await.unwrap(),
            [("DynamoDB", "GetItem", 1), ("KMS", "Decrypt", 1)]
        );
        assert_ne!(kms.signer.public_key(), first.signer.public_key());
        // The CSRF key still comes from the wrapped secret.
        assert_eq!(*kms.csrf_key, *first.csrf_key);
    }
}

// ---- The ingest function --------------------------------------------------------------------

/// Ingest's log lines name the user, the page and the file's extension, never the upload's key
/// (it holds the file's name, which the store keeps only as an HMAC): not for an import, a
/// rejected upload or a failed read, and not at `RUST_LOG=trace` either, where the SDK would
/// log every request with its URL (the object key) and the function's runtime every raw event.
#[tokio::test]
async fn ingest_logs_ids_never_the_file_name() {
    use nib::functions::ingest::Tally;
    use nib::telemetry::{CapturedLogs, subscriber};

    let (config, clients) = fresh().await;
    // The ingest function's services, over these clients.
    let services = {
        use nib::services::{Ports, Role, Services, Settings};
        let ports = Ports::aws(
            &config,
            clients.clone(),
            Role::Ingest,
            nib::config::OcrChoice::Off,
        )
        .await
        .unwrap();
        let settings = Settings::aws(config.clone(), Role::Ingest, nib::config::OcrChoice::Off);
        Services::build(ports, &settings).unwrap()
    };
    let notebook = services.notebook().clone();
    let ingest = nib::functions::ingest(&services).unwrap();
    let upload = |key: &'static str, body: &'static [u8]| {
        let (s3, bucket) = (clients.s3.clone(), config.bucket.clone());
        async move {
            s3.put_object()
                .bucket(bucket)
                .key(key)
                .body(body.to_vec().into())
                .send()
                .await
                .unwrap();
        }
    };
    upload(
        "uploads/default/2026-06-19 zebra costume fitting.md",
        b"## Tasks\n- [ ] Call the printer\n",
    )
    .await;
    upload(
        "uploads/default/2026-06-20 bank statement.pdf",
        b"not a pdf",
    )
    .await;

    let logs = CapturedLogs::default();
    let guard = tracing::subscriber::set_default(subscriber(Some("trace"), true, logs.clone()));
    let mut tally = Tally::default();
    // Event keys are URL-encoded, as S3 sends them.
    for key in [
        "uploads/default/2026-06-19+zebra+costume+fitting.md",
        "uploads/default/2026-06-20+bank+statement.pdf",
    ] {
        ingest
            .record(&config.bucket, key, &mut tally)
            .await
            .unwrap();
    }
    let missing = "uploads/default/2026-06-21+diary+of+a+nobody.md";
    assert!(
        ingest
            .record(&config.bucket, missing, &mut tally)
            .await
            .is_err()
    );
    drop(guard);

    assert_eq!(
        tally,
        Tally {
            imported: 1,
            rejected: 1,
            superseded: 0
        }
    );
    let user = user("default");
    let page = notebook.list_pages(&user, None, None, 10).await.unwrap()[0]
        .page_id
        .clone();
    let text = logs.text();
    for expected in [
        "page imported",
        "upload rejected",
        "ingest failed",
        &page.to_string(),
    ] {
        assert!(text.contains(expected), "{expected:?} not logged: {text}");
    }
    for name in ["zebra", "costume", "bank", "statement", "diary", "nobody"] {
        assert!(!text.contains(name), "{name:?} logged: {text}");
    }
}
