//! BERT's uncased tokenizer: basic tokenization (lower case, accents stripped, punctuation and
//! CJK characters split off) and WordPiece (greedy longest match, `##` continuations), as
//! `tests/search/minilm.py` does it for distillation.

use super::vocab::Vocab;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Words longer than this are one unknown token (BERT's `max_input_chars_per_word`).
const MAX_WORD_CHARS: usize = 100;

fn is_punct(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(c as u32,
            0x00A1 | 0x00A7 | 0x00AB | 0x00B6 | 0x00B7 | 0x00BB | 0x00BF
            | 0x2010..=0x2027 | 0x2030..=0x205E | 0x3001..=0x3003 | 0x3008..=0x3011
            | 0x3014..=0x301F | 0xFF01..=0xFF0F | 0xFF1A..=0xFF20)
}

pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// Lower-cased, accent-free words and single punctuation or CJK characters.
pub fn basic_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let lower: String = text.chars().flat_map(char::to_lowercase).collect();
    for c in lower.nfd() {
        if c == '\0' || c == '\u{FFFD}' || (c.is_control() && !c.is_whitespace()) {
            continue;
        }
        if is_combining_mark(c) {
            continue;
        }
        if c.is_whitespace() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        } else if is_punct(c) || is_cjk(c) {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            out.push(c.to_string());
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Appends the WordPiece ids of one basic token (or the unknown token's, or nothing if the
/// vocabulary has none).
pub(super) fn pieces(word: &str, vocab: &Vocab, out: &mut Vec<u32>) {
    let unk = vocab.get("[UNK]");
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    if chars.len() > MAX_WORD_CHARS {
        out.extend(unk);
        return;
    }
    let mark = out.len();
    let mut start = 0;
    let mut piece = String::new();
    while start < chars.len() {
        let mut end = chars.len();
        let mut found = None;
        while start < end {
            let from = chars[start].0;
            let to = chars.get(end).map_or(word.len(), |c| c.0);
            piece.clear();
            if start > 0 {
                piece.push_str("##");
            }
            piece.push_str(&word[from..to]);
            if let Some(id) = vocab.get(piece.as_str()) {
                found = Some(id);
                break;
            }
            end -= 1;
        }
        match found {
            Some(id) => {
                out.push(id);
                start = end;
            }
            None => {
                out.truncate(mark);
                out.extend(unk);
                return;
            }
        }
    }
}
