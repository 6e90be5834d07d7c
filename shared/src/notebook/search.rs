//! Search over the blind index and the sealed vectors: BM25 over postings keyed by HMAC'd
//! terms, cosine over the chunk vectors of `vectors`, the two fused by [`hybrid_score`]; phrase
//! checks, date checks and snippets on the decrypted text of the best pages only.
//!
//! A posting is the item `U#{user}#T#{blind(term)}` / `{page_id}` with a 12-byte body: term
//! frequency, document length and the page revision it was written for. The server never
//! stores a term in clear; a query's terms are blinded with the same per-user key. Vectors
//! are in the user's sealed vector blocks (`vectors.rs`), read with the statistics in one
//! batch.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::pages::open_page_lines;
use super::records::{PageHead, StatsRecord, decode, page_sk, term_partition, user_pk};
use super::search_index::{OpenBlock, Posting, PostingList, UserIndex, VectorIndex};
use super::vectors::{self, Block};
use super::{Notebook, NotebookError};
use crate::crypto::UserKeys;
use crate::domain::text::{self, Query as TextQuery};
use crate::domain::{Date, PageId, UserId};
use crate::embed;
use crate::ports::{Cond, Item, Query, Write};

/// How a query is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// Keywords (BM25) and meaning (cosine) fused ([`hybrid_score`]).
    #[default]
    Hybrid,
    /// BM25 over the words alone.
    Keyword,
    /// The cosine of the query's vector with each page's best chunk alone.
    Meaning,
}

impl SearchMode {
    pub const NAMES: [&'static str; 3] = ["hybrid", "keyword", "meaning"];

    pub fn parse(s: &str) -> Option<SearchMode> {
        match s {
            "hybrid" => Some(SearchMode::Hybrid),
            "keyword" => Some(SearchMode::Keyword),
            "meaning" => Some(SearchMode::Meaning),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Keyword => "keyword",
            SearchMode::Meaning => "meaning",
        }
    }
}

/// What a search is narrowed to, besides its query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchOptions {
    pub mode: SearchMode,
    /// Only pages dated on or after this day.
    pub from: Option<Date>,
    /// Only pages dated on or before this day.
    pub to: Option<Date>,
}

impl SearchOptions {
    fn admits(&self, date: Date) -> bool {
        self.from.is_none_or(|f| date >= f) && self.to.is_none_or(|t| date <= t)
    }

    fn has_dates(&self) -> bool {
        self.from.is_some() || self.to.is_some()
    }
}

/// A page found by meaning alone is a result only at this cosine or above (see
/// ARCHITECTURE.md, "Search by meaning": 96% of the paraphrases' pages reach it on the eval).
pub const MEANING_FLOOR: f32 = 0.2;
/// The weight of BM25 (relative to the query's best, times the square of the share of the
/// query's terms the page holds) in a hybrid score; the cosine's is 1. Tuned on `make
/// search-eval` seed 7 (see [`hybrid_score`]).
pub const HYBRID_KEYWORD_WEIGHT: f64 = 0.3;
/// In hybrid search a page found by meaning alone needs at least this share of the query's
/// best cosine (and [`MEANING_FLOOR`]).
pub const HYBRID_RELATIVE_FLOOR: f64 = 0.7;

/// A page's hybrid score: its best cosine, plus the keyword part, [`HYBRID_KEYWORD_WEIGHT`]
/// times its BM25 relative to the query's best times the square of the share of the query's
/// terms it holds. A query in the page's own words holds them all and the words decide; a
/// paraphrase whose stray word matches a distractor gives it almost nothing (a bare relative
/// BM25 lost paraphrases 5-8 points of recall@3 to meaning alone; this, under 2).
pub fn hybrid_score(cosine: f64, relative_bm25: f64, coverage: f64) -> f64 {
    cosine + HYBRID_KEYWORD_WEIGHT * relative_bm25 * coverage * coverage
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub page_id: PageId,
    pub date: Date,
    pub snippet: String,
    pub score: f64,
    /// A signed URL to the page's ink, when it has any.
    pub url: Option<String>,
    /// The page line that matched best (by its words, else the chunk nearest in meaning).
    pub line: String,
}

/// Snippet length in characters.
const SNIPPET_CHARS: usize = 160;

pub(super) fn posting_writes(
    user: &UserId,
    page: &PageId,
    tf: &BTreeMap<String, u32>,
    doc_len: u32,
    rev: u32,
) -> Vec<Write> {
    tf.iter()
        .map(|(term, n)| {
            let mut body = Vec::with_capacity(12);
            body.extend_from_slice(&n.to_be_bytes());
            body.extend_from_slice(&doc_len.to_be_bytes());
            body.extend_from_slice(&rev.to_be_bytes());
            Write::put(
                Item {
                    pk: term_partition(user, term),
                    sk: page.to_string(),
                    gsi1: None,
                    version: 1,
                    expires_at: None,
                    body,
                },
                Cond::None,
            )
        })
        .collect()
}

fn parse_posting(body: &[u8]) -> Option<Posting> {
    let b: &[u8; 12] = body.try_into().ok()?;
    let word = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    Some(Posting {
        tf: word(0),
        len: word(4),
        rev: word(8),
    })
}

struct Candidate {
    page: Arc<str>,
    score: f64,
    /// The revision of the first matching posting, and of any later one that differs; the page
    /// is a hit only if its current revision is among them. (Usually all agree, so the vector
    /// stays empty and never allocates.)
    rev: u32,
    other_revs: Vec<u32>,
    /// How many distinct query terms matched.
    matched: usize,
    /// The best chunk by meaning, when the page was ranked by its vectors.
    chunk: Option<usize>,
}

impl Candidate {
    fn has_rev(&self, rev: u32) -> bool {
        self.rev == rev || self.other_revs.contains(&rev)
    }
}

/// Each entry's cosine with the query (its best chunk) and that chunk, by entry number of the
/// index; `None` for entries of another model, without vectors, or outside the date range.
fn score_by_meaning(
    index: &VectorIndex,
    query: Option<&[f32]>,
    model_id: &str,
    opts: &SearchOptions,
) -> Vec<Option<(f32, usize)>> {
    let mut scores = vec![None; index.total];
    let Some(query) = query else {
        return scores;
    };
    let q = embed::query_weights(query);
    for (b, open) in index.blocks.iter().enumerate() {
        let Some(open) = open else { continue };
        let block = &open.block;
        if block.model != model_id || block.dims != q.len() {
            continue;
        }
        let base = index.offsets[b];
        for (e, entry) in block.entries.iter().enumerate() {
            if !opts.admits(entry.date) {
                continue;
            }
            let mut best: Option<(f32, usize)> = None;
            for (i, v) in entry.vectors.chunks_exact(block.dims).enumerate() {
                let cos = embed::weighted_cosine(&q, v);
                if best.is_none_or(|(c, _)| cos > c) {
                    best = Some((cos, i));
                }
            }
            scores[base + e] = best;
        }
    }
    scores
}

/// The candidate of an entry found by meaning.
fn meaning_candidate(index: &VectorIndex, g: usize, cos: f32, chunk: usize) -> Candidate {
    let b = index.offsets.partition_point(|&o| o <= g) - 1;
    let open = index.blocks[b].as_ref().expect("a scored entry's block");
    let e = g - index.offsets[b];
    Candidate {
        page: open.pages[e].clone(),
        score: f64::from(cos),
        rev: open.block.entries[e].rev,
        other_revs: Vec::new(),
        matched: 0,
        chunk: Some(chunk),
    }
}

/// Hybrid scores ([`hybrid_score`]). Candidates are the keyword matches and the pages at
/// [`MEANING_FLOOR`] and [`HYBRID_RELATIVE_FLOOR`] or above; a fused candidate keeps the
/// revisions of both sources.
fn fuse(
    keyword: Vec<Candidate>,
    terms: usize,
    index: &VectorIndex,
    mut meaning: Vec<Option<(f32, usize)>>,
) -> Vec<Candidate> {
    let best_bm25 = keyword.iter().map(|c| c.score).fold(0.0, f64::max);
    let mut out = Vec::with_capacity(keyword.len() + 16);
    for mut c in keyword {
        let relative = if best_bm25 > 0.0 {
            c.score / best_bm25
        } else {
            0.0
        };
        let coverage = c.matched as f64 / terms.max(1) as f64;
        let mut cos = 0.0;
        if let Some(g) = index.by_page.get(&c.page).copied()
            && let Some((cosine, chunk)) = meaning[g].take()
        {
            let m = meaning_candidate(index, g, cosine, chunk);
            cos = m.score;
            if !c.has_rev(m.rev) {
                c.other_revs.push(m.rev);
            }
            c.chunk = m.chunk;
        }
        c.score = hybrid_score(cos, relative, coverage);
        out.push(c);
    }
    // A page found by meaning alone must also be near the best cosine of the query: a word
    // query ("printer") finds its pages by the word, and only close neighbours besides.
    let best_cos = meaning
        .iter()
        .flatten()
        .map(|m| f64::from(m.0))
        .fold(f64::MIN, f64::max);
    let floor = f64::from(MEANING_FLOOR).max(HYBRID_RELATIVE_FLOOR * best_cos);
    out.extend(meaning_only(index, &meaning, floor));
    out
}

/// The candidates by meaning at `floor` or above.
fn meaning_only<'a>(
    index: &'a VectorIndex,
    meaning: &'a [Option<(f32, usize)>],
    floor: f64,
) -> impl Iterator<Item = Candidate> + 'a {
    meaning.iter().enumerate().filter_map(move |(g, m)| {
        let (cos, chunk) = (*m)?;
        (f64::from(cos) >= floor).then(|| meaning_candidate(index, g, cos, chunk))
    })
}

/// Best first: higher score, then lower page id (so the order is deterministic).
fn best_first(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.page.cmp(&b.page))
}

/// Merges the terms' posting lists, each sorted by page id, into one candidate per page with
/// its BM25 score: a k-way merge over the sorted lists (k = query terms), so no hashing.
fn merge(lists: &[PostingList], docs: u32, avg_len: f64) -> Vec<Candidate> {
    let df: Vec<u32> = lists.iter().map(|l| l.len() as u32).collect();
    let mut ranked = Vec::with_capacity(lists.iter().map(|l| l.len()).max().unwrap_or(0));
    // The position of each list's next posting.
    let mut heads = vec![0usize; lists.len()];
    // Each round takes the list whose next page id is the smallest: that page is the next
    // candidate.
    while let Some(first) = (0..lists.len())
        .filter(|&i| heads[i] < lists[i].len())
        .min_by(|&a, &b| lists[a][heads[a]].0.cmp(&lists[b][heads[b]].0))
    {
        let (page, p) = &lists[first][heads[first]];
        heads[first] += 1;
        let mut c = Candidate {
            page: page.clone(),
            score: text::bm25(p.tf, df[first], docs, p.len, avg_len),
            rev: p.rev,
            other_revs: Vec::new(),
            matched: 1,
            chunk: None,
        };
        // Lists before `first` cannot hold this page: their next ids are all larger.
        for i in first + 1..lists.len() {
            if let Some((page, p)) = lists[i].get(heads[i])
                && *page == c.page
            {
                c.score += text::bm25(p.tf, df[i], docs, p.len, avg_len);
                if p.rev != c.rev && !c.other_revs.contains(&p.rev) {
                    c.other_revs.push(p.rev);
                }
                c.matched += 1;
                heads[i] += 1;
            }
        }
        ranked.push(c);
    }
    ranked
}

impl Notebook {
    /// Every posting of one term, sorted by page id: from the open index, else read (and kept
    /// in it).
    async fn postings(
        &self,
        index: &UserIndex,
        user: &UserId,
        blind_term: String,
    ) -> Result<PostingList, NotebookError> {
        if let Some(list) = index.postings(&blind_term) {
            return Ok(list);
        }
        let mut q = Query::table(term_partition(user, &blind_term), "");
        let mut postings: Vec<(Arc<str>, Posting)> = Vec::new();
        loop {
            let page = self.store.query(&q).await?;
            postings.extend(
                page.items
                    .into_iter()
                    .filter_map(|i| parse_posting(&i.body).map(|p| (Arc::from(i.sk), p))),
            );
            match page.next {
                Some(next) => q.after = Some(next),
                None => break,
            }
        }
        // The store returns a partition in sort-key order; the merge relies on it.
        if !postings.is_sorted_by(|a, b| a.0 < b.0) {
            postings.sort_by(|a, b| a.0.cmp(&b.0));
            postings.dedup_by(|a, b| a.0 == b.0);
        }
        let list: PostingList = postings.into();
        index.keep_postings(blind_term, list.clone());
        Ok(list)
    }

    /// The user's open search index at the notebook's current revision, with its vectors when
    /// `vectors` (see `search_index`): the revision is read first; when this process has the
    /// index at that revision nothing else is read.
    async fn user_index(
        &self,
        user: &UserId,
        keys: &UserKeys,
        vectors: bool,
    ) -> Result<Arc<UserIndex>, NotebookError> {
        let revision = self.notebook_revision(user).await?;
        let cached = self.search_cache.get(user);
        if let Some(c) = &cached
            && c.revision == revision
        {
            if c.vectors.is_some() || !vectors {
                return Ok(c.clone());
            }
            let v = self.open_vectors(user, keys, None).await?;
            let index = Arc::new(c.with_vectors(v));
            self.search_cache.put(user, index.clone());
            return Ok(index);
        }
        let pk = user_pk(user);
        let mut batch = StatsRecord::keys(&pk);
        let stats_len = batch.len();
        if vectors {
            batch.extend(vectors::block_keys(&pk));
        }
        let items = self.store.batch_get(&batch).await?;
        let stats = StatsRecord::from_items(&items[..stats_len])?;
        let v = if vectors {
            let previous = cached.as_ref().and_then(|c| c.vectors.as_deref());
            Some(self.vectors_from(user, keys, &items[stats_len..], previous)?)
        } else {
            None
        };
        let index = Arc::new(UserIndex::new(revision, stats.pages, stats.total_len, v));
        self.search_cache.put(user, index.clone());
        Ok(index)
    }

    /// Reads and opens the user's vector blocks.
    async fn open_vectors(
        &self,
        user: &UserId,
        keys: &UserKeys,
        previous: Option<&VectorIndex>,
    ) -> Result<Arc<VectorIndex>, NotebookError> {
        let items = self
            .store
            .batch_get(&vectors::block_keys(&user_pk(user)))
            .await?;
        self.vectors_from(user, keys, &items, previous)
    }

    /// Opens the vector block items (in block order), reusing the blocks of `previous` whose
    /// item version is unchanged.
    fn vectors_from(
        &self,
        user: &UserId,
        keys: &UserKeys,
        items: &[Option<Item>],
        previous: Option<&VectorIndex>,
    ) -> Result<Arc<VectorIndex>, NotebookError> {
        let mut blocks = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let Some(item) = item else {
                blocks.push(None);
                continue;
            };
            let kept = previous
                .and_then(|p| p.blocks.get(i).cloned().flatten())
                .filter(|b| b.version == item.version);
            let open = match kept {
                Some(b) => b,
                None => {
                    let block = Block::open(keys, user, item)?;
                    let pages = block
                        .entries
                        .iter()
                        .map(|e| Arc::from(e.page.as_str()))
                        .collect();
                    Arc::new(OpenBlock {
                        version: item.version,
                        block,
                        pages,
                    })
                }
            };
            blocks.push(Some(open));
        }
        Ok(Arc::new(VectorIndex::new(blocks)))
    }

    /// Ranked pages for a query (hybrid: keywords and meaning). Loose terms are OR'ed and
    /// ranked by BM25; quoted phrases must appear as written. Ties break by page id, so the
    /// order is deterministic. The query is bounded (`text::parse_bounded_query`): at most 512
    /// characters and 32 distinct terms.
    pub async fn search(
        &self,
        user: &UserId,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, NotebookError> {
        Ok(self
            .search_with(user, query, &SearchOptions::default(), 0, limit)
            .await?
            .0)
    }

    /// The hits `offset..offset + limit` of [`Notebook::search`]'s ranking, and whether more
    /// follow.
    pub async fn search_from(
        &self,
        user: &UserId,
        query: &str,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<SearchHit>, bool), NotebookError> {
        self.search_with(user, query, &SearchOptions::default(), offset, limit)
            .await
    }

    /// The hits `offset..offset + limit` of a query in a mode and date range, and whether more
    /// follow. Dates are applied inside the ranking: a page outside them never takes a place.
    pub async fn search_with(
        &self,
        user: &UserId,
        query: &str,
        opts: &SearchOptions,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<SearchHit>, bool), NotebookError> {
        let parsed: TextQuery = text::parse_bounded_query(query)
            .map_err(|e| NotebookError::Invalid(format!("query {e}")))?;
        if let (Some(f), Some(t)) = (opts.from, opts.to)
            && f > t
        {
            return Err(NotebookError::Invalid("from must not be after to".into()));
        }
        // One more than asked, to know whether more follow.
        let want = offset.saturating_add(limit).saturating_add(1);
        let mut hits = self.ranked_hits(user, query, &parsed, opts, want).await?;
        let more = hits.len() == want;
        hits.truncate(want - 1);
        Ok((hits.split_off(offset.min(hits.len())), more))
    }

    /// The best `limit` hits of a parsed query.
    async fn ranked_hits(
        &self,
        user: &UserId,
        query: &str,
        parsed: &TextQuery,
        opts: &SearchOptions,
        limit: usize,
    ) -> Result<Vec<SearchHit>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        // The open index (statistics, and unless keywords alone without dates, the vectors),
        // then the terms' posting lists not already in it, read concurrently.
        let use_vectors = opts.mode != SearchMode::Keyword || opts.has_dates();
        let use_terms = opts.mode != SearchMode::Meaning || !parsed.phrases.is_empty();
        let index = self.user_index(user, &keys, use_vectors).await?;
        if index.docs == 0 {
            return Ok(Vec::new());
        }
        let lists = if use_terms {
            futures::future::try_join_all(
                parsed
                    .terms
                    .iter()
                    .map(|term| self.postings(&index, user, keys.blind("term", term))),
            )
            .await?
        } else {
            Vec::new()
        };
        let docs = index.docs.max(1);
        let avg_len = index.total_len as f64 / docs as f64;

        let no_vectors = VectorIndex::new(Vec::new());
        let vectors = index.vectors.as_deref().unwrap_or(&no_vectors);
        let mut meaning = if opts.mode == SearchMode::Keyword {
            score_by_meaning(vectors, None, "", opts)
        } else {
            let model = embed::model().map_err(|e| NotebookError::Corrupt(e.to_string()))?;
            let qv = model.embed(query);
            score_by_meaning(vectors, qv.as_deref(), model.id(), opts)
        };

        // Phrase terms must all be present; loose terms are optional.
        let required: Vec<&String> = parsed.phrases.iter().flatten().collect();
        let mut keyword = if use_terms {
            merge(&lists, docs, avg_len)
        } else {
            Vec::new()
        };
        if !required.is_empty() {
            let required_count = parsed.terms.iter().filter(|t| required.contains(t)).count();
            // Cheap pre-filter: a page missing a phrase term cannot match. Counting matched terms
            // is enough when the query has no loose terms; otherwise the text check decides.
            if required_count == parsed.terms.len() {
                keyword.retain(|c| c.matched == required_count);
            }
        }
        // Dates inside the ranking: pages the blocks date outside the range leave before any
        // cut (the page record's date is checked again below, for pages without vectors).
        if opts.has_dates() {
            keyword.retain(|c| vectors.date_of(&c.page).is_none_or(|d| opts.admits(d)));
        }
        if !required.is_empty() {
            // A phrase still requires the phrase: only pages holding its terms.
            let mut holders = vec![false; meaning.len()];
            for c in &keyword {
                if let Some(&g) = vectors.by_page.get(&c.page) {
                    holders[g] = true;
                }
            }
            for (m, held) in meaning.iter_mut().zip(holders) {
                if !held {
                    *m = None;
                }
            }
        }
        let mut ranked = match opts.mode {
            SearchMode::Keyword => keyword,
            SearchMode::Meaning => {
                meaning_only(vectors, &meaning, f64::from(MEANING_FLOOR)).collect()
            }
            SearchMode::Hybrid => fuse(keyword, parsed.terms.len(), vectors, meaning),
        };
        // Walk down the ranking, verifying revisions, dates and phrases on the decrypted pages.
        // Only the best `batch` candidates are put in order at a time (usually one batch gives
        // the hits), rather than sorting every page that matched a word.
        let mut hits = Vec::with_capacity(limit.min(256));
        let batch = limit.saturating_mul(2).clamp(8, 256);
        let mut rest: &mut [Candidate] = &mut ranked;
        while !rest.is_empty() {
            let take = batch.min(rest.len());
            if take < rest.len() {
                rest.select_nth_unstable_by(take - 1, best_first);
            }
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(take);
            chunk.sort_unstable_by(best_first);
            rest = tail;
            let page_keys: Vec<(String, String)> = chunk
                .iter()
                .filter_map(|c| PageId::parse(&c.page).ok())
                .map(|p| (pk.clone(), page_sk(&p)))
                .collect();
            let items = self.store.batch_get(&page_keys).await?;
            for (c, item) in chunk.iter().zip(items) {
                let Some(item) = item else { continue };
                let record: PageHead = decode("page", &item.body)?;
                // Only postings and vectors written for the page's current revision count; a
                // page matched only through stale ones is not a hit.
                if !c.has_rev(record.rev) || !opts.admits(record.date) {
                    continue;
                }
                let lines = open_page_lines(user, &keys, &record.page_id, &record.lines)?;
                let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
                let body = texts.join("\n");
                if !parsed.phrases.is_empty() {
                    let doc_terms = text::terms(&body);
                    if !parsed
                        .phrases
                        .iter()
                        .all(|p| text::contains_phrase(&doc_terms, p))
                    {
                        continue;
                    }
                }
                let (snippet, line) = snippet_and_line(&body, &texts, parsed, c.chunk);
                let url = self.ink_url(user, &record).await?;
                hits.push(SearchHit {
                    page_id: record.page_id,
                    date: record.date,
                    snippet,
                    score: c.score,
                    url,
                    line,
                });
                if hits.len() == limit {
                    return Ok(hits);
                }
            }
        }
        Ok(hits)
    }
}

/// The snippet and best line of a hit: around the first line holding a query term; for a page
/// found by meaning alone, the chunk nearest in meaning (its first line as the best line).
fn snippet_and_line(
    body: &str,
    lines: &[&str],
    parsed: &TextQuery,
    chunk: Option<usize>,
) -> (String, String) {
    let by_words = lines.iter().find(|l| {
        let t = text::terms(l);
        parsed.terms.iter().any(|q| t.contains(q))
    });
    if let Some(line) = by_words {
        return (
            text::snippet(body, &parsed.terms, SNIPPET_CHARS),
            (*line).to_owned(),
        );
    }
    // The last vector of a page of several chunks is the whole page's: no line of its own.
    let chunks = embed::chunks(body);
    let windows = chunks.len().min(vectors::MAX_CHUNKS);
    if let Some(c) = chunk.filter(|&i| i < windows).and_then(|i| chunks.get(i)) {
        let first = c.lines().next().unwrap_or_default().to_owned();
        return (text::snippet(c, &parsed.terms, SNIPPET_CHARS), first);
    }
    (
        text::snippet(body, &parsed.terms, SNIPPET_CHARS),
        lines
            .iter()
            .find(|l| !l.trim().is_empty())
            .copied()
            .unwrap_or_default()
            .to_owned(),
    )
}
