#!/usr/bin/env python3
"""Fits the checkbox model of `shared/ocr/src/layout.rs` (`BOX_WEIGHTS`) on generated pages.

For every line of a page, the layout finds the square best covered by ink left of (or at the
start of) the words, and a logistic model over that square's features decides whether it is a
drawn box or a square in the strokes of letters (an outlined N, the bowl of an R, a boxy
capital). This script learns that model from pages with known truth:

    make ocr-pages OCR_EVAL_DIR=.data/ocr-fit OCR_SEED=777 OCR_PAGES=100
    NIB_OCR_FEATURES=1 target/release/nib-ocr-eval .data/ocr-fit --workers 1 2> features.txt
    .venv/bin/python tests/ocr/fit_checkbox.py features.txt .data/ocr-fit

`nib-ocr-eval` prints `PAGE <stem>#<n>` before each page and `FEAT <cy> <features...>` (or
`NA` when no square was found) for each line. A line is labelled a task when the truth line
whose box holds its centre is a task. The script prints the page-grouped 5-fold
cross-validated precision/recall of the model (lines, not the engine's text) and the weights
to paste into `BOX_WEIGHTS`; score the result on pages of another seed (`make ocr-eval`).
"""

import json
import sys

import numpy as np

# The order of `Features::inputs` in layout.rs.
NAMES = [
    "score", "corners", "rel_side", "abs_rel_bottom", "pos_rel_bottom", "no_body", "left",
    "above", "below", "right_gap", "left_clean", "above_clean", "below_clean", "bias",
]


def inputs(f):
    score, corners, rel_side, rel_bottom, *rest = f
    known = not np.isnan(rel_side)
    if not known:
        rel_side, rel_bottom = 1.3, 0.0
    return [score, corners, min(rel_side, 2.5), abs(rel_bottom), max(rel_bottom, 0.0),
            0.0 if known else 1.0, *rest, 1.0]


def truth_lines(truth_dir, page):
    stem, n = page.rsplit("#", 1)
    with open(f"{truth_dir}/{stem}.truth.json") as f:
        t = json.load(f)
    return (t["pages"][int(n) - 1] if "pages" in t else t)["lines"]


def label(lines, cy):
    """The kind of the truth line whose box holds cy (the nearest centre when several do)."""
    best = None
    for line in lines:
        x, y, w, h = line["bbox"]
        if y <= cy <= y + h:
            d = abs(y + h / 2 - cy)
            if best is None or d < best[0]:
                best = (d, line["kind"])
    return best and best[1]


def load(features_path, truth_dir):
    rows = []  # (page index, inputs or None, is task)
    pages, lines = [], []
    with open(features_path) as f:
        for raw in f:
            parts = raw.rstrip("\n").split("\t")
            if parts[0] == "PAGE":
                pages.append(parts[1])
                lines = truth_lines(truth_dir, parts[1])
            elif parts[0] == "FEAT" and pages:
                kind = label(lines, float(parts[1]))
                if kind is None:
                    continue
                x = None if parts[2] == "NA" else inputs([float(v) for v in parts[2:]])
                rows.append((len(pages) - 1, x, kind == "task"))
    return rows


def fit(x, y, l2=1e-2, steps=3000, rate=0.5):
    w = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-x @ w))
        g = x.T @ (p - y) / len(y) + l2 * w
        g[-1] -= l2 * w[-1]
        w -= rate * g
    return w


def main():
    rows = load(sys.argv[1], sys.argv[2])
    found = [r for r in rows if r[1] is not None]
    missed = sum(1 for r in rows if r[1] is None and r[2])
    x = np.array([r[1] for r in found])
    y = np.array([1.0 if r[2] else 0.0 for r in found])
    page = np.array([r[0] for r in found])
    mu, sd = x[:, :-1].mean(0), x[:, :-1].std(0) + 1e-6

    def norm(v):
        z = v.copy()
        z[:, :-1] = (v[:, :-1] - mu) / sd
        return z

    z = norm(x)
    tp = fp = fn = 0
    for k in range(5):
        test = page % 5 == k
        w = fit(z[~test], y[~test])
        p = z[test] @ w > 0
        tp += np.sum(p & (y[test] == 1))
        fp += np.sum(p & (y[test] == 0))
        fn += np.sum(~p & (y[test] == 1))
    fn += missed
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    print(f"{len(rows)} lines, {int(y.sum()) + missed} tasks ({missed} without any square)")
    print(f"5-fold by page: P {precision:.3f} R {recall:.3f} "
          f"F1 {2 * precision * recall / (precision + recall):.3f}")
    w = fit(z, y)
    raw = w.copy()
    raw[:-1] = w[:-1] / sd
    raw[-1] = w[-1] - np.sum(w[:-1] * mu / sd)
    for name, v in zip(NAMES, raw):
        print(f"  {name:15s} {v:+.4f}")
    print("const BOX_WEIGHTS: [f32; 14] = [" + ", ".join(f"{v:.4f}" for v in raw) + "];")


if __name__ == "__main__":
    main()
