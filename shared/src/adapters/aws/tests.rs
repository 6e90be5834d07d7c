//! The AWS adapters against moto's server (see `emulator`): the store conformance suite, the
//! exact requests each port operation sends, assets with presigned URLs, and KMS keys.
//!
//! One server per test binary (per test process under nextest), a fresh table and bucket per
//! test. moto checks neither signatures nor expiry, so presigned URLs are checked for their
//! `X-Amz-*` parameters and fetched for their bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;

use super::emulator::Emulator;
use super::{AwsClients, CallCounts};
use crate::config::AwsConfig;
use crate::crypto::{Aad, Vault};
use crate::domain::{PageId, UserId};
use crate::ports::{
    AssetKind, Assets, Cond, Item, Keys, KeysError, Query, Store, StoreError, Write,
};
use crate::store_suite;

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
    store_suite::run_all(|| {
        // The suite's factory is synchronous; each check gets its own new table.
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                let config = emulator.fresh().await.unwrap();
                let clients = AwsClients::connect(&config).await;
                Arc::new(clients.store(&config)) as Arc<dyn Store>
            })
        })
    })
    .await;
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

    // First use: read the (absent) key items, generate, store.
    let v1 = assert_calls!(
        clients,
        vault.user_keys(&alice).await.unwrap(),
        [
            ("DynamoDB", "Query", 1),
            ("KMS", "GenerateDataKey", 1),
            ("DynamoDB", "PutItem", 1),
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
            .unwrap(&alice, &crate::ports::WrappedKey(wrapped.clone()))
            .await
            .unwrap();
        assert!(
            keys.unwrap(&user("bob"), &crate::ports::WrappedKey(wrapped))
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

/// `App::open_aws` sizes the vault's cache from the config (the vault is the only key cache).
#[tokio::test]
async fn open_aws_takes_the_key_cache_size_and_lifetime_from_the_config() {
    let (alice, bob) = (user("alice"), user("bob"));
    let reload = counts(&[("DynamoDB", "Query", 1), ("KMS", "Decrypt", 1)]);

    let mut config = emulator().await.fresh().await.unwrap();
    config.key_cache_size = 1;
    let app = crate::app::App::open_aws(config.clone()).await.unwrap();
    let calls = app.aws_calls.clone().unwrap();
    app.vault.user_keys(&alice).await.unwrap();
    app.vault.user_keys(&bob).await.unwrap();
    let before = calls.snapshot();
    app.vault.user_keys(&bob).await.unwrap();
    assert_eq!(calls.since(&before), counts(&[]), "cached");
    // Bob pushed Alice out of a cache of one.
    let before = calls.snapshot();
    app.vault.user_keys(&alice).await.unwrap();
    assert_eq!(calls.since(&before), reload);

    // A lifetime shorter than any request: every use asks KMS again.
    config.key_cache_size = 10;
    config.key_cache_ttl = Duration::from_nanos(1);
    let app = crate::app::App::open_aws(config).await.unwrap();
    let calls = app.aws_calls.clone().unwrap();
    for _ in 0..2 {
        let before = calls.snapshot();
        app.vault.user_keys(&alice).await.unwrap();
        assert_eq!(calls.since(&before), reload);
    }
}
