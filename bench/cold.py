#!/usr/bin/env python3
"""Cold start: every Lambda function binary under functions/, and `nib serve` as a stand-in.

For each `functions/*/` crate's release binary: nib-coldstart runs it 20 times under a local
Lambda Runtime API and reports the median time from spawn to its answer to the first invocation,
the binary's size and its peak RSS. The functions run configured as deployed, against moto's
server on 127.0.0.1 (started here, provisioned by tests/lambda/dev_env.py: table, bucket, data
and signing keys, one uploaded page). Each function is measured twice: with
`bench/events/{binary}.json`, an event it answers without a request to AWS (the cold start
proper; mcp and oauth have none there: their fixtures need no request, a call without a token
and the metadata, though oauth's start itself reads its secret), and with its fixture from tests/data/lambda/ (`make invoke-<fn>` sends the same), whose answer
includes the first request's real work against the emulator. The size of the arm64 binary of
`make lambdas` is recorded beside the host build's when target/lambda/ has it. Then the same for `nib serve`: spawn to the first
200 answer to `tools/list` with a bearer token, on a data directory with one user and a token.

Then the first search (issue 31: "the first `search_pages` on a cold pages function", <= 150 ms
at 10,000 pages): `nib import` puts --search-pages generated pages (nib-bench-gen, or
--pages-dir) into moto for the event's user, and the pages function answers
`bench/events/pages-search.json` cold, its first search opening the notebook's index and the
model. The answer of the timed runs is checked (nib-coldstart reports it): a result with hits,
not an error. With --pages-layer-bin, a pages binary built with NIB_EMBED_MODEL_LAYER
(the model read from a file at first use, as `make lambdas` builds it) is measured beside it:
the probe event, and the same first search. moto runs as bench/moto_server.py: moto's server
with transactions that back up only the items they name and queries that start from their
partition's matching items (moto's own made the import quadratic in the notebook's size, and
each query cost the whole table).

Writes OUT/cold.json. Standard library only.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

# The fixture each function gets as its first event (as `make invoke-<fn>`).
FIXTURES = {
    "mcp": "apigw-v2-mcp-tools-list.json",
    "pages": "pages-list-pages.json",
    "tasks": "tasks-list-tasks.json",
    "ingest": "s3-object-created.json",
    "oauth": "apigw-v2-well-known.json",
    "account": "account-delete-account.json",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_aws(root, work):
    """moto's server on a free port, provisioned; returns (process, the functions' env)."""
    venv = os.path.join(root, ".venv", "bin")
    port = free_port()
    log = open(os.path.join(work, "moto.log"), "w")
    moto = subprocess.Popen([os.path.join(venv, "python"),
                             os.path.join(root, "bench", "moto_server.py"), "-H", "127.0.0.1",
                             "-p", str(port)], stdout=log, stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    env_file = os.path.join(work, "lambda.env")
    subprocess.run([os.path.join(venv, "python"), os.path.join(root, "tests/lambda/dev_env.py"),
                    "--endpoint", f"http://127.0.0.1:{port}", "--out", env_file], check=True,
                   timeout=120)
    env = {}
    with open(env_file) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition("=")
            env[key] = value.strip('"')
    env["RUST_LOG"] = "warn"
    return moto, env


def function_binaries(root, target, profile):
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"], cwd=root,
        capture_output=True, text=True, check=True).stdout)
    functions = os.path.join(os.path.abspath(root), "functions") + os.sep
    found = []
    for pkg in meta["packages"]:
        if not pkg["manifest_path"].startswith(functions):
            continue
        for t in pkg["targets"]:
            if "bin" in t["kind"]:
                found.append((pkg["name"], t["name"], os.path.join(target, profile, t["name"])))
    return sorted(found)


def deployed_size(target, name):
    """The size of the binary in `make lambdas`' zip (arm64), when it was built."""
    import zipfile
    path = os.path.join(target, "lambda", name, "bootstrap.zip")
    if not os.path.exists(path):
        return None
    with zipfile.ZipFile(path) as z:
        return z.getinfo("bootstrap").file_size


def coldstart(tool, args, answer=False):
    """nib-coldstart's report; with `answer`, the last run's answer body in it too."""
    out = subprocess.run([tool] + args, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-500:]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if not answer:
        r.pop("answer", None)
    return r


def search_hits(r):
    """The number of hits in a timed run's answer (nib-coldstart reports the last one's body);
    raises unless it is a result (not an error kind, not a failed invocation) with hits."""
    try:
        reply = json.loads(r.get("answer") or "") if r.get("outcome") == "response" else None
    except ValueError:
        reply = None
    results = ((reply or {}).get("result") or {}).get("results")
    if not results:
        raise RuntimeError(f"{r.get('binary')} answered the search with no hits "
                           f"({r.get('outcome')}): {str(r.get('answer'))[:1000]}")
    return len(results)


def import_pages(nib, folder, work, timeout):
    """`nib import FOLDER --backend aws` into moto for the default user (the search event's),
    in seconds. Pages the import could not store (moto refuses a connection now and then under
    the import's 64 pages in flight) are imported again, from a folder of those alone."""
    started = time.monotonic()
    for attempt in (1, 2, 3):
        left = timeout - (time.monotonic() - started)
        out = subprocess.run([nib, "--backend", "aws", "import", folder],
                             capture_output=True, text=True, timeout=max(left, 1))
        print(f"cold: import (pass {attempt}): {out.stdout.strip()[-300:]}", flush=True)
        if out.returncode == 0:
            return time.monotonic() - started
        failed = [line[len("error: "):].split(": could not be stored")[0]
                  for line in out.stderr.splitlines()
                  if line.startswith("error: ") and ": could not be stored" in line]
        if not failed:
            break
        folder = os.path.join(work, f"import-retry-{attempt}")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for path in failed:
            shutil.copy(path, folder)
    sys.exit(f"cold: nib import into moto failed: {out.stderr.strip()[-1500:]}")


def generated_pages(args, work):
    """A folder of exactly --search-pages generated pages: --pages-dir, else written here."""
    folder = args.pages_dir
    if not folder:
        folder = os.path.join(work, f"pages-{args.search_pages}")
        shutil.rmtree(folder, ignore_errors=True)
        gen = os.path.join(args.target, "release", "nib-bench-gen")
        subprocess.run([gen, folder, str(args.search_pages)], check=True, timeout=600,
                       stdout=subprocess.DEVNULL)
    count = sum(1 for n in os.listdir(folder) if n.endswith(".md"))
    if count != args.search_pages:
        sys.exit(f"cold: {folder} holds {count} pages, not --search-pages {args.search_pages}")
    return folder


def search_rows(args, tool, work, pages_bin):
    """The first search_pages of a cold pages function at --search-pages pages (and of the
    --pages-layer-bin build), the answer of the timed runs checked."""
    event = os.path.join(args.root, "bench", "events", "pages-search.json")
    folder = generated_pages(args, work)
    import_s = import_pages(args.nib, folder, work, args.import_timeout)
    print(f"cold: imported {args.search_pages} pages into moto in {import_s:.0f} s "
          f"({args.search_pages / import_s:.1f} pages/s)", flush=True)
    rows = []
    for name, model, binary in pages_builds(args, pages_bin):
        r = coldstart(tool, ["lambda", "--name", name, "--bin", binary, "--runs",
                             str(args.runs), "--event", event], answer=True)
        hits = None
        if "error" not in r:
            try:
                hits = search_hits(r)
            except RuntimeError as e:  # recorded as an error: main exits non-zero at the end
                print(f"cold: {e}", file=sys.stderr, flush=True)
                r["error"] = str(e)[-500:]
        r.pop("answer", None)
        r.update({"package": "nib-fn-pages", "kind": "first search_pages",
                  "event": os.path.relpath(event, args.root), "model": model,
                  "pages": args.search_pages, "hits": hits, "import_s": round(import_s, 1)})
        rows.append(r)
        print(f"cold: {name} (first search_pages, {args.search_pages} pages): {r}", flush=True)
    return rows


def pages_builds(args, pages_bin):
    """(row name, where the model is, binary) of the pages builds to measure."""
    found = []
    if pages_bin and os.path.exists(pages_bin):
        found.append(("pages", "inside", pages_bin))
    if args.pages_layer_bin:
        found.append(("pages (model in layer)", "layer", args.pages_layer_bin))
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--target", default="target")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--functions-profile", default="release-lambda",
                    help="the cargo profile the function binaries were built with")
    ap.add_argument("--functions", help="only these functions (comma-separated binary names)")
    ap.add_argument("--nib", help="the nib binary (the stand-in, and the import into moto; "
                    "default TARGET/release/nib)")
    ap.add_argument("--no-stand-in", action="store_true", help="skip `nib serve`")
    ap.add_argument("--search-pages", type=int, default=10000,
                    help="pages in the notebook of the first-search measurement (0: skip it)")
    ap.add_argument("--pages-dir", help="a folder of exactly --search-pages pages to import "
                    "(default: written by TARGET/release/nib-bench-gen)")
    ap.add_argument("--import-timeout", type=int, default=1800,
                    help="seconds the import into moto may take in all")
    ap.add_argument("--pages-layer-bin", help="a pages binary built with "
                    "NIB_EMBED_MODEL_LAYER (the model read from a file at first use)")
    ap.add_argument("--model-file", help="the model file a --pages-layer-bin build reads "
                    "(NIB_EMBED_MODEL_FILE; default ROOT/.tools/embed/model.nibm)")
    args = ap.parse_args()
    if args.runs < 5 and args.search_pages:
        ap.error("--runs: at least 5 for the first-search median")
    tool = os.path.join(args.target, "release", "nib-coldstart")
    nib = args.nib = args.nib or os.path.join(args.target, "release", "nib")
    if args.pages_layer_bin:
        # Read by the layer build only (cfg(embed_layer)); a build with the model inside
        # ignores it.
        os.environ["NIB_EMBED_MODEL_FILE"] = os.path.abspath(
            args.model_file or os.path.join(args.root, ".tools", "embed", "model.nibm"))
    only = set(args.functions.split(",")) if args.functions else None
    results = []
    work = os.path.join(args.out, "cold")
    os.makedirs(work, exist_ok=True)
    moto, function_env = start_aws(args.root, work)
    saved_env = dict(os.environ)
    os.environ.update(function_env)

    pages_bin = None
    for pkg, name, path in function_binaries(args.root, args.target, args.functions_profile):
        if only is not None and name not in only:
            continue
        if name == "pages":
            pages_bin = path
        if not os.path.exists(path):
            results.append({"name": name, "package": pkg, "kind": "lambda",
                            "error": f"{path} not built"})
            continue
        deployed = deployed_size(args.target, name)
        zipped = os.path.join(args.target, "lambda", name, "bootstrap.zip")
        # Two first events: one the function answers without a request to AWS (the cold start
        # itself: process, runtime client, SDK clients, config), and its fixture, whose answer
        # includes the first request's real work against the emulator.
        probe = os.path.join(args.root, "bench", "events", f"{name}.json")
        fixture = os.path.join(args.root, "tests", "data", "lambda", FIXTURES.get(name, "-"))
        runs = [("lambda", probe if os.path.exists(probe) else fixture)]
        if runs[0][1] != fixture:
            runs.append(("lambda, first request", fixture))
        for kind, event in runs:
            cmd = ["lambda", "--name", name, "--bin", path, "--runs", str(args.runs)]
            if os.path.exists(event):
                cmd += ["--event", event]
            r = coldstart(tool, cmd)
            r.update({"package": pkg, "kind": kind, "event": os.path.relpath(event, args.root)})
            if deployed:
                r["deployed_binary_bytes"] = deployed
                r["deployed_zip_bytes"] = os.path.getsize(zipped)
            results.append(r)
            print(f"cold: {name} ({kind}): {r}", flush=True)

    if args.pages_layer_bin:
        probe = os.path.join(args.root, "bench", "events", "pages.json")
        r = coldstart(tool, ["lambda", "--name", "pages (model in layer)", "--bin",
                             args.pages_layer_bin, "--runs", str(args.runs), "--event", probe])
        r.update({"package": "nib-fn-pages", "kind": "lambda (model in layer)",
                  "event": os.path.relpath(probe, args.root), "model": "layer"})
        results.append(r)
        print(f"cold: pages, model in layer (lambda): {r}", flush=True)
    try:
        if args.search_pages:
            results += search_rows(args, tool, work, pages_bin)
    finally:
        moto.terminate()
        try:
            moto.wait(timeout=10)
        except subprocess.TimeoutExpired:
            moto.kill()
            moto.wait(timeout=10)
    os.environ.clear()
    os.environ.update(saved_env)
    if args.no_stand_in:
        return finish(args, results)
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    token = subprocess.run([nib, "--data-dir", data, "token", "create", "--scope", "read"],
                           capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    body = os.path.join(work, "tools_list.json")
    with open(body, "w") as f:
        f.write('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
    r = coldstart(tool, ["http", "--name", "nib serve (stand-in)", "--bin", nib,
                         "--runs", str(args.runs), "--body", body,
                         "--header", f"authorization: Bearer {token}",
                         "--header", "mcp-protocol-version: 2025-11-25",
                         "--", "--data-dir", data, "serve", "--bind", "127.0.0.1:{port}"])
    r.update({"kind": "stand-in"})
    results.append(r)
    print(f"cold: nib serve: {r}", flush=True)
    finish(args, results)


def finish(args, results):
    with open(os.path.join(args.out, "cold.json"), "w") as f:
        json.dump({"runs": args.runs, "results": results}, f, indent=2)
    if any("error" in r for r in results):
        sys.exit("cold: some binaries did not answer (see cold.json)")


if __name__ == "__main__":
    main()
