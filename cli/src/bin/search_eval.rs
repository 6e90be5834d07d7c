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
//!
//! The floor of meaning (issue 48): the set's queries that should find nothing (absent topics,
//! letter strings, rare words; any that shares a term with a page of its notebook is left out
//! and counted) and, for each floor of a sweep, the paraphrases' recall beside the share of
//! those queries that hybrid and meaning search answer with nothing (nib's ranking at each
//! floor: an absolute cosine, and deviations above the mean of the query's cosines with the
//! notebook's pages; 0.05 and 0 are the floor before issue 48). `--real PATH...` (files or folders of `.md`
//! and `.txt`, each split at its `#` headings into pages) indexes real notes as one more
//! notebook and asks it the same queries: the scale of cosines on text the generator did not
//! write.

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

/// The floors of meaning swept: absolute cosine, and deviations above the query's mean cosine
/// (the engine's, `MEANING_FLOOR` and `MEANING_SPREAD`, are printed with them).
const FLOORS: [f32; 4] = [0.05, 0.10, 0.15, 0.20];
const SPREADS: [f32; 8] = [0.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5];

fn grid() -> Vec<(f32, f32)> {
    let mut g: Vec<(f32, f32)> = FLOORS
        .iter()
        .flat_map(|f| SPREADS.iter().map(move |s| (*f, *s)))
        .collect();
    g.push((nib::notebook::MEANING_FLOOR, nib::notebook::MEANING_SPREAD));
    g
}

/// The kinds of queries that should find nothing (`generate.py`).
const EMPTY_KINDS: [&str; 3] = ["absent", "nonsense", "rare"];

/// Percentiles of `v` (sorted here), as one line.
fn percentiles(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| {
        if v.is_empty() {
            return f64::NAN;
        }
        v[((v.len() - 1) as f64 * p).round() as usize]
    };
    [0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0]
        .iter()
        .map(|p| format!("{:>6.3}", at(*p)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pages of real notes: each `.md`/`.txt` file under `paths`, split at its `#` headings.
fn real_pages(paths: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut files = Vec::new();
    for p in paths {
        let path = std::path::Path::new(p);
        if path.is_dir() {
            for e in std::fs::read_dir(path)? {
                files.push(e?.path());
            }
        } else {
            files.push(path.to_path_buf());
        }
    }
    files.sort();
    let mut pages = Vec::new();
    for f in files {
        if !matches!(f.extension().and_then(|e| e.to_str()), Some("md" | "txt")) {
            continue;
        }
        let text = std::fs::read_to_string(&f)?;
        let mut section = String::new();
        let mut push = |section: &mut String| {
            if !section.trim().is_empty() {
                let id = format!("{}#{}", f.display(), pages.len());
                pages.push(serde_json::json!({ "id": id, "date": "2026-01-01", "text": section }));
            }
            section.clear();
        };
        for line in text.lines() {
            if line.starts_with('#') {
                push(&mut section);
            }
            section.push_str(line);
            section.push('\n');
        }
        push(&mut section);
    }
    Ok(pages)
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
    // Per floor: hybrid and meaning tallies by kind of query with a target; queries that
    // should find nothing, answered with nothing, by (notebooks, mode, kind).
    let mut swept: HashMap<(usize, &str, &str), Tally> = HashMap::new();
    let mut nothing: HashMap<(usize, &str, &str, &str), usize> = HashMap::new();
    let mut asked: HashMap<(&str, &str), usize> = HashMap::new();
    let mut shared_empty: HashMap<&str, usize> = HashMap::new();
    // Cosines: of paraphrases' targets, and the best page's for queries that should find nothing.
    let mut cosines: HashMap<(&str, String), Vec<f64>> = HashMap::new();
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
    let args: Vec<String> = std::env::args().collect();
    let real: Vec<String> = args
        .iter()
        .skip_while(|a| *a != "--real")
        .skip(1)
        .take_while(|a| !a.starts_with("--"))
        .cloned()
        .collect();
    let mut labelled: Vec<(&str, Value)> = books.into_iter().map(|b| ("set", b)).collect();
    if !real.is_empty() {
        // The set's queries that should find nothing, once each, asked of the real notes.
        let mut queries: Vec<Value> = Vec::new();
        for (_, b) in &labelled {
            for q in b["queries"].as_array().into_iter().flatten() {
                if EMPTY_KINDS.contains(&q["kind"].as_str().unwrap_or_default())
                    && !queries.iter().any(|o| o["query"] == q["query"])
                {
                    queries.push(q.clone());
                }
            }
        }
        let pages = real_pages(&real)?;
        println!("real notes: {} pages from {}", pages.len(), real.join(" "));
        labelled.push((
            "real",
            serde_json::json!({ "pages": pages, "queries": queries }),
        ));
    }
    for (label, book) in &labelled {
        let label: &str = label;
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
            let empty_kind = EMPTY_KINDS.iter().find(|k| **k == kind).copied();
            if let Some(kind) = empty_kind
                && qterms.iter().any(|t| df.contains_key(t.as_str()))
            {
                // It shares a word with a page: finding that page is right.
                *shared_empty.entry(kind).or_default() += 1;
                continue;
            }
            let tp = pages.iter().find(|p| p.id == target);
            if tp.is_none() && empty_kind.is_none() {
                anyhow::bail!("query target {target} is not a page");
            }
            if kind == "paraphrase"
                && let Some(tp) = tp
                && qterms.iter().any(|t| tp.terms.contains_key(t))
            {
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
            let qv = model.embed_query(query);
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
            let nib_ranked =
                |keyword: bool, meaning: bool, floor: f32, spread: f32| -> Vec<String> {
                    let ask = nib::notebook::RankQuery {
                        vector: qv.as_deref(),
                        terms: qterms.len(),
                        all_terms: false,
                        phrases: false,
                        keyword,
                        meaning,
                        want: 6,
                        floor,
                        spread,
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
            let nib_rank = |keyword: bool, meaning: bool| -> Vec<String> {
                nib_ranked(
                    keyword,
                    meaning,
                    nib::notebook::MEANING_FLOOR,
                    nib::notebook::MEANING_SPREAD,
                )
            };
            let swept_ranks: Vec<[Vec<String>; 2]> = grid()
                .into_iter()
                .map(|(f, sp)| {
                    [
                        nib_ranked(true, true, f, sp),
                        nib_ranked(false, true, f, sp),
                    ]
                })
                .collect();
            if let Some(kind) = empty_kind {
                *asked.entry((label, kind)).or_default() += 1;
                let best = scored
                    .iter()
                    .map(|s| f64::from(s.2))
                    .fold(f64::NEG_INFINITY, f64::max);
                cosines
                    .entry((label, format!("{kind}: best page")))
                    .or_default()
                    .push(best);
                for (fi, [h, m]) in swept_ranks.iter().enumerate() {
                    for (mode, ranked) in [("hybrid", h), ("meaning", m)] {
                        if ranked.is_empty() {
                            *nothing.entry((fi, label, mode, kind)).or_default() += 1;
                        }
                    }
                }
                continue;
            }
            for (fi, [h, m]) in swept_ranks.iter().enumerate() {
                for (mode, ranked) in [("hybrid", h), ("meaning", m)] {
                    let rank = ranked.iter().position(|id| *id == target).map(|i| i + 1);
                    swept
                        .entry((fi, mode, kind_name(kind)))
                        .or_default()
                        .add(rank);
                }
            }
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
                cosines
                    .entry((label, "paraphrase: its target".into()))
                    .or_default()
                    .push(f64::from(c));
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
    println!();
    for (kind, n) in &shared_empty {
        println!("left out: {n} {kind} queries that share a search term with a page");
    }
    println!(
        "{:<36} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}",
        "cosine percentiles", "1%", "5%", "10%", "25%", "50%", "75%", "90%", "95%", "99%", "max"
    );
    let mut keys: Vec<(&str, String)> = cosines.keys().cloned().collect();
    keys.sort();
    for k in keys {
        let v = cosines.get_mut(&k).expect("a key");
        println!(
            "{:<36} {}",
            format!("{} / {} ({})", k.0, k.1, v.len()),
            percentiles(v)
        );
    }
    println!(
        "\nfloor of meaning: hybrid r@1/r@3/r@5/MRR and meaning r@3 on paraphrases, hybrid r@3 on \
         literal queries; share answered with nothing (hybrid / meaning) of the queries that \
         should find nothing"
    );
    let share = |fi: usize, label: &str, mode: &str, kind: &str| {
        let n = asked.get(&(label, kind)).copied().unwrap_or(0);
        let k = nothing.get(&(fi, label, mode, kind)).copied().unwrap_or(0);
        format!("{:.2}", k as f64 / n.max(1) as f64)
    };
    let labels: Vec<&str> = ["set", "real"]
        .into_iter()
        .filter(|l| EMPTY_KINDS.iter().any(|k| asked.contains_key(&(*l, *k))))
        .collect();
    let mut head = format!(
        "{:<14} {:>27} {:>6} {:>6}",
        "floor spread", "hybrid para", "mean", "lit"
    );
    for l in &labels {
        for k in EMPTY_KINDS {
            head.push_str(&format!(" {:>11}", format!("{l} {k}")));
        }
    }
    println!("{head}");
    let points = grid();
    for (fi, (f, sp)) in points.iter().enumerate() {
        let t = |mode, kind| swept.get(&(fi, mode, kind)).copied().unwrap_or_default();
        let (h, m, l) = (
            t("hybrid", "paraphrase"),
            t("meaning", "paraphrase"),
            t("hybrid", "literal"),
        );
        let n = |t: &Tally| t.n.max(1) as f64;
        let name = if fi + 1 == points.len() {
            format!("{f:.2} {sp:.1} nib")
        } else {
            format!("{f:.2} {sp:.1}")
        };
        let mut row = format!(
            "{name:<14} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3}",
            h.r1 as f64 / n(&h),
            h.r3 as f64 / n(&h),
            h.r5 as f64 / n(&h),
            h.rr / n(&h),
            m.r3 as f64 / n(&m),
            l.r3 as f64 / n(&l)
        );
        for label in &labels {
            for k in EMPTY_KINDS {
                row.push_str(&format!(
                    " {:>11}",
                    format!(
                        "{} {}",
                        share(fi, label, "hybrid", k),
                        share(fi, label, "meaning", k)
                    )
                ));
            }
        }
        println!("{row}");
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
