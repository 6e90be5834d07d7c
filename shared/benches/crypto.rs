//! AES-256-GCM seal and open of a 4 KB field, through `crypto::UserKeys` as the notebook uses
//! it (a `Vault` over an in-memory store and a local key file).

mod common;

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nib::adapters::embedded::EmbeddedStore;
use nib::adapters::local_keys::LocalKeys;
use nib::crypto::{Aad, Vault};

const FIELD: usize = 4096;

fn crypto(c: &mut Criterion) {
    let rt = common::runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = Arc::new(LocalKeys::open_or_create(&dir.path().join("master.key")).expect("keys"));
    let vault = Vault::new(
        Arc::new(EmbeddedStore::in_memory()),
        keys,
        16,
        Duration::from_secs(3600),
    );
    let user = common::user();
    let ring = rt.block_on(vault.user_keys(&user)).expect("user keys");
    let aad = Aad {
        user: &user,
        pk: "U#default",
        sk: "PAGE#01J0000000000000000000000",
        field: "ocr",
    };
    let plain: Vec<u8> = (0..FIELD).map(|i| b"abcdefghij klmnop\n"[i % 18]).collect();
    let sealed = ring.seal(&aad, &plain);

    let mut group = c.benchmark_group("crypto");
    group.throughput(Throughput::BytesDecimal(FIELD as u64));
    group.bench_function("seal_4k", |b| {
        b.iter(|| ring.seal(&aad, std::hint::black_box(&plain)))
    });
    group.bench_function("open_4k", |b| {
        b.iter(|| {
            ring.open(&aad, std::hint::black_box(&sealed))
                .expect("opens")
        })
    });
    group.finish();
    common::write_json("crypto.json", &serde_json::json!({ "field_bytes": FIELD }));
}

criterion_group!(benches, crypto);
criterion_main!(benches);
