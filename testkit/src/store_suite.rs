//! The `Store` conformance suite: the behaviour every back end must share, written once against
//! the port so the embedded store and the DynamoDB adapter run the same checks.
//!
//! Each check takes a fresh, empty store and panics (with a message naming the check) when the
//! store misbehaves. [`run_all`] runs them all; a back end's tests call it with a factory that
//! builds a store judging expiry by the clock it is given:
//!
//! ```ignore
//! nib_testkit::store_suite::run_all(|clock| {
//!     Arc::new(EmbeddedStore::in_memory().with_clock(clock)) as Arc<dyn Store>
//! })
//! .await;
//! ```
//!
//! Most checks pass the system clock, with items expired 100 s ago or expiring in an hour;
//! [`expiry_boundary`] pins a clock to the very second an item expires. `increment_is_atomic`
//! spawns tokio tasks, so run the suite on a multi-threaded runtime to make the race real.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use nib::ports::{
    Clock, Cond, Item, MAX_TRANSACTION_ITEMS, Query, QueryPage, Store, StoreError, SystemClock,
    Write, counter_value,
};

/// A clock the suite sets by hand.
#[derive(Debug)]
pub struct PinnedClock(AtomicI64);

impl PinnedClock {
    pub fn at(unix: i64) -> Arc<PinnedClock> {
        Arc::new(PinnedClock(AtomicI64::new(unix)))
    }

    pub fn set(&self, unix: i64) {
        self.0.store(unix, Ordering::SeqCst);
    }
}

impl Clock for PinnedClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(self.0.load(Ordering::SeqCst) as u64)
    }
}

/// Runs every check, each on a new store from `make`, which must judge expiry by the clock it
/// is given.
pub async fn run_all(make: impl Fn(Arc<dyn Clock>) -> Arc<dyn Store>) {
    expiry_boundary(|clock| make(clock)).await;
    let make = || make(Arc::new(SystemClock));
    conditional_puts(make()).await;
    items_round_trip(make()).await;
    failed_condition_reports_its_index_and_writes_nothing(make()).await;
    delete_conditions(make()).await;
    check_writes(make()).await;
    query_prefix_bounds_reverse_limit(make()).await;
    query_pagination(make()).await;
    query_bad_cursor_is_invalid(make()).await;
    gsi1_follows_puts_and_deletes(make()).await;
    gsi1_pagination_and_bounds(make()).await;
    expired_items_are_absent(make()).await;
    increment_counts(make()).await;
    increment_is_atomic(make()).await;
    adds_in_transactions(make()).await;
    concurrent_adds_do_not_conflict(make()).await;
    batch_get_keeps_order(make()).await;
    invalid_transactions(make()).await;
    empty_transaction_is_a_no_op(make()).await;
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A plain item with version 1, no index key, no expiry, and a body naming its key.
pub fn item(pk: &str, sk: &str) -> Item {
    Item {
        pk: pk.into(),
        sk: sk.into(),
        gsi1: None,
        version: 1,
        expires_at: None,
        body: format!("{pk}|{sk}").into_bytes(),
    }
}

fn with_gsi(mut item: Item, gpk: &str, gsk: &str) -> Item {
    item.gsi1 = Some((gpk.into(), gsk.into()));
    item
}

fn with_version(mut item: Item, version: u64) -> Item {
    item.version = version;
    item
}

fn expiring(mut item: Item, at: i64) -> Item {
    item.expires_at = Some(at);
    item
}

fn sks(items: &[Item]) -> Vec<&str> {
    items.iter().map(|i| i.sk.as_str()).collect()
}

#[track_caller]
fn assert_condition_failed(result: Result<(), StoreError>, index: usize, what: &str) {
    match result {
        Err(StoreError::ConditionFailed { index: i }) if i == index => {}
        other => panic!("{what}: expected ConditionFailed {{ index: {index} }}, got {other:?}"),
    }
}

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::Invalid(_)) => {}
        other => panic!("{what}: expected Invalid, got {other:?}"),
    }
}

/// Follows cursors to the end and returns every item, checking that no page exceeds `limit`.
pub async fn query_all(store: &dyn Store, query: &Query) -> Vec<Item> {
    let mut query = query.clone();
    let mut all = Vec::new();
    // Bounds the loop so a store that keeps returning cursors fails instead of hanging.
    for _ in 0..10_000 {
        let QueryPage { items, next } = store.query(&query).await.unwrap();
        assert!(
            items.len() <= query.limit,
            "a page of {} items exceeds the limit {}",
            items.len(),
            query.limit
        );
        all.extend(items);
        match next {
            Some(next) => query.after = Some(next),
            None => return all,
        }
    }
    panic!("query never ran out of pages");
}

/// `NotExists`, `Exists` and `Version` on single puts.
pub async fn conditional_puts(store: Arc<dyn Store>) {
    let s = &*store;
    let a = item("P", "a");
    s.put(a.clone(), Cond::NotExists).await.unwrap();
    assert_condition_failed(
        s.put(a.clone(), Cond::NotExists).await,
        0,
        "NotExists on a stored item",
    );
    assert_condition_failed(
        s.put(item("P", "b"), Cond::Exists).await,
        0,
        "Exists on an absent item",
    );
    assert_condition_failed(
        s.put(with_version(item("P", "b"), 2), Cond::Version(1))
            .await,
        0,
        "Version on an absent item",
    );
    assert_eq!(s.get("P", "b").await.unwrap(), None, "a failed put wrote");

    s.put(with_version(a.clone(), 1), Cond::Exists)
        .await
        .unwrap();
    s.put(with_version(a.clone(), 2), Cond::Version(1))
        .await
        .unwrap();
    assert_condition_failed(
        s.put(with_version(a.clone(), 3), Cond::Version(1)).await,
        0,
        "a stale Version",
    );
    assert_eq!(s.get("P", "a").await.unwrap().unwrap().version, 2);
    s.put(with_version(a.clone(), 3), Cond::Version(2))
        .await
        .unwrap();

    // `Cond::None` writes whatever is there.
    let mut b = with_version(a.clone(), 9);
    b.body = b"replaced".to_vec();
    s.put(b.clone(), Cond::None).await.unwrap();
    s.put(item("P", "c"), Cond::None).await.unwrap();
    assert_eq!(s.get("P", "a").await.unwrap(), Some(b));
}

/// Every field of an item comes back as it was written.
pub async fn items_round_trip(store: Arc<dyn Store>) {
    let s = &*store;
    let full = Item {
        pk: "U#x".into(),
        sk: "PAGE#é\u{1F600}".into(),
        gsi1: Some(("U#x#PAGES".into(), "2024-02-03#1".into())),
        version: u64::MAX / 3,
        expires_at: Some(now() + 3600),
        body: (0..=255).collect(),
    };
    let empty_body = Item {
        body: vec![],
        ..item("U#x", "EMPTY")
    };
    s.put(full.clone(), Cond::NotExists).await.unwrap();
    s.put(empty_body.clone(), Cond::NotExists).await.unwrap();
    assert_eq!(s.get(&full.pk, &full.sk).await.unwrap(), Some(full.clone()));
    assert_eq!(s.get("U#x", "EMPTY").await.unwrap(), Some(empty_body));
    assert_eq!(s.get("U#x", "missing").await.unwrap(), None);
    assert_eq!(s.get("U#y", &full.sk).await.unwrap(), None);
    let page = s.query(&Query::gsi1("U#x#PAGES", "")).await.unwrap();
    assert_eq!(page.items, vec![full]);
}

/// A transaction whose third write fails names index 2 and leaves everything as it was.
pub async fn failed_condition_reports_its_index_and_writes_nothing(store: Arc<dyn Store>) {
    let s = &*store;
    s.put(item("P", "keep"), Cond::NotExists).await.unwrap();
    s.put(item("P", "taken"), Cond::NotExists).await.unwrap();
    let writes = vec![
        Write::put(with_gsi(item("P", "new"), "G", "1"), Cond::NotExists),
        Write::delete("P", "keep", Cond::Exists),
        Write::put(item("P", "taken"), Cond::NotExists),
        Write::put(item("P", "other"), Cond::None),
    ];
    assert_condition_failed(s.transact(writes).await, 2, "the third write's condition");
    assert_eq!(
        s.get("P", "new").await.unwrap(),
        None,
        "write 0 was applied"
    );
    assert!(
        s.get("P", "keep").await.unwrap().is_some(),
        "write 1 was applied"
    );
    assert_eq!(
        s.get("P", "other").await.unwrap(),
        None,
        "write 3 was applied"
    );
    assert!(
        s.query(&Query::gsi1("G", ""))
            .await
            .unwrap()
            .items
            .is_empty(),
        "the index saw a failed write"
    );

    // The first failing write is the one reported.
    let writes = vec![
        Write::put(item("P", "x"), Cond::None),
        Write::delete("P", "absent", Cond::Exists),
        Write::put(item("P", "taken"), Cond::NotExists),
    ];
    assert_condition_failed(s.transact(writes).await, 1, "the first failing write");

    // And the same writes with true conditions all apply.
    let writes = vec![
        Write::put(item("P", "new"), Cond::NotExists),
        Write::delete("P", "keep", Cond::Exists),
        Write::put(with_version(item("P", "taken"), 2), Cond::Version(1)),
    ];
    s.transact(writes).await.unwrap();
    assert!(s.get("P", "new").await.unwrap().is_some());
    assert_eq!(s.get("P", "keep").await.unwrap(), None);
    assert_eq!(s.get("P", "taken").await.unwrap().unwrap().version, 2);
}

/// Deletes honour their conditions; an unconditional delete of nothing succeeds.
pub async fn delete_conditions(store: Arc<dyn Store>) {
    let s = &*store;
    s.transact(vec![Write::delete("P", "absent", Cond::None)])
        .await
        .unwrap();
    assert_condition_failed(
        s.transact(vec![Write::delete("P", "absent", Cond::Exists)])
            .await,
        0,
        "deleting an absent item under Exists",
    );
    s.put(with_version(item("P", "a"), 4), Cond::NotExists)
        .await
        .unwrap();
    assert_condition_failed(
        s.transact(vec![Write::delete("P", "a", Cond::Version(3))])
            .await,
        0,
        "deleting under a stale Version",
    );
    assert_condition_failed(
        s.transact(vec![Write::delete("P", "a", Cond::NotExists)])
            .await,
        0,
        "deleting a stored item under NotExists",
    );
    assert!(s.get("P", "a").await.unwrap().is_some());
    s.transact(vec![Write::delete("P", "a", Cond::Version(4))])
        .await
        .unwrap();
    assert_eq!(s.get("P", "a").await.unwrap(), None);
    s.put(item("P", "b"), Cond::None).await.unwrap();
    s.transact(vec![Write::delete("P", "b", Cond::Exists)])
        .await
        .unwrap();
    assert_eq!(s.get("P", "b").await.unwrap(), None);
}

/// `Check` gates a transaction without writing anything.
pub async fn check_writes(store: Arc<dyn Store>) {
    let s = &*store;
    s.put(with_version(item("P", "guard"), 5), Cond::NotExists)
        .await
        .unwrap();
    let check = |cond| Write::Check {
        pk: "P".into(),
        sk: "guard".into(),
        cond,
    };
    s.transact(vec![
        check(Cond::Version(5)),
        Write::put(item("P", "a"), Cond::None),
    ])
    .await
    .unwrap();
    assert!(s.get("P", "a").await.unwrap().is_some());
    assert_condition_failed(
        s.transact(vec![
            Write::put(item("P", "b"), Cond::None),
            check(Cond::Version(4)),
        ])
        .await,
        1,
        "a Check on a stale version",
    );
    assert_condition_failed(
        s.transact(vec![
            Write::put(item("P", "b"), Cond::None),
            check(Cond::NotExists),
        ])
        .await,
        1,
        "a Check for absence of a stored item",
    );
    assert_eq!(s.get("P", "b").await.unwrap(), None);
    s.transact(vec![Write::Check {
        pk: "P".into(),
        sk: "absent".into(),
        cond: Cond::NotExists,
    }])
    .await
    .unwrap();
    // The check changed nothing.
    assert_eq!(s.get("P", "absent").await.unwrap(), None);
    assert_eq!(s.get("P", "guard").await.unwrap().unwrap().version, 5);
}

/// Prefixes, inclusive bounds, reverse order and limits within one partition.
pub async fn query_prefix_bounds_reverse_limit(store: Arc<dyn Store>) {
    let s = &*store;
    let keys = [
        "A", "A#1", "A#2", "A#3", "A#4", "A#5", "A#50", "AB", "B#1", "B#2", "a#1",
    ];
    let mut writes: Vec<Write> = keys
        .iter()
        .map(|sk| Write::put(item("P", sk), Cond::NotExists))
        .collect();
    // Neighbouring partitions must never leak in.
    writes.push(Write::put(item("O", "A#1"), Cond::NotExists));
    writes.push(Write::put(item("P#", "A#1"), Cond::NotExists));
    writes.push(Write::put(item("PP", "A#1"), Cond::NotExists));
    s.transact(writes).await.unwrap();

    let q = |prefix: &str| Query::table("P", prefix);
    let run = |query: Query| async move { query_all(s, &query).await };

    assert_eq!(sks(&run(q("")).await), keys.to_vec(), "the whole partition");
    assert_eq!(
        sks(&run(q("A#")).await),
        ["A#1", "A#2", "A#3", "A#4", "A#5", "A#50"]
    );
    assert_eq!(
        sks(&run(q("A")).await),
        ["A", "A#1", "A#2", "A#3", "A#4", "A#5", "A#50", "AB"]
    );
    assert_eq!(sks(&run(q("A#5")).await), ["A#5", "A#50"]);
    assert!(run(q("C")).await.is_empty());
    assert!(run(Query::table("Q", "")).await.is_empty());

    let bounded = Query {
        from: Some("A#2".into()),
        to: Some("A#5".into()),
        ..q("A#")
    };
    assert_eq!(
        sks(&run(bounded.clone()).await),
        ["A#2", "A#3", "A#4", "A#5"]
    );
    let reversed = Query {
        reverse: true,
        ..bounded.clone()
    };
    assert_eq!(
        sks(&run(reversed.clone()).await),
        ["A#5", "A#4", "A#3", "A#2"]
    );
    // Bounds that are not themselves stored, or outside the prefix.
    let loose = Query {
        from: Some("A#0".into()),
        to: Some("A#49".into()),
        ..q("A#")
    };
    assert_eq!(sks(&run(loose).await), ["A#1", "A#2", "A#3", "A#4"]);
    let wide = Query {
        from: Some("0".into()),
        to: Some("Z".into()),
        ..q("B")
    };
    assert_eq!(sks(&run(wide).await), ["B#1", "B#2"]);
    let only_from = Query {
        from: Some("AB".into()),
        ..q("")
    };
    assert_eq!(sks(&run(only_from).await), ["AB", "B#1", "B#2", "a#1"]);
    let only_to = Query {
        to: Some("A#1".into()),
        reverse: true,
        ..q("")
    };
    assert_eq!(sks(&run(only_to).await), ["A#1", "A"]);
    let empty = Query {
        from: Some("A#4".into()),
        to: Some("A#3".into()),
        ..q("A#")
    };
    assert!(run(empty).await.is_empty());

    let first = s
        .query(&Query {
            limit: 2,
            ..reversed
        })
        .await
        .unwrap();
    assert_eq!(sks(&first.items), ["A#5", "A#4"]);
    assert!(
        first.next.is_some(),
        "a full page with more to come has a cursor"
    );
    let whole = s
        .query(&Query {
            limit: 100,
            ..q("A#")
        })
        .await
        .unwrap();
    assert_eq!(whole.items.len(), 6);
    assert_eq!(whole.next, None, "a partial last page has no cursor");
}

/// Cursors walk a large partition in both directions without gaps or repeats.
pub async fn query_pagination(store: Arc<dyn Store>) {
    let s = &*store;
    let n = 250;
    let expected: Vec<String> = (0..n).map(|i| format!("K#{i:04}")).collect();
    for chunk in expected.chunks(MAX_TRANSACTION_ITEMS) {
        let writes = chunk
            .iter()
            .map(|sk| Write::put(item("P", sk), Cond::NotExists))
            .collect();
        s.transact(writes).await.unwrap();
    }
    s.put(item("P", "L#0"), Cond::NotExists).await.unwrap();
    for limit in [1, 7, 50, 250, 1000] {
        let forward = query_all(
            s,
            &Query {
                limit,
                ..Query::table("P", "K#")
            },
        )
        .await;
        assert_eq!(sks(&forward), expected, "forward, limit {limit}");
        let backward = query_all(
            s,
            &Query {
                limit,
                reverse: true,
                ..Query::table("P", "K#")
            },
        )
        .await;
        let mut reversed = expected.clone();
        reversed.reverse();
        assert_eq!(sks(&backward), reversed, "reverse, limit {limit}");
    }
    // Bounds still apply on later pages.
    let bounded = query_all(
        s,
        &Query {
            from: Some("K#0010".into()),
            to: Some("K#0029".into()),
            limit: 6,
            ..Query::table("P", "K#")
        },
    )
    .await;
    assert_eq!(sks(&bounded), &expected[10..30]);

    // A page ends at the limit and its cursor resumes strictly after its last item.
    let first = s
        .query(&Query {
            limit: 3,
            ..Query::table("P", "K#")
        })
        .await
        .unwrap();
    assert_eq!(sks(&first.items), &expected[..3]);
    let second = s
        .query(&Query {
            limit: 3,
            after: first.next,
            ..Query::table("P", "K#")
        })
        .await
        .unwrap();
    assert_eq!(sks(&second.items), &expected[3..6]);
}

/// A cursor the store did not hand out is refused.
pub async fn query_bad_cursor_is_invalid(store: Arc<dyn Store>) {
    let s = &*store;
    s.put(item("P", "a"), Cond::NotExists).await.unwrap();
    for garbage in ["not a cursor!", "%%%", "\u{1F600}"] {
        let query = Query {
            after: Some(garbage.into()),
            ..Query::table("P", "")
        };
        assert_invalid(s.query(&query).await, "a garbage cursor");
    }
}

/// The index follows puts, overwrites, key changes and deletes, in and out of transactions.
pub async fn gsi1_follows_puts_and_deletes(store: Arc<dyn Store>) {
    let s = &*store;
    let index = |gpk: &str| Query::gsi1(gpk, "");
    let in_index = |gpk: &'static str| async move {
        query_all(s, &index(gpk))
            .await
            .into_iter()
            .map(|i| (i.gsi1.unwrap().1, i.sk))
            .collect::<Vec<_>>()
    };
    let pair = |g: &str, sk: &str| (g.to_owned(), sk.to_owned());

    s.put(with_gsi(item("P", "a"), "G", "2"), Cond::NotExists)
        .await
        .unwrap();
    s.put(with_gsi(item("P", "b"), "G", "1"), Cond::NotExists)
        .await
        .unwrap();
    s.put(item("P", "c"), Cond::NotExists).await.unwrap();
    assert_eq!(in_index("G").await, [pair("1", "b"), pair("2", "a")]);

    // The index returns whole items.
    let page = s.query(&index("G")).await.unwrap();
    assert_eq!(page.items[0], with_gsi(item("P", "b"), "G", "1"));

    // Moving within the index, to another index partition, and out of it.
    s.put(with_gsi(item("P", "a"), "G", "0"), Cond::Exists)
        .await
        .unwrap();
    assert_eq!(in_index("G").await, [pair("0", "a"), pair("1", "b")]);
    s.put(with_gsi(item("P", "b"), "H", "1"), Cond::Exists)
        .await
        .unwrap();
    assert_eq!(in_index("G").await, [pair("0", "a")]);
    assert_eq!(in_index("H").await, [pair("1", "b")]);
    s.put(item("P", "a"), Cond::Exists).await.unwrap();
    assert!(in_index("G").await.is_empty());

    // An overwrite with the same index key keeps one entry, holding the new body.
    let mut b2 = with_gsi(item("P", "b"), "H", "1");
    b2.body = b"new".to_vec();
    s.put(b2.clone(), Cond::None).await.unwrap();
    assert_eq!(query_all(s, &index("H")).await, vec![b2]);

    // Into the index by overwrite; out of it by delete, also inside transactions.
    s.transact(vec![
        Write::put(with_gsi(item("P", "c"), "H", "0"), Cond::Exists),
        Write::delete("P", "b", Cond::Exists),
    ])
    .await
    .unwrap();
    assert_eq!(in_index("H").await, [pair("0", "c")]);
    s.transact(vec![Write::delete("P", "c", Cond::None)])
        .await
        .unwrap();
    assert!(in_index("H").await.is_empty());

    // Items of different partitions may share an index partition and sort key.
    s.put(with_gsi(item("P1", "x"), "T", "same"), Cond::None)
        .await
        .unwrap();
    s.put(with_gsi(item("P2", "x"), "T", "same"), Cond::None)
        .await
        .unwrap();
    let mut pks: Vec<String> = query_all(s, &index("T"))
        .await
        .into_iter()
        .map(|i| i.pk)
        .collect();
    pks.sort();
    assert_eq!(pks, ["P1", "P2"]);
}

/// The index ranges with prefixes, bounds, reverse order and cursors like the table.
pub async fn gsi1_pagination_and_bounds(store: Arc<dyn Store>) {
    let s = &*store;
    let n = 30;
    let writes = (0..n)
        .map(|i| {
            // Table order (by sk) is the reverse of index order, to show which one is used.
            let it = with_gsi(
                item("U#a", &format!("PAGE#{:03}", n - i)),
                "U#a#PAGES",
                &format!("2024-01-{:02}#{i:03}", 1 + i % 28),
            );
            Write::put(it, Cond::NotExists)
        })
        .collect();
    s.transact(writes).await.unwrap();
    let mut expected: Vec<String> = (0..n)
        .map(|i| format!("2024-01-{:02}#{i:03}", 1 + i % 28))
        .collect();
    expected.sort();
    let gsks = |items: Vec<Item>| -> Vec<String> {
        items.into_iter().map(|i| i.gsi1.unwrap().1).collect()
    };

    let all = query_all(
        s,
        &Query {
            limit: 4,
            ..Query::gsi1("U#a#PAGES", "2024-")
        },
    )
    .await;
    assert_eq!(gsks(all), expected);
    let backward = query_all(
        s,
        &Query {
            limit: 4,
            reverse: true,
            ..Query::gsi1("U#a#PAGES", "")
        },
    )
    .await;
    let mut reversed = expected.clone();
    reversed.reverse();
    assert_eq!(gsks(backward), reversed);

    let january_2nd_to_4th = query_all(
        s,
        &Query {
            from: Some("2024-01-02".into()),
            to: Some("2024-01-04#999".into()),
            limit: 2,
            ..Query::gsi1("U#a#PAGES", "")
        },
    )
    .await;
    let want: Vec<String> = expected
        .iter()
        .filter(|g| g.as_str() >= "2024-01-02" && g.as_str() <= "2024-01-04#999")
        .cloned()
        .collect();
    assert_eq!(want.len(), 4);
    assert_eq!(gsks(january_2nd_to_4th), want);
    let one_day = query_all(s, &Query::gsi1("U#a#PAGES", "2024-01-01#")).await;
    assert_eq!(gsks(one_day), ["2024-01-01#000", "2024-01-01#028"]);
    // The exact sort key as an inclusive upper bound.
    let upto = query_all(
        s,
        &Query {
            to: Some("2024-01-01#028".into()),
            ..Query::gsi1("U#a#PAGES", "")
        },
    )
    .await;
    assert_eq!(gsks(upto), ["2024-01-01#000", "2024-01-01#028"]);
    assert!(
        query_all(s, &Query::gsi1("U#a", "")).await.is_empty(),
        "an index partition is matched exactly, not by prefix"
    );
}

/// Items past `expires_at` read as absent everywhere, and conditions treat them as absent.
pub async fn expired_items_are_absent(store: Arc<dyn Store>) {
    let s = &*store;
    let past = now() - 100;
    let future = now() + 3600;
    s.transact(vec![
        Write::put(
            expiring(with_gsi(item("P", "old"), "G", "1"), past),
            Cond::None,
        ),
        Write::put(
            expiring(with_gsi(item("P", "new"), "G", "2"), future),
            Cond::None,
        ),
        Write::put(expiring(item("P", "old2"), past), Cond::None),
    ])
    .await
    .unwrap();

    assert_eq!(s.get("P", "old").await.unwrap(), None);
    assert!(s.get("P", "new").await.unwrap().is_some());
    let got = s
        .batch_get(&[("P".into(), "old".into()), ("P".into(), "new".into())])
        .await
        .unwrap();
    assert!(got[0].is_none() && got[1].is_some());
    assert_eq!(sks(&query_all(s, &Query::table("P", "")).await), ["new"]);
    assert_eq!(sks(&query_all(s, &Query::gsi1("G", "")).await), ["new"]);
    // A page of one still skips the expired item rather than returning nothing forever.
    let one = query_all(
        s,
        &Query {
            limit: 1,
            ..Query::table("P", "")
        },
    )
    .await;
    assert_eq!(sks(&one), ["new"]);

    assert_condition_failed(
        s.put(item("P", "old"), Cond::Exists).await,
        0,
        "Exists on an expired item",
    );
    assert_condition_failed(
        s.put(item("P", "old"), Cond::Version(1)).await,
        0,
        "Version on an expired item",
    );
    assert_condition_failed(
        s.transact(vec![Write::delete("P", "old", Cond::Exists)])
            .await,
        0,
        "deleting an expired item under Exists",
    );
    // An expired item can be replaced as if it were not there, and then reads normally.
    s.put(item("P", "old"), Cond::NotExists).await.unwrap();
    assert_eq!(s.get("P", "old").await.unwrap(), Some(item("P", "old")));
    assert_eq!(sks(&query_all(s, &Query::gsi1("G", "")).await), ["new"]);
    s.transact(vec![Write::delete("P", "old2", Cond::None)])
        .await
        .unwrap();
}

/// The port's expiry rule ([`nib::ports::is_live`]) at its boundary, on the store's clock: an
/// item is live the second before its `expires_at` and gone from that second on, for every
/// read, every condition and `increment`. (The embedded store once kept an item
/// live through its `expires_at` second while DynamoDB did not, and both read the system time.)
pub async fn expiry_boundary(make: impl Fn(Arc<PinnedClock>) -> Arc<dyn Store>) {
    // A day ahead of real time, so that no real TTL process could have deleted anything yet:
    // only the store's clock decides.
    let start = now() + 86_400;
    let clock = PinnedClock::at(start);
    let store = make(clock.clone());
    let s = &*store;
    let at = start + 1;
    s.transact(vec![
        Write::put(
            expiring(with_gsi(item("P", "a"), "G", "a"), at),
            Cond::NotExists,
        ),
        Write::put(expiring(item("P", "b"), at), Cond::NotExists),
    ])
    .await
    .unwrap();
    assert_eq!(s.increment("P", "c", 5, at).await.unwrap(), 5);

    // One second before: live everywhere.
    assert!(s.get("P", "a").await.unwrap().is_some(), "live before");
    let keys = [
        ("P".to_owned(), "a".to_owned()),
        ("P".to_owned(), "b".to_owned()),
    ];
    assert!(
        s.batch_get(&keys)
            .await
            .unwrap()
            .iter()
            .all(Option::is_some),
        "live before (batch_get)"
    );
    assert_eq!(
        sks(&query_all(s, &Query::table("P", "")).await),
        ["a", "b", "c"]
    );
    assert_eq!(sks(&query_all(s, &Query::gsi1("G", "")).await), ["a"]);
    s.transact(vec![Write::Check {
        pk: "P".into(),
        sk: "a".into(),
        cond: Cond::Version(1),
    }])
    .await
    .unwrap();
    assert_condition_failed(
        s.put(item("P", "b"), Cond::NotExists).await,
        0,
        "NotExists on an item one second before it expires",
    );
    assert_eq!(
        s.increment("P", "c", 1, at).await.unwrap(),
        6,
        "still counting"
    );

    // At `expires_at`: gone from every read and every condition.
    clock.set(at);
    assert_eq!(s.get("P", "a").await.unwrap(), None, "gone at expires_at");
    assert!(
        s.batch_get(&keys)
            .await
            .unwrap()
            .iter()
            .all(Option::is_none),
        "gone at expires_at (batch_get)"
    );
    assert!(query_all(s, &Query::table("P", "")).await.is_empty());
    assert!(query_all(s, &Query::gsi1("G", "")).await.is_empty());
    assert_condition_failed(
        s.transact(vec![Write::Check {
            pk: "P".into(),
            sk: "a".into(),
            cond: Cond::Exists,
        }])
        .await,
        0,
        "Exists on an item at its expires_at",
    );
    assert_condition_failed(
        s.put(item("P", "a"), Cond::Version(1)).await,
        0,
        "Version on an item at its expires_at",
    );
    s.put(item("P", "b"), Cond::NotExists).await.unwrap();
    assert_eq!(s.get("P", "b").await.unwrap(), Some(item("P", "b")));
    assert_eq!(
        s.increment("P", "c", 1, at + 60).await.unwrap(),
        1,
        "a counter at its expires_at starts over"
    );
}

/// Counters start at zero, add, and start over once expired.
pub async fn increment_counts(store: Arc<dyn Store>) {
    let s = &*store;
    let later = now() + 3600;
    assert_eq!(s.increment("RL#t#1", "RL", 1, later).await.unwrap(), 1);
    assert_eq!(s.increment("RL#t#1", "RL", 5, later).await.unwrap(), 6);
    assert_eq!(s.increment("RL#t#2", "RL", 2, later).await.unwrap(), 2);
    assert_eq!(s.increment("RL#t#1", "RL", 0, later).await.unwrap(), 6);
    let counter = s.get("RL#t#1", "RL").await.unwrap().unwrap();
    assert_eq!(counter.expires_at, Some(later));

    // An expired counter counts from zero again.
    let past = now() - 100;
    assert_eq!(s.increment("RL#t#3", "RL", 7, past).await.unwrap(), 7);
    assert_eq!(s.get("RL#t#3", "RL").await.unwrap(), None);
    assert_eq!(s.increment("RL#t#3", "RL", 1, later).await.unwrap(), 1);
}

/// Fifty concurrent increments each see a distinct value and none is lost.
pub async fn increment_is_atomic(store: Arc<dyn Store>) {
    let later = now() + 3600;
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.increment("C", "C", 1, later).await.unwrap() })
        })
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    seen.sort_unstable();
    assert_eq!(seen, (1..=50).collect::<Vec<u64>>());
    assert_eq!(store.increment("C", "C", 0, later).await.unwrap(), 50);
}

/// `Write::Add` counts up and down inside transactions, with the other writes or not at all.
pub async fn adds_in_transactions(store: Arc<dyn Store>) {
    let s = &*store;
    let count = |item: Option<Item>| item.as_ref().and_then(counter_value);
    s.transact(vec![Write::add("U#a", "STATS#n", 3)])
        .await
        .unwrap();
    s.transact(vec![
        Write::put(item("U#a", "P#1"), Cond::NotExists),
        Write::add("U#a", "STATS#n", 4),
        Write::add("U#a", "STATS#len", 10),
    ])
    .await
    .unwrap();
    assert_eq!(count(s.get("U#a", "STATS#n").await.unwrap()), Some(7));
    assert_eq!(count(s.get("U#a", "STATS#len").await.unwrap()), Some(10));
    s.transact(vec![Write::add("U#a", "STATS#len", -6)])
        .await
        .unwrap();
    assert_eq!(count(s.get("U#a", "STATS#len").await.unwrap()), Some(4));

    // A failed condition elsewhere adds nothing; going below zero fails at the add's index.
    let failed = s
        .transact(vec![
            Write::add("U#a", "STATS#n", 1),
            Write::put(item("U#a", "P#1"), Cond::NotExists),
        ])
        .await;
    assert!(matches!(
        failed,
        Err(StoreError::ConditionFailed { index: 1 })
    ));
    let below = s
        .transact(vec![
            Write::put(item("U#a", "P#2"), Cond::NotExists),
            Write::add("U#a", "STATS#len", -5),
        ])
        .await;
    assert!(
        matches!(below, Err(StoreError::ConditionFailed { index: 1 })),
        "{below:?}"
    );
    assert_eq!(count(s.get("U#a", "STATS#n").await.unwrap()), Some(7));
    assert_eq!(count(s.get("U#a", "STATS#len").await.unwrap()), Some(4));
    assert_eq!(s.get("U#a", "P#2").await.unwrap(), None);
}

/// Transactions that add to the same counters never fail each other's conditions (there are
/// none), and every add counts once. DynamoDB may still cancel a transaction that overlaps
/// another in flight (`Conflict`), which the caller retries, as here.
pub async fn concurrent_adds_do_not_conflict(store: Arc<dyn Store>) {
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                loop {
                    let writes = vec![
                        Write::put(item("U#c", &format!("P#{i}")), Cond::NotExists),
                        Write::add("U#c", "STATS#n", 1),
                        Write::add("U#c", "STATS#len", 5),
                    ];
                    match store.transact(writes).await {
                        Err(StoreError::Conflict) => continue,
                        other => return other,
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let n = store.get("U#c", "STATS#n").await.unwrap().unwrap();
    assert_eq!(counter_value(&n), Some(20));
    let len = store.get("U#c", "STATS#len").await.unwrap().unwrap();
    assert_eq!(counter_value(&len), Some(100));
}

/// `batch_get` answers in the order asked, with `None` for missing keys, repeats allowed, and
/// more keys than one DynamoDB request takes.
pub async fn batch_get_keeps_order(store: Arc<dyn Store>) {
    let s = &*store;
    assert!(s.batch_get(&[]).await.unwrap().is_empty());
    let writes = (0..60)
        .map(|i| Write::put(item("P", &format!("{i:03}")), Cond::NotExists))
        .collect();
    s.transact(writes).await.unwrap();
    let key = |pk: &str, sk: &str| (pk.to_owned(), sk.to_owned());
    let asked = vec![
        key("P", "005"),
        key("P", "missing"),
        key("P", "001"),
        key("Q", "001"),
        key("P", "005"),
    ];
    let got = s.batch_get(&asked).await.unwrap();
    assert_eq!(
        got,
        vec![
            Some(item("P", "005")),
            None,
            Some(item("P", "001")),
            None,
            Some(item("P", "005")),
        ]
    );
    // 150 keys, in a scrambled order, half of them missing.
    let asked: Vec<(String, String)> = (0..150)
        .map(|i| key("P", &format!("{:03}", (i * 37) % 120)))
        .collect();
    let got = s.batch_get(&asked).await.unwrap();
    assert_eq!(got.len(), asked.len());
    for ((_, sk), got) in asked.iter().zip(got.iter()) {
        let n: u32 = sk.parse().unwrap();
        assert_eq!(*got, (n < 60).then(|| item("P", sk)), "key {sk}");
    }
    // `batch_get_each` hands over the same items, each with its position, in order.
    let mut each = Vec::new();
    s.batch_get_each(&asked, &mut |i, item| each.push((i, item)))
        .await
        .unwrap();
    let expected: Vec<(usize, Item)> = got
        .into_iter()
        .enumerate()
        .filter_map(|(i, item)| Some((i, item?)))
        .collect();
    assert_eq!(each, expected);
}

/// Two writes on one key, or more than the limit, are refused before anything is written.
pub async fn invalid_transactions(store: Arc<dyn Store>) {
    let s = &*store;
    assert_invalid(
        s.transact(vec![
            Write::put(item("P", "a"), Cond::None),
            Write::delete("P", "a", Cond::None),
        ])
        .await,
        "two writes on one key",
    );
    assert_invalid(
        s.transact(vec![
            Write::put(item("P", "b"), Cond::None),
            Write::Check {
                pk: "P".into(),
                sk: "b".into(),
                cond: Cond::NotExists,
            },
        ])
        .await,
        "a write and a check on one key",
    );
    let too_many = (0..=MAX_TRANSACTION_ITEMS)
        .map(|i| Write::put(item("P", &format!("{i:04}")), Cond::None))
        .collect();
    assert_invalid(s.transact(too_many).await, "too many writes");
    assert!(query_all(s, &Query::table("P", "")).await.is_empty());

    let just_enough = (0..MAX_TRANSACTION_ITEMS)
        .map(|i| Write::put(item("P", &format!("{i:04}")), Cond::NotExists))
        .collect();
    s.transact(just_enough).await.unwrap();
    assert_eq!(
        query_all(s, &Query::table("P", "")).await.len(),
        MAX_TRANSACTION_ITEMS
    );
}

/// An empty transaction succeeds and does nothing (DynamoDB would refuse it, so its adapter
/// returns early).
pub async fn empty_transaction_is_a_no_op(store: Arc<dyn Store>) {
    store.transact(Vec::new()).await.unwrap();
}
