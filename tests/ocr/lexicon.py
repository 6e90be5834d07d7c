#!/usr/bin/env python3
"""The local OCR engine's word list: English words with their frequencies, from the pinned PyPI
wheel of `wordfreq` (Apache-2.0 code; its word lists CC-BY-SA 4.0), the same wheel the search
model is derived from (tests/tools/requirements-embed.txt).

    lexicon.py --words wordfreq-3.1.1-py3-none-any.whl --out lexicon.tsv [--count 120000]

writes `word<TAB>log10 frequency` for the --count most frequent words of wordfreq's large English
list that are written with letters (and an apostrophe inside), lower-cased, most frequent first.
`ocr::decode` scores each word the recogniser spells with it (a word's prior in the CTC beam
search). The list is read at run time from the OCR engine's folder, like the models; nothing of
it is committed or compiled in.
"""

import argparse
import gzip
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "search"))
from minilm import read_msgpack  # noqa: E402  (the msgpack subset wordfreq's lists use)


def words(wheel):
    """(word, log10 frequency), most frequent first: wordfreq's lists are buckets of words a
    centibel apart (bucket i holds the words of frequency 10^(-i/100))."""
    with zipfile.ZipFile(wheel) as z:
        packed = read_msgpack(gzip.decompress(z.read("wordfreq/data/large_en.msgpack.gz")))
    for i, bucket in enumerate(packed):
        if i == 0 or not isinstance(bucket, list):
            continue  # the header
        for w in sorted(bucket):
            yield w, -i / 100.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", required=True, help="the wordfreq wheel")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=120000)
    args = ap.parse_args()
    seen, out = set(), []
    for w, log10 in words(args.words):
        w = w.lower()
        core = w.replace("'", "")
        if not core or not core.isalpha() or w.startswith("'") or w.endswith("'") or w in seen:
            continue
        seen.add(w)
        out.append(f"{w}\t{log10:.2f}")
        if len(out) == args.count:
            break
    Path(args.out).write_text("\n".join(out) + "\n", encoding="utf-8")
    print(f"lexicon: {len(out)} words into {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
