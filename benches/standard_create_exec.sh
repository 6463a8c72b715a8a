#!/usr/bin/env bash
# Standard workspace create and exec through the CLI (issue 24, point 7): for each binary, a
# service of its own; per round, `ws create --repo <fixture> --runtime standard` then EXECS
# `ws exec <id> true`, then `ws delete`. Binaries alternate round by round, so load drift
# hits each alike. Wall time per call (the CLI process included), median and range.
#
#   benches/standard_create_exec.sh [DW_BIN ...]   # default: this tree's target/release/dockwarden
#
# Env: ROUNDS (20), EXECS (10), UID_BASE (27600; one range of 50 per binary). Needs root for
# what it measures (per-workspace uids and namespaces).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
ROUNDS=${ROUNDS:-20}
EXECS=${EXECS:-10}
UID_BASE=${UID_BASE:-27600}
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$TARGET_DIR/release/dockwarden")

TMP=$(mktemp -d /tmp/dwcreate.XXXXXX)
chmod 711 "$TMP"
PIDS=()
cleanup() {
	set +e
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

sh "$ROOT/fixtures/workspace/make-repo.sh" "$TMP/repo" >/dev/null
for k in "${!BINS[@]}"; do
	mkdir -p "$TMP/s$k"
	"${BINS[$k]}" serve --socket "$TMP/s$k/ws.sock" --state-dir "$TMP/s$k/state" \
		--uid-base $((UID_BASE + 50 * k)) --uid-count 50 2>"$TMP/s$k/serve.log" &
	PIDS+=($!)
done
for k in "${!BINS[@]}"; do
	for _ in $(seq 200); do [ -S "$TMP/s$k/ws.sock" ] && break; sleep 0.05; done
done
ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
for r in $(seq "$ROUNDS"); do
	for j in "${!BINS[@]}"; do
		k=$(((j + r) % ${#BINS[@]}))
		ws=("${BINS[$k]}" ws --socket "$TMP/s$k/ws.sock")
		t0=$(date +%s%N)
		"${ws[@]}" create --id "b$r" --repo "$TMP/repo" --runtime standard >/dev/null 2>&1
		echo "$k create $(ms "$t0")" >>"$TMP/samples"
		for _ in $(seq "$EXECS"); do
			t0=$(date +%s%N)
			"${ws[@]}" exec "b$r" true >/dev/null
			echo "$k exec $(ms "$t0")" >>"$TMP/samples"
		done
		"${ws[@]}" delete "b$r" >/dev/null
	done
done
python3 - "$TMP/samples" "${BINS[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for k, name in enumerate(sys.argv[2:]):
    for what in ("create", "exec"):
        v = [int(r[2]) for r in rows if int(r[0]) == k and r[1] == what]
        print(f"{name:>40} {what:>6}: median {statistics.median(v):.0f} ms ({min(v)}-{max(v)}), n={len(v)}")
PY
