#!/usr/bin/env python3
"""Notebook pages of REAL handwriting (not fonts) with ground truth, for scoring nib's OCR.

Every line on a page is real handwriting of one writer with its exact transcript, taken from
public sources that were fetched beside this repository (never committed; see README.md):

  * tablet ink: online pen strokes (IAM-OnDB lines) rendered as smooth antialiased pen lines;
  * paper scans: IAM line/word images, when an IAM-derived mirror with images and labels is
    present (`--mirror`), placed with their background lightened to white.

A page: heading (larger, sometimes underlined), hand-drawn checkbox tasks (open / done),
bullets, one sentence -- the layout of tests/ocr/generate.py's font pages -- and
`STEM.truth.json` in the format of tests/ocr/README.md plus `style`, `writer`, `source`.

    build.py --out .data/ocr-real --seed 46 [--photo] [--mirror /work/.mirror]

The same arguments give the same bytes (pinned numpy and Pillow).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import math
import pickle
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

ROOT = Path(__file__).resolve().parents[3]
CACHE = ROOT / ".data" / "ocr-real-cache"
PAGE_W, PAGE_H = 1404, 1872

# ---- Exclusions (the held-out set uses these; never take anything from them) ------------------

EXCLUDED_IAM_FORMS = {"a01-063", "r06-137"}  # any line/word image of these forms (any variant letter)
EXCLUDED_REPOS = {
    "githubharald+WordDetector",
    "githubharald+HTRPipeline",
    "sjvasquez+handwriting-synthesis",
}


def excluded_id(item_id: str) -> bool:
    """True for an IAM id (form, line or word) of an excluded form: a01-063u-04, r06-137-02-01..."""
    parts = item_id.split("-")
    if len(parts) < 2:
        return False
    form = parts[0] + "-" + parts[1][:3]
    return form in EXCLUDED_IAM_FORMS


# ---- Sources ---------------------------------------------------------------------------------

# A source: the fetch name, what it holds, its licence, and a loader giving Writer objects.
SOURCES = {
    "grzego": {
        "fetch": "github:Grzego/handwriting-generation",
        "dir": "Grzego+handwriting-generation",
        "what": "data/styles.pkl: 8 IAM-OnDB text lines (pen strokes + transcript), one per writer",
        "licence": "repository MIT; the strokes are IAM-OnDB (non-commercial research use only)",
    },
    # Labels only (no images): IAM ascii/lines.txt (all 13353 lines: id, binarisation grey level,
    # bbox, transcript) and forms_for_parsing.txt (form -> writer id).
    "iam-lines-txt": {
        "fetch": "github:Tyrian0/IAM_a_reader",
        "dir": "Tyrian0+IAM_a_reader",
        "what": "data/lines.txt: the IAM lines.txt label file (transcripts of every IAM line)",
        "licence": "repository has no licence file; the labels are IAM (non-commercial research use only)",
    },
    "iam-forms-txt": {
        "fetch": "github:sakshi101-tannirwar/Handwritting_Classifier-",
        "dir": "sakshi101-tannirwar+Handwritting_Classifier-",
        "what": "forms_for_parsing.txt: IAM form id -> writer id",
        "licence": "repository has no licence file; the table is IAM (non-commercial research use only)",
    },
    # Paper scans: IAM line images bundled as demo/test inputs, labelled through lines.txt.
    "tuandoan": {
        "fetch": "github:tuandoan998/Handwritten-Text-Recognition",
        "dir": "tuandoan998+Handwritten-Text-Recognition",
        "what": "Demo/images + Resource/test_img: 9 IAM line images (8 lines, 8 writers)",
        "licence": "repository has no licence file; the images are IAM (non-commercial research use only)",
    },
}

# IAM line images of `tuandoan`: path -> IAM line id. Named files carry their id; the unnamed ones
# were identified by their size, which equals the line's bbox w x h in lines.txt, and checked by eye
# against the transcript (1661x89 also fits k07-077-00; the ink reads "A MOVE to stop ...").
TUANDOAN_LINES = {
    "Resource/test_img/1.png": "a01-000u-00",
    "Resource/test_img/2.png": "a01-003x-05",
    "Resource/test_img/4.png": "c02-000-00",
    "Resource/test_img/3.png": "c02-000-03",
    "Demo/images/a02-004-01.png": "a02-004-01",
    "Demo/images/a02-012-00.png": "a02-012-00",
    "Demo/images/a03-009-00.png": "a03-009-00",
    "Demo/images/b02-035-00.png": "b02-035-00",
    "Demo/images/c01-009-00.png": "c01-009-00",
}

# Style of each IAM writer, by looking at their lines (rule: `print` = letters mostly separate and
# upright; `cursive` = most letters of a word joined, usually slanted and fast; `mixed` = words
# partly joined, partly printed).
IAM_STYLE = {
    "000": "print",    # a01-000u: block capitals + separate lower case
    "003": "print",    # a01-003x: upright, some joins
    "022": "print",    # a02-004: separate letters, light slant
    "024": "cursive",  # a02-012: joined, round
    "041": "cursive",  # a03-009: fast, strongly slanted, joined
    "095": "cursive",  # b02-035: joined, slanted
    "135": "print",    # c01-009: neat print, large
    "137": "cursive",  # c02-000: joined words next to printed ones
}


@dataclass
class Run:
    """A run of consecutive words of one writer: an ink image (L, 0 = ink, 255 = paper) + text."""

    text: str
    ink: Image.Image  # mode "L", white background
    xheight: float  # estimated x-height in the image's pixels
    item: str  # source id of the line it came from


@dataclass
class Writer:
    wid: str
    style: str  # print / cursive / mixed / tablet
    source: str
    lines: list  # list[list[Run]]: per source line, its word runs (one per word), in order


def git_show(mirror: Path, repo_dir: str, path: str) -> bytes:
    gd = mirror / repo_dir / "repo"
    if not gd.exists():
        gd = mirror / repo_dir
    out = subprocess.run(
        ["git", "--git-dir", str(gd), "show", f"HEAD:{path}"], capture_output=True, check=True
    )
    return out.stdout


def cached(mirror: Path, key: str, path: str) -> Path:
    src = SOURCES[key]
    dest = CACHE / src["dir"] / path
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(git_show(mirror, src["dir"], path))
    return dest


def available(mirror: Path, key: str) -> bool:
    d = SOURCES[key]["dir"]
    if d in EXCLUDED_REPOS:
        return False
    return (mirror / d / "repo").exists() or (mirror / d).exists()


# ---- Tablet ink from strokes -----------------------------------------------------------------


def strokes_from_offsets(arr: np.ndarray) -> list[np.ndarray]:
    """Graves-style (dx, dy, end-of-stroke) rows -> list of absolute point arrays."""
    arr = np.asarray(arr, dtype=np.float64)
    xy = np.cumsum(arr[:, :2], axis=0)
    out, cur = [], []
    for p, e in zip(xy, arr[:, 2]):
        cur.append(p)
        if e > 0.5:
            if len(cur) > 0:
                out.append(np.array(cur))
            cur = []
    if cur:
        out.append(np.array(cur))
    return [s for s in out if len(s) >= 1]


def split_words(strokes: list[np.ndarray], n_words: int) -> list[list[np.ndarray]] | None:
    """Groups strokes into n_words words at the n_words-1 widest horizontal gaps."""
    if n_words == 1:
        return [strokes]
    spans = sorted(((s[:, 0].min(), s[:, 0].max(), i) for i, s in enumerate(strokes)))
    clusters, cur, right = [], [spans[0]], spans[0][1]
    gaps = []
    for lo, hi, i in spans[1:]:
        if lo > right:
            gaps.append((lo - right, len(clusters)))
            clusters.append(cur)
            cur = [(lo, hi, i)]
        else:
            cur.append((lo, hi, i))
        right = max(right, hi)
    clusters.append(cur)
    if len(clusters) < n_words:
        return None
    # keep the n_words-1 widest gaps as word boundaries
    widest = sorted(gaps, reverse=True)[: n_words - 1]
    cuts = sorted(idx for _, idx in widest)
    words, start = [], 0
    for c in cuts + [len(clusters) - 1]:
        group = [strokes[i] for cl in clusters[start : c + 1] for _, _, i in cl]
        words.append(group)
        start = c + 1
    return words


def render_strokes(strokes: list[np.ndarray], scale: float, width: float, ss: int = 3) -> Image.Image:
    """Draws strokes (already in page pixels after `scale`) at ss x and downsamples (antialiasing)."""
    pts = np.concatenate(strokes)
    lo = pts.min(axis=0)
    pad = width * 2 + 4
    size = ((pts.max(axis=0) - lo) * scale + 2 * pad).astype(int) + 1
    img = Image.new("L", (int(size[0]) * ss, int(size[1]) * ss), 255)
    d = ImageDraw.Draw(img)
    w = max(1, int(round(width * ss)))
    for s in strokes:
        p = [((x - lo[0]) * scale * ss + pad * ss, (y - lo[1]) * scale * ss + pad * ss) for x, y in s]
        if len(p) == 1:
            x, y = p[0]
            d.ellipse([x - w / 2, y - w / 2, x + w / 2, y + w / 2], fill=0)
            continue
        d.line(p, fill=0, width=w, joint="curve")
        for x, y in (p[0], p[-1]):
            d.ellipse([x - w / 2, y - w / 2, x + w / 2, y + w / 2], fill=0)
    return img.resize((img.width // ss, img.height // ss), Image.LANCZOS)


def load_grzego(mirror: Path) -> list[Writer]:
    d = pickle.loads(cached(mirror, "grzego", "data/styles.pkl").read_bytes(), encoding="latin1")
    writers = []
    for i, (arr, _codes, text) in enumerate(zip(d[0], d[1], d[2])):
        text = str(text).strip()
        strokes = strokes_from_offsets(np.asarray(arr))
        words_txt = text.split()
        groups = split_words(strokes, len(words_txt))
        if groups is None:
            continue
        # x-height estimate of the raw strokes: median of word heights of lowercase-ish words * 0.5
        hs = [np.ptp(np.concatenate(g)[:, 1]) for g in groups]
        xh_raw = float(np.median(hs)) * 0.5
        writers.append(
            Writer(
                wid=f"iamondb-grzego-{i}",
                style="tablet",
                source="github:Grzego/handwriting-generation data/styles.pkl (IAM-OnDB)",
                lines=[[("strokes", g, w, xh_raw, f"styles.pkl#{i}") for g, w in zip(groups, words_txt)]],
            )
        )
    return writers


# ---- Paper scans (IAM line images) ----------------------------------------------------------


def iam_labels(mirror: Path) -> tuple[dict, dict]:
    """lines.txt -> {line id: (grey level, text)}; forms_for_parsing.txt -> {form id: writer}."""
    lines = {}
    for raw in cached(mirror, "iam-lines-txt", "data/lines.txt").read_text(encoding="utf-8", errors="replace").splitlines():
        if raw.startswith("#") or not raw.strip():
            continue
        p = raw.split(" ")
        if len(p) < 9 or not p[2].isdigit():
            continue
        text = " ".join(p[8:]).replace("|", " ").replace("&quot;", '"')
        lines[p[0]] = (int(p[2]), " ".join(text.split()))
    forms = {}
    for raw in cached(mirror, "iam-forms-txt", "forms_for_parsing.txt").read_text().splitlines():
        p = raw.split()
        if len(p) >= 2:
            forms[p[0]] = p[1]
    return lines, forms


def ink_columns_split(a: np.ndarray, n_words: int) -> list[tuple[int, int]] | None:
    """Splits a line (bool ink mask, rows x cols) into n_words column spans at the widest gaps."""
    cols = np.flatnonzero(a.sum(axis=0) > 0)
    if len(cols) == 0:
        return None
    runs, start, prev = [], cols[0], cols[0]
    for c in cols[1:]:
        if c > prev + 1:
            runs.append((start, prev))
            start = c
        prev = c
    runs.append((start, prev))
    if len(runs) < n_words:
        return None
    gaps = sorted(((runs[i + 1][0] - runs[i][1], i) for i in range(len(runs) - 1)), reverse=True)
    cuts = sorted(i for _, i in gaps[: n_words - 1])
    spans, first = [], 0
    for c in cuts + [len(runs) - 1]:
        spans.append((runs[first][0], runs[c][1]))
        first = c + 1
    return spans


def scan_line_words(img: Image.Image, grey: int, text: str, item: str) -> list[tuple] | None:
    """An IAM line image -> word specs ("image", word ink, word, raw x-height, id).

    The paper is lightened to white: pixels brighter than the form's binarisation grey level
    (lines.txt) fade to 255, darker ones keep their tone (stretched so the darkest ink is ~0)."""
    a = np.asarray(img.convert("L"), dtype=np.float32)
    hi = min(float(grey) + 20.0, 240.0)
    lo = float(np.percentile(a[a < grey], 5)) if (a < grey).any() else 0.0
    light = np.clip((a - lo) / max(hi - lo, 1.0), 0, 1) * 255.0
    ink = a < grey
    # drop specks: columns/rows with a single ink pixel do not count
    rows = np.flatnonzero(ink.sum(axis=1) > 1)
    if len(rows) == 0:
        return None
    r0, r1 = rows[0], rows[-1] + 1
    ink, light = ink[r0:r1], light[r0:r1]
    words = text.split()
    spans = ink_columns_split(ink, len(words))
    if spans is None:
        return None
    prof = ink.sum(axis=1).astype(np.float64)
    band = prof >= 0.4 * prof.max()
    # x-height: the longest run of dense rows (the body of the lower-case letters)
    best, cur = 0, 0
    for b in band:
        cur = cur + 1 if b else 0
        best = max(best, cur)
    xh_raw = float(max(best, 8))
    # A split is trusted only when every word is about as wide per letter as the others (a
    # word glued to its neighbour or a stray dot cut off as a word is not); otherwise the line
    # is kept whole, as one run.
    per_char = [(c1 - c0 + 1) / max(len(w), 1) for (c0, c1), w in zip(spans, words)]
    median = float(np.median(per_char))
    if any(not (0.45 * median <= p <= 2.2 * median) for p in per_char):
        cols = np.flatnonzero(ink.sum(axis=0) > 0)
        spans, words = [(int(cols[0]), int(cols[-1]))], [" ".join(words)]
    out = []
    for (c0, c1), w in zip(spans, words):
        crop = light[:, max(0, c0 - 2) : c1 + 3]
        out.append(("image", Image.fromarray(crop.astype(np.uint8), "L"), w, xh_raw, item))
    return out


def load_tuandoan(mirror: Path) -> list[Writer]:
    lines, forms = iam_labels(mirror)
    by_writer: dict[str, list] = {}
    for path, lid in sorted(TUANDOAN_LINES.items(), key=lambda kv: kv[1]):
        if excluded_id(lid) or lid not in lines:
            continue
        form = "-".join(lid.split("-")[:2])
        wid = forms.get(form)
        if wid is None:
            continue
        grey, text = lines[lid]
        img = Image.open(cached(mirror, "tuandoan", path))
        specs = scan_line_words(img, grey, text, lid)
        if specs:
            by_writer.setdefault(wid, []).append(specs)
    return [
        Writer(
            wid=f"iam-{wid}",
            style=IAM_STYLE.get(wid, "mixed"),
            source="github:tuandoan998/Handwritten-Text-Recognition (IAM lines %s)" % ", ".join(s[0][4] for s in ls),
            lines=ls,
        )
        for wid, ls in sorted(by_writer.items())
    ]


# ---- Page drawing ----------------------------------------------------------------------------


def wobbly(pts, nrng: np.random.Generator, amp: float, step: float = 5.0):
    out = []
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        n = max(2, int(math.hypot(x1 - x0, y1 - y0) / step))
        for k in range(n):
            t = k / n
            out.append((x0 + (x1 - x0) * t + nrng.normal(0, amp), y0 + (y1 - y0) * t + nrng.normal(0, amp)))
    out.append(pts[-1])
    return out


def pen_line(img: Image.Image, pts, width: float, ink, ss: int = 3):
    """Antialiased polyline onto an RGB page (drawn on a small supersampled patch)."""
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    x0, y0 = int(min(xs) - width * 2 - 2), int(min(ys) - width * 2 - 2)
    x1, y1 = int(max(xs) + width * 2 + 3), int(max(ys) + width * 2 + 3)
    mask = Image.new("L", ((x1 - x0) * ss, (y1 - y0) * ss), 0)
    d = ImageDraw.Draw(mask)
    q = [((x - x0) * ss, (y - y0) * ss) for x, y in pts]
    w = max(1, int(round(width * ss)))
    d.line(q, fill=255, width=w, joint="curve")
    for x, y in (q[0], q[-1]):
        d.ellipse([x - w / 2, y - w / 2, x + w / 2, y + w / 2], fill=255)
    mask = mask.resize((x1 - x0, y1 - y0), Image.LANCZOS)
    img.paste(Image.new("RGB", mask.size, ink), (x0, y0), mask)


def paste_ink(page: Image.Image, ink_l: Image.Image, x: int, y: int, color, keep_gray: bool):
    """Ink image (L, white paper) onto the page: alpha = darkness; colour from the pen."""
    a = np.asarray(ink_l, dtype=np.float32)
    alpha = np.clip((255.0 - a) / 255.0, 0, 1)
    if keep_gray:
        # scans: keep the ink's own tone, lighten the background to white
        alpha = np.clip((alpha - 0.12) / 0.88, 0, 1) ** 0.9
    mask = Image.fromarray((alpha * 255).astype(np.uint8))
    page.paste(Image.new("RGB", ink_l.size, color), (x, y), mask)


def draw_box(page, rng, nrng, x, y, s, ink, width):
    c = [(x, y), (x + s, y + rng.uniform(-2, 2)), (x + s + rng.uniform(-2, 2), y + s), (x, y + s + rng.uniform(-2, 2)), (x, y)]
    pen_line(page, wobbly(c, nrng, 0.7), width, ink)


def draw_done(page, rng, nrng, x, y, s, ink, width) -> str:
    kind = rng.choice(["check", "check", "x", "check-big"])
    if kind == "x":
        pen_line(page, wobbly([(x + 3, y + 3), (x + s - 3, y + s - 3)], nrng, 0.6), width, ink)
        pen_line(page, wobbly([(x + s - 3, y + 3), (x + 3, y + s - 3)], nrng, 0.6), width, ink)
    else:
        big = 1.6 if kind == "check-big" else 1.0
        pts = [(x + s * 0.15, y + s * 0.5), (x + s * 0.42, y + s * 0.85), (x + s * (0.9 * big), y + s * (1 - 1.05 * big))]
        pen_line(page, wobbly(pts, nrng, 0.6), width * 1.1, ink)
    return kind


def build_ink(run_spec, target_xh: float, style: str, rng: random.Random):
    """(kind, payload, text, xh_raw, id) -> Run scaled to the page x-height."""
    kind, payload, text, xh_raw, item = run_spec
    scale = target_xh / max(xh_raw, 1e-6)
    if kind == "strokes":
        width = rng.uniform(2.2, 3.6)
        img = render_strokes(payload, scale, width)
    else:  # image (L)
        img = payload.resize((max(1, int(payload.width * scale)), max(1, int(payload.height * scale))), Image.LANCZOS)
    return Run(text=text, ink=img, xheight=target_xh, item=item)


def join_runs(runs: list[Run], gap: int) -> Run:
    """Consecutive words side by side on a common baseline-ish (bottom of the x-height band)."""
    if len(runs) == 1:
        return runs[0]
    h = max(r.ink.height for r in runs)
    w = sum(r.ink.width for r in runs) + gap * (len(runs) - 1)
    img = Image.new("L", (w, h), 255)
    x = 0
    for r in runs:
        img.paste(r.ink, (x, (h - r.ink.height) // 2))
        x += r.ink.width + gap
    return Run(" ".join(r.text for r in runs), img, runs[0].xheight, runs[0].item)


def plan_chunks(n: int, rng: random.Random) -> list[tuple[str, int]]:
    """Splits n words of a writer into (kind, word count) chunks, top to bottom: a one-word
    heading, tasks of two or three words (short phrases, as tasks are), a bullet, a sentence."""
    if n < 4:
        return []
    rest = n - 1
    sentence = 2 if rest >= 5 else 1
    rest -= sentence
    n_bullets = 1 if rest >= 3 else 0
    rest -= n_bullets
    tasks = []
    while rest > 0:
        k = min(rest, rng.choice((2, 2, 3)))
        tasks.append(k)
        rest -= k
    return [("heading", 1)] + [("task", k) for k in tasks] + [("bullet", 1)] * n_bullets + [("text", sentence)]


def plan_mixed(writers: list, rng: random.Random) -> list[tuple[str, list]]:
    """A page of several writers' lines, as the held-out set's "mixed writers" pages: a heading
    of one or two words, three to five tasks and one or two bullets of two to four consecutive
    words each, and a whole line as the sentence; each part from a writer drawn at random."""
    def run(lo: int, hi: int) -> list:
        w = rng.choice(writers)
        line = rng.choice(w.lines)
        k = min(len(line), rng.randint(lo, hi))
        start = rng.randint(0, len(line) - k)
        return [(spec, w.style) for spec in line[start : start + k]]

    chunks = [("heading", run(1, 2))]
    chunks += [("task", run(2, 4)) for _ in range(rng.randint(3, 5))]
    chunks += [("bullet", run(2, 4)) for _ in range(rng.randint(1, 2))]
    w = rng.choice(writers)
    chunks.append(("text", [(spec, w.style) for spec in rng.choice(w.lines)]))
    return chunks


INKS = [(18, 22, 30), (20, 35, 110), (25, 45, 140), (10, 10, 12), (40, 40, 48)]


def paper(rng: random.Random, nrng: np.random.Generator) -> Image.Image:
    base = rng.randint(246, 253)
    a = np.full((PAGE_H, PAGE_W, 3), base, np.float32)
    a += nrng.normal(0, 1.6, (PAGE_H, PAGE_W, 1))
    a[..., 2] -= rng.uniform(0, 3)
    return Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))


def make_page(writer: Writer, runs_by_line: list[list[tuple]], stem: str, rng: random.Random, nrng):
    """One writer's page: their words cut into a heading, tasks, a bullet and a sentence."""
    words = [w for line in runs_by_line for w in line]
    chunks, i = [], 0
    for kind, k in plan_chunks(len(words), rng):
        chunks.append((kind, [(spec, writer.style) for spec in words[i : i + k]]))
        i += k
    return draw_page(chunks, stem, writer.style, writer.wid, writer.source, rng, nrng)


def draw_page(chunks, stem: str, style: str, wid: str, source: str, rng: random.Random, nrng):
    """The page of `chunks` ((kind, [(word spec, writer style)]), top to bottom) and its truth."""
    page = paper(rng, nrng)
    ink = rng.choice(INKS)
    xh = rng.uniform(15, 22)  # x-height in page px (lines ~40-70 px tall)
    lines_out = []
    x_left = rng.randint(110, 170)
    y = rng.randint(120, 170)
    pen_w = rng.uniform(2.2, 3.2)
    for kind, specs in chunks:
        t_xh = xh * (1.45 if kind == "heading" else 1.0)
        runs = [build_ink(spec, t_xh, st, rng) for spec, st in specs]
        tablet = specs[0][1] == "tablet"
        run = join_runs(runs, gap=int(t_xh * rng.uniform(1.2, 1.8)))
        if run.ink.width > PAGE_W - x_left - 120:
            f = (PAGE_W - x_left - 120) / run.ink.width
            run.ink = run.ink.resize((int(run.ink.width * f), max(1, int(run.ink.height * f))), Image.LANCZOS)
        x = x_left
        mark = None
        status = None
        h = run.ink.height
        if kind == "task":
            s = int(xh * rng.uniform(1.6, 2.3))
            by = y + (h - s) // 2
            draw_box(page, rng, nrng, x, by, s, ink, pen_w)
            status = "done" if rng.random() < 0.45 else "open"
            mark = "box-empty" if status == "open" else draw_done(page, rng, nrng, x, by, s, ink, pen_w)
            x += s + int(xh * rng.uniform(0.9, 1.5))
        elif kind == "bullet":
            cy = y + h // 2
            if rng.random() < 0.5:
                r = pen_w * 1.3
                pen_line(page, [(x + 6, cy), (x + 6.5, cy + 0.5)], r * 2, ink)
                mark = "dot"
            else:
                pen_line(page, wobbly([(x, cy), (x + xh * 1.1, cy + rng.uniform(-1, 1))], nrng, 0.4), pen_w, ink)
                mark = "dash"
            x += int(xh * 2.2)
        paste_ink(page, run.ink, x, y, ink, keep_gray=not tablet)
        if kind == "heading" and rng.random() < 0.6:
            uy = y + h + 4
            pen_line(page, wobbly([(x, uy), (x + run.ink.width, uy + rng.uniform(-3, 3))], nrng, 0.8), pen_w, ink)
            mark = "underline"
        line = {"kind": kind, "text": run.text, "status": status, "bbox": [int(x if kind in ("heading", "text") else x_left), int(y), int(x + run.ink.width - (x if kind in ("heading", "text") else x_left)), int(h)]}
        if mark:
            line["mark"] = mark
        lines_out.append(line)
        y += h + int(xh * rng.uniform(1.6, 2.6)) + (int(xh * 1.2) if kind == "heading" else 0)
    # light scanner noise
    a = np.asarray(page, dtype=np.float32) + nrng.normal(0, 2.0, (PAGE_H, PAGE_W, 1))
    page = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(0.4))
    truth = {
        "stem": stem,
        "date": stem,
        "width": PAGE_W,
        "height": PAGE_H,
        "font": "",
        "rotation_deg": 0.0,
        "format": "png",
        "style": style,
        "writer": wid,
        "source": source,
        "lines": lines_out,
    }
    return page, truth


# ---- Photo variant ---------------------------------------------------------------------------


def perspective_coeffs(src, dst):
    m = []
    for (x, y), (u, v) in zip(dst, src):
        m.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        m.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    b = np.array([c for p in src for c in p], dtype=np.float64)
    return np.linalg.solve(np.array(m, dtype=np.float64), b).tolist()


def photo(page: Image.Image, rng: random.Random, nrng) -> Image.Image:
    fw, fh = 1500, 2000
    base = np.array(rng.choice([(120, 90, 60), (150, 120, 90), (90, 80, 75), (170, 160, 150)]), np.float32)
    grain = nrng.normal(0, 1, (fh // 8, fw // 8)).astype(np.float32)
    grain = np.asarray(Image.fromarray(((grain + 4) * 30).clip(0, 255).astype(np.uint8)).resize((fw, fh), Image.BICUBIC), np.float32) / 255 - 0.5
    streak = np.sin(np.linspace(0, rng.uniform(20, 60), fw))[None, :] * 0.15
    desk = base[None, None, :] * (1 + 0.35 * (grain + streak)[..., None])
    frame = Image.fromarray(desk.clip(0, 255).astype(np.uint8))
    occ = rng.uniform(0.70, 0.85)
    pw = int(fh * occ * PAGE_W / PAGE_H)
    ph = int(fh * occ)
    ox, oy = (fw - pw) // 2, (fh - ph) // 2
    j = lambda s: rng.uniform(0.02, 0.06) * s * rng.choice([-1, 1])
    dst = [(ox + j(pw), oy + j(ph)), (ox + pw + j(pw), oy + j(ph)), (ox + pw + j(pw), oy + ph + j(ph)), (ox + j(pw), oy + ph + j(ph))]
    src = [(0, 0), (PAGE_W, 0), (PAGE_W, PAGE_H), (0, PAGE_H)]
    coeffs = perspective_coeffs(src, dst)
    warped = page.transform((fw, fh), Image.PERSPECTIVE, coeffs, Image.BICUBIC, fillcolor=(0, 0, 0))
    mask = Image.new("L", page.size, 255).transform((fw, fh), Image.PERSPECTIVE, coeffs, Image.BILINEAR, fillcolor=0)
    # soft drop shadow under the page
    shadow = mask.filter(ImageFilter.GaussianBlur(18))
    sh = np.asarray(shadow, np.float32) / 255
    dk = np.asarray(frame, np.float32) * (1 - 0.35 * np.roll(np.roll(sh, 12, 0), 8, 1)[..., None])
    frame = Image.fromarray(dk.clip(0, 255).astype(np.uint8))
    frame.paste(warped, (0, 0), mask)
    # shadow gradient across part of the frame (a hand / phone)
    yy, xx = np.mgrid[0:fh, 0:fw].astype(np.float32)
    ang = rng.uniform(0, 2 * math.pi)
    t = (xx * math.cos(ang) + yy * math.sin(ang)) / (fw + fh)
    t = (t - t.min()) / (t.max() - t.min())
    cut = rng.uniform(0.45, 0.75)
    g = 1 - rng.uniform(0.25, 0.45) * np.clip((t - cut) / 0.15, 0, 1)
    light = 0.92 + 0.08 * (1 - ((xx - fw / 2) ** 2 + (yy - fh / 2) ** 2) / ((fw / 2) ** 2 + (fh / 2) ** 2))
    a = np.asarray(frame, np.float32) * (g * light)[..., None]
    a += nrng.normal(0, 2.5, a.shape[:2])[..., None]
    frame = Image.fromarray(a.clip(0, 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(rng.uniform(0.6, 1.2)))
    return frame


# ---- Main ------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=46)
    ap.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--photo", action="store_true", help="write phone-photo JPEGs instead of flat PNGs")
    ap.add_argument("--start", default="2026-05-01", help="date (stem) of the first page")
    ap.add_argument("--mixed", type=int, default=24, help="pages of several writers' lines")
    args = ap.parse_args(argv)

    writers: list[Writer] = []
    missing = []
    for key, loader in (("grzego", load_grzego), ("tuandoan", load_tuandoan)):
        needs = [key] + (["iam-lines-txt", "iam-forms-txt"] if key != "grzego" else [])
        if all(available(args.mirror, k) for k in needs):
            writers += loader(args.mirror)
        else:
            missing += [SOURCES[k]["fetch"] for k in needs if not available(args.mirror, k)]
    if missing:
        print("build.py: sources not found under %s; fetch them first (the `fetch` tool):\n  %s"
              % (args.mirror, "\n  ".join(missing)), file=sys.stderr)
        if not writers:
            return 2
    writers.sort(key=lambda w: w.wid)
    args.out.mkdir(parents=True, exist_ok=True)
    day = datetime.date.fromisoformat(args.start)
    n = 0
    # One page per writer, then pages of several writers' lines ("mixed").
    plans = [("writer", w) for w in writers if plan_chunks(sum(len(l) for l in w.lines), random.Random(0))]
    plans += [("mixed", i) for i in range(args.mixed)]
    for what, w in plans:
        key = w.wid if what == "writer" else f"mixed-{w}"
        seed = int(hashlib.sha256(f"{args.seed}:{key}".encode()).hexdigest()[:12], 16)
        rng = random.Random(seed)
        nrng = np.random.default_rng(seed)
        stem = (day + datetime.timedelta(days=n)).isoformat()
        if what == "writer":
            page, truth = make_page(w, w.lines, stem, rng, nrng)
        else:
            chunks = plan_mixed(writers, rng)
            ids = sorted({c for _, specs in chunks for c in {spec[4] for spec, _ in specs}})
            page, truth = draw_page(chunks, stem, "mixed", "several", "lines " + ", ".join(ids), rng, nrng)
        if args.photo:
            img = photo(page, rng, nrng)
            truth.update({"variant": "photo", "format": "jpg", "width": img.width, "height": img.height})
            for line in truth["lines"]:
                line.pop("bbox", None)
            img.save(args.out / f"{stem}.jpg", quality=80)
        else:
            page.save(args.out / f"{stem}.png", optimize=False)
        (args.out / f"{stem}.truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
        n += 1
    print(f"build.py: {n} pages into {args.out} from {len(writers)} writers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
