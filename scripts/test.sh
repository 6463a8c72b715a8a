#!/usr/bin/env bash
# Runs every test on a Debian machine as root: sets the machine up (packages, dockerd, test
# image, Engine 26.1), then unit tests, policy cases, property tests, the Go differential and the
# end-to-end suites against both real engines, 20.10 and 26.1 (the Compose suites with v1 and
# v2; docs/ci.md). Test binaries run one after another (cargo's default).
#
# First the gates (scripts/gates.sh: cargo fmt, clippy -D warnings, bounded fuzzing of every
# fuzz target). A failed gate fails the run, but the tests still run, so one run shows all.
#
# The full output (with every test's own lines) goes to target/test-output.log; what is printed
# here is each gate's line, each suite, its result line, every skip with its reason, the
# measurements tests report (e.g. the 80-way create race), and on failure the failures section.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export DOCKER_HOST=unix:///var/run/docker.sock
# The end-to-end suites run on both engines (tests/common/mod.rs: `Engine`); both are required
# here, so a missing one fails its tests instead of skipping them.
export DW_ENGINE20_SOCK=/var/run/docker.sock
export DW_ENGINE26_SOCK="$D26_SOCK" DW_ENGINE26_NETNS="$D26_NETNS_PATH" DW_ENGINE26_PREFIX="$D26_PREFIX"
export DW_ENGINES_REQUIRED="20.10 26.1" DW_COMPOSE_REQUIRED="v1 v2"
# The engine e2e_docker_workspace's private daemons must report (the 26.1 run below sets its
# own); with it set, that suite fails instead of skipping.
export DW_WORKSPACE_ENGINE=20.10
cli=/usr/bin/docker; [ -x /usr/local/bin/docker ] && cli=/usr/local/bin/docker
for e in "20.10 $DW_ENGINE20_SOCK host" "26.1 $DW_ENGINE26_SOCK $DW_ENGINE26_NETNS"; do
  set -- $e
  echo "engine $1: $("$cli" -H "unix://$2" version --format 'Engine {{.Server.Version}} (API {{.Server.APIVersion}})') on $2, network namespace $3"
done
echo "clients: $("$cli" version --format 'CLI {{.Client.Version}}' 2>/dev/null)," \
  "$(/usr/bin/docker version --format 'CLI {{.Client.Version}}' 2>/dev/null)," \
  "$(docker-compose version --short 2>/dev/null | sed 's/^/Compose v1 /')," \
  "$("$cli" compose version 2>/dev/null)," "$("$cli" buildx version 2>/dev/null)"
mkdir -p target
log=target/test-output.log
status=0
gates=0
bash scripts/gates.sh >"$log" 2>&1 || gates=$?
{
  cargo test --release --no-fail-fast --lib --bins --tests --examples -- --test-threads=4 --show-output &&
  # Criterion benches take no libtest flags; in test mode each runs once as a smoke test.
  cargo test --release --benches &&
  # The Docker-workspace suite starts its own private daemons; the first run used Engine 20.10,
  # this one gives every workspace an Engine 26.1 dockerd.
  if [ -x "${DW_ENGINE26_PREFIX:-/opt/docker26}/usr/sbin/dockerd" ]; then
    echo "engine 26.1 for workspaces: e2e_docker_workspace again with DOCKWARDEN_TEST_DOCKERD"
    DW_WORKSPACE_ENGINE=26.1 DOCKWARDEN_TEST_DOCKERD="${DW_ENGINE26_PREFIX:-/opt/docker26}/usr/sbin/dockerd" \
      cargo test --release --test e2e_docker_workspace -- --test-threads=2
  else
    # DW_ENGINES_REQUIRED names 26.1: a missing engine fails the run, it is never a skip.
    echo "error: e2e_docker_workspace on Engine 26.1: no dockerd under ${DW_ENGINE26_PREFIX:-/opt/docker26}"
    false
  fi
} >>"$log" 2>&1 || status=$?
grep -E '^gate |^ +Running |^engine 26.1 for workspaces|^test result|^test .* (FAILED|ignored)$|^(skip|SKIPPED)|^skipped:|^go_differential|^oracle|parallel creates|past the budget|fork loop|creates were allowed|^sidecar |^note: Engine|pids.current rose|^error' "$log" || true
# One closing line over every suite.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
if [ "$gates" -ne 0 ]; then
  echo "---- failed gates (full output: target/gates.log) ----"
  grep -E '^(error|warning)(\[|:)|^Diff in ' -A12 target/gates.log | head -120 || true
fi
if [ "$status" -ne 0 ]; then
  echo "---- failures (full log: $log) ----"
  sed -n '/^failures:/,/^test result/p' "$log" | tail -300
  grep -E '^error(\[|:)' -A12 "$log" | head -80 || true
fi
# The tests' status, or the gates' when the tests passed.
[ "$status" -ne 0 ] || status=$gates
exit "$status"
