#!/usr/bin/env bash
# A focused Compose measure (issue 14): `docker compose up -d` and `down` of the 5-service
# project `benches/e2e.sh` uses, straight to the daemon and through one or more proxies,
# alternated round by round (the order rotates), wall time of each command.
#
#   benches/compose_loop.sh [DW_BIN ...]   # default: this tree's target/release/dockwarden
#
# Env: DW_DAEMON (/var/run/docker.sock), DW_IMAGE (dockwarden-test:latest), ROUNDS (10),
# DOCKER (docker). Prints one line per sample, then per target the median and range of each
# measure and the ratio of medians direct/target (above 1: the target is slower).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DAEMON=${DW_DAEMON:-/var/run/docker.sock}
IMAGE=${DW_IMAGE:-dockwarden-test:latest}
ROUNDS=${ROUNDS:-10}
DOCKER=${DOCKER:-docker}
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$TARGET_DIR/release/dockwarden")

TMP=$(mktemp -d /tmp/dwcompose.XXXXXX)
PIDS=()
cleanup() {
	set +e
	for k in $(seq 0 ${#BINS[@]}); do
		DOCKER_HOST="unix://$DAEMON" "$DOCKER" compose -p "dwcl$$-$k" -f "$TMP/compose.yaml" down -t 0 >/dev/null 2>&1
	done
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

{
	echo "services:"
	for i in 1 2 3 4 5; do
		printf '  s%s:\n    image: %s\n    pull_policy: never\n    command: ["sleep", "86400"]\n    stop_signal: SIGKILL\n' "$i" "$IMAGE"
	done
} >"$TMP/compose.yaml"

. "$ROOT/benches/proxies.sh"
start_proxies

now() { date +%s.%N; }
n=${#SOCKS[@]}
for r in $(seq "$ROUNDS"); do
	for j in $(seq 0 $((n - 1))); do
		k=$(((j + r) % n))
		export DOCKER_HOST="unix://${SOCKS[$k]}"
		t0=$(now)
		"$DOCKER" compose -p "dwcl$$-$k" -f "$TMP/compose.yaml" up -d >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
		t1=$(now)
		"$DOCKER" compose -p "dwcl$$-$k" -f "$TMP/compose.yaml" down >/dev/null 2>"$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
		t2=$(now)
		echo "$r $k up $(echo "$t1 - $t0" | bc) down $(echo "$t2 - $t1" | bc) load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$TMP/samples"
	done
done
unset DOCKER_HOST
python3 - "$TMP/samples" "${NAMES[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
names = sys.argv[2:]
med = {}
for k, name in enumerate(names):
    for what, col in (("up", 3), ("down", 5)):
        v = [float(r[col]) for r in rows if int(r[1]) == k]
        med[(k, what)] = statistics.median(v)
        ratio = med[(0, what)] / med[(k, what)]
        print(f"{name:>40} {what:>4}: median {med[(k, what)]:.3f} s ({min(v):.3f}-{max(v):.3f}), direct/target {ratio:.3f}")
PY
