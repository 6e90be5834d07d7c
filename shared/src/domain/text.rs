//! Search text: terms for the blind index, query parsing, BM25 and snippets.
//!
//! STUB: the contract below is fixed; the body is being written.

/// The index terms of a text, in order, with repeats: Unicode words, lowercased, English-stemmed,
/// stop words kept out. Used both for documents and for queries so the two always agree.
pub fn terms(text: &str) -> Vec<String> {
    let _ = text;
    todo!()
}

/// A parsed search query.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    /// Every distinct term of the query (phrase terms included), in first-seen order.
    pub terms: Vec<String>,
    /// Each quoted phrase as its terms, in order; a document must contain each phrase.
    pub phrases: Vec<Vec<String>>,
}

/// Parses `api "team sync" notes`. An unterminated quote runs to the end. A phrase of one term
/// is just a term.
pub fn parse_query(q: &str) -> Query {
    let _ = q;
    todo!()
}

/// True when the terms of `text` contain `phrase` as a consecutive run.
pub fn contains_phrase(text_terms: &[String], phrase: &[String]) -> bool {
    let _ = (text_terms, phrase);
    todo!()
}

/// The BM25 score of one term in one document (k1 = 1.2, b = 0.75, idf with +1 inside the log so
/// it is never negative).
pub fn bm25(tf: u32, df: u32, docs: u32, doc_len: u32, avg_len: f64) -> f64 {
    let _ = (tf, df, docs, doc_len, avg_len);
    todo!()
}

/// A snippet of at most about `max_chars` characters cut from `text` around the first place
/// where a query term matches (matching by term, so `specs` matches `spec`), on word boundaries,
/// with `…` where it was cut. The start of the text when nothing matches.
pub fn snippet(text: &str, query_terms: &[String], max_chars: usize) -> String {
    let _ = (text, query_terms, max_chars);
    todo!()
}
