#!/usr/bin/env bash
# OAuth end to end against a real `nib serve` (its authorization server on, default rate limits):
#   1. the official TypeScript SDK's OAuth client provider (tests/oauth/e2e.mjs): discovery from
#      the 401, dynamic registration, the consent page filled in headless Chromium, the code
#      exchange, tool calls, a refresh after a 401, refresh-token reuse, scope step-up;
#   2. the official conformance suite's authorization-server checks (tests/oauth/conformance.mjs
#      runs `conformance authorization` and plays the browser for its code-grant scenario).
# Needs: target/debug/nib (this script builds nothing), `make tools-node`, and Debian's chromium
# (`make test` installs it when missing).
# Environment (optional):
#   NIB_BIN                  the binary to test instead of target/debug/nib
#   CHROMIUM_BIN             the browser (default /usr/bin/chromium)
#   NIB_UPDATE_SCREENSHOT=1  save the consent page to docs/consent.png (for the README)
set -euo pipefail

# shellcheck source=tests/lib/server.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/server.sh"
HERE="$ROOT/tests/oauth"

nib_require_bin
nib_require_node
if [[ ! -x "${CHROMIUM_BIN:-/usr/bin/chromium}" ]]; then
    echo "error: ${CHROMIUM_BIN:-/usr/bin/chromium} is missing." >&2
    echo "       Install it with: apt-get install -y chromium chromium-driver (make test does)" >&2
    exit 2
fi
export NODE_PATH="$ROOT/.tools/npm/node_modules"

SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/nib-oauth.XXXXXX")"
cleanup() {
    nib_stop
    rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

nib_start --bind 127.0.0.1:0
ISSUER="${NIB_URL%/mcp}"
# The first start prints the default user's sign-in password just after its token.
PASSWORD=""
for _ in $(seq 1 50); do
    line="$(grep -m1 -E '^nib: password for user default ' "$NIB_WORK/stdout" 2>/dev/null || true)"
    if [[ -n "$line" ]]; then
        PASSWORD="$(sed -E 's/^[^:]+: [^:]+: ([^ ]+).*/\1/' <<<"$line")"
        break
    fi
    sleep 0.1
done
if [[ -z "$PASSWORD" ]]; then
    echo "error: nib serve printed no 'nib: password for user default ...' line" >&2
    nib_dump_logs
    exit 1
fi
echo "oauth: testing $NIB_URL (issuer $ISSUER)"

# The tests import playwright-core and the SDK from .tools/npm: run them from a copy there, where
# Node's module resolution finds them.
RUNDIR="$ROOT/.tools/npm/oauth-tests"
rm -rf "$RUNDIR"
mkdir -p "$RUNDIR"
cp "$HERE"/*.mjs "$RUNDIR/"

status=0

echo
echo "== TypeScript SDK client (@modelcontextprotocol/sdk $(node -p 'require(process.env.NODE_PATH + "/@modelcontextprotocol/sdk/package.json").version'))"
shot="$SCRATCH/consent.png"
[[ "${NIB_UPDATE_SCREENSHOT:-}" == 1 ]] && shot="$ROOT/docs/consent.png" && mkdir -p "$ROOT/docs"
node "$RUNDIR/e2e.mjs" "$NIB_URL" "$PASSWORD" "$shot" || status=1

echo
echo "== conformance authorization ($(conformance --version 2>/dev/null || echo '?'))"
# A public client registered like any other (RFC 7591). Its redirect URI has no port: loopback
# redirects may use any (RFC 8252), so the suite's callback port can be picked freely.
client_id="$(curl -sS -X POST "$ISSUER/oauth/register" -H 'content-type: application/json' \
    -d '{"client_name":"MCP conformance suite","redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}' |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).client_id||""))')"
if [[ -z "$client_id" ]]; then
    echo "error: could not register a client for the conformance suite" >&2
    status=1
else
    port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
    node "$RUNDIR/conformance.mjs" "$ISSUER" "$NIB_URL" "$client_id" "$PASSWORD" "$port" \
        "$SCRATCH/conformance" || status=1
fi

if ! kill -0 "$NIB_PID" 2>/dev/null; then
    echo "oauth: nib serve died during the run" >&2
    status=1
fi
if [[ "$status" -ne 0 ]]; then
    nib_dump_logs
fi
rm -rf "$RUNDIR"
exit "$status"
