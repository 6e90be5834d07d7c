//! Search over the blind index: postings keyed by HMAC'd terms, BM25 ranking, phrase checks and
//! snippets on the decrypted text of the best pages only.
//!
//! A posting is the item `U#{user}#T#{blind(term)}` / `{page_id}` with a 12-byte body: term
//! frequency, document length and the page revision it was written for. The server never
//! stores a term in clear; a query's terms are blinded with the same per-user key.

use std::collections::BTreeMap;

use super::pages::open_page_lines;
use super::records::{PageHead, StatsRecord, decode, page_sk, term_partition, user_pk};
use super::{Notebook, NotebookError};
use crate::domain::text::{self, Query as TextQuery};
use crate::domain::{Date, PageId, UserId};
use crate::ports::{Cond, Item, Query, Write};

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub page_id: PageId,
    pub date: Date,
    pub snippet: String,
    pub score: f64,
    /// A signed URL to the page's ink, when it has any.
    pub url: Option<String>,
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

#[derive(Clone, Copy)]
struct Posting {
    tf: u32,
    len: u32,
    rev: u32,
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
    page: String,
    score: f64,
    /// The revision of the first matching posting, and of any later one that differs; the page
    /// is a hit only if its current revision is among them. (Usually all agree, so the vector
    /// stays empty and never allocates.)
    rev: u32,
    other_revs: Vec<u32>,
    /// How many distinct query terms matched.
    matched: usize,
}

impl Candidate {
    fn has_rev(&self, rev: u32) -> bool {
        self.rev == rev || self.other_revs.contains(&rev)
    }
}

/// Best first: higher score, then lower page id (so the order is deterministic).
fn best_first(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| a.page.cmp(&b.page))
}

/// Merges the terms' posting lists, each sorted by page id, into one candidate per page with
/// its BM25 score: a k-way merge over the sorted lists (k = query terms), so no hashing and no
/// second copy of the page ids.
fn merge(mut lists: Vec<Vec<(String, Posting)>>, docs: u32, avg_len: f64) -> Vec<Candidate> {
    let df: Vec<u32> = lists.iter().map(|l| l.len() as u32).collect();
    let mut ranked = Vec::with_capacity(lists.iter().map(Vec::len).max().unwrap_or(0));
    // The position of each list's next posting.
    let mut heads = vec![0usize; lists.len()];
    // Each round takes the list whose next page id is the smallest: that page is the next
    // candidate.
    while let Some(first) = (0..lists.len())
        .filter(|&i| heads[i] < lists[i].len())
        .min_by(|&a, &b| lists[a][heads[a]].0.cmp(&lists[b][heads[b]].0))
    {
        let (page, p) = &mut lists[first][heads[first]];
        let (page, p) = (std::mem::take(page), *p);
        heads[first] += 1;
        let mut c = Candidate {
            page,
            score: text::bm25(p.tf, df[first], docs, p.len, avg_len),
            rev: p.rev,
            other_revs: Vec::new(),
            matched: 1,
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
    /// Every posting of one term, sorted by page id.
    async fn postings(
        &self,
        user: &UserId,
        blind_term: String,
    ) -> Result<Vec<(String, Posting)>, NotebookError> {
        let mut q = Query::table(term_partition(user, &blind_term), "");
        let mut postings = Vec::new();
        loop {
            let page = self.store.query(&q).await?;
            postings.extend(
                page.items
                    .into_iter()
                    .filter_map(|i| parse_posting(&i.body).map(|p| (i.sk, p))),
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
        Ok(postings)
    }

    /// Ranked pages for a query. Loose terms are OR'ed and ranked by BM25; quoted phrases must
    /// appear as written. Ties break by page id, so the order is deterministic. The query is
    /// bounded (`text::parse_bounded_query`): at most 512 characters and 32 distinct terms.
    pub async fn search(
        &self,
        user: &UserId,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, NotebookError> {
        Ok(self.search_from(user, query, 0, limit).await?.0)
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
        let parsed: TextQuery = text::parse_bounded_query(query)
            .map_err(|e| NotebookError::Invalid(format!("query {e}")))?;
        // One more than asked, to know whether more follow.
        let want = offset.saturating_add(limit).saturating_add(1);
        let mut hits = self.ranked_hits(user, &parsed, want).await?;
        let more = hits.len() == want;
        hits.truncate(want - 1);
        Ok((hits.split_off(offset.min(hits.len())), more))
    }

    /// The best `limit` hits of a parsed query.
    async fn ranked_hits(
        &self,
        user: &UserId,
        parsed: &TextQuery,
        limit: usize,
    ) -> Result<Vec<SearchHit>, NotebookError> {
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let stats = StatsRecord::from_items(&self.store.batch_get(&StatsRecord::keys(&pk)).await?)?;
        if stats.pages == 0 {
            return Ok(Vec::new());
        }
        let docs = stats.pages.max(1);
        let avg_len = stats.total_len as f64 / docs as f64;

        // Phrase terms must all be present; loose terms are optional. The terms' partitions are
        // read concurrently.
        let required: Vec<&String> = parsed.phrases.iter().flatten().collect();
        let lists = futures::future::try_join_all(
            parsed
                .terms
                .iter()
                .map(|term| self.postings(user, keys.blind("term", term))),
        )
        .await?;
        let mut ranked = merge(lists, docs, avg_len);
        if !required.is_empty() {
            let required_count = parsed.terms.iter().filter(|t| required.contains(t)).count();
            // Cheap pre-filter: a page missing a phrase term cannot match. Counting matched terms
            // is enough when the query has no loose terms; otherwise the text check decides.
            if required_count == parsed.terms.len() {
                ranked.retain(|c| c.matched == required_count);
            }
        }

        // Walk down the ranking, verifying revisions and phrases on the decrypted pages. Only
        // the best `batch` candidates are put in order at a time (usually one batch gives the
        // hits), rather than sorting every page that matched a word.
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
                // Only postings written for the page's current revision count; a page matched
                // only through stale postings is not a hit.
                if !c.has_rev(record.rev) {
                    continue;
                }
                let lines = open_page_lines(user, &keys, &record.page_id, &record.lines)?;
                let body: String = lines
                    .iter()
                    .map(|l| l.text.as_str())
                    .collect::<Vec<_>>()
                    .join("\n");
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
                let url = self.ink_url(user, &record).await?;
                hits.push(SearchHit {
                    page_id: record.page_id,
                    date: record.date,
                    snippet: text::snippet(&body, &parsed.terms, SNIPPET_CHARS),
                    score: c.score,
                    url,
                });
                if hits.len() == limit {
                    return Ok(hits);
                }
            }
        }
        Ok(hits)
    }
}
