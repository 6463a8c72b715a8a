#!/usr/bin/env bash
# Bench: suspension of a standard workspace whose run script serves HTTP and which runs
# BUSY busy-looping processes besides (default 4). Over RUNS rounds (default 20):
#   thaw     the kernel thaw alone, as the service measures it (`thaw_us` of `POST resume`);
#   resume   the whole `POST /v1/workspaces/<id>/resume` round trip over the API socket;
#   answer   from before the resume call to the server's first HTTP 200 through `exec curl`
#            (the exec itself is a few ms of that: it is shown alone as `exec`).
#   never-suspended  the same curl exec in the same round with no suspension before it: the
#            baseline `answer` is compared with;
#   suspend  `POST suspend` (freeze + the snapshot at suspension) for reference.
# Target (issue 27): thaw <= 50 ms. Usage (root): benches/suspend_resume.sh [BIN]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$here/target/release/dockwarden}
runs=${RUNS:-20}
busy=${BUSY:-4}
tmp=$(mktemp -d)
chmod 711 "$tmp"
sock=$tmp/ws.sock
"$bin" serve --socket "$sock" --state-dir "$tmp/state" --uid-base 47600 --uid-count 10 \
  --no-docker --idle-timeout 100000 2>"$tmp/serve.log" &
serve=$!
cleanup() {
  "$bin" ws --socket "$sock" delete sr >/dev/null 2>&1 || true
  kill "$serve" 2>/dev/null || true
  wait "$serve" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
mkdir -p "$tmp/repo/.dockwarden"
cat >"$tmp/repo/.dockwarden/settings.json" <<JSON
{"runtime": "standard", "scripts": {"run": "for i in \$(seq $busy); do (while :; do :; done) & done; exec /usr/bin/python3 -m http.server 18766 --bind 127.0.0.1"}}
JSON
git -C "$tmp/repo" init -q && git -C "$tmp/repo" add -A && git -C "$tmp/repo" -c user.email=b@b -c user.name=b commit -qm init
api() { local m=$1 p=$2; shift 2; curl -s --unix-socket "$sock" -X "$m" "http://ws$p" "$@"; }
now() { date +%s%N; }
"$bin" ws --socket "$sock" create --id sr --repo "$tmp/repo" >/dev/null 2>&1
probe='curl -s -o /dev/null -w %{http_code} --max-time 5 http://127.0.0.1:18766/'
for _ in $(seq 1 100); do
  [ "$(api POST /v1/workspaces/sr/exec -d "{\"cmd\": \"$probe\"}" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("stdout"))')" = 200 ] && break
  sleep 0.2
done
: >"$tmp/samples"
for _ in $(seq "$runs"); do
  t0=$(now); api POST /v1/workspaces/sr/suspend >/dev/null; t1=$(now)
  echo "suspend $(( (t1 - t0) / 1000 ))" >>"$tmp/samples"
  sleep 0.2
  t0=$(now); resumed=$(api POST /v1/workspaces/sr/resume); t1=$(now)
  echo "resume $(( (t1 - t0) / 1000 ))" >>"$tmp/samples"
  out=$(api POST /v1/workspaces/sr/exec -d "{\"cmd\": \"$probe\"}")
  t2=$(now)
  code=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["stdout"])')
  [ "$code" = 200 ] || { echo "the server did not answer after resume ($code)" >&2; exit 1; }
  # Parsed here, outside every timed span (python3 start-up is tens of ms).
  echo "thaw $(echo "$resumed" | python3 -c 'import json,sys; print(json.load(sys.stdin)["thaw_us"])')" >>"$tmp/samples"
  echo "answer $(( (t2 - t0) / 1000 ))" >>"$tmp/samples"
  t0=$(now); api POST /v1/workspaces/sr/exec -d '{"cmd": "true"}' >/dev/null; t1=$(now)
  echo "exec $(( (t1 - t0) / 1000 ))" >>"$tmp/samples"
  t0=$(now); api POST /v1/workspaces/sr/exec -d "{\"cmd\": \"$probe\"}" >/dev/null; t1=$(now)
  echo "never-suspended $(( (t1 - t0) / 1000 ))" >>"$tmp/samples"
done
python3 - "$tmp/samples" "$busy" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"standard workspace, run-script HTTP server + {sys.argv[2]} busy loops")
for what in ("thaw", "resume", "answer", "never-suspended", "exec", "suspend"):
    v = [int(r[1]) / 1000 for r in rows if r[0] == what]
    print(f"{what:>8}: median {statistics.median(v):7.2f} ms  (min {min(v):.2f}, max {max(v):.2f}, n={len(v)})")
PY
