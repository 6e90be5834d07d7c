#!/usr/bin/env python3
"""Writes BENCHMARKS.md from one `make bench` run, appends its row to bench/history.csv and
draws bench/search_latency.png (search latency against notebook size, every run in the CSV).

Reads OUT/{parser,crypto,search,import,load,cold}.json (written by the benches, load.py and
cold.py) and criterion's estimates under OUT/criterion/. A missing part is reported as missing,
not guessed. Needs matplotlib for the plot (installed into .venv by `make tools-bench`).
"""

import argparse
import csv
import datetime
import json
import math
import os
import platform
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


def soak_target(soak):
    """Issue 31's target 7: after an hour of mixed load, RSS within 20% of the first minute's."""
    goal = "server RSS after 1 h of mixed load within 20% of its first minute (issue 31)"
    if not soak:
        return (goal, "n/a", status(None))
    # "Returns to": judged once the load is over (an idle server drops its caches, idle.rs).
    ratio, idle = soak["end_over_first_minute"], soak["idle_over_first_minute"]
    return (goal, f"{soak['rss_first_minute_kib'] / 1024:.0f} MiB after 1 min, "
                  f"{soak['rss_end_kib'] / 1024:.0f} MiB at the end of the load ({ratio:.2f}x), "
                  f"{soak['rss_after_idle_kib'] / 1024:.0f} MiB after {soak['idle_seconds']} s "
                  f"idle ({idle:.2f}x)",
            status(idle <= 1.2))


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="the folder the benchmarks wrote into")
    ap.add_argument("--root", default=".")
    args = ap.parse_args()
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

    # ---- targets ----
    targets = []
    # Issue 18's targets: a share of the floor, p99 <= 2 ms, and the peak RSS of the run.
    for name, label, share in (("get_page", "get_page", 0.5), ("tools_list", "tools/list", 0.6)):
        goal = f"{label} at c=16: >= {share * 100:.0f}% of floor req/s, p99 <= 2 ms, RSS <= 40 MiB"
        row = scenario(load_doc, name, 16)
        if row:
            ratio, p99 = row["ratio_rps"], row["nib"]["p99_ms"]
            rss = (row["nib"].get("peak_rss_kib") or 0) / 1024
            targets.append((goal,
                            f"{ratio * 100:.0f}% of floor, p99 {p99:.2f} ms, {rss:.0f} MiB "
                            "(the scenario alone in a fresh process)",
                            status(ratio >= share and p99 <= 2 and rss <= 40)))
        else:
            targets.append((goal, "n/a", status(None)))
    # Issue 15's: hybrid search_pages over HTTP at 10,000 pages, and in process at 10k/100k.
    goal = "search_pages (hybrid) at 10k pages, c=16: >= 2,500 req/s, p99 <= 15 ms, RSS <= 60 MiB"
    row = scenario(load_doc, "search_pages", 16)
    if row:
        rps, p99 = row["nib"]["rps"], row["nib"]["p99_ms"]
        rss = (row["nib"].get("peak_rss_kib") or 0) / 1024
        targets.append((goal, f"{rps:,.0f} req/s, p99 {p99:.2f} ms, {rss:.1f} MiB",
                        status(rps >= 2500 and p99 <= 15 and rss <= 60)))
    else:
        targets.append((goal, "n/a", status(None)))
    for pages, limit in ((10_000, 5), (100_000, 20)):
        size = search_size(search, pages)
        targets.append((f"search at {pages // 1000}k pages: p95 <= {limit} ms in process (issue 15)",
                        fmt(size["p95_ms"], 2, " ms") if size else "n/a",
                        status(size["p95_ms"] <= limit if size else None)))
    s10 = search_size(search, 10_000)
    targets.append(("search at 10k pages: p95 <= 10 ms in process",
                    fmt(s10["p95_ms"], 2, " ms") if s10 else "n/a",
                    status(s10["p95_ms"] <= 10 if s10 else None)))
    g1, g2 = growth(search, 1_000, 10_000), growth(search, 10_000, 100_000)
    if g1 is not None or g2 is not None:
        worst = max(g for g in (g1, g2) if g is not None)
        targets.append(("search latency grows sub-linearly with pages (p95 ~ pages^k, k < 1)",
                        f"k = {fmt(g1)} (1k->10k), {fmt(g2)} (10k->100k)",
                        status(worst < 1)))
    targets.append(("import >= 500 pages/s (markdown, embedded store)",
                    fmt(imp["pages_per_s"], 0, " pages/s") if imp else "n/a",
                    status(imp["pages_per_s"] >= 500 if imp else None)))
    targets.append(soak_target(soak))
    lambdas = [r for r in (cold or {}).get("results", []) if r.get("kind") == "lambda"]
    if lambdas:
        ok = [r for r in lambdas if "error" not in r]
        worst = max((r["median_ms"] for r in ok), default=None)
        # The binary that ships: the arm64 one of `make lambdas` when built, else this host's.
        size = max((r.get("deployed_binary_bytes") or r["binary_bytes"] for r in ok),
                   default=None)
        rss = max((r.get("peak_rss_kib") or 0 for r in ok), default=None)
        targets.append(("Lambda cold start <= 25 ms median (worst function)",
                        fmt(worst, 1, " ms"), status(worst <= 25 if worst else None)))
        targets.append(("Lambda binary <= 8 MB (largest)", fmt(size / 1e6 if size else None,
                                                              1, " MB"),
                        status(size <= 8e6 if size else None)))
        # Issue 31: the deployment package, the zip `make lambdas` writes (the search model
        # is not in it: it ships once, as a layer).
        zipped = max((r.get("deployed_zip_bytes") or 0 for r in ok), default=0)
        targets.append(("Lambda package <= 10 MB zipped (largest, `make lambdas`)",
                        fmt(zipped / 1e6 if zipped else None, 2, " MB"),
                        status(zipped <= 10e6 if zipped else None)))
        # Issue 31: the first search of a cold pages function on the emulator (bench/cold.py).
        first = [r for r in (cold or {}).get("results", [])
                 if r.get("kind") == "first search_pages" and "error" not in r]
        slowest = max(first, key=lambda r: r["median_ms"], default=None)
        targets.append(("first search_pages on a cold pages function at 10k pages, emulator: "
                        "<= 150 ms median (issue 31)",
                        ", ".join(f"{r['median_ms']:,.0f} ms (model {r.get('model')}, "
                                  f"{r['pages']:,} pages)" for r in first) or "n/a",
                        status(slowest["median_ms"] <= 150 and slowest["pages"] >= 10_000
                               if slowest else None)))
        targets.append(("Lambda peak RSS <= 30 MB (largest)",
                        fmt(rss / 1024 if rss else None, 1, " MiB"),
                        status(rss <= 30 * 1024 if rss else None)))
    else:
        stand = next((r for r in (cold or {}).get("results", []) if r.get("kind") == "stand-in"
                      and "error" not in r), None)
        targets.append(("Lambda: cold start <= 25 ms, binary <= 8 MB, RSS <= 30 MB",
                        "no functions/*/ binaries yet; stand-in `nib serve`: " + (
                            f"{stand['median_ms']:.1f} ms, {stand['binary_bytes'] / 1e6:.1f} MB,"
                            f" {stand['peak_rss_kib'] / 1024:.1f} MiB" if stand else "n/a"),
                        "not measured (stand-in shown)"))

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
    L.append("# Benchmarks\n")
    L.append(f"Written by `make bench` on {now:%Y-%m-%d %H:%M} UTC at commit `{commit}`. "
             "Do not edit by hand: `bench/report.py` writes it, and `bench/history.csv` keeps "
             "one row per run, so a regression shows up as a row.\n")
    L.append("## Machine\n")
    L.append("| | |\n|---|---|")
    L.append(f"| CPU | {m['cpu']} ({m['cores']} cores) |")
    L.append(f"| memory | {m['memory']} |")
    L.append(f"| kernel | {m['kernel']} |")
    L.append(f"| toolchain | {m['rustc']} |")
    L.append(f"| load average (1 min) at start / end | {m['loadavg_start']} / "
             f"{m['loadavg_end']} |")
    L.append("")
    L.append("A shared 2-core machine: the load generator and the server share the two cores, "
             "and other work on the machine shows up as noise (the load average above says how "
             "much). Compare runs on the same machine, and prefer the ratios to the floor, "
             "which share that noise.\n")
    L.append("## Commands\n")
    L.append("```sh\nmake bench        # all of the below, then this report\n"
             "make bench-micro  # criterion: parser, crypto, search (1k/10k/100k), dispatch\n"
             "make bench-load   # nib serve vs the floor server under wrk, plus the import rate\n"
             "make bench-cold   # cold start of functions/*/ binaries (and nib serve)\n"
             "make bench-soak   # nib serve's memory through an hour of mixed load\n```\n")
    L.append("## Where the targets stand\n")
    L.append("| target | measured | |\n|---|---|---|")
    for t, v, s in targets:
        L.append(f"| {t} | {v} | {s} |")
    L.append("")

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

    # Hand-written: the OCR engine's measurements (`make bench-ocr`, `make ocr-eval`).
    ocr = os.path.join(root, "bench", "ocr.md")
    if os.path.exists(ocr):
        with open(ocr) as f:
            L.append(f.read().rstrip() + "\n")

    # Hand-written: search by meaning's measurements (issue 15), kept across runs.
    meaning = os.path.join(root, "bench", "search-meaning.md")
    if os.path.exists(meaning):
        with open(meaning) as f:
            L.append(f.read().rstrip() + "\n")

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

    findings = os.path.join(root, "bench", "findings.md")
    if os.path.exists(findings):
        with open(findings) as f:
            L.append(f.read().rstrip() + "\n")

    with open(os.path.join(root, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(L))
    print(f"report: wrote BENCHMARKS.md and a row of {history_path}")


if __name__ == "__main__":
    main()
