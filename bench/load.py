#!/usr/bin/env python3
"""The load benchmark: `nib serve` on a generated notebook against a floor server.

Steps (each bounded in time; only 127.0.0.1 is ever contacted):
1. generate N markdown pages (nib-bench-gen), import them with `nib import` into a fresh data
   directory (timed: the import rate), and create a read token with `nib token create`;
2. start `nib serve` and, per scenario (tools/call get_page, tools/call search_pages,
   tools/list), send one checked request: it must answer 200 with a JSON-RPC result that is not
   an error. Its status, content type and body are captured;
3. start the floor server (nib-floor) with those captures: it answers the same request bytes
   with the same response bytes and does nothing else. One checked request each again;
4. drive both with wrk (one thread, keep-alive) at each concurrency for D seconds, after a
   one-second warm-up, resetting the server's peak RSS (`/proc/PID/clear_refs`) before each run
   (nib restarted before each scenario, so a scenario's peak is its own)
   and reading `VmHWM` after it.

Writes OUT/import.json and OUT/load.json. Standard library only.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

PROTOCOL = "2025-11-25"

# The load generator is one client with one token: lift nib's per-token rate limits (env
# variables, so a nib without them ignores them), or the runs would measure 429s. The limiter
# still runs and counts every request.
UNLIMITED = {"NIB_RATE_PER_MINUTE": "1000000000", "NIB_RATE_PER_HOUR": "1000000000"}

WRK_SCRIPT = r"""
local f = assert(io.open(os.getenv("NIB_BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "%(protocol)s"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("NIB_BENCH_TOKEN")

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "NIBRESULT {\"requests\":%%d,\"duration_us\":%%d,\"errors_connect\":%%d,\"errors_read\":%%d," ..
    "\"errors_write\":%%d,\"errors_status\":%%d,\"errors_timeout\":%%d,\"p50_us\":%%d," ..
    "\"p90_us\":%%d,\"p99_us\":%%d,\"max_us\":%%d,\"mean_us\":%%f}\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean))
end
""" % {"protocol": PROTOCOL}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, token, timeout=30):
    req = urllib.request.Request(
        url,
        data=body.encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": PROTOCOL,
            "authorization": f"Bearer {token}",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers.get("content-type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type", ""), e.read()


def wait_ready(url, proc, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"load: {url} exited with {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(url.replace("/mcp", "/healthz"), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"load: {url} did not come up within {seconds} s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def reset_hwm(pid):
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def rpc(method, params):
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      separators=(",", ":"))


def checked(name, status, body):
    """One checked request: a 200 carrying a JSON-RPC result that is not an error."""
    try:
        doc = json.loads(body)
    except ValueError:
        sys.exit(f"load: {name}: not JSON: {body[:200]!r}")
    result = doc.get("result") if isinstance(doc, dict) else None
    if status != 200 or result is None or result.get("isError"):
        sys.exit(f"load: {name}: expected 200 with a result, got {status}: {body[:300]!r}")
    return doc


def run_wrk(wrk, url, body_file, token, connections, seconds, script):
    env = dict(os.environ, NIB_BENCH_BODY=body_file, NIB_BENCH_TOKEN=token)
    cmd = [wrk, "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", script, url]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True,
                         timeout=seconds + 30).stdout
    m = re.search(r"^NIBRESULT (\{.*\})$", out, re.M)
    if not m:
        sys.exit(f"load: wrk printed no result:\n{out}")
    r = json.loads(m.group(1))
    errors = sum(v for k, v in r.items() if k.startswith("errors_"))
    return {
        "requests": r["requests"],
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "p50_ms": r["p50_us"] / 1000,
        "p90_ms": r["p90_us"] / 1000,
        "p99_ms": r["p99_us"] / 1000,
        "max_ms": r["max_us"] / 1000,
        "mean_ms": r["mean_us"] / 1000,
        "errors": errors,
    }


def import_pages(args, pages_dir, data):
    """`nib import` of the generated pages into a fresh data directory, timed."""
    started = time.monotonic()
    imp = subprocess.run([args.nib, "--data-dir", data, "import", pages_dir],
                         capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - started
    if imp.returncode != 0:
        sys.exit(f"load: nib import failed:\n{imp.stdout}\n{imp.stderr[-2000:]}")
    m = re.search(r"imported (\d+) pages .* in ([\d.]+)s \((\d+) pages/s\)", imp.stdout)
    imported = {
        "pages": int(m.group(1)) if m else args.pages,
        "seconds": float(m.group(2)) if m else wall,
        "pages_per_s": float(m.group(3)) if m else args.pages / wall,
        "wall_seconds": wall,
        "line": imp.stdout.strip(),
    }
    print(f"load: {imported['line']}", flush=True)
    with open(os.path.join(args.out, "import.json"), "w") as f:
        json.dump(imported, f, indent=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nib", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--wrk", default="wrk")
    ap.add_argument("--out", required=True)
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--data", help="serve a copy of this existing data directory (every request "
                    "adds an access record, so the directory itself is left as it was); skip "
                    "generation and import")
    ap.add_argument("--scenarios", default="get_page,search_pages,tools_list",
                    help="which scenarios to run, comma-separated")
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]

    work = os.path.join(args.out, "load")
    os.makedirs(work, exist_ok=True)
    pages_dir = os.path.join(work, f"notebook-{args.pages}")
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    if args.data:
        # A copy: each run's records would otherwise grow the store the next run measures
        # (a few runs of get_page left three million access records, a 3.8 GB store).
        shutil.copytree(args.data, data)
    if not args.data and not os.path.isdir(pages_dir):
        subprocess.run([args.gen, pages_dir + ".tmp", str(args.pages)], check=True,
                       stdout=subprocess.DEVNULL)
        os.rename(pages_dir + ".tmp", pages_dir)

    # 1. Import (timed) and a token.
    if not args.data:
        import_pages(args, pages_dir, data)
    token = subprocess.run([args.nib, "--data-dir", data, "token", "create", "--scope", "read",
                            "--label", "bench"], capture_output=True, text=True,
                           check=True).stdout.strip()


    # 2. nib serve, and one checked request per scenario (captured for the floor).
    nib_log = open(os.path.join(work, "nib-serve.log"), "w")

    def start_nib():
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        proc = subprocess.Popen([args.nib, "--data-dir", data, "serve", "--bind",
                                 f"127.0.0.1:{port}"], stdout=nib_log, stderr=nib_log,
                                env=dict(os.environ, **UNLIMITED))
        wait_ready(url, proc)
        return proc, url

    nib, floor = None, None
    try:
        nib, nib_url = start_nib()
        status, _, body = post(nib_url, rpc("tools/call", {"name": "list_pages",
                                                           "arguments": {"limit": 200}}), token)
        listed = checked("list_pages", status, body)["result"]["structuredContent"]["pages"]
        page_id = listed[len(listed) // 2]["page_id"]
        scenarios = {
            "get_page": rpc("tools/call", {"name": "get_page",
                                           "arguments": {"page_id": page_id}}),
            "search_pages": rpc("tools/call", {"name": "search_pages",
                                               "arguments": {"query": "budget review"}}),
            "tools_list": rpc("tools/list", {}),
        }
        wanted = args.scenarios.split(",")
        unknown = set(wanted) - set(scenarios)
        if unknown:
            sys.exit(f"load: unknown scenarios {sorted(unknown)}")
        scenarios = {name: req for name, req in scenarios.items() if name in wanted}
        captures = []
        body_files = {}
        for name, req in scenarios.items():
            status, ctype, body = post(nib_url, req, token)
            checked(f"nib {name}", status, body)
            captures.append({"request": req, "status": status, "content_type": ctype,
                             "response": body.decode()})
            body_files[name] = os.path.join(work, f"{name}.json")
            with open(body_files[name], "w") as f:
                f.write(req)
        captures_file = os.path.join(work, "captures.json")
        with open(captures_file, "w") as f:
            json.dump(captures, f)

        # 3. The floor, checked the same way and byte for byte.
        floor_port = free_port()
        floor_url = f"http://127.0.0.1:{floor_port}/mcp"
        floor = subprocess.Popen([args.floor, "--bind", f"127.0.0.1:{floor_port}",
                                  "--captures", captures_file], stdout=subprocess.DEVNULL)
        wait_ready(floor_url, floor)
        for cap in captures:
            status, _, body = post(floor_url, cap["request"], token)
            if status != cap["status"] or body.decode() != cap["response"]:
                sys.exit("load: the floor does not answer like nib")

        # 4. Timed runs.
        script = os.path.join(work, "wrk.lua")
        with open(script, "w") as f:
            f.write(WRK_SCRIPT)
        servers = {"nib": (nib, nib_url), "floor": (floor, floor_url)}
        results = []
        for name in scenarios:
            # Each scenario in a fresh process, so its peak RSS is its own (search's open index
            # and model stay resident and would count against tools/list after it).
            stop(nib)
            nib, nib_url = start_nib()
            servers["nib"] = (nib, nib_url)
            for c in levels:
                row = {"scenario": name, "concurrency": c}
                for server, (proc, url) in servers.items():
                    run_wrk(args.wrk, url, body_files[name], token, c, 1, script)
                    reset_hwm(proc.pid)
                    r = run_wrk(args.wrk, url, body_files[name], token, c, args.duration,
                                script)
                    r["peak_rss_kib"] = vm_hwm_kib(proc.pid)
                    if r["errors"]:
                        sys.exit(f"load: {server} {name} c={c}: {r['errors']} errors")
                    row[server] = r
                row["ratio_rps"] = row["nib"]["rps"] / row["floor"]["rps"]
                print(f"load: {name:13} c={c:<3} nib {row['nib']['rps']:9.0f} req/s "
                      f"p50 {row['nib']['p50_ms']:.3f} p99 {row['nib']['p99_ms']:.3f} ms | "
                      f"floor {row['floor']['rps']:9.0f} req/s | ratio {row['ratio_rps']:.2f}",
                      flush=True)
                results.append(row)
    finally:
        if nib is not None:
            stop(nib)
        if floor is not None:
            stop(floor)
        nib_log.close()

    with open(os.path.join(args.out, "load.json"), "w") as f:
        json.dump({"pages": args.pages, "duration_s": args.duration, "wrk_threads": 1,
                   "page_id": page_id, "search_query": "budget review",
                   "scenarios": results}, f, indent=2)


if __name__ == "__main__":
    main()
