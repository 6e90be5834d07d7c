//! `nib-search-eval SET.json [--pool]`: scores search by meaning on a set of `tests/search/generate.py`
//! (`make search-eval`). For every notebook of the set, each page is indexed as nib indexes it
//! (its search terms and BM25 from `domain::text`, its chunks and vectors from `embed`), each
//! query ranked in three modes, dates filtered before ranking:
//!
//! - keyword: BM25 alone (what `search_pages` did before issue 15), pages sharing no term are
//!   not returned;
//! - meaning and hybrid: ranked by nib's own ranking (`notebook::rank`, over the open index
//!   nib would hold for the notebook: the sign-code pass, then exact cosines of the best
//!   pages, fused with BM25 by `notebook::hybrid_score`);
//! - "meaning, exact over every page": the exact cosine of every page's best vector, to show
//!   what the two-pass scan loses (reciprocal rank fusion, `embed::rrf`, is scored too, not
//!   used).
//!
//! It prints recall@1/@3/@5 and MRR per mode and per kind of query (paraphrases, and queries
//! in the page's own words), after checking with nib's own terms that no paraphrase shares a
//! search term with its page (any that does is left out and counted).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use nib::domain::text;
use nib::embed;
use serde_json::Value;

struct Page {
    id: String,
    date: String,
    terms: BTreeMap<String, u32>,
    len: u32,
    vectors: Vec<Vec<i8>>,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    r1: usize,
    r3: usize,
    r5: usize,
    rr: f64,
}

impl Tally {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(r) = rank {
            self.r1 += usize::from(r <= 1);
            self.r3 += usize::from(r <= 3);
            self.r5 += usize::from(r <= 5);
            self.rr += 1.0 / r as f64;
        }
    }
    fn line(&self, name: &str) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "{name:<36} {:>5} {:>6.3} {:>6.3} {:>6.3} {:>6.3}",
            self.n,
            self.r1 as f64 / n,
            self.r3 as f64 / n,
            self.r5 as f64 / n,
            self.rr / n
        )
    }
}

/// The three modes of `search_pages`, and reciprocal rank fusion for comparison.
const MODES: [&str; 5] = [
    "keyword",
    "meaning",
    "hybrid",
    "meaning, exact over every page",
    "rrf (k=60), not used",
];

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .ok_or_else(|| anyhow::anyhow!("usage: nib-search-eval SET.json [--pool]"))?;
    let set: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    let t0 = Instant::now();
    let model = embed::model()?;
    let load = t0.elapsed();
    let mut tallies: HashMap<(&str, &str), Tally> = HashMap::new();
    let mut shared_words = 0usize;
    let mut chunks_embedded = 0usize;
    let mut embed_time = std::time::Duration::ZERO;
    let mut pages_indexed = 0usize;
    let mut above = [0usize; 5];
    let mut paraphrases = 0usize;
    let mut books = set["notebooks"].as_array().cloned().unwrap_or_default();
    // `--pool`: every notebook's pages in one (about 750), so the sign-code pass of `meaning`
    // and `hybrid` has more pages than it rescores exactly; "meaning, exact" shows the cost.
    if std::env::args().any(|a| a == "--pool") {
        let mut pages = Vec::new();
        let mut queries = Vec::new();
        for b in &books {
            pages.extend(b["pages"].as_array().cloned().unwrap_or_default());
            queries.extend(b["queries"].as_array().cloned().unwrap_or_default());
        }
        books = vec![serde_json::json!({ "pages": pages, "queries": queries })];
    }
    for book in &books {
        let mut pages = Vec::new();
        for p in book["pages"].as_array().into_iter().flatten() {
            let body = p["text"].as_str().unwrap_or_default();
            let ts = text::terms(body);
            let mut tf = BTreeMap::new();
            for t in &ts {
                *tf.entry(t.clone()).or_insert(0u32) += 1;
            }
            let t1 = Instant::now();
            let chunks = embed::page_texts(body, nib::notebook::MAX_CHUNKS);
            let vectors: Vec<Vec<i8>> = chunks
                .iter()
                .filter_map(|c| model.embed(c))
                .map(|v| embed::quantize(&v))
                .collect();
            embed_time += t1.elapsed();
            chunks_embedded += chunks.len();
            pages_indexed += 1;
            pages.push(Page {
                id: p["id"].as_str().unwrap_or_default().to_owned(),
                date: p["date"].as_str().unwrap_or_default().to_owned(),
                terms: tf,
                len: ts.len() as u32,
                vectors,
            });
        }
        let docs = pages.len() as u32;
        let avg = pages.iter().map(|p| f64::from(p.len)).sum::<f64>() / f64::from(docs.max(1));
        let mut df: HashMap<&str, u32> = HashMap::new();
        for p in &pages {
            for t in p.terms.keys() {
                *df.entry(t.as_str()).or_default() += 1;
            }
        }
        // The open index nib would hold for this notebook: one block of every page's vectors
        // (entry numbers = positions in `pages`), and each term's posting list.
        let block = nib::notebook::Block {
            model: model.id().to_owned(),
            dims: model.dims(),
            entries: pages
                .iter()
                .map(|p| nib::notebook::Entry {
                    page: p.id.clone(),
                    rev: 1,
                    date: nib::domain::Date::parse(&p.date).unwrap_or_else(|_| {
                        nib::domain::Date::parse("2026-01-01").expect("a date")
                    }),
                    vectors: p.vectors.concat(),
                })
                .collect(),
        };
        let open = nib::notebook::OpenBlock::new(1, block);
        let index = nib::notebook::VectorIndex::new(
            vec![Some(std::sync::Arc::new(open))],
            model.id(),
            model.dims(),
        );
        let mut postings: HashMap<&str, Vec<(u32, nib::notebook::Posting)>> = HashMap::new();
        for (i, p) in pages.iter().enumerate() {
            for (t, tf) in &p.terms {
                postings.entry(t.as_str()).or_default().push((
                    i as u32,
                    nib::notebook::Posting {
                        tf: *tf,
                        len: p.len,
                        rev: 1,
                    },
                ));
            }
        }
        for q in book["queries"].as_array().into_iter().flatten() {
            let query = q["query"].as_str().unwrap_or_default();
            let target = q["target"].as_str().unwrap_or_default();
            let kind = q["kind"].as_str().unwrap_or("paraphrase");
            let from = q["from"].as_str();
            let to = q["to"].as_str();
            let qterms = text::parse_query(query).terms;
            let Some(tp) = pages.iter().find(|p| p.id == target) else {
                anyhow::bail!("query target {target} is not a page");
            };
            if kind == "paraphrase" && qterms.iter().any(|t| tp.terms.contains_key(t)) {
                shared_words += 1;
                continue;
            }
            let in_range = |p: &Page| {
                from.is_none_or(|f| p.date.as_str() >= f) && to.is_none_or(|t| p.date.as_str() <= t)
            };
            let rank_by = |scores: Vec<(f64, &str)>| -> Vec<String> {
                let mut s: Vec<(f64, &str)> =
                    scores.into_iter().filter(|(x, _)| *x > 0.0).collect();
                s.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
                s.into_iter().map(|(_, id)| id.to_owned()).collect()
            };
            let qv = model.embed(query);
            let best_cos = |p: &Page| -> f32 {
                qv.as_ref().map_or(0.0, |qv| {
                    p.vectors
                        .iter()
                        .map(|v| embed::cosine(qv, v))
                        .fold(f32::MIN, f32::max)
                })
            };
            let bm = |p: &Page| -> f64 {
                qterms
                    .iter()
                    .map(|t| {
                        let tf = p.terms.get(t).copied().unwrap_or(0);
                        text::bm25(
                            tf,
                            df.get(t.as_str()).copied().unwrap_or(0),
                            docs,
                            p.len,
                            avg,
                        )
                    })
                    .sum()
            };
            let floor = nib::notebook::MEANING_FLOOR;
            let scored: Vec<(&Page, f64, f32)> = pages
                .iter()
                .filter(|p| in_range(p))
                .map(|p| (p, bm(p), best_cos(p)))
                .collect();
            let keyword = rank_by(scored.iter().map(|(p, b, _)| (*b, p.id.as_str())).collect());
            // Shifted by 2 so rank_by keeps every candidate (a cosine may be negative).
            let meaning = rank_by(
                scored
                    .iter()
                    .filter(|s| s.2 >= floor)
                    .map(|(p, _, c)| (f64::from(*c) + 2.0, p.id.as_str()))
                    .collect(),
            );
            // nib's own ranking (`notebook::rank`, as `search_pages` ranks).
            let lists: Vec<nib::notebook::PostingList> = qterms
                .iter()
                .map(|t| postings.get(t.as_str()).cloned().unwrap_or_default().into())
                .collect();
            let admits = |d: nib::domain::Date| {
                let d = d.to_string();
                from.is_none_or(|f| d.as_str() >= f) && to.is_none_or(|t| d.as_str() <= t)
            };
            let nib_rank = |keyword: bool, meaning: bool| -> Vec<String> {
                let ask = nib::notebook::RankQuery {
                    vector: qv.as_deref(),
                    terms: qterms.len(),
                    all_terms: false,
                    phrases: false,
                    keyword,
                    meaning,
                    want: 6,
                };
                let dated: Option<&dyn Fn(nib::domain::Date) -> bool> =
                    (from.is_some() || to.is_some()).then_some(&admits);
                let mut c = nib::notebook::rank(&ask, &index, &lists, docs, avg, dated);
                c.sort_by(|a, b| {
                    b.score
                        .total_cmp(&a.score)
                        .then_with(|| pages[a.id as usize].id.cmp(&pages[b.id as usize].id))
                });
                c.into_iter()
                    .map(|c| pages[c.id as usize].id.clone())
                    .collect()
            };
            let hybrid = nib_rank(true, true);
            let nib_meaning = nib_rank(false, true);
            let rrf: Vec<String> = embed::rrf(&[(&keyword, 1.0), (&meaning, 1.0)], embed::RRF_K)
                .into_iter()
                .map(|(id, _)| id.to_owned())
                .collect();
            let cos_of = |id: &str| {
                pages.iter().find(|p| p.id == id).map_or(0.0, |p| {
                    qv.as_ref().map_or(0.0, |qv| {
                        p.vectors
                            .iter()
                            .map(|v| embed::cosine(qv, v))
                            .fold(f32::MIN, f32::max)
                    })
                })
            };
            if kind == "paraphrase" {
                let c = cos_of(target);
                for (floor, n) in [(0.25f32, 0usize), (0.3, 1), (0.35, 2), (0.4, 3), (0.5, 4)] {
                    if c >= floor {
                        above[n] += 1;
                    }
                }
                paraphrases += 1;
            }
            for (mode, list) in MODES
                .iter()
                .zip([&keyword, &nib_meaning, &hybrid, &meaning, &rrf])
            {
                let rank = list.iter().position(|id| id == target).map(|i| i + 1);
                tallies
                    .entry((mode, kind_name(kind)))
                    .or_default()
                    .add(rank);
            }
        }
    }
    println!(
        "{path}: model {} ({} dims), loaded in {:.1} ms; {pages_indexed} pages, {chunks_embedded} chunks \
         embedded in {:.0} ms ({:.0} pages/s)",
        model.id(),
        model.dims(),
        load.as_secs_f64() * 1e3,
        embed_time.as_secs_f64() * 1e3,
        pages_indexed as f64 / embed_time.as_secs_f64().max(1e-9)
    );
    if shared_words > 0 {
        println!("left out: {shared_words} paraphrases that share a search term with their page");
    }
    println!(
        "paraphrase targets at cosine >= 0.25/0.30/0.35/0.40/0.50: {}",
        above
            .iter()
            .map(|n| format!("{:.2}", *n as f64 / paraphrases.max(1) as f64))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    println!(
        "{:<36} {:>5} {:>6} {:>6} {:>6} {:>6}",
        "mode / queries", "n", "r@1", "r@3", "r@5", "MRR"
    );
    for kind in ["paraphrase", "literal"] {
        for mode in MODES {
            if let Some(t) = tallies.get(&(mode, kind)) {
                println!("{}", t.line(&format!("{mode} / {kind}")));
            }
        }
    }
    Ok(())
}

fn kind_name(kind: &str) -> &'static str {
    if kind == "literal" {
        "literal"
    } else {
        "paraphrase"
    }
}
