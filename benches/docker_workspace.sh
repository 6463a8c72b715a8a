#!/usr/bin/env bash
# Bench: docker-compose workspaces. Times, over RUNS runs (default 5), with medians:
#   create   `ws create --repo <local compose repo>` until `docker ps` answers inside;
#   connect  `ws connect` after `ws kill` until `docker ps` answers inside.
# Targets (issue 10): docker ready within 2 s of the clone; connect within 1.5 s.
# Usage (root): benches/docker_workspace.sh [--dockerd PATH]   (binary: target/release/dockwarden)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DOCKWARDEN:-$here/target/release/dockwarden}
runs=${RUNS:-5}
dockerd=/usr/sbin/dockerd
[ "${1:-}" = --dockerd ] && dockerd=$2
tmp=$(mktemp -d)
chmod 711 "$tmp"   # workspace users traverse to their worktree
sock=$tmp/ws.sock
"$bin" serve --socket "$sock" --state-dir "$tmp/state" --uid-base 47000 --uid-count 50 \
  --dockerd "$dockerd" 2>"$tmp/serve.log" &
serve=$!
cleanup() {
  for id in $("$bin" ws --socket "$sock" --json list 2>/dev/null | python3 -c 'import json,sys; [print(w["id"]) for w in json.load(sys.stdin)]' 2>/dev/null); do
    "$bin" ws --socket "$sock" delete "$id" >/dev/null 2>&1 || true
  done
  kill "$serve" 2>/dev/null || true
  wait "$serve" 2>/dev/null || true
  [ "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
sh "$here/fixtures/workspace/make-compose-repo.sh" "$tmp/repo" >/dev/null
ws() { "$bin" ws --socket "$sock" "$@"; }
now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
clone_ms=(); create_ms=(); connect_ms=()
for i in $(seq 1 "$runs"); do
  t0=$(now)
  git clone --quiet "$tmp/repo" "$tmp/clone-$i"
  t1=$(now)
  clone_ms+=("$(ms "$t0" "$t1")")
  t0=$(now)
  ws --json create --id "b$i" --repo "$tmp/repo" --runtime docker-compose >/dev/null
  ws exec "b$i" docker ps >/dev/null
  t1=$(now)
  create_ms+=("$(ms "$t0" "$t1")")
  ws --json kill "b$i" >/dev/null
  t0=$(now)
  ws --json connect "b$i" >/dev/null
  ws exec "b$i" docker ps >/dev/null
  t1=$(now)
  connect_ms+=("$(ms "$t0" "$t1")")
  ws delete "b$i" >/dev/null
done
engine=$("$dockerd" --version)
echo "engine: $engine"
echo "runs: $runs"
echo "git clone of the fixture (ms): ${clone_ms[*]}  median $(printf '%s\n' "${clone_ms[@]}" | median)"
echo "create -> docker ps (ms):      ${create_ms[*]}  median $(printf '%s\n' "${create_ms[@]}" | median)"
echo "connect after kill -> docker ps (ms): ${connect_ms[*]}  median $(printf '%s\n' "${connect_ms[@]}" | median)"
