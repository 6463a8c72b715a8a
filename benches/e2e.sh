#!/usr/bin/env bash
# End-to-end bench: the direct daemon socket, a bare hyper forwarder with no policy
# (examples/bare_forwarder.rs), HAProxy (benches/haproxy.cfg) and dockwarden, side by side
# against the same dockerd, rotating the order of the four targets within every round.
#
#   benches/e2e.sh [--quick] [--rounds N] [--out DIR]
#   DW_BIN=/path/to/other/dockwarden benches/e2e.sh --out /tmp/before   # compare two builds
#
# Needs: a running dockerd at $DW_DAEMON (default /var/run/docker.sock), the image
# dockwarden-test:latest (fixtures/make-test-image.sh), haproxy, python3 and the docker CLI.
# The load generator is examples/loadgen.rs (built here; one thread, to leave the CPU to the
# targets); DW_LOADGEN=oha uses `oha` instead (`cargo install oha --locked`). Writes
# DIR/results.csv, results.json, results.md and chart.svg (DIR defaults to benches/results).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DAEMON=${DW_DAEMON:-/var/run/docker.sock}
IMAGE=${DW_IMAGE:-dockwarden-test:latest}
DOCKER=${DOCKER:-$(command -v docker)}
OUT=$ROOT/benches/results
QUICK=0
ROUNDS=3
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1; ROUNDS=1 ;;
        --rounds) ROUNDS=$2; shift ;;
        --out) OUT=$2; shift ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
if [ $QUICK = 1 ]; then DUR=1s; STREAM_MIB=256; CP_MIB=64; BIG_MIB=64; RUNS=2; REPS=1; else DUR=3s; STREAM_MIB=1024; CP_MIB=256; BIG_MIB=256; RUNS=3; REPS=2; fi
# Transfers and compose are timed REPS times per target per round (single ~1 s samples moved
# 1.5-2x between rounds on this machine).
REPS=${DW_REPS:-$REPS}
STREAMS=${DW_STREAMS:-1000}
LOADGEN=${DW_LOADGEN:-loadgen}
for tool in haproxy socat python3 "$DOCKER" $([ "$LOADGEN" = oha ] && echo oha); do
    command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 2; }
done
ulimit -n 16384 2>/dev/null || ulimit -n "$(ulimit -Hn)"

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
(cd "$ROOT" && cargo build --release --quiet --bin dockwarden --example loadgen --example bare_forwarder 2>/dev/null) ||
    (cd "$ROOT" && cargo build --release --bin dockwarden --example loadgen --example bare_forwarder)
# DW_BIN runs another build of the proxy (for before/after comparisons); the default is this tree's.
DW_BIN=${DW_BIN:-$TARGET_DIR/release/dockwarden}

TMP=$(mktemp -d /tmp/dwbench.XXXXXX)
NAME=dwbench-$$-$RANDOM
DW_PID= HAP_PID= BARE_PID= RELAY_PID=
TARGETS=(direct socat bare haproxy dockwarden)
cleanup() {
    set +e
    "$DOCKER" -H "unix://$DAEMON" rm -f "$NAME" >/dev/null 2>&1
    for t in "${TARGETS[@]}"; do
        DOCKER_HOST="unix://$DAEMON" "$DOCKER" compose -p "$NAME-$t" -f "$TMP/compose.yaml" down -t 0 >/dev/null 2>&1
        "$DOCKER" -H "unix://$DAEMON" rmi -f "$NAME-ctx-$t" >/dev/null 2>&1
    done
    "$DOCKER" -H "unix://$DAEMON" rmi -f "$NAME-load" >/dev/null 2>&1
    for p in "$DW_PID" "$HAP_PID" "$BARE_PID" "$RELAY_PID"; do
        [ -n "$p" ] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/ws" "$OUT"
"$DW_BIN" proxy --listen "$TMP/dw.sock" --upstream "$DAEMON" --workspace "$TMP/ws" \
    --audit-log "$TMP/audit.log" >/dev/null 2>"$TMP/dw.log" &
DW_PID=$!
DW_HAPROXY_LISTEN=$TMP/hap.sock DW_DAEMON=$DAEMON haproxy -f "$ROOT/benches/haproxy.cfg" -db >"$TMP/hap.log" 2>&1 &
HAP_PID=$!
"$TARGET_DIR/release/examples/bare_forwarder" "$TMP/bare.sock" "$DAEMON" 2>"$TMP/bare.log" &
BARE_PID=$!
# The floor of any relay: socat copying bytes between the two sockets (one process per
# connection, 1 MiB buffers), no HTTP at all. What it loses against direct is the hop itself.
socat -b 1048576 "UNIX-LISTEN:$TMP/relay.sock,fork,backlog=1024" "UNIX-CONNECT:$DAEMON" 2>"$TMP/relay.log" &
RELAY_PID=$!
for s in dw.sock hap.sock bare.sock relay.sock; do
    for _ in $(seq 100); do [ -S "$TMP/$s" ] && break; sleep 0.1; done
    [ -S "$TMP/$s" ] || { echo "$s did not come up" >&2; cat "$TMP"/*.log >&2; exit 1; }
done

sock() { case $1 in direct) echo "$DAEMON" ;; socat) echo "$TMP/relay.sock" ;; dockwarden) echo "$TMP/dw.sock" ;; haproxy) echo "$TMP/hap.sock" ;; bare) echo "$TMP/bare.sock" ;; esac; }
dk() { local t=$1; shift; DOCKER_HOST="unix://$(sock "$t")" DOCKER_CLI_HINTS=false "$DOCKER" "$@"; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.6f}')" "$1" "$2"; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

CSV=$OUT/results.csv
echo "round,measure,target,value,unit,better" >"$CSV"
row() { echo "$ROUND,$1,$2,$3,$4,$5" >>"$CSV"; }

# Created through dockwarden: it refuses containers made directly on the daemon
# (`container.foreign`); the other targets can use any container.
dk dockwarden run -d --name "$NAME" "$IMAGE" sleep 86400 >/dev/null
dk direct exec "$NAME" sh -c "head -c $((CP_MIB << 20)) /dev/zero > /tmp/big"
head -c $((CP_MIB << 20)) /dev/zero >"$TMP/big"
# A build context of BIG_MIB (the classic builder: the context is the request body of POST /build),
# and an image with a BIG_MIB layer saved to a tar for `docker load` (uploads) and `docker save`
# (downloads). Random bytes, so nothing on the way can shortcut zeros.
mkdir -p "$TMP/ctx" "$TMP/img"
head -c $((BIG_MIB << 20)) /dev/urandom >"$TMP/ctx/blob"
printf 'FROM %s\nLABEL dwbench=1\n' "$IMAGE" >"$TMP/ctx/Dockerfile"
ln "$TMP/ctx/blob" "$TMP/img/blob"
printf 'FROM %s\nCOPY blob /blob\n' "$IMAGE" >"$TMP/img/Dockerfile"
DOCKER_BUILDKIT=0 dk direct build -q -t "$NAME-load" "$TMP/img" >/dev/null 2>&1
dk direct save -o "$TMP/img.tar" "$NAME-load"
IMG_MIB=$(python3 -c "import os; print(os.path.getsize('$TMP/img.tar') / 1048576)")
# Five services of the test image; SIGKILL so `down` does not wait out sleep's 10 s grace.
{
    echo "services:"
    for i in 1 2 3 4 5; do
        printf '  s%s:\n    image: %s\n    pull_policy: never\n    command: ["sleep", "86400"]\n    stop_signal: SIGKILL\n' "$i" "$IMAGE"
    done
} >"$TMP/compose.yaml"
dk dockwarden version >/dev/null 2>&1 || true
ROUND=0
row rss_idle_fresh dockwarden "$(rss_kib "$DW_PID")" KiB lower
row rss_idle_fresh haproxy "$(rss_kib "$HAP_PID")" KiB lower

load() { # target path conns -> rps p50_ms p99_ms
    local s; s=$(sock "$1")
    if [ "$LOADGEN" = oha ]; then
        oha --no-tui --output-format json -z "$DUR" -c "$3" --unix-socket "$s" "http://docker$2" 2>/dev/null
    else
        "$TARGET_DIR/release/examples/loadgen" "$s" "$2" "$3" "$DUR"
    fi |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
codes = d.get("statusCodeDistribution", {})
bad = {k: v for k, v in codes.items() if k != "200"}
if bad or not codes:
    sys.exit(f"unexpected status codes: {codes}")
p = d["latencyPercentiles"]
print(d["summary"]["requestsPerSec"], p["p50"] * 1e3, p["p99"] * 1e3)'
}

order() { # rotate the four targets by the round number
    local i n=${#TARGETS[@]}
    for ((i = 0; i < n; i++)); do echo "${TARGETS[$(((i + ROUND) % n))]}"; done
}
# Waits until the bench container runs nothing but its own process (an exec that ended on the
# client side may still be running in the daemon), then a moment more for the daemon to settle.
settle() {
    local i
    for i in $(seq 100); do
        [ "$(dk direct top "$NAME" 2>/dev/null | tail -n +2 | wc -l)" -le 1 ] && break
        sleep 0.1
    done
    sleep 0.5
}
rate() { python3 -c "import sys; print(float(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2])))" "$@"; }

for ROUND in $(seq 1 "$ROUNDS"); do
    echo "round $ROUND/$ROUNDS" >&2
    for ep in ping inspect; do
        path=/_ping; [ $ep = inspect ] && path=/v1.41/containers/$NAME/json
        for c in 1 16 64; do
            for t in $(order); do
                read -r rps p50 p99 < <(load "$t" "$path" "$c")
                row "${ep}_c${c}_rps" "$t" "$rps" req/s higher
                row "${ep}_c${c}_p50" "$t" "$p50" ms lower
                row "${ep}_c${c}_p99" "$t" "$p99" ms lower
            done
        done
    done
    for t in $(order); do
        for _ in $(seq "$RUNS"); do
            t0=$(now); dk "$t" run --rm "$IMAGE" true >/dev/null; t1=$(now)
            row docker_run "$t" "$(elapsed "$t0" "$t1")" s lower
        done
    done
    bytes=$((STREAM_MIB << 20))
    for t in $(order); do
        # HAProxy 2.4+ drops `Upgrade: tcp` from a request with a body (exec start), so
        # `docker exec` fails through it (haproxy/haproxy#2684): not run (missing, not zero). It
        # used to be tried, and the daemon went on running and discarding the failed exec's
        # 1 GiB for a few seconds, which slowed whichever target came next.
        if [ "$t" = haproxy ]; then
            echo "exec via haproxy: not run (HAProxy 2.6 drops Upgrade: tcp from exec start; see benches/README.md)" >&2
            continue
        fi
        for _ in $(seq "$REPS"); do
        settle
        t0=$(now)
        if dk "$t" exec "$NAME" sh -c "head -c $bytes /dev/zero" >/dev/null 2>"$TMP/err"; then
            t1=$(now); row exec_stdout "$t" "$(python3 -c "print($bytes / 1048576 / ($t1 - $t0))")" MiB/s higher
        else
            echo "exec_stdout via $t failed: $(head -c 200 "$TMP/err")" >&2
        fi
        settle
        t0=$(now)
        if head -c $bytes /dev/zero | dk "$t" exec -i "$NAME" sh -c 'cat > /dev/null' 2>"$TMP/err"; then
            t1=$(now); row exec_stdin "$t" "$(python3 -c "print($bytes / 1048576 / ($t1 - $t0))")" MiB/s higher
        else
            echo "exec_stdin via $t failed: $(head -c 200 "$TMP/err")" >&2
        fi
        done
    done
    for t in $(order); do
        for _ in $(seq "$REPS"); do
        rm -f "$TMP/out"
        t0=$(now); dk "$t" cp "$NAME:/tmp/big" "$TMP/out"; t1=$(now)
        row cp_from_container "$t" "$(python3 -c "print($CP_MIB / ($t1 - $t0))")" MiB/s higher
        t0=$(now); dk "$t" cp "$TMP/big" "$NAME:/tmp/up"; t1=$(now)
        row cp_to_container "$t" "$(python3 -c "print($CP_MIB / ($t1 - $t0))")" MiB/s higher
        done
    done
    for t in $(order); do
        for _ in $(seq "$REPS"); do
        # Uploads: a build context (classic builder, request body) and `docker load`.
        t0=$(now)
        if DOCKER_BUILDKIT=0 dk "$t" build -q -t "$NAME-ctx-$t" "$TMP/ctx" >/dev/null 2>"$TMP/err"; then
            t1=$(now); row build_context "$t" "$(rate "$BIG_MIB" "$t0" "$t1")" MiB/s higher
        else
            echo "build_context via $t failed: $(grep -v -i -e deprecated -e buildkit -e environment-variable -e '^ *$' "$TMP/err" | head -c 200)" >&2
        fi
        dk direct rmi -f "$NAME-ctx-$t" >/dev/null 2>&1 || true
        dk direct rmi -f "$NAME-load" >/dev/null
        t0=$(now)
        if dk "$t" load -q -i "$TMP/img.tar" >/dev/null 2>"$TMP/err"; then
            t1=$(now); row image_load "$t" "$(rate "$IMG_MIB" "$t0" "$t1")" MiB/s higher
        else
            echo "image_load via $t failed: $(head -c 200 "$TMP/err")" >&2
            dk direct load -q -i "$TMP/img.tar" >/dev/null
        fi
        # Download: `docker save` of the same image.
        t0=$(now)
        if dk "$t" save "$NAME-load" >/dev/null 2>"$TMP/err"; then
            t1=$(now); row image_save "$t" "$(rate "$IMG_MIB" "$t0" "$t1")" MiB/s higher
        else
            echo "image_save via $t failed: $(head -c 200 "$TMP/err")" >&2
        fi
        done
    done
    for t in $(order); do
        for _ in $(seq "$REPS"); do
        t0=$(now)
        if dk "$t" compose -p "$NAME-$t" -f "$TMP/compose.yaml" up -d >/dev/null 2>"$TMP/err"; then
            t1=$(now); row compose_up "$t" "$(elapsed "$t0" "$t1")" s lower
        else
            echo "compose up via $t failed: $(head -c 300 "$TMP/err")" >&2
        fi
        t0=$(now)
        if dk "$t" compose -p "$NAME-$t" -f "$TMP/compose.yaml" down >/dev/null 2>"$TMP/err"; then
            t1=$(now); row compose_down "$t" "$(elapsed "$t0" "$t1")" s lower
        else
            echo "compose down via $t failed: $(head -c 300 "$TMP/err")" >&2
            DOCKER_HOST="unix://$DAEMON" "$DOCKER" compose -p "$NAME-$t" -f "$TMP/compose.yaml" down -t 0 >/dev/null 2>&1 || true
        fi
        done
    done
    row rss_idle dockwarden "$(rss_kib "$DW_PID")" KiB lower
    row rss_idle haproxy "$(rss_kib "$HAP_PID")" KiB lower
    for t in dockwarden haproxy; do
        pid=$DW_PID; [ $t = haproxy ] && pid=$HAP_PID
        kib=$(python3 "$ROOT/benches/hold_streams.py" "$(sock $t)" "$STREAMS" "$pid" 2>/dev/null | awk '{print $2}')
        row "rss_${STREAMS}_events" "$t" "$kib" KiB lower
        sleep 1
    done
done

MEM=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
cat >"$OUT/meta.json" <<JSON
{"date": "$(date -u +%Y-%m-%dT%H:%MZ)", "machine": "$(nproc) CPUs, $MEM RAM, $(uname -r)",
 "dockerd": "$("$DOCKER" -H "unix://$DAEMON" version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')",
 "haproxy": "$(haproxy -v | head -1 | awk '{print "HAProxy", $3}')", "rustc": "$(rustc -V | awk '{print "rustc", $2}')",
 "loadgen": "$([ "$LOADGEN" = oha ] && oha --version || echo examples/loadgen.rs)", "mode": "$([ $QUICK = 1 ] && echo quick || echo full)", "rounds": $ROUNDS,
 "dockwarden_bin": "$DW_BIN", "durations": "load ${DUR} per point, exec ${STREAM_MIB} MiB each way, cp ${CP_MIB} MiB each way, build context ${BIG_MIB} MiB, image load/save $(printf %.0f "$IMG_MIB") MiB, ${RUNS} docker runs and ${REPS} of each transfer and compose up/down per target per round"}
JSON
python3 "$ROOT/benches/report.py" "$CSV" "$OUT/meta.json" "$OUT"
