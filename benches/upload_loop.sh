#!/usr/bin/env bash
# A focused upload measure (issue 14): `PUT /containers/{id}/archive` of a tar of random bytes,
# sent by curl, straight to the daemon and through one or more proxies, alternated round by
# round (the order rotates), chunked (as the docker CLI sends it) or with Content-Length, or
# `docker cp` itself (CLI=1: the CLI's own tar stream, sent in 32 KiB chunks).
#
#   benches/upload_loop.sh [DW_BIN ...]    # default: this tree's target/release/dockwarden
#
# Env: DW_DAEMON (/var/run/docker.sock), DW_IMAGE (dockwarden-test:latest), MIB (256),
# ROUNDS (5), CHUNKED (1: `Transfer-Encoding: chunked`; 0: Content-Length), CLI (0; 1: `docker
# cp` of the file instead of curl), BARE=1 to add examples/bare_forwarder. Prints one line per
# sample and the median and range per target.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
DAEMON=${DW_DAEMON:-/var/run/docker.sock}
IMAGE=${DW_IMAGE:-dockwarden-test:latest}
MIB=${MIB:-256}
ROUNDS=${ROUNDS:-5}
CHUNKED=${CHUNKED:-1}
BINS=("$@")
[ ${#BINS[@]} -gt 0 ] || BINS=("$TARGET_DIR/release/dockwarden")

TMP=$(mktemp -d /tmp/dwup.XXXXXX)
PIDS=() CTR=dwup-$$-$RANDOM
cleanup() {
    set +e
    for k in $(seq 1 ${#BINS[@]}); do docker -H "unix://$DAEMON" rm -f "$CTR-$k" >/dev/null 2>&1; done
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

NAMES=(direct) SOCKS=("$DAEMON")
i=0
for b in "${BINS[@]}"; do
    mkdir -p "$TMP/ws$i"
    "$b" proxy --listen "$TMP/p$i.sock" --upstream "$DAEMON" --workspace "$TMP/ws$i" \
        --audit-log "$TMP/audit$i.log" >/dev/null 2>"$TMP/p$i.log" &
    PIDS+=($!)
    NAMES+=("$(basename "$b")#$i") SOCKS+=("$TMP/p$i.sock")
    i=$((i + 1))
done
if [ "${BARE:-0}" = 1 ]; then
    "$TARGET_DIR/release/examples/bare_forwarder" "$TMP/bare.sock" "$DAEMON" 2>"$TMP/bare.log" &
    PIDS+=($!)
    NAMES+=(bare) SOCKS+=("$TMP/bare.sock")
fi
for s in "${SOCKS[@]}"; do
    for _ in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
done
# One container per dockwarden, made through it (it refuses containers it did not create);
# direct and the bare forwarder use the first.
CTRS=()
for k in "${!NAMES[@]}"; do
    if [ "$k" -ge 1 ] && [ "$k" -le ${#BINS[@]} ]; then
        DOCKER_HOST="unix://${SOCKS[$k]}" docker run -d --name "$CTR-$k" "$IMAGE" sleep 3600 >/dev/null
        CTRS+=("$CTR-$k")
    else
        CTRS+=("$CTR-1")
    fi
done
head -c $((MIB << 20)) /dev/urandom >"$TMP/blob"
tar -C "$TMP" -cf "$TMP/up.tar" blob
[ "${CLI:-0}" = 1 ] || rm "$TMP/blob"
hdr=()
[ "$CHUNKED" = 1 ] && hdr=(-H "Transfer-Encoding: chunked")

n=${#NAMES[@]}
for r in $(seq "$ROUNDS"); do
    for k in $(seq 0 $((n - 1))); do
        j=$(((k + r) % n))
        if [ "${CLI:-0}" = 1 ]; then
            t0=$(date +%s.%N)
            docker -H "unix://${SOCKS[$j]}" cp "$TMP/blob" "${CTRS[$j]}:/tmp/blob" >/dev/null
            t="$(python3 -c "print($(date +%s.%N) - $t0)") 200"
        else
            t=$(curl -sS -o /dev/null -w '%{time_total} %{http_code}' --unix-socket "${SOCKS[$j]}" -X PUT \
                "${hdr[@]}" -H 'Content-Type: application/x-tar' --data-binary "@$TMP/up.tar" \
                "http://docker/v1.41/containers/${CTRS[$j]}/archive?path=/tmp")
        fi
        set -- $t
        [ "$2" = 200 ] || { echo "${NAMES[$j]}: HTTP $2" >&2; exit 1; }
        echo "sample ${NAMES[$j]} $(python3 -c "print(f'{$MIB / $1:.1f}')") MiB/s"
    done
done | tee "$TMP/samples" >&2
python3 - "$TMP/samples" <<'EOF'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    _, name, v, _ = line.split()
    by.setdefault(name, []).append(float(v))
base = statistics.median(by["direct"])
for name, vs in by.items():
    m = statistics.median(vs)
    print(f"{name:24} median {m:7.1f} MiB/s  ({min(vs):.1f}-{max(vs):.1f})  {m / base:.2f}x direct")
EOF
