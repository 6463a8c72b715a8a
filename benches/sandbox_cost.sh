#!/usr/bin/env bash
# Issue 24's cost targets: a standard create (target: median <= 150 ms) and an exec (target:
# <= 5 ms added) through the CLI, this build (with the workspace sandbox) against a baseline
# build, alternated A B A B in one go on the same machine. For each round and build: `ws create`,
# then the first `ws exec true` (which starts the sandbox's PID 1), then a warm `ws exec true`,
# then `ws delete`. Prints medians and min-max in milliseconds, and the median ratios.
#
#   BASE=/path/to/baseline/dockwarden ROUNDS=15 benches/sandbox_cost.sh
#
# Needs root. Each build gets its own service, state directory and uid range.
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${NEW:-target/release/dockwarden}
BASE=${BASE:?set BASE to a baseline dockwarden binary (e.g. built from the commit before the sandbox)}
ROUNDS=${ROUNDS:-15}
work=$(mktemp -d)
chmod 711 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  pkill -9 -f "sandbox-init .*--root $work/" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start() { # name binary uid_base
  local dir="$work/$1"
  mkdir -p "$dir"
  "$2" serve --socket "$dir/ws.sock" --state-dir "$dir/state" --uid-base "$3" --uid-count 100 \
    --no-docker --secrets-key "$dir/secrets.key" >"$dir/serve.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$dir/ws.sock" ] && return 0; sleep 0.05; done
  # A baseline build without --secrets-key: start it without the flag.
  "$2" serve --socket "$dir/ws.sock" --state-dir "$dir/state" --uid-base "$3" --uid-count 100 \
    --no-docker >"$dir/serve.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$dir/ws.sock" ] && return 0; sleep 0.05; done
  echo "service $1 did not start: $(tail -3 "$dir/serve.log")" >&2
  exit 1
}

start base "$BASE" 46000
start new "$NEW" 46200

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
declare -A T
for i in $(seq "$ROUNDS"); do
  for b in base new; do
    bin=$NEW; [ "$b" = base ] && bin=$BASE
    s=(--socket "$work/$b/ws.sock")
    t=$(date +%s%N); "$bin" ws "${s[@]}" create --id "r$i" >/dev/null; T[$b.create]+="$(ms "$t") "
    t=$(date +%s%N); "$bin" ws "${s[@]}" exec "r$i" true >/dev/null; T[$b.exec1]+="$(ms "$t") "
    t=$(date +%s%N); "$bin" ws "${s[@]}" exec "r$i" true >/dev/null; T[$b.exec]+="$(ms "$t") "
    "$bin" ws "${s[@]}" delete "r$i" >/dev/null
  done
done

python3 - "$ROUNDS" <<EOF
import statistics, sys
t = {$(for k in "${!T[@]}"; do printf "'%s': [%s], " "$k" "$(echo ${T[$k]} | tr ' ' ',')"; done)}
print(f"rounds: {sys.argv[1]} (alternated base/new), milliseconds through the CLI")
print(f"{'measure':<28}{'base median (min-max)':>24}{'sandbox median (min-max)':>28}{'ratio':>8}")
for m, label in [("create", "ws create"), ("exec1", "first ws exec (starts PID 1)"), ("exec", "warm ws exec")]:
    b, n = t[f"base.{m}"], t[f"new.{m}"]
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"{label:<28}{f'{mb:.0f} ({min(b)}-{max(b)})':>24}{f'{mn:.0f} ({min(n)}-{max(n)})':>28}{mn / mb:>8.2f}")
EOF
