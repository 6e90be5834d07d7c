#!/usr/bin/env bash
# Real MCP clients against a real `nib serve` (bearer-token auth, no public discovery):
#   1. the official Python SDK (tests/clients/python_client.py), both protocol eras;
#   2. MCP Inspector's CLI (Node 22), tools/list and tools/call list_pages, both eras,
#      plus a call without the token that must be refused.
# Needs: target/debug/nib (this script builds nothing), `make tools-node` and `make tools-python`.
# Environment (optional): NIB_BIN, the binary to test instead of target/debug/nib.
set -euo pipefail

# shellcheck source=tests/lib/server.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/server.sh"

PYTHON="$ROOT/.venv/bin/python"
nib_require_bin
# The tools an admin token lists: the catalog itself, as `nib tools` prints it.
EXPECTED_TOOLS="$("$NIB" tools | cut -f1 | paste -sd' ')"
export NIB_EXPECTED_TOOLS="$EXPECTED_TOOLS"
nib_require_node
if [[ ! -x "$PYTHON" ]]; then
    echo "error: $PYTHON is missing. Install the Python tools with: make tools-python" >&2
    exit 2
fi

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/nib-clients.XXXXXX")"
cleanup() {
    nib_stop
    rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The clients make ~70 requests within a minute, four of them prompts charged 12-15 units each
# (docs/operator-guide.md, "Server options"): above `nib serve`'s default 60 a minute, which would refuse the last
# ones with 429. The limits have their own tests (tests/integration/ratelimit.rs).
nib_start --bind 127.0.0.1:0 --rate-per-minute 600
if [[ -z "$NIB_TOKEN" ]]; then
    echo "error: nib serve printed no 'nib: token for user default (admin): TOKEN' line" >&2
    echo "       (expected on first start in an empty data dir)" >&2
    nib_dump_logs
    exit 1
fi
echo "clients: testing $NIB_URL"

status=0

echo
echo "== python client (mcp SDK $("$PYTHON" -c 'import importlib.metadata as m; print(m.version("mcp"))'))"
"$PYTHON" "$ROOT/tests/clients/python_client.py" "$NIB_URL" "$NIB_TOKEN" || status=1

# ---- MCP Inspector CLI ------------------------------------------------------------------------
echo
echo "== inspector CLI ($(inspector --version 2>/dev/null | tail -n 1))"
# The inspector keeps a catalog and client state under $HOME/.mcp-inspector: give it a scratch HOME.
# --stored-auth-only: never start an interactive OAuth flow (it would wait for a browser).
inspector_run() {
    HOME="$SCRATCH/home" inspector --cli "$NIB_URL" --transport http --stored-auth-only \
        --format json "$@" </dev/null
}
mkdir -p "$SCRATCH/home"

ipassed=0
ifailed=0
icheck() { # icheck NAME OK(0/1) DETAIL
    if [[ "$2" == 0 ]]; then
        ipassed=$((ipassed + 1))
        echo "ok   - $1"
    else
        ifailed=$((ifailed + 1))
        echo "FAIL - $1: $3"
    fi
}

# Reads the inspector's JSON output on stdin and checks it; prints a reason and exits 1 if wrong.
json_check() {
    node -e '
const kind = process.argv[1];
const expected = process.argv[2].split(" ");
let text = "";
process.stdin.on("data", (d) => (text += d)).on("end", () => {
  let out;
  try { out = JSON.parse(text); } catch { console.log("not JSON: " + text.slice(0, 300)); process.exit(1); }
  const r = out.result;
  if (!r) { console.log("no result: " + text.slice(0, 300)); process.exit(1); }
  if (kind === "tools") {
    const names = (r.tools || []).map((t) => t.name);
    const missing = expected.filter((n) => !names.includes(n));
    if (missing.length) { console.log(`missing ${missing.join(", ")}; got ${names.join(", ")}`); process.exit(1); }
  } else {
    if (r.isError || !r.structuredContent || !Array.isArray(r.structuredContent.pages)) {
      console.log("expected structuredContent.pages (a list), not isError: " + text.slice(0, 300)); process.exit(1);
    }
  }
});' "$1" "$EXPECTED_TOOLS"
}

for era in legacy modern; do
    out="$SCRATCH/tools-$era.json"
    rc=0
    inspector_run --protocol-era "$era" --method tools/list \
        --header "Authorization: Bearer $NIB_TOKEN" >"$out" 2>"$out.err" || rc=$?
    if [[ "$rc" -ne 0 ]]; then
        icheck "[$era] tools/list" 1 "exit $rc: $(head -c 400 "$out.err")"
    else
        reason="$(json_check tools <"$out")" && ok=0 || ok=1
        icheck "[$era] tools/list lists the eight tools" "$ok" "$reason"
    fi

    out="$SCRATCH/call-$era.json"
    rc=0
    inspector_run --protocol-era "$era" --method tools/call --tool-name list_pages \
        --header "Authorization: Bearer $NIB_TOKEN" >"$out" 2>"$out.err" || rc=$?
    if [[ "$rc" -ne 0 ]]; then
        icheck "[$era] tools/call list_pages" 1 "exit $rc: $(head -c 400 "$out.err")"
    else
        reason="$(json_check pages <"$out")" && ok=0 || ok=1
        icheck "[$era] tools/call list_pages returns pages" "$ok" "$reason"
    fi
done

rc=0
inspector_run --protocol-era legacy --method tools/list >"$SCRATCH/noauth.json" 2>"$SCRATCH/noauth.err" || rc=$?
if [[ "$rc" -ne 0 ]] && grep -q 'auth_required' "$SCRATCH/noauth.err"; then
    icheck "tools/list without the token is refused (auth_required)" 0 ""
else
    icheck "tools/list without the token is refused (auth_required)" 1 \
        "exit $rc: $(head -c 300 "$SCRATCH/noauth.json") $(head -c 300 "$SCRATCH/noauth.err")"
fi

echo "inspector: $ipassed passed, $ifailed failed"
[[ "$ifailed" -eq 0 ]] || status=1

if ! kill -0 "$NIB_PID" 2>/dev/null; then
    echo "clients: nib serve died during the run" >&2
    status=1
fi
if [[ "$status" -ne 0 ]]; then
    nib_dump_logs
fi
exit "$status"
