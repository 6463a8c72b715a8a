#!/usr/bin/env bash
# The long fuzz run (not in CI; CI fuzzes each target for a minute, scripts/gates.sh): 10
# million executions of each target, one target after another on one core, and the results
# written into fuzz/README.md ("Last long run"). A crash stops that target's run, keeps its
# input in fuzz/artifacts/<target>/ and makes the status non-zero.
#
#   scripts/fuzz.sh [TARGET...]   default: every target in fuzz/fuzz_targets
#   DW_FUZZ_RUNS       executions per target (default 10000000)
#   DW_FUZZ_MAX_SECS   wall-time bound per target (default 3600); a run it stops is reported
#                      as "N of DW_FUZZ_RUNS executions"
# On a shared machine: `nice -n 10 scripts/fuzz.sh`.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/fuzz-common.sh
runs=${DW_FUZZ_RUNS:-10000000}
cap=${DW_FUZZ_MAX_SECS:-3600}
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${FUZZ_TARGETS[@]}"); fi
mkdir -p "$FUZZ_WORK"
fuzz_install && fuzz_build >"$FUZZ_WORK/build.log" 2>&1 || {
  echo "fuzz: building the targets failed ($FUZZ_WORK/build.log)"
  exit 1
}
commit=$(git rev-parse --short HEAD)
dirty=$(git diff --name-only HEAD -- src fuzz/fuzz_targets Cargo.toml Cargo.lock | tr '\n' ' ')
[ -z "$dirty" ] || commit="$commit (with uncommitted changes to ${dirty% })"
rustc=$(rustc --version)
date=$(date -u +%Y-%m-%d)
rows=$FUZZ_WORK/long-run-rows.md
: >"$rows"
failed=0
for t in "${targets[@]}"; do
  log="$FUZZ_WORK/$t.long.log" start=$SECONDS
  echo "fuzz $t: up to $runs executions or $cap s ($log)"
  fuzz_run "$t" "$log" -runs="$runs" -max_total_time="$cap"
  rc=$?
  wall=$((SECONDS - start))
  done_runs=$(fuzz_stat "$log" runs)
  artifacts=$(fuzz_artifacts "$log" | tr "\n" " ")
  crashes=$(fuzz_artifacts "$log" | grep -c . || true)
  execs="$done_runs"
  [ "${done_runs:-0}" -ge "$runs" ] || execs="$done_runs of $runs"
  result="no crash"
  if [ "$rc" -ne 0 ]; then
    failed=1
    result="FAILED: ${artifacts:-status $rc, see $log}"
  fi
  echo "fuzz $t: $execs executions in $wall s, $(fuzz_stat "$log" exec_s) exec/s, $result"
  printf '| `%s` | %s | %s s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$execs" \
    "$wall" "$(fuzz_stat "$log" exec_s)" "$(fuzz_stat "$log" cov)" "$(fuzz_stat "$log" ft)" \
    "$(fuzz_stat "$log" corpus)" "$crashes" "$result" "$date" "$commit" "$rustc" >>"$rows"
done

# fuzz/README.md: everything between the two markers is rewritten; a target this run left out
# keeps its row from the last run that had it.
readme=fuzz/README.md
{
  echo "<!-- fuzz.sh results: written by scripts/fuzz.sh, do not edit -->"
  echo "cargo-fuzz $(cargo fuzz --version 2>/dev/null | awk '{print $2}'), sanitizer" \
    "\`$FUZZ_SANITIZER\`, one core, \`-runs=$runs -max_total_time=$cap\`, seeds as above."
  echo
  echo "| target | executions | wall time | exec/s | coverage (cov) | features (ft) | corpus | crashes | result | date | commit | rustc |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for t in "${FUZZ_TARGETS[@]}"; do
    grep -F "| \`$t\` |" "$rows" ||
      sed -n '/^<!-- fuzz.sh results/,/^<!-- end fuzz.sh results/p' "$readme" | grep -F "| \`$t\` |" || true
  done
  echo "<!-- end fuzz.sh results -->"
} >"$FUZZ_WORK/long-run.md"
awk -v new="$FUZZ_WORK/long-run.md" '
  /^<!-- fuzz.sh results/ { while ((getline l < new) > 0) print l; skip = 1; next }
  /^<!-- end fuzz.sh results/ { skip = 0; next }
  !skip' "$readme" >"$readme.tmp" && mv "$readme.tmp" "$readme"
exit "$failed"
