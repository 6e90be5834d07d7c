#!/usr/bin/env python3
"""Writes BENCHMARKS.md, all of it: the targets table and the latest benchmark figures.

`--out OUT` (`make bench`, `make bench-report`): from one run, whose results are
OUT/{parser,crypto,search,import,load,cold,soak}.json (written by the benches, load.py, cold.py
and soak.py) and criterion's estimates under OUT/criterion/; appends the run's row to
bench/history.csv and draws bench/search_latency.png (search latency against notebook size, every
run in the CSV) and bench/soak_rss.png. A missing part is reported as missing, not guessed. Needs
matplotlib for the plots (installed into .venv by `make tools-bench`).

`--render` (`make bench-render`): no run; BENCHMARKS.md again from the last row of
bench/history.csv, appending nothing and drawing nothing (no matplotlib needed). For when the
run directory is gone, or bench/measured.toml changed.

Both take the targets measured by hand (make test, make run, OCR, search recall, and anything
measured since the last run) from bench/measured.toml: each target shows its newest figure. The
hand-written findings stay in bench/findings.md, bench/ocr.md and bench/search-meaning.md;
BENCHMARKS.md links to them and copies nothing from them.
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import subprocess

HISTORY_FIELDS = [
    "date", "commit", "cpu", "cores", "loadavg",
    "parser_mb_s", "seal_4k_us", "open_4k_us",
    "dispatch_get_page_us", "dispatch_tools_list_us",
    "search_1k_p50_ms", "search_1k_p95_ms", "search_10k_p50_ms", "search_10k_p95_ms",
    "search_100k_p50_ms", "search_100k_p95_ms",
    "import_pages_s",
    "get_page_c16_rps", "get_page_c16_floor_rps", "get_page_c16_p99_ms",
    "tools_list_c16_rps", "tools_list_c16_floor_rps", "tools_list_c16_p99_ms",
    "search_pages_c16_rps", "search_pages_c16_floor_rps", "search_pages_c16_p99_ms",
    "nib_peak_rss_mib", "cold_nib_serve_ms", "cold_lambda_worst_median_ms",
]


def load(out, name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def criterion_ns(out, *path):
    """Criterion's median estimate of one benchmark, in ns per iteration."""
    doc = load(os.path.join(out, "criterion", *path, "new"), "estimates.json")
    return doc["median"]["point_estimate"] if doc else None


def git(root, *args):
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def machine(out):
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kib = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
            mem = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    start = load(out, "start.json") or {}
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory": mem,
        "kernel": platform.release(),
        "rustc": rustc,
        "loadavg_start": start.get("loadavg", ""),
        "loadavg_end": open("/proc/loadavg").read().split()[0] if os.path.exists(
            "/proc/loadavg") else "",
    }


def fmt(v, digits=2, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "n/a"
    return f"{v:,.{digits}f}{unit}"


def status(ok):
    if ok is None:
        return "not measured"
    return "met" if ok else "**missed**"


def scenario(load_doc, name, c):
    if not load_doc:
        return None
    for row in load_doc["scenarios"]:
        if row["scenario"] == name and row["concurrency"] == c:
            return row
    return None


def search_size(search, pages):
    if not search:
        return None
    return next((s for s in search["sizes"] if s["pages"] == pages), None)


def growth(search, small, big):
    """How p95 scales from `small` to `big` pages: the exponent k in t ~ pages^k."""
    a, b = search_size(search, small), search_size(search, big)
    if not a or not b or a["p95_ms"] <= 0:
        return None
    return math.log(b["p95_ms"] / a["p95_ms"]) / math.log(big / small)


def pyplot(what):
    """matplotlib's pyplot drawing to files, or None (said) when it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"report: matplotlib is missing; no {what} (make tools-bench installs it)")
        return None
    return plt


def plot(history_rows, path):
    plt = pyplot("plot")
    if plt is None:
        return False
    sizes = [(1_000, "1k"), (10_000, "10k"), (100_000, "100k")]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    runs = [r for r in history_rows if any(r.get(f"search_{k}_p95_ms") for _, k in sizes)]
    for i, row in enumerate(runs):
        latest = i == len(runs) - 1
        for q, style in (("p50", "-"), ("p95", "--")):
            pts = [(n, float(row[f"search_{k}_{q}_ms"])) for n, k in sizes
                   if row.get(f"search_{k}_{q}_ms")]
            if not pts:
                continue
            xs, ys = zip(*pts)
            ax.plot(xs, ys, style, marker="o", color="C0" if q == "p50" else "C1",
                    alpha=1.0 if latest else 0.25, linewidth=2 if latest else 1,
                    label=f"{q} (latest run)" if latest else None)
    if runs:
        # What linear growth from the latest run's smallest notebook would look like.
        base = next(((n, float(runs[-1][f"search_{k}_p95_ms"])) for n, k in sizes
                     if runs[-1].get(f"search_{k}_p95_ms")), None)
        if base:
            xs = [n for n, _ in sizes if n >= base[0]]
            ax.plot(xs, [base[1] * n / base[0] for n in xs], ":", color="grey", linewidth=1,
                    label="linear growth (for reference)")
    ax.axhline(10, color="grey", linewidth=0.8, linestyle=":")
    ax.text(1_100, 10.5, "target: p95 <= 10 ms at 10k pages", fontsize=8, color="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pages in the notebook")
    ax.set_ylabel("search_pages latency per query (ms)")
    ax.set_title("nib search latency vs notebook size (faint: earlier runs)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return True


def plot_soak(soak, path):
    """The server's resident set through the soak run (bench/soak.py), against minutes."""
    plt = pyplot("soak plot")
    if plt is None:
        return False
    minutes = [t / 60 for t, _ in soak["samples"]]
    mib = [kib / 1024 for _, kib in soak["samples"]]
    first = soak["rss_first_minute_kib"] / 1024
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=110)
    ax.plot(minutes, mib, color="C0", linewidth=1.2, label="nib serve RSS")
    ax.axhline(first, color="grey", linewidth=0.8, linestyle=":")
    ax.axhspan(first * 0.8, first * 1.2, color="C2", alpha=0.12,
               label="within 20% of the first minute")
    upload_end = 0.6 * soak["seconds"] / 60
    ax.axvspan(0, upload_end, color="C1", alpha=0.06,
               label=f"uploads ({soak['uploaded']:,} pages)")
    ax.axvline(soak["load_seconds"] / 60, color="grey", linewidth=0.8, linestyle="--")
    ax.text(soak["load_seconds"] / 60, max(mib) * 0.98, "load stops ", fontsize=8, ha="right",
            color="grey", va="top")
    ax.set_xlabel("minutes since nib serve started")
    ax.set_ylabel("resident set (MiB)")
    ax.set_ylim(0, max(mib) * 1.1)
    ax.set_title(f"nib serve on {soak['pages']:,} pages under mixed load "
                 f"({soak['rate_per_s']:g} MCP requests/s)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    return True


def soak_section(soak, plotted):
    L = ["## Memory of a long-running server (`make bench-soak`)\n"]
    if not soak:
        return L + ["not measured\n"]
    ok = sum(soak["ok"].values())
    if soak.get("steady"):
        writes = ("update_task_status (todo and done in turn), while the owner, signed in to the "
                  f"web app, replaces the text of {soak['uploaded']:,} imported pages one file per "
                  "request over the first 60% of the run (`--steady`: the notebook keeps its size)")
    else:
        writes = (f"create_task, while the owner, signed in to the web app, uploads "
                  f"{soak['uploaded']:,} more pages one file per request over the first 60% of "
                  "the run")
    L.append(f"`bench/soak.py`: `nib serve` on {soak['pages']:,} generated pages for "
             f"{soak['seconds'] / 60:.0f} minutes at {soak['rate_per_s']:g} MCP requests a "
             "second, a fixed mix of search_pages, get_page (a random page), list_tasks and "
             f"{writes}. The resident set (`VmRSS`) is read every few seconds, and once more after "
             f"{soak['idle_seconds']} s without load. {ok:,} requests answered, "
             f"{sum(soak['failed'].values())} failed.\n")
    L.append("| after 1 min | at the end | after the idle | peak | end / first minute "
             "| after the idle / first minute |")
    L.append("|---:|---:|---:|---:|---:|---:|")
    L.append(f"| {soak['rss_first_minute_kib'] / 1024:.1f} MiB | {soak['rss_end_kib'] / 1024:.1f} "
             f"MiB | {soak['rss_after_idle_kib'] / 1024:.1f} MiB | "
             f"{soak['peak_rss_kib'] / 1024:.1f} MiB | {soak['end_over_first_minute']:.2f}x | "
             f"{soak['idle_over_first_minute']:.2f}x |")
    L.append("")
    if plotted:
        L.append("![nib serve RSS over an hour of mixed load](bench/soak_rss.png)\n")
    return L


# ---- targets ----------------------------------------------------------------------------------
# Every target of the table, in its order: the id that bench/measured.toml names, and the goal.
TARGETS = [
    ("get_page_c16", "get_page at c=16: >= 50% of floor req/s, p99 <= 2 ms, RSS <= 40 MiB "
                     "(issue 18)"),
    ("tools_list_c16", "tools/list at c=16: >= 60% of floor req/s, p99 <= 2 ms, RSS <= 40 MiB "
                       "(issue 18)"),
    ("search_pages_c16", "search_pages (hybrid) at 10k pages, c=16: >= 2,500 req/s, "
                         "p99 <= 15 ms, RSS <= 60 MiB (issue 15)"),
    ("search_10k_p95_5", "search at 10k pages: p95 <= 5 ms in process (issue 15)"),
    ("search_100k_p95_20", "search at 100k pages: p95 <= 20 ms in process (issue 15)"),
    ("search_10k_p95_10", "search at 10k pages: p95 <= 10 ms in process"),
    ("search_growth", "search latency grows sub-linearly with pages (p95 ~ pages^k, k < 1)"),
    ("search_recall", "search by meaning: >= 25 of 30 paraphrases in the top 3 "
                      "(recall@3 >= 0.83; issue 15)"),
    ("import_rate", "import >= 500 pages/s (markdown, embedded store)"),
    ("import_flat", "import: a time per page that does not grow with the notebook, "
                    "1k to 100k pages (issue 31)"),
    ("soak_rss", "server RSS after 1 h of mixed load within 20% of its first minute (issue 31)"),
    ("make_run", "first `make run` from a fresh clone <= 6 minutes, downloads excluded; "
                 "a second <= 10 s (issue 31)"),
    ("make_test", "`make test` from a clean clone <= 15 minutes (issue 31)"),
    ("lambda_cold", "Lambda cold start <= 25 ms median (worst function)"),
    ("lambda_binary", "Lambda binary <= 8 MB (largest)"),
    ("lambda_zip", "Lambda package <= 10 MB zipped (largest, `make lambdas`; issue 31)"),
    ("lambda_first_search", "first search_pages on a cold pages function at 10k pages, "
                            "emulator: <= 150 ms median (issue 31)"),
    ("lambda_rss", "Lambda peak RSS <= 30 MB (largest)"),
    ("ocr_speed", "OCR, local engine, 2 workers: peak RSS <= 1 GiB, >= 1.5 pages/s (issue 31)"),
    ("ocr_quality", "OCR on generated pages never tuned on: median CER <= 0.10, task F1 >= 0.90, "
                    "checkbox status >= 0.90 (issue 12)"),
]
TARGET_IDS = {i for i, _ in TARGETS}


def judge(checks):
    """met / **missed** from a target's checks, each (what, True | False | None): a target with
    several parts says which of them were met when not all were."""
    oks = [ok for _, ok in checks]
    if all(ok is None for ok in oks):  # no checks at all, too
        return status(None)
    if all(ok is True for ok in oks):
        return status(True)
    if len(oks) == 1 or all(ok is False for ok in oks):
        return status(False)
    word = {True: "met", False: "missed", None: "not measured"}
    parts = "; ".join(f"{what} {word[ok]}" for what, ok in checks)
    return (status(False) if False in oks else "met where measured") + f" ({parts})"


def result(value, checks, date, how):
    return {"value": value, "checks": checks, "date": date, "how": how}


def num(v):
    """A number of a history.csv cell, or None for an empty one."""
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


def history_targets(row, date, how):
    """The targets a row of bench/history.csv (or a run's row, before it is written) measures."""
    T = {}
    for key, tid, share in (("get_page", "get_page_c16", 0.5),
                            ("tools_list", "tools_list_c16", 0.6)):
        rps, floor, p99 = (num(row.get(f"{key}_c16_{c}")) for c in ("rps", "floor_rps", "p99_ms"))
        if rps and floor and p99 is not None:
            T[tid] = result(f"{rps / floor * 100:.0f}% of floor ({rps:,.0f} req/s against "
                            f"{floor:,.0f}), p99 {p99:.2f} ms",
                            [("share of the floor", rps / floor >= share), ("p99", p99 <= 2),
                             ("RSS", None)], date, how)
    rps, p99 = num(row.get("search_pages_c16_rps")), num(row.get("search_pages_c16_p99_ms"))
    if rps and p99 is not None:
        T["search_pages_c16"] = result(f"{rps:,.0f} req/s, p99 {p99:.2f} ms",
                                       [("req/s", rps >= 2500), ("p99", p99 <= 15),
                                        ("RSS", None)], date, how)
    p95 = {k: num(row.get(f"search_{k}_p95_ms")) for k in ("1k", "10k", "100k")}
    p50 = {k: num(row.get(f"search_{k}_p50_ms")) for k in ("1k", "10k", "100k")}
    for tid, k, limit in (("search_10k_p95_5", "10k", 5), ("search_100k_p95_20", "100k", 20),
                          ("search_10k_p95_10", "10k", 10)):
        if p95[k] is not None:
            T[tid] = result(f"{fmt(p50[k], 2, ' ms')} p50, {fmt(p95[k], 2, ' ms')} p95",
                            [("p95", p95[k] <= limit)], date, how)
    ks = []
    for a, b, n in (("1k", "10k", 10), ("10k", "100k", 10)):
        if p95[a] and p95[b]:
            ks.append((f"{a}->{b}", math.log(p95[b] / p95[a]) / math.log(n)))
    if ks:
        T["search_growth"] = result("k = " + ", ".join(f"{k:.2f} ({span})" for span, k in ks),
                                    [("k", max(k for _, k in ks) < 1)], date, how)
    imp = num(row.get("import_pages_s"))
    if imp is not None:
        T["import_rate"] = result(fmt(imp, 0, " pages/s"), [("pages/s", imp >= 500)], date, how)
    worst = num(row.get("cold_lambda_worst_median_ms"))
    if worst is not None:
        T["lambda_cold"] = result(fmt(worst, 1, " ms"), [("median", worst <= 25)], date, how)
    return T


def run_targets(load_doc, soak, cold, hist, date, how):
    """The targets of a `make bench` run: what its history row gives, with the peak RSS of each
    load scenario, the soak and the Lambda functions' sizes, which the row does not keep."""
    T = history_targets(hist, date, how)
    # Issue 18's targets: a share of the floor, p99 <= 2 ms, and the peak RSS of the run.
    for name, tid, share in (("get_page", "get_page_c16", 0.5),
                             ("tools_list", "tools_list_c16", 0.6)):
        row = scenario(load_doc, name, 16)
        if row:
            ratio, p99 = row["ratio_rps"], row["nib"]["p99_ms"]
            rss = (row["nib"].get("peak_rss_kib") or 0) / 1024
            T[tid] = result(f"{ratio * 100:.0f}% of floor, p99 {p99:.2f} ms, {rss:.0f} MiB "
                            "(the scenario alone in a fresh process)",
                            [("share of the floor", ratio >= share), ("p99", p99 <= 2),
                             ("RSS", rss <= 40)], date, how)
    # Issue 15's: hybrid search_pages over HTTP at 10,000 pages.
    row = scenario(load_doc, "search_pages", 16)
    if row:
        rps, p99 = row["nib"]["rps"], row["nib"]["p99_ms"]
        rss = (row["nib"].get("peak_rss_kib") or 0) / 1024
        T["search_pages_c16"] = result(f"{rps:,.0f} req/s, p99 {p99:.2f} ms, {rss:.1f} MiB",
                                       [("req/s", rps >= 2500), ("p99", p99 <= 15),
                                        ("RSS", rss <= 60)], date, how)
    if soak:
        # Issue 31's target 7: "returns to" is judged once the load is over (an idle server
        # drops its caches, idle.rs).
        ratio, idle = soak["end_over_first_minute"], soak["idle_over_first_minute"]
        T["soak_rss"] = result(
            f"{soak['rss_first_minute_kib'] / 1024:.0f} MiB after 1 min, "
            f"{soak['rss_end_kib'] / 1024:.0f} MiB at the end of the load ({ratio:.2f}x), "
            f"{soak['rss_after_idle_kib'] / 1024:.0f} MiB after {soak['idle_seconds']} s "
            f"idle ({idle:.2f}x)", [("after the idle", idle <= 1.2)], date, how)
    ok = [r for r in (cold or {}).get("results", [])
          if r.get("kind") == "lambda" and "error" not in r]
    if ok:
        # The binary that ships: the arm64 one of `make lambdas` when built, else this host's.
        size = max(r.get("deployed_binary_bytes") or r["binary_bytes"] for r in ok)
        T["lambda_binary"] = result(fmt(size / 1e6, 1, " MB"), [("MB", size <= 8e6)], date, how)
        # Issue 31: the deployment package, the zip `make lambdas` writes (the search model
        # is not in it: it ships once, as a layer).
        zipped = max(r.get("deployed_zip_bytes") or 0 for r in ok)
        if zipped:
            T["lambda_zip"] = result(fmt(zipped / 1e6, 2, " MB"), [("MB", zipped <= 10e6)],
                                     date, how)
        rss = max(r.get("peak_rss_kib") or 0 for r in ok)
        if rss:
            T["lambda_rss"] = result(fmt(rss / 1024, 1, " MiB"), [("MiB", rss <= 30 * 1024)],
                                     date, how)
    # Issue 31: the first search of a cold pages function on the emulator (bench/cold.py).
    first = [r for r in (cold or {}).get("results", [])
             if r.get("kind") == "first search_pages" and "error" not in r]
    if first:
        slowest = max(first, key=lambda r: r["median_ms"])
        T["lambda_first_search"] = result(
            ", ".join(f"{r['median_ms']:,.0f} ms (model {r.get('model')}, {r['pages']:,} pages)"
                      for r in first),
            [("median", slowest["median_ms"] <= 150 and slowest["pages"] >= 10_000)], date, how)
    return T


def slug(heading):
    """GitHub's anchor of a markdown heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def headings(root, path):
    try:
        with open(os.path.join(root, path)) as f:
            return [l.lstrip("#").strip() for l in f if l.startswith("#")]
    except OSError:
        return None


def measured_targets(root):
    """bench/measured.toml: the latest value of targets measured by hand, each with its date,
    commit, command and the hand-written section that has the details."""
    path = os.path.join(root, "bench", "measured.toml")
    if not os.path.exists(path):
        return {}
    import tomllib  # Python >= 3.11
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    T = {}
    for e in doc.get("target", []):
        tid = e["id"]
        if tid not in TARGET_IDS:
            print(f"report: bench/measured.toml: unknown target {tid!r} (not in TARGETS)")
            continue
        checks = []
        for c in e.get("checks", []):
            if "met" in c:
                ok = bool(c["met"])
            elif "max" in c:
                ok = c["value"] <= c["max"]
            elif "min" in c:
                ok = c["value"] >= c["min"]
            elif "below" in c:
                ok = c["value"] < c["below"]
            else:
                ok = None
            checks.append((c["what"], ok))
        src = e.get("source") or {}
        where = ""
        if src.get("file"):
            found = headings(root, src["file"])
            section = src.get("section")
            if section and found is not None and section in found:
                where = f"[{src['file']}, \"{section}\"]({src['file']}#{slug(section)})"
            else:
                print(f"report: bench/measured.toml: {tid}: no section {section!r} in "
                      f"{src['file']}")
                where = f"[{src['file']}]({src['file']})"
        date = str(e["date"])
        how = ", ".join(x for x in (date, f"`{e['commit']}`" if e.get("commit") else "") if x)
        how += f": `{e['command']}`" if e.get("command") else ""
        how += f"; {where}" if where else ""
        T[tid] = result(e["value"], checks, date, how)
    return T


def targets_table(*sources):
    """For each target, the newest of the sources' figures (the first source wins a tie)."""
    L = ["| target | latest measured | | measured (date, commit, command, details) |",
         "|---|---|---|---|"]
    for tid, goal in TARGETS:
        found = [s[tid] for s in sources if tid in s]
        if not found:
            L.append(f"| {goal} | n/a | {status(None)} | |")
            continue
        r = max(found, key=lambda r: r["date"])
        cell = lambda s: s.replace("|", "\\|")  # a pipe in a command would end the cell
        L.append(f"| {goal} | {cell(r['value'])} | {judge(r['checks'])} | {cell(r['how'])} |")
    L.append("")
    return L


# ---- the report's parts -----------------------------------------------------------------------
def header(L, by, when, commit, source):
    L.append("# Benchmarks\n")
    L.append(f"Written by {by} on {when:%Y-%m-%d %H:%M} UTC at commit `{commit}`{source}. "
             "Do not edit by hand: `bench/report.py` writes it; `bench/history.csv` keeps one "
             "row per run, so a regression shows up as a row; the targets measured by hand are "
             "in `bench/measured.toml`, and what was found along the way in the files under "
             "\"Findings\" below.\n")


def machine_note(L):
    L.append("A shared 2-core machine: the load generator and the server share the two cores, "
             "and other work on the machine shows up as noise (the load average above says how "
             "much). Compare runs on the same machine, and prefer the ratios to the floor, "
             "which share that noise.\n")


def commands(L):
    L.append("## Commands\n")
    L.append("```sh\nmake bench        # all of the below, then this report\n"
             "make bench-micro  # criterion: parser, crypto, search (1k/10k/100k), dispatch\n"
             "make bench-load   # nib serve vs the floor server under wrk, plus the import rate\n"
             "make bench-cold   # cold start of functions/*/ binaries (and nib serve)\n"
             "make bench-ocr    # the local OCR engine's pages/s and peak RSS (bench/ocr.md)\n"
             "make bench-soak   # nib serve's memory through an hour of mixed load\n"
             "make bench-render # this file again from bench/history.csv's last row and "
             "bench/measured.toml\n```\n")
    L.append("The commands of the targets measured by hand are in the table below and in "
             "`bench/measured.toml`.\n")


def findings(L, root):
    L.append("## Findings (hand-written)\n")
    for path, what in (
            ("bench/findings.md", "profiling and footprint: where the time and the memory go, "
                                  "what was changed and what was tried (issues 18 and 31)"),
            ("bench/ocr.md", "the local OCR engine: speed, memory and quality, on generated "
                             "pages and on real handwriting"),
            ("bench/search-meaning.md", "search by meaning (issue 15): quality on paraphrases, "
                                        "speed and memory"),
            ("bench/measured.toml", "the latest value of each target measured by hand, with "
                                    "its date and command")):
        if os.path.exists(os.path.join(root, path)):
            L.append(f"- [{path}]({path}): {what}")
    L.append("")


def image(L, root, path, alt):
    if os.path.exists(os.path.join(root, path)):
        L.append(f"![{alt}]({path})\n")


def render_from_history(root):
    """BENCHMARKS.md from the last row of bench/history.csv and bench/measured.toml, for when
    the run directory is gone: nothing is appended to the history and no plot is drawn."""
    history_path = os.path.join(root, "bench", "history.csv")
    with open(history_path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit("report: bench/history.csv has no row to render")
    row = rows[-1]
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    commit = git(root, "rev-parse", "--short", "HEAD") or "unknown"
    if git(root, "status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"
    run_date, run_commit = row["date"][:16].replace("T", " "), row["commit"]
    run = f"the `make bench` run of {run_date} UTC at `{run_commit}`"
    L = []
    header(L, "`make bench-render` (`bench/report.py --render`)", now, commit,
           f", from the last row of `bench/history.csv` ({run}) and `bench/measured.toml`")
    L.append("## Machine\n")
    L.append(f"Of {run} (`bench/history.csv` keeps no more of it):\n")
    L.append("| | |\n|---|---|")
    L.append(f"| CPU | {row.get('cpu') or 'n/a'} ({row.get('cores') or '?'} cores) |")
    L.append(f"| load average (1 min) at start | {row.get('loadavg') or 'n/a'} |")
    L.append("")
    machine_note(L)
    commands(L)
    L.append("## Where the targets stand\n")
    L.append(f"Each target's newest figure: {run}, or `bench/measured.toml` where it is "
             "newer or the run does not measure it.\n")
    L.extend(targets_table(history_targets(row, row["date"][:10],
                                           f"{row['date'][:10]}, `{run_commit}`: `make bench` "
                                           "(bench/history.csv)"),
                           measured_targets(root)))
    L.append("## Latest `make bench` figures\n")
    L.append(f"From {run}, as `bench/history.csv` keeps them: the run's full tables (every "
             "concurrency, each Lambda function, the soak) are in the BENCHMARKS.md it wrote "
             f"(`git log -- BENCHMARKS.md`). Newer figures measured by hand are in the targets "
             "table above.\n")
    n = lambda key: num(row.get(key))
    L.append("### Micro benchmarks (criterion, median)\n")
    L.append("| benchmark | time | throughput |\n|---|---:|---:|")
    if n("parser_mb_s"):
        L.append(f"| structure parser, generated pages | n/a | {fmt(n('parser_mb_s'), 1)} MB/s |")
    for key, what in (("seal_4k_us", "AES-256-GCM seal, 4 KB field (UserKeys)"),
                      ("open_4k_us", "AES-256-GCM open, 4 KB field (UserKeys)")):
        if n(key):
            L.append(f"| {what} | {n(key):.2f} µs | {4096 / n(key):,.0f} MB/s |")
    for key, what in (("dispatch_get_page_us", "dispatch `tools/call get_page` through the "
                                               "router (oneshot, 1k-page store)"),
                      ("dispatch_tools_list_us", "dispatch `tools/list` through the router "
                                                 "(oneshot)")):
        if n(key):
            L.append(f"| {what} | {n(key):.1f} µs | {1e6 / n(key):,.0f} calls/s |")
    L.append("")
    L.append("### Search latency against notebook size (in process)\n")
    L.append("| pages | p50 | p95 |\n|---:|---:|---:|")
    for pages, k in ((1_000, "1k"), (10_000, "10k"), (100_000, "100k")):
        L.append(f"| {pages:,} | {fmt(n(f'search_{k}_p50_ms'), 3, ' ms')} | "
                 f"{fmt(n(f'search_{k}_p95_ms'), 3, ' ms')} |")
    L.append("")
    image(L, root, "bench/search_latency.png", "search latency vs notebook size")
    L.append("### Load: `nib serve` against the floor server (c=16)\n")
    L.append("| scenario | nib req/s | nib p99 | floor req/s | nib/floor |\n"
             "|---|---:|---:|---:|---:|")
    for key in ("get_page", "search_pages", "tools_list"):
        rps, floor = n(f"{key}_c16_rps"), n(f"{key}_c16_floor_rps")
        ratio = f"{rps / floor * 100:.0f}%" if rps and floor else "n/a"
        L.append(f"| {key} | {fmt(rps, 0)} | {fmt(n(f'{key}_c16_p99_ms'), 2, ' ms')} | "
                 f"{fmt(floor, 0)} | {ratio} |")
    L.append("")
    L.append(f"nib's peak RSS over the load runs: {fmt(n('nib_peak_rss_mib'), 1, ' MiB')}.\n")
    L.append("### Import\n")
    L.append(f"`nib import` of generated markdown pages into a fresh data directory: "
             f"**{fmt(n('import_pages_s'), 0, ' pages/s')}**.\n")
    L.append("### Memory of a long-running server (`make bench-soak`)\n")
    L.append("`bench/history.csv` keeps no soak figures: the targets table has the last hour's.\n")
    image(L, root, "bench/soak_rss.png", "nib serve RSS over an hour of mixed load")
    L.append("### Cold start\n")
    L.append("| binary | median |\n|---|---:|")
    L.append(f"| nib serve (stand-in) | {fmt(n('cold_nib_serve_ms'), 1, ' ms')} |")
    L.append(f"| the slowest Lambda function | {fmt(n('cold_lambda_worst_median_ms'), 1, ' ms')} |")
    L.append("")
    findings(L, root)
    with open(os.path.join(root, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(L))
    print(f"report: wrote BENCHMARKS.md from the last row of {history_path} (nothing appended)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="the folder the benchmarks wrote into (a `make bench` run)")
    ap.add_argument("--render", action="store_true",
                    help="no run: write BENCHMARKS.md again from the last row of "
                         "bench/history.csv and bench/measured.toml, append nothing, draw nothing")
    ap.add_argument("--root", default=".")
    args = ap.parse_args()
    if args.render:
        return render_from_history(args.root)
    if not args.out:
        ap.error("--out is needed (or --render)")
    out, root = args.out, args.root

    parser = load(out, "parser.json")
    search = load(out, "search.json")
    imp = load(out, "import.json")
    load_doc = load(out, "load.json")
    cold = load(out, "cold.json")
    soak = load(out, "soak.json")
    m = machine(out)
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    # The commit the benchmarks ran on (`make bench` records it before starting), else now's.
    commit = (load(out, "start.json") or {}).get("commit") or git(root, "rev-parse", "--short",
                                                                  "HEAD")
    if "commit" not in (load(out, "start.json") or {}) and git(
            root, "status", "--porcelain", "--untracked-files=no"):
        commit += "+dirty"

    parse_ns = criterion_ns(out, "parser", "page_mix")
    parser_mb_s = parser["bytes"] / parse_ns * 1e3 if parser and parse_ns else None
    seal_ns = criterion_ns(out, "crypto", "seal_4k")
    open_ns = criterion_ns(out, "crypto", "open_4k")
    get_page_ns = criterion_ns(out, "dispatch", "get_page")
    tools_list_ns = criterion_ns(out, "dispatch", "tools_list")
    lambdas = [r for r in (cold or {}).get("results", []) if r.get("kind") == "lambda"]

    # ---- history ----
    def load_cell(name, c, server, key):
        row = scenario(load_doc, name, c)
        return row[server][key] if row else None

    stand = next((r for r in (cold or {}).get("results", []) if r.get("kind") == "stand-in"
                  and "error" not in r), None)
    peak_rss = max((row[s]["peak_rss_kib"] or 0 for row in load_doc["scenarios"]
                    for s in ("nib",)), default=None) if load_doc else None
    hist = {
        "date": now.isoformat(), "commit": commit, "cpu": m["cpu"], "cores": m["cores"],
        "loadavg": m["loadavg_start"],
        "parser_mb_s": parser_mb_s, "seal_4k_us": seal_ns / 1e3 if seal_ns else None,
        "open_4k_us": open_ns / 1e3 if open_ns else None,
        "dispatch_get_page_us": get_page_ns / 1e3 if get_page_ns else None,
        "dispatch_tools_list_us": tools_list_ns / 1e3 if tools_list_ns else None,
        "import_pages_s": imp["pages_per_s"] if imp else None,
        "get_page_c16_rps": load_cell("get_page", 16, "nib", "rps"),
        "get_page_c16_floor_rps": load_cell("get_page", 16, "floor", "rps"),
        "get_page_c16_p99_ms": load_cell("get_page", 16, "nib", "p99_ms"),
        "tools_list_c16_rps": load_cell("tools_list", 16, "nib", "rps"),
        "tools_list_c16_floor_rps": load_cell("tools_list", 16, "floor", "rps"),
        "tools_list_c16_p99_ms": load_cell("tools_list", 16, "nib", "p99_ms"),
        "search_pages_c16_rps": load_cell("search_pages", 16, "nib", "rps"),
        "search_pages_c16_floor_rps": load_cell("search_pages", 16, "floor", "rps"),
        "search_pages_c16_p99_ms": load_cell("search_pages", 16, "nib", "p99_ms"),
        "nib_peak_rss_mib": peak_rss / 1024 if peak_rss else None,
        "cold_nib_serve_ms": stand["median_ms"] if stand else None,
        "cold_lambda_worst_median_ms": max((r["median_ms"] for r in lambdas if "error" not in r),
                                           default=None),
    }
    for pages, key in ((1_000, "1k"), (10_000, "10k"), (100_000, "100k")):
        s = search_size(search, pages)
        hist[f"search_{key}_p50_ms"] = s["p50_ms"] if s else None
        hist[f"search_{key}_p95_ms"] = s["p95_ms"] if s else None
    history_path = os.path.join(root, "bench", "history.csv")
    rows = []
    if os.path.exists(history_path):
        with open(history_path, newline="") as f:
            rows = list(csv.DictReader(f))
    def cell(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.4g}"
        return v

    cells = {k: cell(v) for k, v in hist.items()}
    rows.append(cells)
    with open(history_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HISTORY_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    plotted = plot(rows, os.path.join(root, "bench", "search_latency.png"))
    soak_plotted = bool(soak) and plot_soak(soak, os.path.join(root, "bench", "soak_rss.png"))

    # ---- the report ----
    L = []
    header(L, "`make bench`", now, commit, "")
    L.append("## Machine\n")
    L.append("| | |\n|---|---|")
    L.append(f"| CPU | {m['cpu']} ({m['cores']} cores) |")
    L.append(f"| memory | {m['memory']} |")
    L.append(f"| kernel | {m['kernel']} |")
    L.append(f"| toolchain | {m['rustc']} |")
    L.append(f"| load average (1 min) at start / end | {m['loadavg_start']} / "
             f"{m['loadavg_end']} |")
    L.append("")
    machine_note(L)
    commands(L)
    L.append("## Where the targets stand\n")
    L.append("Each target's newest figure: this run's, or `bench/measured.toml`'s where the run "
             "does not measure it (or failed to).\n")
    L.extend(targets_table(run_targets(load_doc, soak, cold, hist, f"{now:%Y-%m-%d}",
                                       f"{now:%Y-%m-%d}, `{commit}`: this `make bench` run"),
                           measured_targets(root)))

    L.append("## Micro benchmarks (criterion, median)\n")
    L.append("| benchmark | time | throughput |\n|---|---:|---:|")
    if parse_ns:
        L.append(f"| structure parser, {parser['pages']} generated pages "
                 f"({parser['bytes'] / 1e3:.0f} kB) | {parse_ns / 1e6:.3f} ms | "
                 f"{fmt(parser_mb_s, 1)} MB/s |")
    if seal_ns:
        L.append(f"| AES-256-GCM seal, 4 KB field (UserKeys) | {seal_ns / 1e3:.2f} µs | "
                 f"{4096 / seal_ns * 1e3:,.0f} MB/s |")
    if open_ns:
        L.append(f"| AES-256-GCM open, 4 KB field (UserKeys) | {open_ns / 1e3:.2f} µs | "
                 f"{4096 / open_ns * 1e3:,.0f} MB/s |")
    if get_page_ns:
        L.append(f"| dispatch `tools/call get_page` through the router (oneshot, 1k-page "
                 f"store) | {get_page_ns / 1e3:.1f} µs | {1e9 / get_page_ns:,.0f} calls/s |")
    if tools_list_ns:
        L.append(f"| dispatch `tools/list` through the router (oneshot) | "
                 f"{tools_list_ns / 1e3:.1f} µs | {1e9 / tools_list_ns:,.0f} calls/s |")
    L.append("")

    L.append("## Search latency against notebook size (in process)\n")
    if search:
        L.append("`Notebook::search` over generated notebooks imported through the real import "
                 "path; each sample is one query from a fixed mix (common and rare words, two- "
                 "and three-word queries, a quoted phrase), limit 20.\n")
        L.append("| pages | queries timed | p50 | p95 | max |\n|---:|---:|---:|---:|---:|")
        for s in search["sizes"]:
            L.append(f"| {s['pages']:,} | {s['queries']:,} | {s['p50_ms']:.3f} ms | "
                     f"{s['p95_ms']:.3f} ms | {s['max_ms']:.3f} ms |")
        L.append("")
        if plotted:
            L.append("![search latency vs notebook size](bench/search_latency.png)\n")
    else:
        L.append("not measured\n")

    L.append("## Load: `nib serve` against the floor server\n")
    if load_doc:
        L.append(f"A {load_doc['pages']:,}-page generated notebook; wrk with one thread, "
                 f"keep-alive connections, {load_doc['duration_s']} s per run after a 1 s "
                 "warm-up; a read-scoped bearer token. The floor server answers the same "
                 "request bytes with the same response bytes (captured from nib) and does no "
                 "work. Peak RSS is the server's `VmHWM` over that run (reset before it through "
                 "`/proc/PID/clear_refs`; nib starts afresh for each scenario, so memory kept from "
                 "another scenario does not count, but a run at c=64 still shows what the "
                 "c=1 and c=16 runs before it kept). search_pages queries "
                 f"\"{load_doc['search_query']}\".\n")
        L.append("| scenario | c | nib req/s | nib p50 | nib p99 | nib peak RSS | floor req/s "
                 "| floor p50 | floor p99 | floor RSS | nib/floor |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for row in load_doc["scenarios"]:
            n, fl = row["nib"], row["floor"]
            L.append(f"| {row['scenario']} | {row['concurrency']} | {n['rps']:,.0f} | "
                     f"{n['p50_ms']:.2f} ms | {n['p99_ms']:.2f} ms | "
                     f"{(n['peak_rss_kib'] or 0) / 1024:.1f} MiB | {fl['rps']:,.0f} | "
                     f"{fl['p50_ms']:.2f} ms | {fl['p99_ms']:.2f} ms | "
                     f"{(fl['peak_rss_kib'] or 0) / 1024:.1f} MiB | "
                     f"{row['ratio_rps'] * 100:.0f}% |")
        L.append("")
    else:
        L.append("not measured\n")

    L.append("## Import\n")
    if imp:
        L.append(f"`nib import` of {imp['pages']:,} generated markdown pages into a fresh data "
                 "directory (embedded store, synced once a second and at the end): "
                 f"{imp['seconds']:.1f} s, "
                 f"**{imp['pages_per_s']:,.0f} pages/s**.\n")
    else:
        L.append("not measured\n")

    L.extend(soak_section(soak, soak_plotted))

    L.append("## Cold start\n")
    if cold:
        L.append(f"Median of {cold['runs']} runs, from spawning the process to its first "
                 "answer: for a Lambda function, its answer to the first invocation from a "
                 "local Lambda Runtime API (`bench/src/bin/coldstart.rs`); for `nib serve`, the "
                 "first 200 to `tools/list` with a bearer token. Peak RSS is `VmHWM` right after "
                 "that answer.\n")
        L.append("For a function, `lambda` is its cold start proper: the first event is one it "
                 "answers without a request to AWS (`bench/events/`, else its fixture); "
                 "`lambda, first request` answers its fixture from `tests/data/lambda/`, real "
                 "work against the emulator (moto on 127.0.0.1) included. Binary sizes are this "
                 "machine's build (profile release-lambda); `arm64` is the binary in "
                 "`make lambdas`' zip, which is what ships.\n")
        searched = [r for r in cold["results"] if r.get("kind") == "first search_pages"]
        if searched:
            pages = searched[0].get("pages")
            L.append(f"`first search_pages` answers `bench/events/pages-search.json` (a hybrid "
                     f"query of three words) on a notebook of {pages:,} generated pages that "
                     f"`nib import` put into moto ({searched[0].get('import_s', 0):.0f} s); the "
                     "first search of a cold pages function opens the notebook's index and the "
                     "model. Its answer was checked to be a result with hits before it was "
                     "timed. `model in layer` is a pages binary built with "
                     "`NIB_EMBED_MODEL_LAYER` (as `make lambdas` builds them), which reads the "
                     "model from a file at its first use instead of carrying it.\n")
        L.append("| binary | kind | median | min | p90 | binary size | arm64 | peak RSS | answer |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|---|")
        for r in cold["results"]:
            kind = r.get("kind")
            if kind == "first search_pages" and r.get("pages"):
                kind += f", {r['pages']:,} pages"
            if "error" in r:
                L.append(f"| {r.get('name')} | {kind} | failed: {r['error'][:80]} "
                         "| | | | | | |")
                continue
            answer = r.get("outcome")
            if r.get("hits") is not None:
                answer = f"{answer}, {r['hits']} hits"
            L.append(f"| {r['name']} | {kind} | {r['median_ms']:.1f} ms | "
                     f"{r['min_ms']:.1f} ms | {r['p90_ms']:.1f} ms | "
                     f"{r['binary_bytes'] / 1e6:.1f} MB | "
                     + (f"{r['deployed_binary_bytes'] / 1e6:.1f} MB | "
                        if r.get("deployed_binary_bytes") else "| ")
                     + f"{(r.get('peak_rss_kib') or 0) / 1024:.1f} MiB | {answer} |")
        if not lambdas:
            L.append("\nNo `functions/*/` crates exist yet; the harness builds and measures "
                     "each one's release binary as soon as they do (an event for a function "
                     "can be put in `bench/events/{binary}.json`).")
        L.append("")
    else:
        L.append("not measured\n")

    findings(L, root)

    with open(os.path.join(root, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(L))
    print(f"report: wrote BENCHMARKS.md and a row of {history_path}")


if __name__ == "__main__":
    main()
