#!/usr/bin/env bash
# Runs every test on a Debian machine as root: sets the machine up (packages, dockerd, test
# image), then unit tests, policy cases, property tests, the Go differential and the end-to-end
# suites against the real dockerd. Test binaries run one after another (cargo's default).
#
# The full output (with every test's own lines) goes to target/test-output.log; what is printed
# here is each suite, its result line, every skip with its reason, the measurements tests
# report (e.g. the 80-way create race), and on failure the failures section.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export DOCKER_HOST=unix:///var/run/docker.sock
mkdir -p target
log=target/test-output.log
status=0
{
  cargo test --release --lib --bins --tests --examples -- --test-threads=4 --show-output &&
  # Criterion benches take no libtest flags; in test mode each runs once as a smoke test.
  cargo test --release --benches
} >"$log" 2>&1 || status=$?
grep -E '^ +Running |^test result|^test .* (FAILED|ignored)$|^(skip|SKIPPED)|^skipped:|^go_differential|^oracle|parallel creates|past the budget|fork loop|creates were allowed|^error' "$log" || true
# One closing line over every suite.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
if [ "$status" -ne 0 ]; then
  echo "---- failures (full log: $log) ----"
  sed -n '/^failures:/,/^test result/p' "$log" | tail -300
  grep -E '^error(\[|:)' -A12 "$log" | head -80 || true
fi
exit "$status"
