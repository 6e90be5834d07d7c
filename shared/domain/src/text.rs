//! Search text: terms for the blind index, query parsing, BM25 and snippets.
//!
//! Documents and queries go through the same pipeline ([`terms`]): Unicode words (UAX #29),
//! lowercased, a short list of English stop words dropped, then the Snowball English stemmer. The
//! snippet matcher reuses it word by word, so what a search finds is also what its snippet shows.

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

/// Kept short on purpose: a word on this list can never be searched for, and handwritten notes
/// are terse, so only words that mean nothing on their own are dropped.
const STOP_WORDS: [&str; 21] = [
    "a", "an", "and", "the", "of", "to", "in", "on", "for", "is", "it", "at", "by", "with", "or",
    "as", "be", "are", "was", "this", "that",
];

/// The index terms of a text, in order, with repeats: Unicode words, lowercased, English-stemmed,
/// stop words kept out. Used both for documents and for queries so the two always agree.
pub fn terms(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    text.unicode_words()
        .filter_map(|w| term(&stemmer, w))
        .collect()
}

/// The character a word's term starts with, as far as a cheap test can tell: the first
/// character of the lowercased word (typographic apostrophes folded). The English stemmer only
/// changes a word's end, apart from dropping one leading apostrophe, so a term starts with this
/// character or, after an apostrophe, the next one (proptest below).
fn leading(word: &str) -> [Option<char>; 2] {
    let mut chars = word
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == '\u{2019}' { '\'' } else { c });
    let first = chars.next();
    let second = if first == Some('\'') {
        chars.next()
    } else {
        None
    };
    [first, second]
}

/// Matches words against a query's terms without stemming every word: only a word whose
/// [`leading`] character starts some term is stemmed and compared. (Stemming is most of the
/// cost of a snippet: a page's words are stemmed until one matches.) Built once per query and
/// used for every hit.
pub struct TermMatcher<'a> {
    terms: &'a [String],
    firsts: Vec<char>,
    stemmer: Stemmer,
}

impl<'a> TermMatcher<'a> {
    pub fn new(terms: &'a [String]) -> TermMatcher<'a> {
        let mut firsts: Vec<char> = terms.iter().filter_map(|t| t.chars().next()).collect();
        firsts.sort_unstable();
        firsts.dedup();
        TermMatcher {
            terms,
            firsts,
            stemmer: Stemmer::create(Algorithm::English),
        }
    }

    /// Whether `word`'s term is one of the query's.
    fn matches(&self, word: &str) -> bool {
        let [a, b] = leading(word);
        let may = [a, b]
            .into_iter()
            .flatten()
            .any(|c| self.firsts.binary_search(&c).is_ok());
        may && term(&self.stemmer, word).is_some_and(|t| self.terms.contains(&t))
    }

    /// Whether `text` holds a word whose term is one of the query's (the same test as
    /// `terms(text)` containing one, without stemming words that cannot match).
    pub fn any_in(&self, text: &str) -> bool {
        text.unicode_words().any(|w| self.matches(w))
    }
}

/// The term of one word, or `None` for a stop word.
fn term(stemmer: &Stemmer, word: &str) -> Option<String> {
    // Typographic apostrophes (common in OCR and on phones) are folded so `don’t` finds `don't`.
    let lower: String = word
        .chars()
        .flat_map(char::to_lowercase)
        .map(|c| if c == '\u{2019}' { '\'' } else { c })
        .collect();
    if STOP_WORDS.contains(&lower.as_str()) {
        return None;
    }
    let stemmed = stemmer.stem(&lower).into_owned();
    if stemmed.is_empty() {
        None
    } else {
        Some(stemmed)
    }
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
    let mut query = Query::default();
    // Straight and curly double quotes both delimit phrases (phones type curly ones), and they
    // alternate: the odd-numbered pieces between quotes are the phrases.
    for (i, piece) in q.split(['"', '\u{201c}', '\u{201d}']).enumerate() {
        let piece_terms = terms(piece);
        for t in &piece_terms {
            if !query.terms.contains(t) {
                query.terms.push(t.clone());
            }
        }
        let quoted = i % 2 == 1;
        if quoted && piece_terms.len() >= 2 && !query.phrases.contains(&piece_terms) {
            query.phrases.push(piece_terms);
        }
    }
    query
}

/// The longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 512;
/// The most distinct terms a query may have: each is one partition read, so a long query would
/// fan out into as many reads.
pub const MAX_QUERY_TERMS: usize = 32;

/// Why a query cannot be searched. The messages read after the argument's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("must be at most {MAX_QUERY_CHARS} characters (it has {0})")]
    TooLong(usize),
    #[error("must have at most {MAX_QUERY_TERMS} distinct search words (it has {0})")]
    TooManyTerms(usize),
    #[error("has no searchable words")]
    NoTerms,
}

/// [`parse_query`] within the limits: at most [`MAX_QUERY_CHARS`] characters and
/// [`MAX_QUERY_TERMS`] distinct terms, and at least one term.
pub fn parse_bounded_query(q: &str) -> Result<Query, QueryError> {
    let chars = q.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(QueryError::TooLong(chars));
    }
    let query = parse_query(q);
    match query.terms.len() {
        0 => Err(QueryError::NoTerms),
        n if n > MAX_QUERY_TERMS => Err(QueryError::TooManyTerms(n)),
        _ => Ok(query),
    }
}

/// True when the terms of `text` contain `phrase` as a consecutive run.
pub fn contains_phrase(text_terms: &[String], phrase: &[String]) -> bool {
    // An empty phrase asks for nothing (and `windows(0)` would panic).
    phrase.is_empty() || text_terms.windows(phrase.len()).any(|w| w == phrase)
}

/// The BM25 score of one term in one document (k1 = 1.2, b = 0.75, idf with +1 inside the log so
/// it is never negative).
pub fn bm25(tf: u32, df: u32, docs: u32, doc_len: u32, avg_len: f64) -> f64 {
    bm25_with_idf(tf, bm25_idf(df, docs), doc_len, avg_len)
}

/// The inverse document frequency of [`bm25`]: the same for every posting of a term, so a
/// merge over a term's postings computes it once.
pub fn bm25_idf(df: u32, docs: u32) -> f64 {
    // Counts can be momentarily inconsistent (a page indexed while the totals lag): never let
    // the document count fall below the document frequency.
    let n = f64::from(docs.max(df));
    let df = f64::from(df);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// [`bm25`] with the term's [`bm25_idf`] given.
pub fn bm25_with_idf(tf: u32, idf: f64, doc_len: u32, avg_len: f64) -> f64 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    if tf == 0 {
        return 0.0;
    }
    // Without a usable average length, treat the document as average-sized.
    let relative_len = if avg_len.is_finite() && avg_len > 0.0 {
        f64::from(doc_len) / avg_len
    } else {
        1.0
    };
    let tf = f64::from(tf);
    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * relative_len))
}

/// A snippet of at most about `max_chars` characters cut from `text` around the first place
/// where a query term matches (matching by term, so `specs` matches `spec`), on word boundaries,
/// with `…` where it was cut. The start of the text when nothing matches.
///
/// The body is at most `max_chars` characters; with an ellipsis at each end the whole is at most
/// `max_chars + 2`. Runs of whitespace, newlines included, become one space.
pub fn snippet(text: &str, query_terms: &[String], max_chars: usize) -> String {
    TermMatcher::new(query_terms).snippet(text, max_chars)
}

impl TermMatcher<'_> {
    /// [`snippet`] for this matcher's query.
    pub fn snippet(&self, text: &str, max_chars: usize) -> String {
        Snippable::new(text).snippet(self, max_chars)
    }
}

/// A text made ready for snippets: its words joined by single spaces, and every place a cut
/// may fall (the starts of its word-boundary segments). A search keeps one per page it returns
/// (`notebook::search_index`), so a page returned again is not segmented again; the query's
/// terms are matched against its words when a snippet is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippable {
    /// Runs of whitespace, newlines included, as one space; no space at either end.
    flat: String,
    /// Its length in chars.
    chars: usize,
    /// Each word-boundary segment: its start in chars and its byte range.
    segments: Vec<Segment>,
    /// For each line (split at `\n`) with a word: where its words start in `flat`, in chars,
    /// and its index.
    lines: Vec<(u32, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Segment {
    char_start: u32,
    bytes: (u32, u32),
    /// Whether it holds a letter or digit (only those can match a term).
    word: bool,
}

impl Snippable {
    pub fn new(text: &str) -> Snippable {
        let mut lines = Vec::new();
        let mut at = 0u32;
        for (i, line) in text.split('\n').enumerate() {
            let mut words = line.split_whitespace().peekable();
            if words.peek().is_none() {
                continue;
            }
            if at > 0 {
                at += 1; // the space that joins it to the line before
            }
            lines.push((at, i as u32));
            let mut first = true;
            for w in words {
                if !first {
                    at += 1;
                }
                first = false;
                at += w.chars().count() as u32;
            }
        }
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut segments = Vec::new();
        let mut chars = 0u32;
        let mut bytes = 0u32;
        for segment in flat.split_word_bounds() {
            let len = segment.len() as u32;
            segments.push(Segment {
                char_start: chars,
                bytes: (bytes, bytes + len),
                word: segment.chars().any(char::is_alphanumeric),
            });
            chars += segment.chars().count() as u32;
            bytes += len;
        }
        Snippable {
            chars: chars as usize,
            flat,
            segments,
            lines,
        }
    }

    /// The index of the line (of the text, split at `\n`) that holds char `offset` of the
    /// joined words.
    pub fn line_at(&self, offset: usize) -> Option<usize> {
        let i = self
            .lines
            .partition_point(|(start, _)| *start as usize <= offset);
        i.checked_sub(1).map(|i| self.lines[i].1 as usize)
    }

    /// The char offset of the first word whose term is one of `matcher`'s.
    pub fn first_match(&self, matcher: &TermMatcher<'_>) -> Option<usize> {
        self.segments
            .iter()
            .find(|s| s.word && matcher.matches(&self.flat[s.bytes.0 as usize..s.bytes.1 as usize]))
            .map(|s| s.char_start as usize)
    }

    /// The text's snippet of at most `max_chars` characters (see [`snippet`]).
    pub fn snippet(&self, matcher: &TermMatcher<'_>, max_chars: usize) -> String {
        let total = self.chars;
        if total <= max_chars {
            return self.flat.clone();
        }
        if max_chars == 0 {
            return String::new();
        }
        // Char offsets of every segment start, plus the end: the places we may cut.
        let bounds = || {
            self.segments
                .iter()
                .map(|s| s.char_start as usize)
                .chain(std::iter::once(total))
        };
        let hit_start = self.first_match(matcher).unwrap_or(0);
        // Start a little before the match, but not so late that the window runs off the end.
        let lead = (max_chars / 4).min(40);
        let mut start = hit_start.saturating_sub(lead).min(total - max_chars);
        if start > 0 {
            // The match starts on a boundary, so this never moves past it.
            start = bounds().find(|&b| b >= start).unwrap_or(start);
        }
        let mut end = (start + max_chars).min(total);
        if end < total {
            let last_fit = bounds().take_while(|&b| b <= end).last().unwrap_or(end);
            // Cut on a word boundary unless that would lose the match (a word longer than the
            // window) or half the window (a long word such as a URL); then cut between chars.
            // When the match fits, its end is a boundary past its start.
            if last_fit > start.max(hit_start) && (end - last_fit) * 2 <= max_chars {
                end = last_fit;
            }
        }
        let body: String = self.flat.chars().skip(start).take(end - start).collect();
        let mut out = String::with_capacity(body.len() + 6);
        if start > 0 {
            out.push('…');
        }
        out.push_str(body.trim());
        if end < total {
            out.push('…');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The snippet as it was computed before [`Snippable`] (a walk over the text's segments up
    /// to the match and a window past it): the oracle the prepared text is checked against.
    fn snippet_by_walk(m: &TermMatcher<'_>, text: &str, max_chars: usize) -> String {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let total = flat.chars().count();
        if total <= max_chars {
            return flat;
        }
        if max_chars == 0 {
            return String::new();
        }

        // Char offsets of every word-boundary segment start, plus the end: the places we may cut.
        // Past the match and a window beyond it no cut can fall, so the walk stops there.
        let mut bounds: Vec<usize> = Vec::new();
        let mut chars_seen = 0;
        let mut hit: Option<usize> = None;
        for segment in flat.split_word_bounds() {
            if hit.is_some_and(|h| chars_seen > h + max_chars) {
                break;
            }
            let len = segment.chars().count();
            bounds.push(chars_seen);
            if hit.is_none() && segment.chars().any(char::is_alphanumeric) && m.matches(segment) {
                hit = Some(chars_seen);
            }
            chars_seen += len;
        }
        bounds.push(total);

        let hit_start = hit.unwrap_or(0);
        // Start a little before the match, but not so late that the window runs off the end.
        let lead = (max_chars / 4).min(40);
        let mut start = hit_start.saturating_sub(lead).min(total - max_chars);
        if start > 0 {
            // The match starts on a boundary, so this never moves past it.
            start = bounds
                .iter()
                .copied()
                .find(|&b| b >= start)
                .unwrap_or(start);
        }
        let mut end = (start + max_chars).min(total);
        if end < total {
            let last_fit = bounds.iter().copied().rfind(|&b| b <= end).unwrap_or(end);
            // Cut on a word boundary unless that would lose the match (a word longer than the window)
            // or half the window (a long word such as a URL); then cut between chars. When the match
            // fits, its end is a boundary past its start.
            if last_fit > start.max(hit_start) && (end - last_fit) * 2 <= max_chars {
                end = last_fit;
            }
        }

        let body: String = flat.chars().skip(start).take(end - start).collect();
        let mut out = String::with_capacity(body.len() + 6);
        if start > 0 {
            out.push('…');
        }
        out.push_str(body.trim());
        if end < total {
            out.push('…');
        }
        out
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn terms_are_stemmed_lowercase_words_without_stop_words() {
        assert_eq!(
            terms("Follow up on the API specs, and RUNNING tests!"),
            strings(&["follow", "up", "api", "spec", "run", "test"])
        );
        assert_eq!(terms("it is what it is"), strings(&["what"]));
        assert_eq!(terms(""), Vec::<String>::new());
        assert_eq!(terms("--- ... !!"), Vec::<String>::new());
    }

    #[test]
    fn terms_handle_unicode() {
        assert_eq!(terms("Réunion ÉTÉ"), strings(&["réunion", "été"]));
        assert_eq!(terms("don’t DON'T"), strings(&["don't", "don't"]));
        assert_eq!(
            terms("会議 メモ 2026"),
            strings(&["会", "議", "メモ", "2026"])
        );
    }

    #[test]
    fn queries_split_into_terms_and_phrases() {
        let q = parse_query(r#"api "team sync" notes"#);
        assert_eq!(q.terms, strings(&["api", "team", "sync", "note"]));
        assert_eq!(q.phrases, vec![strings(&["team", "sync"])]);
    }

    #[test]
    fn query_edge_cases() {
        // One-term phrases are terms; repeats are kept once; stop words vanish from phrases.
        let q = parse_query(r#""api" specs "the spec" API "team of sync" "team sync""#);
        assert_eq!(q.terms, strings(&["api", "spec", "team", "sync"]));
        assert_eq!(q.phrases, vec![strings(&["team", "sync"])]);
        // An unterminated quote runs to the end; curly quotes work like straight ones.
        let q = parse_query("budget \"q3 plan review");
        assert_eq!(q.phrases, vec![strings(&["q3", "plan", "review"])]);
        let q = parse_query("“team sync” later");
        assert_eq!(q.phrases, vec![strings(&["team", "sync"])]);
        assert_eq!(parse_query(""), Query::default());
        assert_eq!(parse_query("\"\"\""), Query::default());
    }

    /// Issue 11, item 9: a query's length and its distinct terms are capped before any read.
    #[test]
    fn queries_are_bounded() {
        let words: Vec<String> = (0..MAX_QUERY_TERMS).map(|i| format!("w{i}")).collect();
        let at_limit = words.join(" ");
        assert_eq!(
            parse_bounded_query(&at_limit).unwrap().terms.len(),
            MAX_QUERY_TERMS
        );
        // Repeats count once.
        assert!(parse_bounded_query(&format!("{at_limit} {at_limit}")).is_ok());
        assert_eq!(
            parse_bounded_query(&format!("{at_limit} one more")),
            Err(QueryError::TooManyTerms(MAX_QUERY_TERMS + 2))
        );
        assert_eq!(
            parse_bounded_query(&"é".repeat(MAX_QUERY_CHARS + 1)),
            Err(QueryError::TooLong(MAX_QUERY_CHARS + 1))
        );
        assert!(parse_bounded_query(&"é".repeat(MAX_QUERY_CHARS)).is_ok());
        assert_eq!(parse_bounded_query("the of \"\""), Err(QueryError::NoTerms));
        assert!(
            QueryError::TooManyTerms(40)
                .to_string()
                .contains(&MAX_QUERY_TERMS.to_string())
        );
    }

    #[test]
    fn phrases_match_consecutive_runs() {
        let doc = terms("Notes from the team sync about the API");
        assert!(contains_phrase(&doc, &strings(&["team", "sync"])));
        assert!(contains_phrase(&doc, &terms("syncing about APIs")));
        assert!(!contains_phrase(&doc, &strings(&["sync", "team"])));
        assert!(!contains_phrase(&doc, &strings(&["team", "api"])));
        assert!(contains_phrase(&doc, &[]));
        assert!(!contains_phrase(&[], &strings(&["team"])));
    }

    #[test]
    fn bm25_behaves() {
        let base = bm25(1, 1, 10, 10, 10.0);
        assert!(base > 0.0);
        // idf: ln(1 + (10 - 1 + 0.5) / 1.5); tf part is 1 for tf 1 at average length.
        assert!((base - (1.0f64 + 9.5 / 1.5).ln()).abs() < 1e-12);
        assert!(
            bm25(3, 1, 10, 10, 10.0) > base,
            "more occurrences score higher"
        );
        assert!(
            bm25(1, 5, 10, 10, 10.0) < base,
            "commoner terms score lower"
        );
        assert!(
            bm25(1, 1, 10, 40, 10.0) < base,
            "longer documents score lower"
        );
        assert_eq!(bm25(0, 1, 10, 10, 10.0), 0.0);
        // Inconsistent or degenerate statistics still give finite, non-negative scores.
        for score in [
            bm25(1, 10, 10, 10, 10.0),
            bm25(1, 20, 10, 10, 10.0),
            bm25(1, 1, 1, 0, 0.0),
            bm25(1, 1, 1, 5, -3.0),
            bm25(1, 1, 1, 5, f64::NAN),
            bm25(u32::MAX, u32::MAX, 0, u32::MAX, 1.0),
        ] {
            assert!(score.is_finite() && score >= 0.0, "{score}");
        }
        assert_eq!(bm25(1, 1, 1, 5, -3.0), bm25(1, 1, 1, 5, 5.0));
    }

    #[test]
    fn short_texts_are_returned_whole_and_flattened() {
        assert_eq!(
            snippet("line one\nline  two\r\n", &strings(&["two"]), 100),
            "line one line two"
        );
    }

    #[test]
    fn snippet_without_a_match_is_the_start() {
        let text = "alpha beta gamma delta epsilon zeta eta theta";
        assert_eq!(snippet(text, &strings(&["omega"]), 20), "alpha beta gamma…");
        assert_eq!(snippet(text, &[], 20), "alpha beta gamma…");
    }

    #[test]
    fn snippet_centres_on_the_first_match_by_term() {
        let text = "We met on Monday. Long preamble about many unrelated things here. \
                    Then Bob sent the specs for the new API. More words follow after that.";
        let s = snippet(text, &strings(&["spec"]), 40);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("specs"), "{s}");
        assert!(s.chars().count() <= 42, "{s}");
        assert_eq!(s, "…sent the specs for the new API. More…");
    }

    #[test]
    fn snippet_near_the_end_fills_the_window_backwards() {
        let text = "one two three four five six seven eight nine ten";
        assert_eq!(snippet(text, &strings(&["ten"]), 16), "…eight nine ten");
    }

    #[test]
    fn snippet_cuts_multibyte_text_on_char_boundaries() {
        let text = "Le compte-rendu de réunion: écrire à Zoë pour l'été, puis réserver le café.";
        let s = snippet(text, &terms("Zoë"), 24);
        assert!(s.contains("Zoë"), "{s}");
        assert!(s.chars().count() <= 26, "{s}");
        // No spaces at all: cut between ideographs, which are word boundaries of their own.
        let cjk = "本日の議題は予算と採用計画と新しい会議室の予約についてです";
        // Each ideograph is a term of its own, so `会議` first matches the `議` of `議題`.
        let s = snippet(cjk, &terms("会議"), 10);
        assert_eq!(s, "…日の議題は予算と採用…");
        assert!(s.chars().count() <= 12, "{s}");
        // A word that would cost more than half the window is cut between chars.
        let long = format!("go {} end", "é".repeat(50));
        assert_eq!(snippet(&long, &[], 10), format!("go {}…", "é".repeat(7)));
        let long = format!("start {} end", "é".repeat(50));
        assert_eq!(snippet(&long, &[], 10), "start…");
    }

    #[test]
    fn snippet_of_zero_chars_is_empty() {
        assert_eq!(snippet("something", &strings(&["someth"]), 0), "");
    }

    fn wordy_text() -> impl Strategy<Value = String> {
        let fragment = prop::sample::select(vec![
            "spec",
            "specs",
            "the",
            " ",
            "  ",
            "\n",
            "\r\n",
            "é",
            "会議",
            "🙂",
            "-",
            ".",
            "word",
            "a",
            "\t",
            "don’t",
            "\u{301}",
            "ZWJ\u{200d}",
            "Dying",
            "skies",
            "Meetings",
        ]);
        prop::collection::vec(fragment, 0..80).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn snippet_never_panics_or_overflows(
            text in prop_oneof![any::<String>(), wordy_text()],
            query in prop_oneof![any::<String>(), Just("spec".to_owned()), Just("会議 word".to_owned())],
            max_chars in 0usize..60,
        ) {
            let q = terms(&query);
            let s = snippet(&text, &q, max_chars);
            prop_assert!(s.chars().count() <= max_chars + 2, "{:?} -> {:?}", text, s);
        }

        /// The prepared text gives the snippet the walk over the text gave, for any text,
        /// query and window.
        #[test]
        fn a_prepared_text_snippets_as_the_walk_did(
            text in prop_oneof![any::<String>(), wordy_text()],
            query in prop_oneof![any::<String>(), Just("spec".to_owned()), Just("会議 word".to_owned())],
            max_chars in 0usize..200,
        ) {
            let q = terms(&query);
            let m = TermMatcher::new(&q);
            prop_assert_eq!(Snippable::new(&text).snippet(&m, max_chars), snippet_by_walk(&m, &text, max_chars));
        }

        /// The line of the first match is the first line holding a query word.
        #[test]
        fn the_first_match_is_in_the_first_line_with_a_query_word(
            lines in proptest::collection::vec(prop_oneof![any::<String>(), wordy_text()], 0..6),
            query in prop_oneof![Just("spec".to_owned()), Just("会議 word".to_owned()), any::<String>()],
        ) {
            let text = lines.join("\n");
            let q = terms(&query);
            let m = TermMatcher::new(&q);
            let prepared = Snippable::new(&text);
            let by_lines = text.split('\n').position(|l| m.any_in(l));
            prop_assert_eq!(prepared.first_match(&m).and_then(|at| prepared.line_at(at)), by_lines);
        }

        #[test]
        fn a_term_starts_with_its_words_leading_character(
            word in prop_oneof![
                "['\u{2019}]{0,2}[a-zA-Z'\u{2019}\u{e9}\u{c9}\u{130}\u{df}\u{e6}\u{c6}-]{1,14}",
                any::<String>(),
            ],
        ) {
            let stemmer = Stemmer::create(Algorithm::English);
            if let Some(t) = term(&stemmer, &word) {
                let first = t.chars().next();
                let [a, b] = leading(&word);
                prop_assert!(first == a || first == b, "{:?} -> {:?}", word, t);
            }
        }

        #[test]
        fn any_in_agrees_with_terms(
            text in prop_oneof![any::<String>(), wordy_text()],
            query in prop_oneof![
                any::<String>(),
                Just("specs meeting".to_owned()),
                Just("dying skies".to_owned()),
            ],
        ) {
            let q = terms(&query);
            let expected = terms(&text).iter().any(|t| q.contains(t));
            prop_assert_eq!(TermMatcher::new(&q).any_in(&text), expected);
        }

        #[test]
        fn terms_never_panic_and_are_never_empty(text in any::<String>()) {
            for t in terms(&text) {
                prop_assert!(!t.is_empty());
            }
            let _ = parse_query(&text);
        }
    }
}
