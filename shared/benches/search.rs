//! Search latency per query over notebooks of 1k, 10k and 100k generated pages: p50 and p95
//! of single queries (a fixed mix from common to rare words, two- and three-word queries and a
//! phrase), through `Notebook::search` over the embedded store, in process.
//!
//! The notebooks are imported through the real import path once and cached under the target
//! directory (see `common::notebook`). `NIB_BENCH_SEARCH_SIZES=1000,10000` picks the sizes.

mod common;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn sizes() -> Vec<usize> {
    std::env::var("NIB_BENCH_SEARCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 100_000])
}

fn search(c: &mut Criterion) {
    let rt = common::runtime();
    let user = common::user();
    let queries = nib_bench::queries(nib_bench::Notebook::new(nib_bench::SEED).vocabulary());
    let mut group = c.benchmark_group("search");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(6));
    let mut summary = Vec::new();
    for pages in sizes() {
        let app = common::notebook(&rt, pages);
        let notebook = app.notebook().clone();
        // Every query once, so a broken notebook fails here rather than timing errors.
        let mut hits = Vec::new();
        for q in &queries {
            let found = rt.block_on(notebook.search(&user, q, 20)).expect("search");
            hits.push(serde_json::json!({ "query": q, "hits": found.len() }));
        }
        let mut latencies: Vec<Duration> = Vec::new();
        let mut next = 0usize;
        group.bench_with_input(BenchmarkId::new("pages", pages), &pages, |b, _| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let q = &queries[next % queries.len()];
                    next += 1;
                    let started = Instant::now();
                    let found = rt.block_on(notebook.search(&user, q, 20)).expect("search");
                    let took = started.elapsed();
                    std::hint::black_box(found);
                    total += took;
                    latencies.push(took);
                }
                total
            })
        });
        latencies.sort();
        let p50 = common::quantile_ms(&latencies, 0.50);
        let p95 = common::quantile_ms(&latencies, 0.95);
        eprintln!(
            "search over {pages} pages: p50 {p50:.3} ms, p95 {p95:.3} ms ({} queries)",
            latencies.len()
        );
        summary.push(serde_json::json!({
            "pages": pages,
            "queries": latencies.len(),
            "p50_ms": p50,
            "p95_ms": p95,
            "max_ms": common::quantile_ms(&latencies, 1.0),
            "hits": hits,
        }));
        drop(app);
    }
    group.finish();
    common::write_json("search.json", &serde_json::json!({ "sizes": summary }));
}

criterion_group!(benches, search);
criterion_main!(benches);
