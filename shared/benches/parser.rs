//! The structure parser's throughput on a realistic page mix (MB/s of markdown).

mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use nib::domain::structure;

/// Enough pages for a representative mix (headings, all task states, bullets, prose).
const PAGES: usize = 500;

fn parser(c: &mut Criterion) {
    let pages: Vec<String> = nib_bench::Notebook::new(nib_bench::SEED)
        .take(PAGES)
        .map(|p| p.markdown)
        .collect();
    let bytes: usize = pages.iter().map(String::len).sum();
    let mut group = c.benchmark_group("parser");
    group.throughput(Throughput::BytesDecimal(bytes as u64));
    group.bench_function("page_mix", |b| {
        b.iter(|| {
            let mut lines = 0;
            for page in &pages {
                lines += structure::parse(std::hint::black_box(page)).len();
            }
            lines
        })
    });
    group.finish();
    common::write_json(
        "parser.json",
        &serde_json::json!({ "pages": PAGES, "bytes": bytes }),
    );
}

criterion_group!(benches, parser);
criterion_main!(benches);
