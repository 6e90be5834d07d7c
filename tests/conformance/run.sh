#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance, pinned in
# tests/tools/package.json) against a real `nib serve`, once per protocol era:
#   2025-11-25  stateful wire (initialize handshake)
#   2026-07-28  stateless wire (server/discover, per-request _meta, Mcp-Method/Mcp-Name headers)
# Each run uses `--suite all`: the default "active" suite leaves out every scenario introduced in
# 2026-07-28 (server-stateless, caching, http-header-validation, ...) and the "pending" ones.
# Failures listed in tests/conformance/expected-failures.yml are tolerated; anything else fails
# the run, and so does a baseline entry that now passes (the CLI calls it stale).
#
# Needs: target/debug/nib (a debug build: the suite's fixture tools, resources and prompts
# answer only in one, with NIB_CONFORMANCE_FIXTURES=1, which this script sets; see
# shared/src/mcp/fixtures.rs) and `make tools-node`. This script builds nothing.
# Environment (all optional):
#   NIB_BIN                     binary to test instead of target/debug/nib
#   CONFORMANCE_SPEC_VERSIONS   default "2025-11-25 2026-07-28"
#   CONFORMANCE_SCENARIO        run only this scenario (e.g. server-initialize)
#   CONFORMANCE_RESULTS         keep checks.json files here instead of a temporary folder
#   CONFORMANCE_BASELINE        another expected-failures file (for experiments)
set -euo pipefail

# shellcheck source=tests/lib/server.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/server.sh"

BASELINE="${CONFORMANCE_BASELINE:-$ROOT/tests/conformance/expected-failures.yml}"
SPEC_VERSIONS="${CONFORMANCE_SPEC_VERSIONS:-2025-11-25 2026-07-28}"

nib_require_bin
nib_require_node

RESULTS="${CONFORMANCE_RESULTS:-}"
CLEAN_RESULTS=""
if [[ -z "$RESULTS" ]]; then
    RESULTS="$(mktemp -d "${TMPDIR:-/tmp}/nib-conformance.XXXXXX")"
    CLEAN_RESULTS="$RESULTS"
fi
cleanup() {
    nib_stop
    if [[ -n "$CLEAN_RESULTS" ]]; then rm -rf "$CLEAN_RESULTS"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --public-discovery: the suite sends no credentials, so initialize, ping, tools/list and
# server/discover must be answered without a token.
NIB_CONFORMANCE_FIXTURES=1 nib_start --bind 127.0.0.1:0 --public-discovery
echo "conformance: testing $NIB_URL ($(conformance --version 2>/dev/null || echo '?'))"

# Prints one line per failing or warning check that the baseline does not excuse (WARNING counts
# as a failure against a baseline, as the CLI judges it), then the summary line
# "conformance VERSION: N passed, M failed" (checks with status SUCCESS / FAILURE).
summarize() {
    local version="$1" dir="$2"
    NODE_PATH="$ROOT/.tools/npm/node_modules" node - "$version" "$dir" "$BASELINE" <<'EOF'
const fs = require('fs');
const path = require('path');
const YAML = require('yaml'); // installed with the conformance package
const [version, dir, baselineFile] = process.argv.slice(2);
const entries = (YAML.parse(fs.readFileSync(baselineFile, 'utf8')) || {}).server || [];
const excused = (scenario, id) => entries.includes(scenario) || entries.includes(`${scenario}:${id}`);
let passed = 0, failed = 0, warnings = 0, skipped = 0, scenarios = 0, expected = 0;
const bad = [];
for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
  const file = path.join(dir, entry, 'checks.json');
  if (!fs.existsSync(file)) continue;
  // Folder names are server-<scenario>-<ISO timestamp with : and . replaced by ->.
  const scenario = entry.replace(/^server-/, '').replace(/-\d{4}-\d{2}-\d{2}T[\d-]+Z$/, '');
  scenarios++;
  for (const c of JSON.parse(fs.readFileSync(file, 'utf8'))) {
    if (c.status === 'SUCCESS') passed++;
    else if (c.status === 'FAILURE') failed++;
    else if (c.status === 'WARNING') warnings++;
    else if (c.status === 'SKIPPED') skipped++;
    if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
    if (excused(scenario, c.id)) { expected++; continue; }
    const msg = (c.errorMessage || c.description || '').replace(/\s+/g, ' ').slice(0, 240);
    bad.push(`  ${c.status === 'FAILURE' ? 'FAIL' : 'WARN'} ${scenario}:${c.id} - ${msg}`);
  }
}
if (bad.length) {
  console.log(`conformance ${version}: checks failing outside the baseline (scenario:check-id):`);
  for (const line of bad) console.log(line);
}
console.log(`conformance ${version}: ${scenarios} scenarios; ${warnings} warnings, ${skipped} skipped, ` +
  `${expected} failing or warning checks excused by the baseline`);
console.log(`conformance ${version}: ${passed} passed, ${failed} failed`);
EOF
}

status=0
for version in $SPEC_VERSIONS; do
    out="$RESULTS/$version"
    mkdir -p "$out"
    args=(server --url "$NIB_URL" --spec-version "$version" --expected-failures "$BASELINE" -o "$out")
    if [[ -n "${CONFORMANCE_SCENARIO:-}" ]]; then
        args+=(--scenario "$CONFORMANCE_SCENARIO")
    else
        args+=(--suite all)
    fi
    echo
    echo "== conformance $version: conformance ${args[*]}"
    rc=0
    conformance "${args[@]}" >"$out/log.txt" 2>&1 || rc=$?
    # The CLI prints little per scenario in suite mode; show its summary and baseline verdict.
    if grep -q '=== SUMMARY ===' "$out/log.txt"; then
        sed -n '/=== SUMMARY ===/,$p' "$out/log.txt"
    else
        cat "$out/log.txt"
    fi
    summarize "$version" "$out"
    if [[ "$rc" -ne 0 ]]; then
        echo "conformance $version: FAILED (exit $rc): failures not in $BASELINE, or stale baseline entries"
        status=1
    fi
    if ! kill -0 "$NIB_PID" 2>/dev/null; then
        echo "conformance: nib serve died during the $version run" >&2
        nib_dump_logs
        exit 1
    fi
done

if [[ "$status" -ne 0 ]]; then
    echo
    CLEAN_RESULTS=""  # keep the evidence
    echo "conformance: FAILED. The CLI's full logs and every checks.json are kept in $RESULTS"
    nib_dump_logs
fi
exit "$status"
