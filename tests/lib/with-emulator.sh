#!/usr/bin/env bash
# Runs a command (nextest, in `make test`) with an emulator zygote beside it: one Python process
# that has imported moto, from which every test's moto server is forked (testkit/emulator.py,
# testkit/src/emulator.rs) rather than started and imported anew. NIB_MOTO_ZYGOTE names its
# socket for the tests. The zygote stops when the command ends; the command's exit status is
# this script's. Needs `make tools-python`.
#   tests/lib/with-emulator.sh cargo nextest run --workspace
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${NIB_VENV:-$ROOT/.venv}/bin/python"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nib-emulator.XXXXXX")"
SOCKET="$WORK/zygote.sock"

# The zygote prints "ready" once it listens and has imported moto.
exec 3< <(exec "$PYTHON" "$ROOT/testkit/emulator.py" zygote "$SOCKET")
ZYGOTE=$!
cleanup() {
    kill "$ZYGOTE" 2>/dev/null || true
    wait "$ZYGOTE" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! read -r line <&3 || [[ "$line" != ready ]]; then
    echo "with-emulator: the emulator zygote did not start (run 'make tools-python')" >&2
    exit 2
fi
exec 3<&-

NIB_MOTO_ZYGOTE="$SOCKET" "$@"
