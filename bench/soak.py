#!/usr/bin/env python3
"""The soak benchmark: the memory of a long-running `nib serve` under mixed load (issue 31).

Steps (only 127.0.0.1 is ever contacted; every step is bounded in time):
1. generate PAGES + UPLOAD markdown pages (nib-bench-gen: one deterministic stream, so the
   first PAGES are the pages the load benchmark imports), import the first PAGES with
   `nib import`, create the user's password and a write token;
2. start `nib serve` and, for SECONDS, drive it at RATE requests a second, a fixed mix of
   tools/call search_pages, get_page (a page picked at random each time), list_tasks and
   create_task; meanwhile the owner signs in to the web app (`/oauth/signin`, as a browser
   does) and uploads the other UPLOAD pages one file per request (`POST /app/upload`, what the
   upload screen's script sends), spread over the first 60% of the run;
3. read the server's resident set (`VmRSS`) every SAMPLE seconds throughout, and once more
   after IDLE seconds with no load.

Every response is checked (HTTP 200, a JSON-RPC result that is not an error; each upload's
outcome `new`); a failure is counted and the run fails at the end when any happened.

With --steady the same load leaves the notebook's size as it was, to tell memory that grows
with the data from memory that leaks: each upload carries the next page's text under the name
of a page already imported (outcome `updated`: the page's text, terms and vectors replaced),
and create_task is update_task_status instead, turning one of 200 existing tasks todo or done
in turn.

Writes OUT/soak.json: the samples, the RSS after the first minute, at the end and after the
idle, the peak, and the counts. Standard library only.
"""

import argparse
import datetime
import http.cookiejar
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import UNLIMITED, free_port, post, rpc, stop, wait_ready  # noqa: E402

PASSWORD = "soak-benchmark-password"


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = {}
        self.failed = {}
        self.first_failure = None

    def add(self, what, ok, detail=""):
        with self.lock:
            book = self.ok if ok else self.failed
            book[what] = book.get(what, 0) + 1
            if not ok and self.first_failure is None:
                self.first_failure = f"{what}: {detail}"[:500]


def call_ok(status, body):
    if status != 200:
        return False
    try:
        msg = json.loads(body)
    except ValueError:
        return False
    result = msg.get("result")
    return result is not None and not result.get("isError", False)


class WebOwner:
    """The owner in a browser: signed in with a cookie jar, posting the upload form."""

    def __init__(self, base, user):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        page = self.get("/app")                # redirected to the sign-in form
        action = re.search(r'<form method="post" action="([^"]+)"', page).group(1)
        fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
        fields.update(username=user, password=PASSWORD)
        url = urllib.parse.urljoin(self.base + "/app", action.replace("&amp;", "&"))
        data = urllib.parse.urlencode(fields).encode()
        with self.opener.open(urllib.request.Request(url, data=data), timeout=30) as r:
            if not r.geturl().endswith("/app"):
                raise RuntimeError(f"sign-in ended at {r.geturl()}")
        # The upload form's token (the page's other form, sign-out, has its own).
        self.csrf = re.search(r'id="upload-form"[^>]*data-csrf="([^"]+)"',
                              self.get("/app/upload")).group(1)

    def get(self, path):
        with self.opener.open(self.base + path, timeout=30) as r:
            return r.read().decode()

    def upload(self, name, data):
        boundary = uuid.uuid4().hex
        parts = []
        for key, value in (("csrf_token", self.csrf), ("back", "/app/upload")):
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n'
                         f"{value}\r\n".encode())
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
                     f'filename="{name}"\r\nContent-Type: text/markdown\r\n\r\n'.encode()
                     + data + b"\r\n")
        parts.append(f"--{boundary}--\r\n".encode())
        req = urllib.request.Request(self.base + "/app/upload", data=b"".join(parts), headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Accept": "application/json", "Origin": self.base})
        try:
            with self.opener.open(req, timeout=120) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nib", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--upload", type=int, default=1_000)
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--rate", type=float, default=20.0, help="MCP requests a second")
    ap.add_argument("--sample", type=float, default=5.0)
    ap.add_argument("--idle", type=int, default=60)
    ap.add_argument("--steady", action="store_true",
                    help="uploads replace imported pages; update_task_status instead of create_task")
    args = ap.parse_args()

    work = os.path.join(args.out, "soak")
    os.makedirs(work, exist_ok=True)
    total = args.pages + args.upload
    stream = os.path.join(work, f"stream-{total}")
    if not os.path.isdir(stream):
        subprocess.run([args.gen, stream + ".tmp", str(total)], check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
        os.rename(stream + ".tmp", stream)
    names = sorted(os.listdir(stream))
    if len(names) != total:
        sys.exit(f"soak: {stream} holds {len(names)} pages, not {total}")
    first = os.path.join(work, "first")
    shutil.rmtree(first, ignore_errors=True)
    os.makedirs(first)
    for n in names[:args.pages]:
        os.symlink(os.path.join(stream, n), os.path.join(first, n))
    later = [os.path.join(stream, n) for n in names[args.pages:]]

    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    nib = lambda *a, **kw: subprocess.run([args.nib, "--data-dir", data, *a], check=True,
                                          capture_output=True, text=True, timeout=1800, **kw)
    print("soak: " + nib("import", first).stdout.strip(), flush=True)
    nib("user", "create", "default", "--password-stdin", input=PASSWORD + "\n")
    token = nib("token", "create", "--scope", "write", "--label", "soak").stdout.strip()

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(work, "nib-serve.log"), "w")
    proc = subprocess.Popen([args.nib, "--data-dir", data, "serve", "--bind", f"127.0.0.1:{port}"],
                            stdout=log, stderr=log, env=dict(os.environ, **UNLIMITED))
    counts = Counts()
    samples = []
    done = threading.Event()
    try:
        wait_ready(base + "/mcp", proc)
        status, _, body = post(base + "/mcp", rpc("tools/call", {
            "name": "list_pages", "arguments": {"limit": 200}}), token)
        page_ids = [p["page_id"] for p in json.loads(body)["result"]["structuredContent"]["pages"]]
        words = sorted({w.lower() for p in later[:50] for w in
                        re.findall(r"[A-Za-z]{5,}", open(p).read())})
        rng = random.Random(31)
        started = time.monotonic()

        def sampler():
            while not done.is_set():
                samples.append([round(time.monotonic() - started, 1), vm_rss_kib(proc.pid)])
                done.wait(args.sample)

        want = "updated" if args.steady else "new"

        def uploader():
            owner = WebOwner(base, "default")
            gap = 0.6 * args.seconds / max(1, len(later))
            for k, path in enumerate(later):
                if done.wait(max(0.0, started + k * gap - time.monotonic())):
                    return
                # Steady: the next page's text under an imported page's name (its date).
                name = names[k] if args.steady else os.path.basename(path)
                with open(path, "rb") as f:
                    status, body = owner.upload(name, f.read())
                files = json.loads(body).get("files", []) if status == 200 else []
                ok = len(files) == 1 and files[0].get("outcome") == want
                counts.add("upload", ok, f"{status} {body[:300]!r}")

        mix = itertools.cycle(["search_pages", "get_page", "get_page", "search_pages",
                               "list_tasks", "get_page", "search_pages", "create_task"])
        threads = [threading.Thread(target=sampler, daemon=True),
                   threading.Thread(target=uploader, daemon=True)]
        for t in threads:
            t.start()
        k = created = 0
        toggled = {}   # steady: a task's last status set

        def refill():
            # An upload that replaces a page's text takes its tasks with it: take others.
            status, _, body = post(base + "/mcp", rpc("tools/call", {
                "name": "list_tasks", "arguments": {"status": "open", "limit": 200}}), token)
            for t in json.loads(body)["result"]["structuredContent"]["tasks"]:
                toggled.setdefault(t["task_link_id"], "todo")

        if args.steady:
            refill()
        while time.monotonic() - started < args.seconds:
            k += 1
            wait = started + k / args.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            what = next(mix)
            if what == "search_pages":
                arguments = {"query": " ".join(rng.sample(words, 2))}
            elif what == "get_page":
                arguments = {"page_id": rng.choice(page_ids)}
            elif what == "list_tasks":
                arguments = {"status": "open", "limit": 50}
            elif args.steady:
                task = rng.choice(sorted(toggled))
                toggled[task] = "done" if toggled[task] == "todo" else "todo"
                what, arguments = "update_task_status", {"task_link_id": task,
                                                         "status": toggled[task]}
            else:
                # 40 tasks a day (a page links at most about 48), on days after the notebook's.
                created += 1
                day = datetime.date(2030, 1, 1) + datetime.timedelta(days=created // 40)
                arguments = {"text": f"Soak task {k} {rng.choice(words)}",
                             "target_date": day.isoformat()}
            status, _, body = post(base + "/mcp", rpc("tools/call", {
                "name": what, "arguments": arguments}), token)
            if what == "update_task_status" and b'"task not found"' in body:
                del toggled[arguments["task_link_id"]]
                refill()
                what = "update_task_status (task gone with its page)"
                counts.add(what, True)
                continue
            counts.add(what, call_ok(status, body), f"{status} {body[:300]!r}")
        load_end = time.monotonic() - started
        rss_end = vm_rss_kib(proc.pid)
        done.set()
        for t in threads:
            t.join(timeout=180)
        time.sleep(args.idle)   # the idle the report's "after idle" figure is about
        idle_t, rss_idle = time.monotonic() - started, vm_rss_kib(proc.pid)
        samples.append([round(idle_t, 1), rss_idle])
    finally:
        done.set()
        stop(proc)

    at_minute = next((kib for t, kib in samples if t >= 60), samples[0][1])
    result = {
        "pages": args.pages, "uploaded": counts.ok.get("upload", 0), "seconds": args.seconds,
        "steady": args.steady,
        "rate_per_s": args.rate, "load_seconds": round(load_end, 1),
        "samples": samples,
        "rss_first_minute_kib": at_minute, "rss_end_kib": rss_end,
        "rss_after_idle_kib": rss_idle, "idle_seconds": args.idle,
        "peak_rss_kib": max(kib for _, kib in samples),
        "end_over_first_minute": round(rss_end / at_minute, 3),
        "idle_over_first_minute": round(rss_idle / at_minute, 3),
        "ok": counts.ok, "failed": counts.failed, "first_failure": counts.first_failure,
    }
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"soak: {sum(counts.ok.values())} requests ok, {sum(counts.failed.values())} failed; "
          f"RSS {at_minute // 1024} MiB after 1 min, {rss_end // 1024} MiB at the end "
          f"({result['end_over_first_minute']}x), {rss_idle // 1024} MiB after {args.idle} s idle, "
          f"peak {result['peak_rss_kib'] // 1024} MiB", flush=True)
    if counts.failed:
        sys.exit(f"soak: failures {counts.failed}; first: {counts.first_failure}")


if __name__ == "__main__":
    main()
