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
use super::rank::{self, Candidate, OpenBlock, Posting, PostingList, RankQuery, VectorIndex};
use super::records::{PageHitHead, StatsRecord, decode, page_sk, term_partition, user_pk};
use super::search_index::{HitPage, UserIndex};
use super::vectors::{self, Block};
use super::{Notebook, NotebookError};
use crate::crypto::UserKeys;
use crate::domain::text::{self, Query as TextQuery};
use crate::domain::{Date, PageId, UserId};
use crate::embed;
use crate::ports::{Cond, Item, Query, Write};

/// How a query is matched: hybrid (words and meaning, fused), keyword (words only) or meaning
/// (meaning only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    // Keywords (BM25) and meaning (cosine) fused (`hybrid_score`).
    #[default]
    Hybrid,
    // BM25 over the words alone.
    Keyword,
    // The cosine of the query's vector with each page's best chunk alone.
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

pub use super::rank::{
    HYBRID_KEYWORD_WEIGHT, HYBRID_RELATIVE_FLOOR, MEANING_FLOOR, MEANING_SPREAD, Match,
    hybrid_score,
};

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub page_id: PageId,
    pub date: Date,
    pub snippet: String,
    /// The ranking's score: hybrid, the cosine plus the words' part (up to
    /// [`HYBRID_KEYWORD_WEIGHT`]); meaning, the cosine; keyword, BM25.
    pub score: f64,
    /// How it matched: by words, by meaning, or both.
    pub matched: Match,
    /// A signed URL to the page's ink, when it has any.
    pub url: Option<String>,
    /// The page line that matched best (by its words, else the chunk nearest in meaning).
    pub line: String,
}

/// Snippet length in characters.
const SNIPPET_CHARS: usize = 160;

/// Postings asked for per page of a term's query. At a query's default page of 1,000 items a
/// term in 2,500 pages took three round trips, one after the other; DynamoDB ends a page at
/// 1 MB whatever the limit, and a posting item is ~120 bytes, so a page holds ~8,700 of them
/// (bench/findings.md, "Footprint, ninth pass": a cold search at 10,000 pages, 6 queries -> 3).
const POSTINGS_PAGE: usize = 10_000;

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

/// Best first: higher score, then lower page id (so the order is deterministic).
fn best_first(index: &UserIndex, a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| index.page(a.id).cmp(&index.page(b.id)))
}

impl Notebook {
    /// Every posting of one term, sorted by page id: from the open index, else read (and kept
    /// in it). One read per term at a time: a query that waited finds the list kept.
    async fn postings(
        &self,
        index: &UserIndex,
        user: &UserId,
        blind_term: String,
    ) -> Result<PostingList, NotebookError> {
        if let Some(list) = index.postings(&blind_term) {
            return Ok(list);
        }
        let lock = index.term_read_lock(&blind_term);
        let list = {
            let _reading = lock.lock().await;
            match index.postings(&blind_term) {
                Some(list) => Ok(list),
                None => self.read_postings(index, user, &blind_term).await,
            }
        };
        index.release_term_read(&blind_term, lock);
        list
    }

    /// Reads a term's postings and keeps them in the index.
    async fn read_postings(
        &self,
        index: &UserIndex,
        user: &UserId,
        blind_term: &str,
    ) -> Result<PostingList, NotebookError> {
        let mut q = Query::table(term_partition(user, blind_term), "");
        q.limit = POSTINGS_PAGE;
        let mut postings: Vec<(u32, Posting)> = Vec::new();
        loop {
            let page = self.store.query(&q).await?;
            postings.extend(
                page.items
                    .into_iter()
                    .filter_map(|i| parse_posting(&i.body).map(|p| (index.number(&i.sk), p))),
            );
            match page.next {
                Some(next) => q.after = Some(next),
                None => break,
            }
        }
        // The merge walks the lists in page-number order.
        postings.sort_unstable_by_key(|p| p.0);
        postings.dedup_by_key(|p| p.0);
        let list: PostingList = postings.into();
        index.keep_postings(blind_term.to_owned(), list.clone());
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
        // One build per user at a time; a query that waited finds the index built.
        let lock = self.search_cache.build_lock(user);
        let built = {
            let _building = lock.lock().await;
            match self.search_cache.get(user) {
                Some(c) if c.revision == revision && (c.vectors.is_some() || !vectors) => Ok(c),
                now => self.build_index(user, keys, revision, vectors, now).await,
            }
        };
        self.search_cache.release_build(user, lock);
        built
    }

    /// Reads and opens the user's index at `revision` (reusing the blocks of `previous` whose
    /// item version is unchanged) and keeps it.
    async fn build_index(
        &self,
        user: &UserId,
        keys: &UserKeys,
        revision: u64,
        vectors: bool,
        previous: Option<Arc<UserIndex>>,
    ) -> Result<Arc<UserIndex>, NotebookError> {
        let pk = user_pk(user);
        let mut batch = StatsRecord::keys(&pk);
        if vectors {
            batch.push((pk.clone(), vectors::PENDING_SK.to_owned()));
        }
        let lead = batch.len();
        if vectors {
            batch.extend(vectors::block_keys(&pk));
        }
        let previous = previous.as_ref().and_then(|c| c.vectors.as_deref());
        let (items, v) = self.read_index(user, keys, &batch, lead, previous).await?;
        let stats = StatsRecord::from_items(&items)?;
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
        let pk = user_pk(user);
        let mut batch = vec![(pk.clone(), vectors::PENDING_SK.to_owned())];
        batch.extend(vectors::block_keys(&pk));
        let (_, v) = self.read_index(user, keys, &batch, 1, previous).await?;
        v.ok_or_else(|| NotebookError::Corrupt("no vector blocks asked for".into()))
    }

    /// Reads `batch` (first `lead` keys returned as items, then the vector blocks in block
    /// order, if any: `None` without them) as one batch, opening each block as it comes and reusing the blocks of `previous`
    /// whose item version is unchanged. With blocks, the last of the `lead` keys is the
    /// pending counter (`vectors::PENDING_SK`): when it exists, the pending entries of an
    /// import not yet folded are read too, and stand for their pages' block entries. A block's sealed item is dropped as soon as it is
    /// opened, and the store hands them over one at a time where it can
    /// (`Store::batch_get_each`), so the sealed blocks (~22 MB at 10,000 pages) are never all
    /// in memory beside the opened ones; each is opened on this thread into storage allocated
    /// once at its size.
    async fn read_index(
        &self,
        user: &UserId,
        keys: &UserKeys,
        batch: &[(String, String)],
        lead: usize,
        previous: Option<&VectorIndex>,
    ) -> Result<(Vec<Option<Item>>, Option<Arc<VectorIndex>>), NotebookError> {
        let stats_len = lead;
        let mut items: Vec<Option<Item>> = (0..stats_len).map(|_| None).collect();
        let mut blocks: Vec<Option<Arc<OpenBlock>>> =
            (stats_len..batch.len()).map(|_| None).collect();
        let mut failed = None;
        self.store
            .batch_get_each(batch, &mut |i, item| {
                if i < stats_len {
                    items[i] = Some(item);
                    return;
                }
                let b = i - stats_len;
                if failed.is_some() {
                    return;
                }
                let kept = previous
                    .and_then(|p| p.blocks.get(b).cloned().flatten())
                    .filter(|open| open.version == item.version);
                match kept {
                    Some(open) => blocks[b] = Some(open),
                    None => match Block::open_for_search(keys, user, item) {
                        Ok(open) => blocks[b] = Some(Arc::new(open)),
                        Err(e) => failed = Some(e),
                    },
                }
            })
            .await?;
        if let Some(e) = failed {
            return Err(e);
        }
        if batch.len() == stats_len {
            return Ok((items, None));
        }
        let model = embed::model()?;
        let pending = match items.last() {
            Some(Some(_)) => Some(Arc::new(self.open_pending(user, keys).await?)),
            _ => None,
        };
        let v = VectorIndex::with_pending(blocks, pending, model.id(), model.dims());
        Ok((items, Some(Arc::new(v))))
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
        let empty = VectorIndex::empty();
        let vectors = index.vectors.as_deref().unwrap_or(&empty);
        let query_vector = if opts.mode == SearchMode::Keyword {
            None
        } else {
            let model = embed::model()?;
            model.embed_query(query)
        };
        let required = parsed.phrases.iter().flatten().count();
        let ask = RankQuery {
            vector: query_vector.as_deref(),
            terms: parsed.terms.len(),
            all_terms: required > 0
                && parsed
                    .terms
                    .iter()
                    .all(|t| parsed.phrases.iter().flatten().any(|p| p == t)),
            phrases: required > 0,
            keyword: opts.mode != SearchMode::Meaning,
            meaning: opts.mode != SearchMode::Keyword,
            want: limit,
            floor: MEANING_FLOOR,
            spread: MEANING_SPREAD,
        };
        let admits = |d: Date| opts.admits(d);
        let dates: Option<&dyn Fn(Date) -> bool> = opts.has_dates().then_some(&admits);
        let mut ranked = rank::rank(&ask, vectors, &lists, docs, avg_len, dates);

        // Walk down the ranking, verifying revisions, dates and phrases on the decrypted pages.
        // Only the best `batch` candidates are put in order at a time (usually one batch gives
        // the hits), rather than sorting every page that matched a word.
        let mut hits = Vec::with_capacity(limit.min(256));
        let words = text::TermMatcher::new(&parsed.terms);
        // The first batch is what is asked for (every candidate is usually a hit: stale
        // postings are rare), later ones larger.
        let mut batch = limit.clamp(8, 256);
        let mut rest: &mut [Candidate] = &mut ranked;
        while !rest.is_empty() {
            let take = batch.min(rest.len());
            if take < rest.len() {
                rest.select_nth_unstable_by(take - 1, |a, b| best_first(&index, a, b));
            }
            batch = batch.saturating_mul(2).min(256);
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(take);
            chunk.sort_unstable_by(|a, b| best_first(&index, a, b));
            rest = tail;
            // The pages of this chunk: opened by an earlier query of the index, else read
            // (one batch) and opened now, and kept.
            let mut opened: Vec<Option<Arc<HitPage>>> =
                chunk.iter().map(|c| index.hit(c.id)).collect();
            let unread: Vec<(usize, PageId)> = chunk
                .iter()
                .enumerate()
                .filter(|(i, _)| opened[*i].is_none())
                .filter_map(|(i, c)| Some((i, PageId::parse(&index.page(c.id)?).ok()?)))
                .collect();
            if !unread.is_empty() {
                let page_keys: Vec<(String, String)> = unread
                    .iter()
                    .map(|(_, p)| (pk.clone(), page_sk(p)))
                    .collect();
                let items = self.store.batch_get(&page_keys).await?;
                for ((i, _), item) in unread.into_iter().zip(items) {
                    let Some(item) = item else { continue };
                    let record: PageHitHead = decode("page", &item.body)?;
                    let lines = open_page_lines(user, &keys, &record.page_id, &record.lines)?;
                    let page = Arc::new(HitPage::new(
                        record.page_id,
                        record.date,
                        record.rev,
                        (record.has_pdf, record.has_png),
                        lines.into_iter().map(|l| l.text).collect(),
                    ));
                    index.keep_hit(chunk[i].id, page.clone());
                    opened[i] = Some(page);
                }
            }
            for (c, page) in chunk.iter().zip(opened) {
                let Some(page) = page else { continue };
                // Only postings and vectors written for the page's current revision count; a
                // page matched only through stale ones is not a hit.
                if !c.has_rev(page.rev) || !opts.admits(page.date) {
                    continue;
                }
                let prepared = page.prepared();
                if !parsed.phrases.is_empty() {
                    let doc_terms = text::terms(&prepared.body);
                    if !parsed
                        .phrases
                        .iter()
                        .all(|p| text::contains_phrase(&doc_terms, p))
                    {
                        continue;
                    }
                }
                let (snippet, line) = snippet_and_line(&page, &words, c.chunk);
                let url = self
                    .ink_url(user, &page.page_id, page.has_pdf, page.has_png)
                    .await?;
                hits.push(SearchHit {
                    page_id: page.page_id.clone(),
                    date: page.date,
                    snippet,
                    score: c.score,
                    matched: c.how(),
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
    page: &HitPage,
    words: &text::TermMatcher<'_>,
    chunk: Option<usize>,
) -> (String, String) {
    let prepared = page.prepared();
    let (body, lines) = (&prepared.body, &page.lines);
    let by_words = prepared
        .snippable
        .first_match(words)
        .and_then(|at| prepared.snippable.line_at(at))
        .and_then(|i| lines.get(i));
    if let Some(line) = by_words {
        return (
            prepared.snippable.snippet(words, SNIPPET_CHARS),
            line.clone(),
        );
    }
    // The last vector of a page of several chunks is the whole page's: no line of its own.
    let chunks = embed::chunks(body);
    let windows = chunks.len().min(vectors::MAX_CHUNKS);
    if let Some(c) = chunk.filter(|&i| i < windows).and_then(|i| chunks.get(i)) {
        let first = c.lines().next().unwrap_or_default().to_owned();
        return (words.snippet(c, SNIPPET_CHARS), first);
    }
    (
        prepared.snippable.snippet(words, SNIPPET_CHARS),
        lines
            .iter()
            .find(|l| !l.trim().is_empty())
            .cloned()
            .unwrap_or_default(),
    )
}
