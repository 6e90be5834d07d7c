//! `nib::adapters::embedded`: the embedded store passes the store conformance suite, on disk
//! and in memory (its other tests are beside it, in nib-shared).

use std::sync::Arc;

use nib::adapters::embedded::EmbeddedStore;
use nib::ports::Store;
use nib_testkit::store_suite;

fn file_store() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(&dir.path().join("nib.redb")).unwrap();
    (dir, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conforms_to_the_store_suite_on_disk() {
    let dirs = std::sync::Mutex::new(Vec::new());
    store_suite::run_all(|clock| {
        let (dir, store) = file_store();
        dirs.lock().unwrap().push(dir);
        Arc::new(store.with_clock(clock)) as Arc<dyn Store>
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conforms_to_the_store_suite_in_memory() {
    store_suite::run_all(|clock| {
        Arc::new(EmbeddedStore::in_memory().with_clock(clock)) as Arc<dyn Store>
    })
    .await;
}
