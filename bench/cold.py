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
    moto = subprocess.Popen([os.path.join(venv, "moto_server"), "-H", "127.0.0.1", "-p",
                             str(port)], stdout=log, stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    env_file = os.path.join(work, "lambda.env")
    subprocess.run([os.path.join(venv, "python"), os.path.join(root, "tests/lambda/dev_env.py"),
                    "--endpoint", f"http://127.0.0.1:{port}", "--out", env_file], check=True)
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


def coldstart(tool, args):
    out = subprocess.run([tool] + args, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--target", default="target")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--functions-profile", default="release-lambda",
                    help="the cargo profile the function binaries were built with")
    args = ap.parse_args()
    tool = os.path.join(args.target, "release", "nib-coldstart")
    nib = os.path.join(args.target, "release", "nib")
    results = []
    work = os.path.join(args.out, "cold")
    os.makedirs(work, exist_ok=True)
    moto, function_env = start_aws(args.root, work)
    saved_env = dict(os.environ)
    os.environ.update(function_env)

    for pkg, name, path in function_binaries(args.root, args.target, args.functions_profile):
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

    moto.terminate()
    os.environ.clear()
    os.environ.update(saved_env)
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    token = subprocess.run([nib, "--data-dir", data, "token", "create", "--scope", "read"],
                           capture_output=True, text=True, check=True).stdout.strip()
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
    with open(os.path.join(args.out, "cold.json"), "w") as f:
        json.dump({"runs": args.runs, "results": results}, f, indent=2)
    if any("error" in r for r in results):
        sys.exit("cold: some binaries did not answer (see cold.json)")


if __name__ == "__main__":
    main()
