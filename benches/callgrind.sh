#!/usr/bin/env bash
# Instructions per proxied request (issue 14), the measure that does not move with the load of
# a shared machine: the proxy under valgrind's callgrind, warmed up, counters zeroed, then
# examples/loadgen at one connection for a few seconds, counters dumped, instructions divided by
# the requests served (user space only).
#
#   benches/callgrind.sh [DW_BIN ...]      # default: this tree's target/release/dockwarden
#
# Env: DW_DAEMON (default /var/run/docker.sock), DW_IMAGE (dockwarden-test:latest),
# SECS (4), ROUNDS (1), BARE=1 to measure examples/bare_forwarder too, KEEP=dir to keep the
# callgrind files (for callgrind_annotate).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DAEMON=${DW_DAEMON:-/var/run/docker.sock}
IMAGE=${DW_IMAGE:-dockwarden-test:latest}
SECS=${SECS:-4}
ROUNDS=${ROUNDS:-1}
LOADGEN=$TARGET_DIR/release/examples/loadgen
[ -x "$LOADGEN" ] || (cd "$ROOT" && cargo build --release --example loadgen --example bare_forwarder)
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$TARGET_DIR/release/dockwarden")
[ "${BARE:-0}" = 1 ] && BINS+=(bare)

TMP=$(mktemp -d /tmp/dwcg.XXXXXX)
PID= CTR=
cleanup() {
    set +e
    [ -n "$CTR" ] && docker -H "unix://$DAEMON" rm -f "$CTR" >/dev/null 2>&1
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

start() { # start BIN OUTFILE
    rm -f "$TMP/p.sock"
    if [ "$1" = bare ]; then
        valgrind --tool=callgrind --callgrind-out-file="$2" "$TARGET_DIR/release/examples/bare_forwarder" \
            "$TMP/p.sock" "$DAEMON" 2>"$TMP/vg.log" &
    else
        mkdir -p "$TMP/ws"
        valgrind --tool=callgrind --callgrind-out-file="$2" "$1" proxy --listen "$TMP/p.sock" \
            --upstream "$DAEMON" --workspace "$TMP/ws" --audit-log "$TMP/audit.log" >/dev/null 2>"$TMP/vg.log" &
    fi
    PID=$!
    for _ in $(seq 300); do [ -S "$TMP/p.sock" ] && return; sleep 0.1; done
    echo "proxy did not come up" >&2; cat "$TMP/vg.log" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; PID=; }

# measure OUTFILE PATH LABEL: instructions per request
measure() {
    "$LOADGEN" "$TMP/p.sock" "$2" 1 2 >/dev/null # warm-up
    callgrind_control -z "$PID" >/dev/null 2>&1
    local reqs
    reqs=$("$LOADGEN" "$TMP/p.sock" "$2" 1 "$SECS" | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requests"])')
    callgrind_control -d "$PID" >/dev/null 2>&1
    sleep 0.5
    local f ir
    f=$(ls -t "$1".* 2>/dev/null | head -1)
    ir=$(awk '/^summary:/ {print $2}' "$f")
    [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$f" "$KEEP/$3-$(echo "$2" | cut -c1-20 | tr -c 'a-z0-9\n' _)"
    rm -f "$1".*
    python3 -c "print(f'{$ir / $reqs:,.0f}')"
}

for round in $(seq "$ROUNDS"); do
    for b in "${BINS[@]}"; do
        start "$b" "$TMP/cg.out"
        if [ -z "$CTR" ]; then
            CTR=dwcg-$$-$RANDOM
            DOCKER_HOST="unix://$TMP/p.sock" docker run -d --name "$CTR" "$IMAGE" sleep 3600 >/dev/null
        fi
        label=$(basename "$b")-r$round
        ping=$(measure "$TMP/cg.out" /_ping "$label")
        insp=$(measure "$TMP/cg.out" "/v1.41/containers/$CTR/json" "$label")
        echo "round $round  $b  /_ping ${ping} instr/req  inspect ${insp} instr/req"
        stop
    done
done
