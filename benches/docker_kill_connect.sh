#!/usr/bin/env bash
# Bench (issue 27, point 8): kill and connect of a docker-compose workspace with two running
# containers. Per run and per binary: a fresh `dockwarden serve` (the test image preloaded),
# `ws create --runtime docker-compose`, two `docker run -d -u 999:999 dockwarden-test:latest sleep 1000`
# inside (PID 1 `sleep` ignores SIGTERM: the slow case; user 999 is in the workspace's
# subordinate range, so kill's stop of the workspace uid's processes does not end them first),
# then times
#   kill     `ws kill` (archive script, processes, snapshot, containers, daemons, namespace);
#   connect  `ws connect` then `ws exec docker ps` until it answers.
# Binaries alternate run by run (A B A B ...), so a comparison holds while the load drifts.
# Targets: kill ≤ 1 s, connect → `docker ps` ≤ 500 ms.
# Usage (root): benches/docker_kill_connect.sh [--dockerd PATH] [BIN ...]
#   (default BIN: target/release/dockwarden; RUNS=5 by default; KEEP=1 keeps the temp dir)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${RUNS:-5}
dockerd=/usr/sbin/dockerd
if [ "${1:-}" = --dockerd ]; then dockerd=$2; shift 2; fi
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=("$here/target/release/dockwarden")
tmp=$(mktemp -d)
chmod 711 "$tmp"   # workspace users traverse to their worktree
docker save -o "$tmp/image.tar" dockwarden-test:latest
chmod 644 "$tmp/image.tar"
serve=
sock=
bin=
ws() { "$bin" ws --socket "$sock" "$@"; }
stop_serve() {
  [ -n "$serve" ] || return 0
  for id in $(ws --json list 2>/dev/null | python3 -c 'import json,sys; [print(w["id"]) for w in json.load(sys.stdin)]' 2>/dev/null); do
    ws delete "$id" >/dev/null 2>&1 || true
  done
  kill "$serve" 2>/dev/null || true
  wait "$serve" 2>/dev/null || true
  serve=
}
cleanup() {
  stop_serve
  if [ "${KEEP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
# start_serve N: a service of binary $bin with its own state directory and socket.
start_serve() {
  local dir=$tmp/s$1
  mkdir -p "$dir"
  sock=$dir/ws.sock
  "$bin" serve --socket "$sock" --state-dir "$dir/state" --uid-base 47000 --uid-count 50 \
    --dockerd "$dockerd" --preload-image-tar "$tmp/image.tar" 2>>"$dir/serve.log" &
  serve=$!
  for _ in $(seq 1 200); do [ -S "$sock" ] && return 0; sleep 0.05; done
  echo "serve did not start; see $dir/serve.log" >&2
  return 1
}
now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A kill_ms connect_ms
for i in $(seq 1 "$runs"); do
  for b in "${!bins[@]}"; do
    bin=${bins[$b]}
    start_serve "$i-$b"
    ws --json create --id k --runtime docker-compose >/dev/null
    for _ in 1 2; do ws exec k 'docker run -d -u 999:999 dockwarden-test:latest sleep 1000' >/dev/null; done
    up=$(ws exec k 'docker ps -q' | wc -l)
    [ "$up" = 2 ] || { echo "expected 2 running containers, got $up" >&2; exit 1; }
    t0=$(now)
    ws --json kill k >/dev/null
    t1=$(now)
    kill_ms[$b]+="$(ms "$t0" "$t1") "
    t0=$(now)
    ws --json connect k >/dev/null
    ws exec k docker ps >/dev/null
    t1=$(now)
    connect_ms[$b]+="$(ms "$t0" "$t1") "
    stop_serve
  done
done
echo "engine: $("$dockerd" --version)"
echo "runs: $runs (binaries alternated run by run); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${!bins[@]}"; do
  k=${kill_ms[$b]}; c=${connect_ms[$b]}
  echo "${bins[$b]}"
  # shellcheck disable=SC2086
  echo "  kill, 2 containers (ms):      $k median $(printf '%s\n' $k | median)"
  # shellcheck disable=SC2086
  echo "  connect -> docker ps (ms):    $c median $(printf '%s\n' $c | median)"
done
