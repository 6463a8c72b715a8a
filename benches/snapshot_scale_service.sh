#!/usr/bin/env bash
# Resident memory of `dockwarden serve` while it snapshots a large tree (issue 16's service
# memory target: peak <= 150 MiB, idle < 30 MiB afterwards).
#
#   benches/snapshot_scale_service.sh TREE WORK [DOCKWARDEN]
#
# Starts the real service (root, --no-docker) with its state directory in WORK, creates a
# workspace, hard-links TREE into its worktree (`cp -al`: same files, no copy), then takes a
# first snapshot and an unchanged incremental through the API while sampling
# /proc/<pid>/status. Prints one line:
#   service_rss start_kib peak_first_kib peak_kib idle_kib
# (VmRSS before the first snapshot, VmHWM after it, VmHWM after the incremental, VmRSS 10 s
# after the incremental). Stops the service and removes its state directory.
set -euo pipefail
TREE=$1
WORK=$2
DW=${3:-target/release/dockwarden}
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (workspace uids)" >&2; exit 0; }
STATE=$WORK/svc-state
SOCK=$WORK/svc.sock
rm -rf "$STATE" "$SOCK"
"$DW" serve --socket "$SOCK" --state-dir "$STATE" --uid-base 47000 --uid-count 5 \
	--no-docker 2>"$WORK/svc.log" &
PID=$!
cleanup() {
	kill -TERM "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	rm -rf "$STATE" "$SOCK"
}
trap cleanup EXIT
api() { curl -sf --unix-socket "$SOCK" -X "$1" "http://ws$2" ${3:+-H 'content-type: application/json' -d "$3"}; }
for _ in $(seq 100); do api GET /v1/health >/dev/null 2>&1 && break; sleep 0.1; done
api POST /v1/workspaces '{"id":"big"}' >/dev/null
WT=$STATE/workspaces/big/worktree
cp -al "$TREE/." "$WT/"
sleep 1
field() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$PID/status"; }
START=$(field VmRSS)
api POST /v1/workspaces/big/snapshot >/dev/null
PEAK1=$(field VmHWM)
api POST /v1/workspaces/big/snapshot >/dev/null
PEAK=$(field VmHWM)
sleep 10
IDLE=$(field VmRSS)
# Where the idle memory is: the largest resident mappings.
awk '/^[0-9a-f]+-[0-9a-f]+ /{m=$0} /^Rss:/{print $2, m}' "/proc/$PID/smaps" | sort -rn >"$WORK/svc-idle-maps.txt" || true
echo "service_rss $START $PEAK1 $PEAK $IDLE"
