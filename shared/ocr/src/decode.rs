//! CTC decoding with a word lexicon: a prefix beam search over the recogniser's per-step
//! character probabilities, in which every run of letters is scored as a word when it ends.
//!
//! Greedy decoding takes the likeliest character at each step and nothing else. On fast
//! cursive the recogniser is often torn between near-identical shapes (u/n/m/w, e/c, r/v, a lost
//! i-dot, a space in the middle of a word), and the likeliest character at each step spells no
//! word at all. The beam search keeps the few likeliest spellings of the line (their CTC
//! probability summed over every alignment, as the recogniser was trained), and adds to each a
//! language prior: a word's log frequency when the run of letters is a word of the
//! [`Lexicon`] (or of the user's own vocabulary, [`Vocabulary`]), a fixed penalty when it is
//! not. A word the recogniser is sure of survives the penalty (names, codes, words of no
//! list); a word it hesitates over leans to the spelling that is a word. While a word is being
//! spelled, a beam is scored with the best word it can still become (the lexicon is a trie), so
//! the right spelling is not pruned before its last letter.
//!
//! Characters outside the scripts a notebook is written in ([`allowed`]: Latin letters, digits,
//! punctuation, a few symbols) are never emitted: the recogniser's alphabet also holds
//! thousands of CJK characters and symbols such as `⑧` or `□`, which a tick or a box's edge
//! otherwise comes out as.

use std::collections::HashMap;

/// The weight of the language prior against the recogniser's log probability.
const LM_WEIGHT: f32 = 0.35;
/// What spelling a letter costs under no language at all (a letter of 27, or the word's end):
/// a word's prior is how much likelier the lexicon makes it than that, so a word is neither
/// cheaper split in two nor joined, and a digit or a mark costs what a word does (nothing).
const BACKGROUND: f32 = 3.33;
/// A run of letters that is no word of the lexicon or the vocabulary: a little less likely than
/// letters at random.
const OOV_PRIOR: f32 = -1.0;
/// The user's own words: scored as words at least this frequent (a name of theirs is as good
/// as a common word).
const VOCABULARY_LOG_PROB: f32 = -9.0;
/// Beams kept after each step.
const BEAM: usize = 16;
/// Characters tried at each step: the likeliest ones above [`MIN_PROB`], at most this many.
const PER_STEP: usize = 6;
const MIN_PROB: f32 = 1e-4;

/// Whether the recogniser may emit this character: the Latin scripts and their punctuation.
pub fn allowed(c: &str) -> bool {
    c.chars().all(|c| match c {
        ' '..='~' | '£' | '°' | '§' | '½' | '¼' | '¾' => true,
        '×' | '÷' => false,
        '\u{c0}'..='\u{17f}' => true,
        '‘' | '’' | '“' | '”' | '–' | '—' | '…' | '€' | '•' => true,
        _ => false,
    })
}

/// Letters that make up words: a run of them is scored as one word.
fn is_word_char(c: char) -> bool {
    c.is_alphabetic() || c == '\''
}

/// Words and their log probabilities (natural log of the relative frequency), as a trie.
#[derive(Debug, Clone)]
pub struct Lexicon {
    nodes: Vec<Node>,
}

impl Default for Lexicon {
    fn default() -> Lexicon {
        Lexicon::new()
    }
}

#[derive(Debug, Clone)]
struct Node {
    children: Vec<(char, u32)>,
    /// The word ending here, if one does.
    word: f32,
    /// The best word at or below this node.
    best: f32,
}

impl Node {
    fn new() -> Node {
        Node {
            children: Vec::new(),
            word: f32::NEG_INFINITY,
            best: f32::NEG_INFINITY,
        }
    }
}

impl Lexicon {
    /// Reads `word<TAB>log10 frequency` lines (what `make tools-ocr` writes from the word list,
    /// `tests/ocr/lexicon.py`); lines that do not parse are skipped.
    pub fn parse(tsv: &str) -> Lexicon {
        let mut lexicon = Lexicon::new();
        for line in tsv.lines() {
            let Some((word, log10)) = line.split_once('\t') else {
                continue;
            };
            if let Ok(log10) = log10.trim().parse::<f32>() {
                lexicon.insert(word, log10 * std::f32::consts::LN_10);
            }
        }
        lexicon
    }

    pub fn new() -> Lexicon {
        Lexicon {
            nodes: vec![Node::new()],
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.iter().filter(|n| n.word.is_finite()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// Adds `word` (lower-cased; only its letters count) with log probability `log_prob`; a
    /// word given twice keeps its best.
    pub fn insert(&mut self, word: &str, log_prob: f32) {
        let word = word.to_lowercase();
        if word.is_empty() || !word.chars().all(is_word_char) {
            return;
        }
        let mut node = 0usize;
        self.nodes[0].best = self.nodes[0].best.max(log_prob);
        for c in word.chars() {
            node = match self.child(node as u32, c) {
                Some(next) => next as usize,
                None => {
                    let next = self.nodes.len() as u32;
                    self.nodes.push(Node::new());
                    let children = &mut self.nodes[node].children;
                    let at = children.partition_point(|(k, _)| *k < c);
                    children.insert(at, (c, next));
                    next as usize
                }
            };
            self.nodes[node].best = self.nodes[node].best.max(log_prob);
        }
        self.nodes[node].word = self.nodes[node].word.max(log_prob);
    }

    fn child(&self, node: u32, c: char) -> Option<u32> {
        let children = &self.nodes[node as usize].children;
        children
            .binary_search_by(|(k, _)| k.cmp(&c))
            .ok()
            .map(|i| children[i].1)
    }

    /// Where `c` leads from `node` (letters compared lower-cased).
    fn step(&self, node: Option<u32>, c: char) -> Option<u32> {
        let node = node?;
        let mut lower = c.to_lowercase();
        let (first, rest) = (lower.next()?, lower.next());
        let next = self.child(node, first)?;
        match rest {
            None => Some(next),
            Some(second) => self.child(next, second),
        }
    }

    /// The log probability of the word ending at `node`, if one does.
    pub fn word_at(&self, node: Option<u32>) -> Option<f32> {
        node.map(|n| self.nodes[n as usize].word)
            .filter(|p| p.is_finite())
    }

    fn best_at(&self, node: Option<u32>) -> Option<f32> {
        node.map(|n| self.nodes[n as usize].best)
            .filter(|p| p.is_finite())
    }

    /// The log probability of `word`, if it is a word here.
    pub fn get(&self, word: &str) -> Option<f32> {
        let mut node = Some(0);
        for c in word.chars() {
            node = self.step(node, c);
        }
        self.word_at(node)
    }
}

/// A user's own words (their notebook's, their notes' and tags, the words they corrected),
/// scored as frequent words on top of the lexicon while their pages are read.
#[derive(Debug, Clone, Default)]
pub struct Vocabulary {
    words: Lexicon,
}

impl Vocabulary {
    pub fn new<'a>(words: impl IntoIterator<Item = &'a str>) -> Vocabulary {
        let mut lexicon = Lexicon::new();
        for text in words {
            for word in text.split(|c: char| !is_word_char(c)) {
                let word = word.trim_matches('\'');
                if word.chars().count() >= 2 {
                    lexicon.insert(word, VOCABULARY_LOG_PROB);
                }
            }
        }
        Vocabulary { words: lexicon }
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }
}

/// Where a beam's current run of letters stands in the lexicon and in the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WordState {
    lexicon: Option<u32>,
    vocabulary: Option<u32>,
    /// Letters in the run so far.
    letters: u16,
}

impl WordState {
    const START: WordState = WordState {
        lexicon: Some(0),
        vocabulary: Some(0),
        letters: 0,
    };
}

/// One spelling of the line so far: a node of the prefix tree of spellings.
#[derive(Debug, Clone)]
struct Prefix {
    parent: u32,
    /// The class that ends it (0 for the empty root).
    class: u32,
    word: WordState,
    /// The language prior of the words it has finished.
    prior: f32,
}

/// The decoder for one alphabet: which classes may be emitted and which are letters.
#[derive(Debug, Clone)]
pub struct Decoder {
    chars: Vec<String>,
    allowed: Vec<bool>,
    /// The class's text as one char when it is one (else `None`: a multi-char class).
    single: Vec<Option<char>>,
    lexicon: Lexicon,
}

impl Decoder {
    /// `chars[0]` is CTC's blank.
    pub fn new(chars: Vec<String>, lexicon: Lexicon) -> Decoder {
        let allowed = chars
            .iter()
            .enumerate()
            .map(|(i, c)| i != 0 && !c.is_empty() && allowed(c))
            .collect();
        let single = chars
            .iter()
            .map(|c| {
                let mut it = c.chars();
                match (it.next(), it.next()) {
                    (Some(c), None) => Some(c),
                    _ => None,
                }
            })
            .collect();
        Decoder {
            chars,
            allowed,
            single,
            lexicon,
        }
    }

    pub fn chars(&self) -> &[String] {
        &self.chars
    }

    pub fn has_lexicon(&self) -> bool {
        !self.lexicon.is_empty()
    }

    /// The best spelling of one line (`steps` rows of `classes` probabilities), and the mean
    /// probability of the characters a greedy reading keeps (the line's confidence).
    pub fn decode(
        &self,
        probs: &[f32],
        steps: usize,
        classes: usize,
        vocabulary: &Vocabulary,
    ) -> (String, f32) {
        let confidence = self.greedy_confidence(probs, steps, classes);
        if !self.has_lexicon() && vocabulary.is_empty() {
            return (self.greedy(probs, steps, classes), confidence);
        }
        (self.beam(probs, steps, classes, vocabulary), confidence)
    }

    /// The likeliest allowed character per step, repeats merged, blanks dropped.
    pub fn greedy(&self, probs: &[f32], steps: usize, classes: usize) -> String {
        let mut text = String::new();
        let mut previous = usize::MAX;
        for t in 0..steps {
            let best = self.best_class(&probs[t * classes..(t + 1) * classes]);
            if best != previous && best != 0 {
                text.push_str(&self.chars[best]);
            }
            previous = best;
        }
        text
    }

    fn best_class(&self, row: &[f32]) -> usize {
        let mut best = (0, row[0]);
        for (i, &p) in row.iter().enumerate().skip(1) {
            if p > best.1 && self.allowed.get(i).copied().unwrap_or(false) {
                best = (i, p);
            }
        }
        best.0
    }

    fn greedy_confidence(&self, probs: &[f32], steps: usize, classes: usize) -> f32 {
        let (mut sum, mut n) = (0.0f32, 0usize);
        let mut previous = usize::MAX;
        for t in 0..steps {
            let row = &probs[t * classes..(t + 1) * classes];
            let best = self.best_class(row);
            if best != previous && best != 0 {
                sum += row[best];
                n += 1;
            }
            previous = best;
        }
        if n == 0 { 0.0 } else { sum / n as f32 }
    }

    fn class_char(&self, class: u32) -> Option<char> {
        self.single.get(class as usize).copied().flatten()
    }

    /// The word state after `class` is appended; `Some(score)` when a run of letters ended
    /// with it (the prior of the finished word).
    fn advance(
        &self,
        state: WordState,
        class: u32,
        vocabulary: &Vocabulary,
    ) -> (WordState, Option<f32>) {
        match self.class_char(class) {
            Some(c) if is_word_char(c) => (
                WordState {
                    lexicon: self.lexicon.step(state.lexicon, c),
                    vocabulary: vocabulary.words.step(state.vocabulary, c),
                    letters: state.letters.saturating_add(1),
                },
                None,
            ),
            _ => (WordState::START, self.finish(state, vocabulary)),
        }
    }

    /// The prior of a finished run of letters (none for an empty run): how much likelier the
    /// lexicon (or the vocabulary) makes the word than letters at random.
    fn finish(&self, state: WordState, vocabulary: &Vocabulary) -> Option<f32> {
        if state.letters == 0 {
            return None;
        }
        let known = self
            .lexicon
            .word_at(state.lexicon)
            .into_iter()
            .chain(vocabulary.words.word_at(state.vocabulary))
            .fold(None, |a: Option<f32>, b| Some(a.map_or(b, |a| a.max(b))));
        Some(
            LM_WEIGHT
                * match known {
                    Some(log_prob) => log_prob + (f32::from(state.letters) + 1.0) * BACKGROUND,
                    None => OOV_PRIOR,
                },
        )
    }

    /// The best the current run of letters can still become: its letters so far at what the
    /// lexicon saves on each, and the likeliest word it can end as.
    fn lookahead(&self, state: WordState, vocabulary: &Vocabulary) -> f32 {
        if state.letters == 0 {
            return 0.0;
        }
        let best = self
            .lexicon
            .best_at(state.lexicon)
            .into_iter()
            .chain(vocabulary.words.best_at(state.vocabulary))
            .fold(f32::NEG_INFINITY, f32::max);
        LM_WEIGHT * (best + f32::from(state.letters) * BACKGROUND).max(OOV_PRIOR)
    }

    fn beam(&self, probs: &[f32], steps: usize, classes: usize, vocabulary: &Vocabulary) -> String {
        // The prefix tree of spellings; beams are nodes of it with their CTC log probabilities
        // (ending in a blank, ending in their last character).
        let mut tree = vec![Prefix {
            parent: 0,
            class: 0,
            word: WordState::START,
            prior: 0.0,
        }];
        let mut children: HashMap<(u32, u32), u32> = HashMap::new();
        let mut beams: Vec<(u32, f32, f32)> = vec![(0, 0.0, f32::NEG_INFINITY)];
        let mut next: HashMap<u32, (f32, f32)> = HashMap::new();
        let mut candidates: Vec<(u32, f32)> = Vec::with_capacity(PER_STEP);
        for t in 0..steps {
            let row = &probs[t * classes..(t + 1) * classes];
            candidates.clear();
            for (i, &p) in row.iter().enumerate().skip(1) {
                if p < MIN_PROB || !self.allowed.get(i).copied().unwrap_or(false) {
                    continue;
                }
                if candidates.len() < PER_STEP {
                    candidates.push((i as u32, p.ln()));
                    candidates.sort_by(|a, b| b.1.total_cmp(&a.1));
                } else if p.ln() > candidates[PER_STEP - 1].1 {
                    candidates[PER_STEP - 1] = (i as u32, p.ln());
                    candidates.sort_by(|a, b| b.1.total_cmp(&a.1));
                }
            }
            let blank = row[0].max(1e-30).ln();
            next.clear();
            for &(node, pb, pnb) in &beams {
                let total = log_add(pb, pnb);
                let entry = next
                    .entry(node)
                    .or_insert((f32::NEG_INFINITY, f32::NEG_INFINITY));
                entry.0 = log_add(entry.0, total + blank);
                let last = tree[node as usize].class;
                for &(class, p) in &candidates {
                    if class == last && node != 0 {
                        // The same character again without a blank between is the same one.
                        let entry = next.get_mut(&node).expect("inserted above");
                        entry.1 = log_add(entry.1, pnb + p);
                    }
                    let from = if class == last && node != 0 {
                        pb
                    } else {
                        total
                    };
                    if from == f32::NEG_INFINITY {
                        continue;
                    }
                    let child = *children.entry((node, class)).or_insert_with(|| {
                        let parent = &tree[node as usize];
                        let (word, finished) = self.advance(parent.word, class, vocabulary);
                        let prefix = Prefix {
                            parent: node,
                            class,
                            word,
                            prior: parent.prior + finished.unwrap_or(0.0),
                        };
                        tree.push(prefix);
                        (tree.len() - 1) as u32
                    });
                    let entry = next
                        .entry(child)
                        .or_insert((f32::NEG_INFINITY, f32::NEG_INFINITY));
                    entry.1 = log_add(entry.1, from + p);
                }
            }
            let mut ranked: Vec<(u32, f32, f32, f32)> = next
                .iter()
                .map(|(&node, &(pb, pnb))| {
                    let prefix = &tree[node as usize];
                    let score =
                        log_add(pb, pnb) + prefix.prior + self.lookahead(prefix.word, vocabulary);
                    (node, pb, pnb, score)
                })
                .collect();
            ranked.sort_by(|a, b| b.3.total_cmp(&a.3).then(a.0.cmp(&b.0)));
            ranked.truncate(BEAM);
            beams = ranked
                .into_iter()
                .map(|(node, pb, pnb, _)| (node, pb, pnb))
                .collect();
        }
        let best = beams
            .iter()
            .map(|&(node, pb, pnb)| {
                let prefix = &tree[node as usize];
                let end = self.finish(prefix.word, vocabulary).unwrap_or(0.0);
                (node, log_add(pb, pnb) + prefix.prior + end)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map_or(0, |(node, _)| node);
        let mut classes_out = Vec::new();
        let mut node = best;
        while node != 0 {
            classes_out.push(tree[node as usize].class);
            node = tree[node as usize].parent;
        }
        classes_out
            .iter()
            .rev()
            .map(|&c| self.chars[c as usize].as_str())
            .collect()
    }
}

fn log_add(a: f32, b: f32) -> f32 {
    if a == f32::NEG_INFINITY {
        return b;
    }
    if b == f32::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An alphabet of blank, a few letters and a space.
    fn alphabet() -> Vec<String> {
        ["", "a", "n", "u", "y", "w", "t", "h", "e", "c", "⑧", " "]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn class(chars: &[String], c: &str) -> usize {
        chars.iter().position(|x| x == c).unwrap()
    }

    /// Rows of probabilities: each step a list of (char, p), the rest going to blank.
    fn rows(chars: &[String], steps: &[&[(&str, f32)]]) -> Vec<f32> {
        let mut out = vec![0.0f32; steps.len() * chars.len()];
        for (t, step) in steps.iter().enumerate() {
            let row = &mut out[t * chars.len()..(t + 1) * chars.len()];
            let mut rest = 1.0;
            for &(c, p) in step.iter() {
                row[class(chars, c)] = p;
                rest -= p;
            }
            row[0] = rest.max(0.0);
        }
        out
    }

    #[test]
    fn greedy_merges_repeats_drops_blanks_and_never_emits_a_disallowed_character() {
        let chars = alphabet();
        let decoder = Decoder::new(chars.clone(), Lexicon::new());
        let seq = rows(
            &chars,
            &[
                &[("⑧", 0.6), ("t", 0.3)],
                &[("t", 0.9)],
                &[],
                &[("h", 0.9)],
                &[("e", 0.9)],
            ],
        );
        // "⑧" is outside the Latin scripts: its step reads as the best allowed class.
        assert_eq!(decoder.greedy(&seq, 5, chars.len()), "the");
    }

    #[test]
    fn a_hesitant_letter_leans_to_the_spelling_that_is_a_word() {
        let chars = alphabet();
        let mut lexicon = Lexicon::new();
        lexicon.insert("than", -7.0);
        lexicon.insert("the", -3.0);
        let decoder = Decoder::new(chars.clone(), lexicon);
        // t h a [u 0.5 / n 0.4]: greedy says "thau", a word only as "than".
        let seq = rows(
            &chars,
            &[
                &[("t", 0.9)],
                &[("h", 0.9)],
                &[("a", 0.9)],
                &[("u", 0.5), ("n", 0.4)],
            ],
        );
        assert_eq!(decoder.greedy(&seq, 4, chars.len()), "thau");
        let (text, _) = decoder.decode(&seq, 4, chars.len(), &Vocabulary::default());
        assert_eq!(text, "than");
    }

    #[test]
    fn a_word_the_recogniser_is_sure_of_stays_though_no_list_has_it() {
        let chars = alphabet();
        let mut lexicon = Lexicon::new();
        lexicon.insert("than", -7.0);
        let decoder = Decoder::new(chars.clone(), lexicon);
        let seq = rows(
            &chars,
            &[
                &[("t", 0.98)],
                &[("h", 0.98)],
                &[("a", 0.98)],
                &[("u", 0.97), ("n", 0.02)],
            ],
        );
        let (text, _) = decoder.decode(&seq, 4, chars.len(), &Vocabulary::default());
        assert_eq!(text, "thau");
    }

    #[test]
    fn a_space_in_the_middle_of_a_word_goes_when_the_whole_is_a_word() {
        let chars = alphabet();
        let mut lexicon = Lexicon::new();
        lexicon.insert("anyway", -8.0);
        lexicon.insert("way", -8.0);
        let decoder = Decoder::new(chars.clone(), lexicon);
        let seq = rows(
            &chars,
            &[
                &[("a", 0.9)],
                &[("n", 0.9)],
                &[("y", 0.9)],
                &[(" ", 0.55)],
                &[("w", 0.9)],
                &[("a", 0.9)],
                &[("y", 0.9)],
            ],
        );
        assert_eq!(decoder.greedy(&seq, 7, chars.len()), "any way");
        let (text, _) = decoder.decode(&seq, 7, chars.len(), &Vocabulary::default());
        assert_eq!(text, "anyway");
    }

    #[test]
    fn the_users_own_words_count_as_words() {
        let chars = alphabet();
        let decoder = Decoder::new(chars.clone(), {
            let mut l = Lexicon::new();
            l.insert("the", -3.0);
            l
        });
        let seq = rows(
            &chars,
            &[
                &[("w", 0.9)],
                &[("e", 0.9)],
                &[("n", 0.45), ("u", 0.5)],
                &[("t", 0.9)],
            ],
        );
        let (plain, _) = decoder.decode(&seq, 4, chars.len(), &Vocabulary::default());
        assert_eq!(plain, "weut");
        let mine = Vocabulary::new(["Went to the Wentworth office"]);
        let (text, _) = decoder.decode(&seq, 4, chars.len(), &mine);
        assert_eq!(text, "went");
    }

    #[test]
    fn the_lexicon_parses_log10_frequencies_and_looks_up_without_case() {
        let lexicon = Lexicon::parse("the\t-1.5\nthan\t-3\nbad line\nx\tnope\n");
        assert_eq!(lexicon.len(), 2);
        assert!((lexicon.get("The").unwrap() - (-1.5 * std::f32::consts::LN_10)).abs() < 1e-4);
        assert!(lexicon.get("tha").is_none());
        assert!(lexicon.get("thank").is_none());
    }

    #[test]
    fn the_notebook_scripts_are_allowed_and_others_are_not() {
        for c in ["a", "Z", "7", "?", "é", "ß", "ł", "€", "£", "°", "’", "–"] {
            assert!(allowed(c), "{c}");
        }
        for c in ["⑧", "□", "口", "中", "×", "¤", "¦", "☑", "√"] {
            assert!(!allowed(c), "{c}");
        }
    }
}
