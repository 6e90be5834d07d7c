#!/usr/bin/env bash
# The MCP App page viewer in a real browser: imports the sample notebook into a fresh data
# directory, makes a write and a read token, starts `nib serve` on it, and runs
# tests/apps/viewer.mjs (Debian's headless Chromium via playwright-core, as the OAuth tests do)
# with the small MCP Apps host of tests/apps/host.html.
# Needs: target/debug/nib (this script builds nothing), `make tools-node`, Debian's chromium.
# Environment (optional): NIB_BIN; CHROMIUM_BIN; VIEWER_SCREENSHOTS (a folder: writes
# viewer-desktop.png and viewer-phone.png there, e.g. docs/ for docs/user-guide.md).
set -euo pipefail

# shellcheck source=tests/lib/server.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/server.sh"

nib_require_bin
nib_require_node
if [[ ! -x "${CHROMIUM_BIN:-/usr/bin/chromium}" ]]; then
    echo "error: ${CHROMIUM_BIN:-/usr/bin/chromium} is missing." >&2
    echo "       Install it with: apt-get install -y chromium chromium-driver (make test does)" >&2
    exit 2
fi
export NODE_PATH="$ROOT/.tools/npm/node_modules"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/nib-apps.XXXXXX")"
SERVE_PID=""
cleanup() {
    if [[ -n "$SERVE_PID" ]]; then
        kill "$SERVE_PID" 2>/dev/null || true
        wait "$SERVE_PID" 2>/dev/null || true
    fi
    rm -rf "$WORK" "${RUNDIR:-}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

DATA="$WORK/data"
"$NIB" import --data-dir "$DATA" --ocr off "$ROOT/tests/data/sample" >/dev/null
# One handwritten page of the OCR sample (its truth file as the page's markdown), for the
# screenshots: the sample notebook's images are tiny placeholders.
HAND="$WORK/hand"
mkdir -p "$HAND"
cp "$ROOT/tests/data/ocr/2025-03-17.png" "$HAND/"
node -e '
const t = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const mark = { open: " ", done: "x", cancelled: "-", migrated: ">" };
const md = t.lines.map((l) => l.kind === "heading" ? `## ${l.text}` : l.kind === "task" ? `- [${mark[l.status] || " "}] ${l.text}` : l.kind === "bullet" ? `- ${l.text}` : l.text);
require("fs").writeFileSync(process.argv[2], md.join("\n") + "\n");
' "$ROOT/tests/data/ocr/2025-03-17.truth.json" "$HAND/2025-03-17.md"
"$NIB" import --data-dir "$DATA" --ocr off "$HAND" >/dev/null
token() { "$NIB" token create --data-dir "$DATA" --scope "$1" | grep -m1 -E '^nib_live_'; }
WRITE_TOKEN="$(token write)"
READ_TOKEN="$(token read)"

"$NIB" serve --data-dir "$DATA" --bind 127.0.0.1:0 >"$WORK/stdout" 2>"$WORK/stderr" &
SERVE_PID=$!
URL=""
for _ in $(seq 1 300); do
    URL="$(grep -m1 -oE '^nib: serving http://[^[:space:]]+/mcp' "$WORK/stdout" 2>/dev/null | sed 's/^nib: serving //' || true)"
    [[ -n "$URL" ]] && break
    if ! kill -0 "$SERVE_PID" 2>/dev/null; then
        echo "error: nib serve exited" >&2
        cat "$WORK/stderr" >&2
        exit 1
    fi
    sleep 0.1
done
if [[ -z "$URL" ]]; then
    echo "error: nib serve printed no 'nib: serving URL' line" >&2
    exit 1
fi
echo "apps: testing the page viewer against $URL"
# ES modules find packages beside them, not on NODE_PATH: run copies inside .tools/npm (as the
# OAuth tests do), one folder per worktree.
RUNDIR="$ROOT/.tools/npm/apps-tests-$(basename "$ROOT")"
rm -rf "$RUNDIR"
mkdir -p "$RUNDIR/apps" "$RUNDIR/oauth"
cp "$ROOT"/tests/apps/*.mjs "$ROOT"/tests/apps/host.html "$RUNDIR/apps/"
cp "$ROOT"/tests/oauth/browser.mjs "$RUNDIR/oauth/"
status=0
node "$RUNDIR/apps/viewer.mjs" "$URL" "$WRITE_TOKEN" "$READ_TOKEN" "${VIEWER_SCREENSHOTS:-}" || status=1
if [[ "$status" -ne 0 ]]; then
    echo "---- nib serve stderr (last 40 lines) ----" >&2
    tail -n 40 "$WORK/stderr" >&2 || true
fi
exit "$status"
