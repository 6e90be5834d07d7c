//! The ranking of a search over an open index, in memory (no I/O): BM25 over the query terms'
//! posting lists, the cosine of the query with each page's vectors, the two fused
//! ([`hybrid_score`]). `search.rs` reads what it needs and walks the ranking; `nib-search-eval`
//! ranks its evaluation set through the same functions.
//!
//! Pages are numbered within an open index (`u32`): the entries of the vector blocks first
//! (in block order), then pages that only have postings. Posting lists are sorted by that
//! number, so merging them compares integers, and a candidate's scores are found by number.
//!
//! Meaning is scored in two passes: every vector's sign bits against the query's (a Hamming
//! distance over 4 words for 256 dimensions: ~30,000 vectors in well under a millisecond) give
//! an estimated cosine; only the best [`rescored`] pages by that estimate (with their keyword
//! part, in hybrid) have their exact cosine computed over their int8 vectors. On the
//! evaluation set the rescoring keeps every result that the exact scan of every page gave
//! (`make search-eval` prints both).

use std::collections::HashMap;
use std::sync::Arc;

use super::vectors::Block;
use crate::domain::Date;
use crate::domain::text;
use crate::embed;

/// A page found by meaning alone is a result only at this cosine or above (and
/// [`MEANING_SPREAD`]); a page found by its words matches by meaning too ([`Match::Both`]) at
/// the same floor. Raising it does not tell nonsense from paraphrases (their cosines overlap;
/// docs/decisions/0052-hybrid-ranking.md, 0053-meaning-floor.md): it only keeps out pages
/// pointing away.
pub const MEANING_FLOOR: f32 = 0.05;
/// A page found by meaning alone also needs this many standard deviations above the mean of
/// the query's estimated cosines with the notebook's pages (when it has [`BACKGROUND_PAGES`]):
/// a query about nothing in the notebook has cosines of 0.2-0.3 with its pages too, but none
/// stands out from the rest. 0: above the mean. 1.5 or 2 emptied half or more of the answers
/// to letter strings on `make search-eval` but cost 2-7 points of paraphrase recall@3, and lost
/// a paraphrase in a notebook of repeated day pages (docs/decisions/0053-meaning-floor.md).
pub const MEANING_SPREAD: f32 = 0.0;
/// The pages a notebook needs before [`MEANING_SPREAD`] applies: the mean and deviation of
/// fewer say little.
pub const BACKGROUND_PAGES: usize = 20;
/// The weight of BM25 (relative to the query's best, times the square of the share of the
/// query's terms the page holds) in a hybrid score; the cosine's is 1. Tuned on `make
/// search-eval` seed 7 (see [`hybrid_score`]).
pub const HYBRID_KEYWORD_WEIGHT: f64 = 0.2;
/// In hybrid search a page found by meaning alone needs at least this share of the query's
/// best cosine (and [`MEANING_FLOOR`]).
pub const HYBRID_RELATIVE_FLOOR: f64 = 0.5;

/// A page's hybrid score: its best cosine, plus the keyword part, [`HYBRID_KEYWORD_WEIGHT`]
/// times its BM25 relative to the query's best times the square of the share of the query's
/// terms it holds. A query in the page's own words holds them all and the words decide; a
/// paraphrase whose stray word matches a distractor gives it almost nothing (a bare relative
/// BM25 lost paraphrases 5-8 points of recall@3 to meaning alone; this, under 2).
pub fn hybrid_score(cosine: f64, relative_bm25: f64, coverage: f64) -> f64 {
    cosine + HYBRID_KEYWORD_WEIGHT * relative_bm25 * coverage * coverage
}

/// How many pages have their exact cosine computed, for a search that wants `want` hits.
pub fn rescored(want: usize) -> usize {
    want.saturating_mul(4).max(256)
}

/// One posting: term frequency, document length and the page revision it was written for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Posting {
    pub tf: u32,
    pub len: u32,
    pub rev: u32,
}

/// A term's postings by page number, sorted by it.
pub type PostingList = Arc<[(u32, Posting)]>;

/// An opened vector block and the item version it was opened at: its entries' vectors in one
/// allocation (entry `e`'s are `vectors[starts[e]..starts[e + 1]]`), sized once when opened.
pub struct OpenBlock {
    pub version: u64,
    pub model: String,
    pub dims: usize,
    /// The entries' page ids.
    pub pages: Vec<Arc<str>>,
    revs: Vec<u32>,
    dates: Vec<Date>,
    /// Byte offsets into `vectors`: one per entry, and the end.
    starts: Vec<u32>,
    vectors: Vec<i8>,
}

impl OpenBlock {
    /// An empty block with room for `entries` entries of `vector_bytes` bytes of vectors in
    /// all (filled by [`OpenBlock::push`]).
    pub fn with_capacity(
        version: u64,
        model: String,
        dims: usize,
        entries: usize,
        vector_bytes: usize,
    ) -> OpenBlock {
        let mut starts = Vec::with_capacity(entries + 1);
        starts.push(0);
        OpenBlock {
            version,
            model,
            dims,
            pages: Vec::with_capacity(entries),
            revs: Vec::with_capacity(entries),
            dates: Vec::with_capacity(entries),
            starts,
            vectors: Vec::with_capacity(vector_bytes),
        }
    }

    /// Adds an entry, its vectors as stored (`chunks x dims` signed bytes).
    pub fn push(&mut self, page: &str, rev: u32, date: Date, vectors: &[u8]) {
        self.pages.push(Arc::from(page));
        self.revs.push(rev);
        self.dates.push(date);
        self.vectors.extend(vectors.iter().map(|v| *v as i8));
        self.starts.push(self.vectors.len() as u32);
    }

    /// An opened [`Block`] in this form.
    pub fn new(version: u64, block: Block) -> OpenBlock {
        let bytes = block.entries.iter().map(|e| e.vectors.len()).sum();
        let mut open =
            OpenBlock::with_capacity(version, block.model, block.dims, block.entries.len(), bytes);
        for e in &block.entries {
            let raw: Vec<u8> = e.vectors.iter().map(|v| *v as u8).collect();
            open.push(&e.page, e.rev, e.date, &raw);
        }
        open
    }

    /// How many entries it has.
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// Entry `e`'s vectors.
    pub fn vectors(&self, e: usize) -> &[i8] {
        &self.vectors[self.starts[e] as usize..self.starts[e + 1] as usize]
    }

    /// Entry `e`'s page revision.
    pub fn rev(&self, e: usize) -> u32 {
        self.revs[e]
    }

    /// Entry `e`'s date.
    pub fn date(&self, e: usize) -> Date {
        self.dates[e]
    }

    /// Memory taken, estimated.
    fn bytes(&self) -> usize {
        self.vectors.capacity()
            + self.pages.iter().map(|p| p.len() + 16 + 32).sum::<usize>()
            + self.starts.capacity() * 4
    }
}

/// The opened vector blocks of a user, their entries numbered: entry `g` is entry `e` of
/// `blocks[b]` with `(b, e) = locs[g]`; its vectors' sign codes are
/// `codes[starts[g] * words .. starts[g + 1] * words]` (none for an entry of a block of another
/// model than `model`).
pub struct VectorIndex {
    pub blocks: Vec<Option<Arc<OpenBlock>>>,
    pub locs: Vec<(u16, u32)>,
    pub by_page: HashMap<Arc<str>, u32>,
    pub model: String,
    pub dims: usize,
    /// Each entry's date, by number (read for every entry of a dated search).
    dates: Vec<Date>,
    words: usize,
    codes: Vec<u64>,
    starts: Vec<u32>,
}

/// The sign bits of a vector, `words` u64 of them.
fn sign_code<T: Copy + PartialOrd + Default>(v: &[T], words: usize, out: &mut Vec<u64>) {
    let zero = T::default();
    for w in 0..words {
        let mut bits = 0u64;
        for (i, x) in v.iter().skip(w * 64).take(64).enumerate() {
            if *x > zero {
                bits |= 1 << i;
            }
        }
        out.push(bits);
    }
}

/// Appends the Hamming distance of every code (of `query.len()` words) to the query's. Four
/// words (256 dimensions, the shipped model) take a path without an inner loop, which the
/// compiler vectorises.
fn hamming_into(codes: &[u64], query: &[u64], out: &mut Vec<u32>) {
    if let Ok(q) = <&[u64; 4]>::try_from(query) {
        out.extend(codes.chunks_exact(4).map(|c| {
            (c[0] ^ q[0]).count_ones()
                + (c[1] ^ q[1]).count_ones()
                + (c[2] ^ q[2]).count_ones()
                + (c[3] ^ q[3]).count_ones()
        }));
        return;
    }
    out.extend(codes.chunks_exact(query.len().max(1)).map(|c| {
        c.iter()
            .zip(query)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum::<u32>()
    }));
}

/// How many vectors' distances [`VectorIndex::estimates`] computes at a time: one pass over
/// many codes vectorises, and a buffer this small stays in the cache.
const HAMMING_RUN: usize = 4096;

impl VectorIndex {
    /// Numbers the blocks' entries and codes the vectors of those of `model` with `dims`.
    pub fn new(blocks: Vec<Option<Arc<OpenBlock>>>, model: &str, dims: usize) -> VectorIndex {
        VectorIndex::with_pending(blocks, None, model, dims)
    }

    /// [`VectorIndex::new`] with the pending entries of an import not yet folded into their
    /// blocks (`vectors::PENDING_PREFIX`) as one more block after them: a page's pending entry
    /// stands for its entry in its block (the pending one is the newer), so each page is
    /// numbered once.
    pub fn with_pending(
        mut blocks: Vec<Option<Arc<OpenBlock>>>,
        pending: Option<Arc<OpenBlock>>,
        model: &str,
        dims: usize,
    ) -> VectorIndex {
        let words = dims.div_ceil(64);
        let usable = |open: &OpenBlock| open.model == model && open.dims == dims && dims > 0;
        let superseded: std::collections::HashSet<Arc<str>> = pending
            .iter()
            .flat_map(|p| p.pages.iter().cloned())
            .collect();
        let first_pending = blocks.len();
        if let Some(p) = pending.filter(|p| !p.is_empty()) {
            blocks.push(Some(p));
        }
        let kept = |b: usize, page: &Arc<str>| {
            superseded.is_empty() || b >= first_pending || !superseded.contains(page)
        };
        // Counted first, so that each array is allocated once at its size.
        let entries: usize = blocks
            .iter()
            .enumerate()
            .filter_map(|(b, o)| o.as_ref().map(|o| (b, o)))
            .map(|(b, o)| o.pages.iter().filter(|p| kept(b, p)).count())
            .sum();
        let vectors: usize = blocks
            .iter()
            .enumerate()
            .filter_map(|(b, o)| o.as_ref().map(|o| (b, o)))
            .filter(|(_, o)| usable(o))
            .map(|(b, o)| {
                (0..o.len())
                    .filter(|e| kept(b, &o.pages[*e]))
                    .map(|e| o.vectors(e).len() / dims)
                    .sum::<usize>()
            })
            .sum();
        let mut locs = Vec::with_capacity(entries);
        let mut by_page = HashMap::with_capacity(entries);
        let mut codes = Vec::with_capacity(vectors * words);
        let mut starts = Vec::with_capacity(entries + 1);
        starts.push(0u32);
        let mut dates = Vec::with_capacity(entries);
        for (b, open) in blocks.iter().enumerate() {
            let Some(open) = open else { continue };
            let usable = usable(open);
            for e in 0..open.len() {
                if !kept(b, &open.pages[e]) {
                    continue;
                }
                by_page.insert(open.pages[e].clone(), locs.len() as u32);
                locs.push((b as u16, e as u32));
                dates.push(open.date(e));
                if usable {
                    for v in open.vectors(e).chunks_exact(dims) {
                        sign_code(v, words, &mut codes);
                    }
                }
                starts.push((codes.len() / words.max(1)) as u32);
            }
        }
        VectorIndex {
            blocks,
            locs,
            by_page,
            model: model.to_owned(),
            dims,
            dates,
            words,
            codes,
            starts,
        }
    }

    /// An index without vectors.
    pub fn empty() -> VectorIndex {
        VectorIndex::new(Vec::new(), "", 0)
    }

    /// How many entries (numbered pages) it has.
    pub fn len(&self) -> usize {
        self.locs.len()
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.locs.is_empty()
    }

    fn entry(&self, g: u32) -> (&OpenBlock, usize) {
        let (b, e) = self.locs[g as usize];
        let open = self.blocks[b as usize]
            .as_ref()
            .expect("a numbered entry's block");
        (open, e as usize)
    }

    /// The page id of entry `g`.
    pub fn page(&self, g: u32) -> &Arc<str> {
        let (open, e) = self.entry(g);
        &open.pages[e]
    }

    /// The date of entry `g`.
    pub fn date(&self, g: u32) -> Date {
        self.dates[g as usize]
    }

    /// The revision of entry `g`.
    pub fn rev(&self, g: u32) -> u32 {
        let (open, e) = self.entry(g);
        open.rev(e)
    }

    /// The exact cosine of the query with entry `g`'s best vector, and that vector's number
    /// (`None` without vectors of the model).
    fn exact(&self, query: &[i16], g: u32) -> Option<(f32, usize)> {
        if self.starts[g as usize] == self.starts[g as usize + 1] {
            return None;
        }
        let (open, e) = self.entry(g);
        let mut best: Option<(f32, usize)> = None;
        for (i, v) in open.vectors(e).chunks_exact(self.dims).enumerate() {
            let cos = embed::weighted_cosine(query, v);
            if best.is_none_or(|(c, _)| cos > c) {
                best = Some((cos, i));
            }
        }
        best
    }

    /// Each entry's estimated cosine with the query from sign codes (its best vector's), or
    /// `f32::NEG_INFINITY` for entries without vectors or outside `admits`.
    fn estimates(&self, query: &[i16], admits: Option<&dyn Fn(Date) -> bool>) -> Vec<f32> {
        let mut q = Vec::with_capacity(self.words);
        sign_code(query, self.words, &mut q);
        // cos(pi * h / dims): the angle a Hamming distance h of sign bits suggests.
        let table: Vec<f32> = (0..=self.words * 64)
            .map(|h| (std::f32::consts::PI * h as f32 / self.dims.max(1) as f32).cos())
            .collect();
        let mut out = vec![f32::NEG_INFINITY; self.len()];
        let words = self.words.max(1);
        let vectors = self.codes.len() / words;
        // Distances of vectors `base..base + run.len()`, computed a run at a time as the pages
        // (numbered in vector order) need them.
        let (mut run, mut base) = (Vec::with_capacity(HAMMING_RUN), 0usize);
        for (g, slot) in out.iter_mut().enumerate() {
            let (lo, hi) = (self.starts[g] as usize, self.starts[g + 1] as usize);
            if lo == hi || admits.is_some_and(|a| !a(self.dates[g])) {
                continue;
            }
            if hi > base + run.len() {
                base = lo;
                let end = (lo + HAMMING_RUN).max(hi).min(vectors);
                run.clear();
                hamming_into(&self.codes[lo * words..end * words], &q, &mut run);
            }
            let best = run[lo - base..hi - base]
                .iter()
                .copied()
                .min()
                .unwrap_or(u32::MAX);
            *slot = table[(best as usize).min(table.len() - 1)];
        }
        out
    }

    /// Memory taken, estimated.
    pub fn bytes(&self) -> usize {
        let blocks: usize = self.blocks.iter().flatten().map(|b| b.bytes()).sum();
        blocks + self.codes.capacity() * 8 + self.starts.capacity() * 4 + self.locs.len() * 48
    }
}

/// A ranked page.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its number in the open index.
    pub id: u32,
    pub score: f64,
    /// The revision of the first matching posting or vector entry, and of any later one that
    /// differs; the page is a hit only if its current revision is among them.
    pub rev: u32,
    pub other_revs: Vec<u32>,
    /// How many distinct query terms matched.
    pub matched: usize,
    /// The best vector by meaning, when the page was ranked by its vectors.
    pub chunk: Option<usize>,
    /// Its best vector's exact cosine with the query, when that was computed.
    pub cosine: Option<f64>,
    /// Whether that cosine reaches the query's floor of meaning.
    pub meaning: bool,
}

/// How a result matched the query: by its words, by its meaning (its best cosine at
/// [`MEANING_FLOOR`] or above), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Match {
    Words,
    Meaning,
    Both,
}

impl Candidate {
    pub fn has_rev(&self, rev: u32) -> bool {
        self.rev == rev || self.other_revs.contains(&rev)
    }

    /// How it matched.
    pub fn how(&self) -> Match {
        match (self.matched > 0, self.meaning) {
            (true, true) => Match::Both,
            (true, false) => Match::Words,
            // Found by meaning alone (which the floor admitted).
            (false, _) => Match::Meaning,
        }
    }

    fn add_rev(&mut self, rev: u32) {
        if !self.has_rev(rev) {
            self.other_revs.push(rev);
        }
    }
}

/// How a ranking is asked for.
pub struct RankQuery<'a> {
    /// The query's unit vector (`None`: keywords only, or no known token).
    pub vector: Option<&'a [f32]>,
    /// The query's distinct terms (their posting lists are `lists`, in this order).
    pub terms: usize,
    /// Every term must match (the query is phrases only).
    pub all_terms: bool,
    /// Pages without every phrase term cannot match (the query has phrases).
    pub phrases: bool,
    pub keyword: bool,
    pub meaning: bool,
    /// How many results the walk wants (bounds the exact rescoring).
    pub want: usize,
    /// The cosine a page found by meaning alone needs ([`MEANING_FLOOR`]; the evaluation
    /// passes others).
    pub floor: f32,
    /// And the deviations above the mean of the query's cosines ([`MEANING_SPREAD`]).
    pub spread: f32,
}

/// Merges the terms' posting lists (each sorted by page number) into one candidate per page
/// with its BM25 score: a k-way merge (k = query terms) over integers.
pub fn merge(lists: &[PostingList], docs: u32, avg_len: f64) -> Vec<Candidate> {
    // Every posting's BM25 first, in one straight pass per list (the divisions vectorise), so
    // the merge below only adds: scoring inside the merge's branches was most of its cost.
    let scores: Vec<Vec<f64>> = lists
        .iter()
        .map(|l| {
            let idf = text::bm25_idf(l.len() as u32, docs);
            l.iter()
                .map(|(_, p)| text::bm25_with_idf(p.tf, idf, p.len, avg_len))
                .collect()
        })
        .collect();
    let mut ranked = Vec::with_capacity(lists.iter().map(|l| l.len()).max().unwrap_or(0));
    let mut heads = vec![0usize; lists.len()];
    loop {
        let mut first = None;
        let mut low = u32::MAX;
        for (i, l) in lists.iter().enumerate() {
            if let Some((id, _)) = l.get(heads[i])
                && (*id < low || first.is_none())
            {
                low = *id;
                first = Some(i);
            }
        }
        let Some(first) = first else { break };
        let p = lists[first][heads[first]].1;
        let score = scores[first][heads[first]];
        heads[first] += 1;
        let mut c = Candidate {
            id: low,
            score,
            rev: p.rev,
            other_revs: Vec::new(),
            matched: 1,
            chunk: None,
            cosine: None,
            meaning: false,
        };
        // Lists before `first` cannot hold this page: their next numbers are all larger.
        for i in first + 1..lists.len() {
            if let Some((id, p)) = lists[i].get(heads[i])
                && *id == low
            {
                c.score += scores[i][heads[i]];
                c.add_rev(p.rev);
                c.matched += 1;
                heads[i] += 1;
            }
        }
        ranked.push(c);
    }
    ranked
}

/// The candidates of a query, in no particular order (the walk orders them): keyword
/// matches, pages by meaning, or both fused. `admits` (for a search with dates) says which
/// pages may be results by their entry's date (pages without an entry are checked on their
/// record by the walk).
pub fn rank(
    q: &RankQuery<'_>,
    vectors: &VectorIndex,
    lists: &[PostingList],
    docs: u32,
    avg_len: f64,
    admits: Option<&dyn Fn(Date) -> bool>,
) -> Vec<Candidate> {
    let entries = vectors.len() as u32;
    let mut keyword = if q.keyword || q.phrases {
        merge(lists, docs, avg_len)
    } else {
        Vec::new()
    };
    if q.phrases && q.all_terms {
        // A page missing a phrase term cannot match (the text check decides the rest).
        keyword.retain(|c| c.matched == q.terms);
    }
    if let Some(admits) = admits {
        keyword.retain(|c| c.id >= entries || admits(vectors.date(c.id)));
    }
    let weights = q.vector.map(embed::query_weights);
    let weights = match weights {
        Some(w) if q.meaning && w.len() == vectors.dims => w,
        _ => {
            return if q.keyword { keyword } else { Vec::new() };
        }
    };
    let mut estimate = vectors.estimates(&weights, admits);
    // The query's floor of meaning: absolute, and above its background (every page it may
    // find, before phrases narrow them) when there are enough pages to have one.
    let (mut n, mut sum, mut squares) = (0usize, 0f64, 0f64);
    for e in estimate.iter().filter(|e| e.is_finite()) {
        n += 1;
        sum += f64::from(*e);
        squares += f64::from(*e) * f64::from(*e);
    }
    let meaning_floor = if n >= BACKGROUND_PAGES {
        let mean = sum / n as f64;
        let deviation = (squares / n as f64 - mean * mean).max(0.0).sqrt();
        f64::from(q.floor).max(mean + f64::from(q.spread) * deviation)
    } else {
        f64::from(q.floor)
    };
    if q.phrases {
        // A phrase still requires the phrase: only pages holding its terms.
        let mut held = vec![false; estimate.len()];
        for c in &keyword {
            if let Some(h) = held.get_mut(c.id as usize) {
                *h = true;
            }
        }
        for (e, h) in estimate.iter_mut().zip(held) {
            if !h {
                *e = f32::NEG_INFINITY;
            }
        }
    }
    // The keyword part of each keyword candidate (hybrid), by page number.
    let best_bm25 = keyword.iter().map(|c| c.score).fold(0.0, f64::max);
    let part = |c: &Candidate| {
        let relative = if best_bm25 > 0.0 {
            c.score / best_bm25
        } else {
            0.0
        };
        hybrid_score(0.0, relative, c.matched as f64 / q.terms.max(1) as f64)
    };
    // First pass: estimated scores; the best `rescored` pages go on. `slot[id]`: 1 + the
    // page's place in `keyword`, 0 for a page found by meaning only.
    let mut slot: Vec<u32> = vec![0; estimate.len()];
    let mut first: Vec<(f32, u32)> = Vec::with_capacity(estimate.len() + keyword.len());
    if q.keyword {
        for (k, c) in keyword.iter().enumerate() {
            let est = estimate.get(c.id as usize).copied().unwrap_or(0.0);
            if let Some(s) = slot.get_mut(c.id as usize) {
                *s = k as u32 + 1;
            }
            first.push(((f64::from(est.max(0.0)) + part(c)) as f32, c.id));
        }
    }
    for (g, est) in estimate.iter().enumerate() {
        if *est > f32::NEG_INFINITY && slot[g] == 0 {
            first.push((*est, g as u32));
        }
    }
    let keep = rescored(q.want).min(first.len());
    if keep < first.len() {
        // Ties (near-identical pages share sign codes) are cut by page id, not by number: the
        // numbers follow the blocks' layout, which a restore or a rewrite changes, and the
        // same notebook must give the same results whatever its layout.
        let by_id = |a: u32, b: u32| {
            if a < entries && b < entries {
                vectors.page(a).cmp(vectors.page(b))
            } else {
                a.cmp(&b)
            }
        };
        first.select_nth_unstable_by(keep, |a, b| {
            b.0.total_cmp(&a.0).then_with(|| by_id(a.1, b.1))
        });
        first.truncate(keep);
    }
    // Pages without an entry that matched words: their places in `keyword`, by number.
    let words_only: HashMap<u32, usize> = if q.keyword {
        keyword
            .iter()
            .enumerate()
            .filter(|(_, c)| c.id >= entries)
            .map(|(k, c)| (c.id, k))
            .collect()
    } else {
        HashMap::new()
    };
    // Second pass: exact cosines.
    let mut out = Vec::with_capacity(first.len());
    let mut best_cos = f64::MIN;
    let mut alone = Vec::new();
    for (_, id) in first {
        let (exact, k) = if id < entries {
            let k = slot[id as usize];
            (vectors.exact(&weights, id), (k > 0).then(|| k as usize - 1))
        } else {
            (None, words_only.get(&id).copied())
        };
        match k {
            Some(k) => {
                let mut c = keyword[k].clone();
                let cos = exact.map_or(0.0, |(cos, _)| f64::from(cos));
                if let Some((exact, chunk)) = exact {
                    c.chunk = Some(chunk);
                    c.cosine = Some(f64::from(exact));
                    c.meaning = f64::from(exact) >= meaning_floor;
                    c.add_rev(vectors.rev(id));
                }
                best_cos = best_cos.max(cos);
                c.score = cos + part(&c);
                out.push(c);
            }
            None => {
                let Some((cos, chunk)) = exact else { continue };
                best_cos = best_cos.max(f64::from(cos));
                alone.push(Candidate {
                    id,
                    score: f64::from(cos),
                    rev: vectors.rev(id),
                    other_revs: Vec::new(),
                    matched: 0,
                    chunk: Some(chunk),
                    cosine: Some(f64::from(cos)),
                    meaning: true,
                });
            }
        }
    }
    // A page found by meaning alone must reach the floor, and in hybrid also be near the best
    // cosine: a word query ("printer") finds its pages by the word, and only close neighbours.
    let floor = if q.keyword {
        meaning_floor.max(HYBRID_RELATIVE_FLOOR * best_cos)
    } else {
        meaning_floor
    };
    out.extend(alone.into_iter().filter(|c| c.score >= floor));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::vectors::Entry;

    fn block(model: &str, entries: Vec<(i8, usize)>) -> Arc<OpenBlock> {
        let dims = 64;
        Arc::new(OpenBlock::new(
            1,
            Block {
                model: model.into(),
                dims,
                entries: entries
                    .into_iter()
                    .enumerate()
                    .map(|(i, (sign, chunks))| Entry {
                        page: format!("p{model}{i}"),
                        rev: 7,
                        date: Date::parse("2026-06-19").unwrap(),
                        // unit vectors of +-1/8, as stored (x 127)
                        vectors: (0..dims * chunks)
                            .map(|j| if j % 2 == 0 { sign * 16 } else { -sign * 16 })
                            .collect(),
                    })
                    .collect(),
            },
        ))
    }

    #[test]
    fn entries_are_numbered_across_blocks_and_other_models_have_no_codes() {
        let v = VectorIndex::new(
            vec![
                None,
                Some(block("m", vec![(1, 2), (-1, 1)])),
                Some(block("old", vec![(1, 1)])),
            ],
            "m",
            64,
        );
        assert_eq!(v.len(), 3);
        assert_eq!(v.page(2).as_ref(), "pold0");
        assert_eq!(v.by_page["pm1"], 1);
        let unit: Vec<f32> = (0..64)
            .map(|j| if j % 2 == 0 { 0.125 } else { -0.125 })
            .collect();
        let q = embed::query_weights(&unit);
        let est = v.estimates(&q, None);
        assert!((est[0] - 1.0).abs() < 1e-6, "{est:?}");
        assert!((est[1] + 1.0).abs() < 1e-6, "{est:?}");
        assert_eq!(est[2], f32::NEG_INFINITY, "another model is not compared");
        assert_eq!(v.exact(&q, 2), None);
        let (cos, _) = v.exact(&q, 0).unwrap();
        assert!((cos - 1.0).abs() < 0.02, "{cos}");
        assert!((v.exact(&q, 1).unwrap().0 + 1.0).abs() < 0.02);
    }

    #[test]
    fn estimates_over_many_runs_are_each_pages_best_sign_distance() {
        // 256 dimensions (the four-word path), pages of 0 to 3 vectors, more vectors than one
        // run holds, and a date filter that skips pages (so runs start at uneven places).
        let dims = 256;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let day = |d: u64| Date::parse(&format!("2026-06-{:02}", 1 + d % 28)).unwrap();
        let entries: Vec<Entry> = (0..8000)
            .map(|i| Entry {
                page: format!("p{i}"),
                rev: 1,
                date: day(next()),
                vectors: (0..dims * (next() % 4) as usize)
                    .map(|_| (next() % 255) as i8)
                    .collect(),
            })
            .collect();
        let want: Vec<(usize, Date, Vec<Vec<i8>>)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let vs = e.vectors.chunks_exact(dims).map(<[i8]>::to_vec).collect();
                (i, e.date, vs)
            })
            .collect();
        let v = VectorIndex::new(
            vec![Some(Arc::new(OpenBlock::new(
                1,
                Block {
                    model: "m".into(),
                    dims,
                    entries,
                },
            )))],
            "m",
            dims,
        );
        assert!(v.codes.len() / 4 > 2 * HAMMING_RUN, "several runs");
        let unit: Vec<f32> = (0..dims)
            .map(|_| (next() % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let norm = unit.iter().map(|a| a * a).sum::<f32>().sqrt();
        let unit: Vec<f32> = unit.iter().map(|a| a / norm).collect();
        let q = embed::query_weights(&unit);
        let admits = |d: Date| d != day(3) && d != day(4);
        let est = v.estimates(&q, Some(&admits));
        let sign = |a: &[i16], b: &[i8]| {
            a.iter()
                .zip(b)
                .filter(|(x, y)| (**x > 0) != (**y > 0))
                .count()
        };
        for (i, date, vs) in want {
            let expected = if vs.is_empty() || !admits(date) {
                f32::NEG_INFINITY
            } else {
                let h = vs.iter().map(|w| sign(&q, w)).min().unwrap();
                (std::f32::consts::PI * h as f32 / dims as f32).cos()
            };
            assert_eq!(est[i], expected, "page {i}");
        }
    }

    #[test]
    fn rank_fuses_words_and_meaning_and_applies_dates_and_phrases() {
        // Entries 0 (along the query) and 1 (against it); page 2 has words only.
        let v = VectorIndex::new(vec![Some(block("m", vec![(1, 1), (-1, 1)]))], "m", 64);
        let unit: Vec<f32> = (0..64)
            .map(|j| if j % 2 == 0 { 0.125 } else { -0.125 })
            .collect();
        let p = Posting {
            tf: 2,
            len: 10,
            rev: 7,
        };
        let lists: Vec<PostingList> = vec![vec![(1, p), (2, p)].into()];
        let ask = |keyword, meaning, phrases| RankQuery {
            vector: Some(&unit),
            terms: 1,
            all_terms: phrases,
            phrases,
            keyword,
            meaning,
            want: 10,
            floor: MEANING_FLOOR,
            spread: MEANING_SPREAD,
        };
        let ids = |mut c: Vec<Candidate>| {
            c.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
            c.into_iter().map(|c| c.id).collect::<Vec<_>>()
        };
        let all = None;
        assert_eq!(
            ids(rank(&ask(true, false, false), &v, &lists, 3, 10.0, all)),
            [1, 2]
        );
        // Meaning alone: only the entry along the query reaches the floor.
        assert_eq!(
            ids(rank(&ask(false, true, false), &v, &lists, 3, 10.0, all)),
            [0]
        );
        // Hybrid: the meaning match first (cosine 1), then the word matches (their keyword
        // part; entry 1's cosine is -1, page 2 has none).
        assert_eq!(
            ids(rank(&ask(true, true, false), &v, &lists, 3, 10.0, all)),
            [0, 2, 1]
        );
        // A phrase keeps only the pages holding its words, in every mode.
        assert_eq!(
            ids(rank(&ask(true, true, true), &v, &lists, 3, 10.0, all)),
            [2, 1]
        );
        assert_eq!(
            ids(rank(&ask(false, true, true), &v, &lists, 3, 10.0, all)),
            Vec::<u32>::new()
        );
        // Dates: entries outside are out (page 2, without an entry, is left to the walk).
        let none: &dyn Fn(Date) -> bool = &|_| false;
        assert_eq!(
            ids(rank(
                &ask(true, true, false),
                &v,
                &lists,
                3,
                10.0,
                Some(none)
            )),
            [2]
        );
    }

    #[test]
    fn pages_with_the_same_sign_codes_are_cut_the_same_whatever_the_layout() {
        // 600 pages whose vectors share their signs (so their estimates tie) but not their
        // magnitudes; more than `rescored` keeps. Laid out in two orders (as before and after
        // a restore), the same pages are rescored and the same results come out.
        let dims = 64;
        let entry = |i: usize| Entry {
            page: format!("p{i:04}"),
            rev: 1,
            date: Date::parse("2026-06-19").unwrap(),
            vectors: (0..dims)
                .map(|j| {
                    let m = 1 + ((i * 7 + j * 13) % 90) as i8;
                    if j % 2 == 0 { m } else { -m }
                })
                .collect(),
        };
        let index = |order: Vec<usize>| {
            let block = Block {
                model: "m".into(),
                dims,
                entries: order.into_iter().map(entry).collect(),
            };
            VectorIndex::new(vec![Some(Arc::new(OpenBlock::new(1, block)))], "m", dims)
        };
        let forward = index((0..600).collect());
        let backward = index((0..600).rev().collect());
        let unit: Vec<f32> = (0..dims)
            .map(|j| if j % 2 == 0 { 0.125 } else { -0.125 })
            .collect();
        let ask = RankQuery {
            vector: Some(&unit),
            terms: 0,
            all_terms: false,
            phrases: false,
            keyword: false,
            meaning: true,
            want: 10,
            floor: MEANING_FLOOR,
            spread: MEANING_SPREAD,
        };
        let found = |v: &VectorIndex| {
            let mut pages: Vec<(String, u64)> = rank(&ask, v, &[], 600, 10.0, None)
                .into_iter()
                .map(|c| (v.page(c.id).to_string(), c.score.to_bits()))
                .collect();
            pages.sort();
            pages
        };
        let (a, b) = (found(&forward), found(&backward));
        assert!(a.len() >= 10 && a.len() < 600, "{}", a.len());
        assert_eq!(a, b);
    }

    #[test]
    fn hamming_of_four_words_agrees_with_the_general_count() {
        let codes: Vec<u64> = (0..40u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let q = [u64::MAX, 0, 0x5555_5555_5555_5555, 1];
        let general: Vec<u32> = codes
            .chunks_exact(4)
            .map(|c| c.iter().zip(&q).map(|(a, b)| (a ^ b).count_ones()).sum())
            .collect();
        let mut four = Vec::new();
        hamming_into(&codes, &q, &mut four);
        assert_eq!(four, general);
        // Appends.
        hamming_into(&q, &q, &mut four);
        assert_eq!(four.len(), general.len() + 1);
        assert_eq!(four.last(), Some(&0));
        // Two words: the general path.
        let mut two = Vec::new();
        hamming_into(&[0, 0, u64::MAX, 0], &[0, 1], &mut two);
        assert_eq!(two, [1, 65]);
    }

    #[test]
    fn merge_adds_the_terms_of_a_page_and_keeps_differing_revisions() {
        let p = |rev| Posting {
            tf: 1,
            len: 10,
            rev,
        };
        let a: PostingList = vec![(1, p(1)), (4, p(1))].into();
        let b: PostingList = vec![(0, p(1)), (4, p(2))].into();
        let merged = merge(&[a, b], 10, 10.0);
        let ids: Vec<u32> = merged.iter().map(|c| c.id).collect();
        assert_eq!(ids, [0, 1, 4]);
        let four = &merged[2];
        assert_eq!(four.matched, 2);
        assert!(four.has_rev(1) && four.has_rev(2));
        assert!(four.score > merged[0].score);
    }
}
