//! Search over the blind index: postings keyed by HMAC'd terms, BM25 ranking, phrase checks and
//! snippets on the decrypted text of the best pages only.
//!
//! A posting is the item `U#{user}#T#{blind(term)}` / `{page_id}` with a 12-byte body: term
//! frequency, document length and the page revision it was written for. The server never
//! stores a term in clear; a query's terms are blinded with the same per-user key.

use std::collections::{BTreeMap, HashMap};

use super::records::{PageRecord, STATS_SK, StatsRecord, decode, page_sk, term_partition, user_pk};
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
    /// The revision each matching posting was written for; all must equal the page's.
    revs: Vec<u32>,
    /// How many distinct query terms matched.
    matched: usize,
}

impl Notebook {
    /// Ranked pages for a query. Loose terms are OR'ed and ranked by BM25; quoted phrases must
    /// appear as written. Ties break by page id, so the order is deterministic.
    pub async fn search(
        &self,
        user: &UserId,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SearchHit>, NotebookError> {
        let parsed: TextQuery = text::parse_query(query);
        if parsed.terms.is_empty() {
            return Err(NotebookError::Invalid(
                "query has no searchable words".into(),
            ));
        }
        let keys = self.vault.user_keys(user).await?;
        let pk = user_pk(user);
        let stats: StatsRecord = match self.store.get(&pk, STATS_SK).await? {
            Some(item) => decode("stats", &item.body)?,
            None => return Ok(Vec::new()),
        };
        let docs = stats.pages.max(1);
        let avg_len = stats.total_len as f64 / docs as f64;

        // Phrase terms must all be present; loose terms are optional.
        let required: Vec<&String> = parsed.phrases.iter().flatten().collect();
        let mut candidates: HashMap<String, Candidate> = HashMap::new();
        for term in &parsed.terms {
            let mut q = Query::table(term_partition(user, &keys.blind("term", term)), "");
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
            let df = postings.len() as u32;
            for (page, p) in postings {
                let c = candidates.entry(page.clone()).or_insert_with(|| Candidate {
                    page,
                    score: 0.0,
                    revs: Vec::new(),
                    matched: 0,
                });
                c.score += text::bm25(p.tf, df, docs, p.len, avg_len);
                c.revs.push(p.rev);
                c.matched += 1;
            }
        }
        let mut ranked: Vec<Candidate> = candidates.into_values().collect();
        if !required.is_empty() {
            let required_count = parsed.terms.iter().filter(|t| required.contains(t)).count();
            // Cheap pre-filter: a page missing a phrase term cannot match. Counting matched terms
            // is enough when the query has no loose terms; otherwise the text check decides.
            if required_count == parsed.terms.len() {
                ranked.retain(|c| c.matched == required_count);
            }
        }
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.page.cmp(&b.page))
        });

        // Walk down the ranking, verifying revisions and phrases on the decrypted pages.
        let mut hits = Vec::with_capacity(limit);
        let batch = (limit * 2).max(8);
        for chunk in ranked.chunks(batch) {
            let page_keys: Vec<(String, String)> = chunk
                .iter()
                .filter_map(|c| PageId::parse(&c.page).ok())
                .map(|p| (pk.clone(), page_sk(&p)))
                .collect();
            let items = self.store.batch_get(&page_keys).await?;
            for (c, item) in chunk.iter().zip(items) {
                let Some(item) = item else { continue };
                let record: PageRecord = decode("page", &item.body)?;
                // Only postings written for the page's current revision count; a page matched
                // only through stale postings is not a hit.
                if !c.revs.contains(&record.rev) {
                    continue;
                }
                let lines = self.open_lines(user, &keys, &record)?;
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
