#!/usr/bin/env bash
# Parallel container creates (issue 14): N creates sent at once by curl (as Compose sends a
# project's creates), straight to the daemon and through one or more proxies, alternated
# round by round; wall time from the first request to the last answer. Shows whether a proxy
# lets the daemon make them in parallel (the container cap is counted per create).
#
#   benches/create_burst.sh [DW_BIN ...]   # default: this tree's target/release/dockwarden
#
# Env: DW_DAEMON (/var/run/docker.sock), DW_IMAGE (dockwarden-test:latest), N (10),
# ROUNDS (8). Prints the median and range per target and the ratio to direct.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DAEMON=${DW_DAEMON:-/var/run/docker.sock}
IMAGE=${DW_IMAGE:-dockwarden-test:latest}
N=${N:-10}
ROUNDS=${ROUNDS:-8}
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$TARGET_DIR/release/dockwarden")

TMP=$(mktemp -d /tmp/dwburst.XXXXXX)
LABEL=dwburst=$$
PIDS=()
remove() {
	local ids
	ids=$(docker -H "unix://$DAEMON" ps -aq --filter "label=$LABEL")
	[ -z "$ids" ] || docker -H "unix://$DAEMON" rm -f $ids >/dev/null
}
cleanup() {
	set +e
	remove
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

. "$ROOT/benches/proxies.sh"
start_proxies
body="{\"Image\":\"$IMAGE\",\"Cmd\":[\"true\"],\"Labels\":{\"dwburst\":\"$$\"}}"
n=${#SOCKS[@]}
for r in $(seq "$ROUNDS"); do
	for j in $(seq 0 $((n - 1))); do
		k=$(((j + r) % n))
		t0=$(date +%s.%N)
		curls=()
		for _ in $(seq "$N"); do
			curl -s -o /dev/null -w '%{http_code}\n' --unix-socket "${SOCKS[$k]}" \
				-H 'Content-Type: application/json' -d "$body" http://docker/v1.41/containers/create >>"$TMP/codes" &
			curls+=($!)
		done
		wait "${curls[@]}"
		t1=$(date +%s.%N)
		echo "$k $(echo "$t1 - $t0" | bc)" >>"$TMP/samples"
		remove
	done
done
bad=$(grep -vc '^201$' "$TMP/codes" || true)
[ "$bad" = 0 ] || { echo "$bad creates were not answered 201" >&2; exit 1; }
python3 - "$TMP/samples" "${NAMES[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = sys.argv[2:]
med = {}
for k, name in enumerate(names):
    v = [float(r[1]) for r in rows if int(r[0]) == k]
    med[k] = statistics.median(v)
    print(f"{name:>40}: median {med[k] * 1000:.0f} ms ({min(v) * 1000:.0f}-{max(v) * 1000:.0f}), {med[k] / med[0]:.2f}x direct")
PY
