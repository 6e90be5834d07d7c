//! The model's vocabulary as a compact hash table over the vocabulary text compiled into the
//! binary: 4 bytes per token and 4 per slot (a `HashMap<&str, u32>` of the 60,522 tokens took
//! 3.3 MB of a server's heap; this, under 0.8 MB).

/// Token ids by their text. A token's id is its line number in the vocabulary text; a token
/// listed twice has the id of its last line (as collecting into a map gives).
pub(super) struct Vocab {
    text: &'static str,
    /// Token `i` is `text[starts[i]..starts[i + 1] - 1]` (each is followed by one `\n`; the
    /// last start is one past the text's end).
    starts: Vec<u32>,
    /// Open addressing with linear probing: a token's id + 1, 0 for an empty slot. A power of
    /// two at least twice the tokens, so probes stay short.
    slots: Vec<u32>,
}

/// FNV-1a, 64 bits: tokens are a few bytes, and the table is built from the binary's own
/// vocabulary, so a keyed hash buys nothing here.
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Vocab {
    /// The vocabulary of `text`, one token per line. `None` when it holds more tokens or bytes
    /// than 32-bit ids and offsets reach.
    pub fn new(text: &'static str) -> Option<Vocab> {
        if text.len() >= u32::MAX as usize {
            return None;
        }
        let mut starts = vec![0u32];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        starts.push(text.len() as u32 + 1);
        let n = starts.len() - 1;
        let size = (2 * n).next_power_of_two();
        let mut vocab = Vocab {
            text,
            starts,
            slots: vec![0; size],
        };
        for id in 0..n as u32 {
            let slot = vocab.find(vocab.token(id));
            vocab.slots[slot] = id + 1;
        }
        Some(vocab)
    }

    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// The text of token `id` (`id` < [`Vocab::len`]).
    pub fn token(&self, id: u32) -> &'static str {
        let (from, to) = (self.starts[id as usize], self.starts[id as usize + 1] - 1);
        &self.text[from as usize..to as usize]
    }

    /// The slot holding `piece`, or the empty slot where it would go.
    fn find(&self, piece: &str) -> usize {
        let mask = self.slots.len() - 1;
        let mut slot = hash(piece) as usize & mask;
        loop {
            match self.slots[slot] {
                0 => return slot,
                id if self.token(id - 1) == piece => return slot,
                _ => slot = (slot + 1) & mask,
            }
        }
    }

    /// The id of `piece`, if it is a token.
    pub fn get(&self, piece: &str) -> Option<u32> {
        self.slots[self.find(piece)].checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn finds_what_a_map_of_the_lines_finds() {
        let text = "[PAD]\n[UNK]\nthe\n##s\ncafe\n\nthe\nophthalmologist";
        let vocab = Vocab::new(text).expect("vocabulary");
        let map: HashMap<&str, u32> = text
            .split('\n')
            .enumerate()
            .map(|(i, t)| (t, i as u32))
            .collect();
        assert_eq!(vocab.len(), 8);
        for (token, id) in &map {
            assert_eq!(vocab.get(token), Some(*id), "{token:?}");
        }
        // A repeated token has its last line's id, and an empty line is a token too.
        assert_eq!(vocab.get("the"), Some(6));
        assert_eq!(vocab.get(""), Some(5));
        assert_eq!(vocab.token(7), "ophthalmologist");
        for missing in ["th", "thes", "##", "Cafe", "ophthalmologists"] {
            assert_eq!(vocab.get(missing), None, "{missing:?}");
        }
    }

    #[test]
    fn the_built_in_vocabulary_agrees_with_a_map() {
        let m = super::super::model().expect("model");
        for id in (0..m.vocab.len() as u32).step_by(97) {
            let token = m.vocab.token(id);
            assert_eq!(m.vocab.get(token), Some(id), "{token:?}");
        }
    }
}
