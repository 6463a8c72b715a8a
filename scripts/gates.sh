#!/usr/bin/env bash
# The gates CI runs besides the tests (scripts/test.sh runs this first): formatting, clippy with
# warnings denied, and a bounded fuzz run of every target in fuzz/fuzz_targets. Every gate
# runs, whatever the others did; each prints one line `gate <name>: ok|FAILED ...`, and the
# status is non-zero when any failed. The gates' own output is in target/gates.log, each fuzz
# run's in target/fuzz/<target>.log.
#
#   DW_FUZZ_SECS   seconds per fuzz target (default 60); 0 skips fuzzing
#   DW_GATES       which gates, space-separated (default `fmt clippy layering fuzz`)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/fuzz-common.sh
mkdir -p target "$FUZZ_WORK"
log=target/gates.log
: >"$log"
secs=${DW_FUZZ_SECS:-60}
failed=0

# gate NAME COMMAND...: runs it with its output in the log and prints the gate's line.
gate() {
  local name=$1 start=$SECONDS
  shift
  echo "==== gate $name: $*" >>"$log"
  if "$@" >>"$log" 2>&1; then
    echo "gate $name: ok in $((SECONDS - start)) s"
  else
    echo "gate $name: FAILED in $((SECONDS - start)) s (output: $log)"
    failed=1
    return 1
  fi
}

# A component or tool that is missing is installed, not skipped: a gate never passes unrun.
need_component() {
  cargo "$1" --version >/dev/null 2>&1 || rustup component add "$2" >>"$log" 2>&1
}

# One target for DW_FUZZ_SECS seconds; a crash fails the gate and names the kept input.
fuzz_gate() {
  local t=$1 start=$SECONDS tlog="$FUZZ_WORK/$1.log"
  if fuzz_run "$t" "$tlog" -max_total_time="$secs"; then
    echo "gate fuzz $t: ok in $((SECONDS - start)) s ($(fuzz_stat "$tlog" runs) runs," \
      "$(fuzz_stat "$tlog" exec_s) exec/s, cov $(fuzz_stat "$tlog" cov), ft $(fuzz_stat "$tlog" ft)," \
      "corpus $(fuzz_stat "$tlog" corpus))"
  else
    echo "gate fuzz $t: FAILED in $((SECONDS - start)) s (output: $tlog)"
    fuzz_artifacts "$tlog" | sed "s|^|gate fuzz $t: kept input |"
    # The panic and its message (an assert's left/right), or libFuzzer's own error line.
    { grep -m1 -A3 "panicked at" "$tlog" || grep -m1 "^==[0-9]*== ERROR" "$tlog"; } |
      sed "/^stack backtrace/,\$d; s|^|gate fuzz $t:   |"
    echo "gate fuzz $t: reproduce: (cd fuzz && cargo fuzz run -s $FUZZ_SANITIZER $t <kept input>)"
    failed=1
  fi
  cat "$tlog" >>"$log"
}

for g in ${DW_GATES:-fmt clippy layering fuzz}; do
  case $g in
    fmt)
      need_component fmt rustfmt
      gate fmt cargo fmt --all --check
      gate fmt-fuzz cargo fmt --manifest-path fuzz/Cargo.toml --check ;;
    clippy)
      need_component clippy clippy
      # --release: the build scripts' work (bundled SQLite and zstd compiled from C) is shared
      # with the tests' `cargo test --release`; a debug clippy would compile them once more.
      gate clippy cargo clippy --release --all-targets -- -D warnings ;;
    fuzz)
      [ "$secs" -gt 0 ] || { echo "gate fuzz: skipped (DW_FUZZ_SECS=0)"; continue; }
      if gate fuzz-install fuzz_install && gate fuzz-build fuzz_build; then
        for t in "${FUZZ_TARGETS[@]}"; do fuzz_gate "$t"; done
      fi ;;
    layering)
      # dockwarden-policy stays pure: no tokio, hyper, nix, libc or rustix in its tree.
      gate layering scripts/check-layering.sh ;;
    *) echo "gate $g: FAILED (no such gate)"; failed=1 ;;
  esac
done
exit "$failed"
