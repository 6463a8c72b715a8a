# Sourced by scripts/gates.sh (bounded fuzzing in CI) and scripts/fuzz.sh (the long run), from
# the repository root: cargo-fuzz on the stable toolchain, the targets, their seeds, one run of
# one target and what its output says.
#
# `-s none`: no AddressSanitizer. The fuzzed code (JSON decoder, router, policy) is safe Rust in
# a crate that denies `unsafe`, so ASan would find nothing there, while it halves the speed and
# needs `-Zsanitizer` (nightly, or RUSTC_BOOTSTRAP=1 on stable). Without it cargo-fuzz passes
# only stable flags (`-Cpasses=sancov-module`, `-Cllvm-args=...`, `-Cdebug-assertions`), so
# panics, failed asserts and integer overflow are still crashes. DW_FUZZ_SANITIZER=address
# brings ASan back (RUSTC_BOOTSTRAP=1 is then set for it).

FUZZ_TARGETS=(body_decoder router policy_decide)
FUZZ_SANITIZER=${DW_FUZZ_SANITIZER:-none}
# Its own directory: cargo-fuzz's RUSTFLAGS would rebuild everything in the main target/.
FUZZ_TARGET_DIR=${DW_FUZZ_TARGET_DIR:-$PWD/fuzz/target}
FUZZ_WORK=${DW_FUZZ_WORK:-$PWD/target/fuzz}
[ "$FUZZ_SANITIZER" = none ] || export RUSTC_BOOTSTRAP=1

# cargo-fuzz when missing (about 35 s to build from crates.io).
fuzz_install() {
  command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
}

fuzz_build() {
  (cd fuzz && cargo fuzz build -s "$FUZZ_SANITIZER" --target-dir "$FUZZ_TARGET_DIR")
}

# Read-only seed inputs for a target, made from files in git (printed: the directory).
# body_decoder: the request bodies in fixtures/bodies; policy_decide: the same bodies behind
# each endpoint selector byte; router: every path the policy cases name, behind a GET and a
# POST method byte. Every target: the inputs that once failed it, in fuzz/regressions/<target>/.
fuzz_seeds() {
  local t=$1 dir="$FUZZ_WORK/seeds/$1" f i=0 p
  rm -rf "$dir" && mkdir -p "$dir"
  [ ! -d "fuzz/regressions/$t" ] || cp "fuzz/regressions/$t"/* "$dir"/
  case $t in
    body_decoder) cp fixtures/bodies/*.json "$dir"/ ;;
    policy_decide)
      for f in fixtures/bodies/*.json; do
        for sel in 0 1 2 3 4 5; do
          { printf "\\x0$sel"; cat "$f"; } >"$dir/$sel-$(basename "$f")"
        done
      done ;;
    router)
      grep -ho '"path": *"[^"]*"' tests/policy_cases/*.json | sed 's/^"path": *"//; s/"$//; s/?.*//' |
        sort -u | while IFS= read -r p; do
          i=$((i + 1))
          { printf '\x00'; printf '%s' "$p"; } >"$dir/get-$i"
          { printf '\x01'; printf '%s' "$p"; } >"$dir/post-$i"
        done ;;
  esac
  echo "$dir"
}

# fuzz_run TARGET LOG LIBFUZZER-FLAGS...: one run; its corpus in fuzz/corpus/TARGET (not in
# git), a crash's input in fuzz/artifacts/TARGET/ (cargo-fuzz's default). Returns its status.
fuzz_run() {
  local t=$1 log=$2 dict=()
  shift 2
  case $t in body_decoder | policy_decide) dict=(-dict=body.dict) ;; esac
  mkdir -p "fuzz/corpus/$t"
  local seeds
  seeds=$(fuzz_seeds "$t")
  (cd fuzz && cargo fuzz run -s "$FUZZ_SANITIZER" --target-dir "$FUZZ_TARGET_DIR" "$t" \
    "corpus/$t" "$seeds" -- "${dict[@]}" -print_final_stats=1 -timeout=10 "$@") >"$log" 2>&1
}

# fuzz_stat LOG KEY: a number from a run's log: `runs`, `exec_s` (libFuzzer's final stats),
# `cov`, `ft`, `corpus` (units in its last status line).
fuzz_stat() {
  local log=$1 key=$2
  case $key in
    runs) sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 ;;
    exec_s) sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 ;;
    cov | ft) grep -E '^#[0-9]+' "$log" | tail -1 | sed -n "s/.* $key: \\([0-9]*\\).*/\\1/p" ;;
    corpus) grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' ;;
  esac
}

# The inputs libFuzzer kept for a failed run (crash-, leak-, timeout-, oom-), one a line.
fuzz_artifacts() {
  sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$1" | sed 's|^\(\./\)\?artifacts/|fuzz/artifacts/|'
}
