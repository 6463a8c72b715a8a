#!/usr/bin/env bash
# Gate: the pure policy core, crates/dockwarden-policy, reaches no async runtime, HTTP stack or
# system-call wrapper (tokio, hyper, mio, nix, libc, rustix, socket2) through its normal
# dependencies, however deep. The compiler then keeps it free of I/O (ARCHITECTURE.md).
# Prints `gate layering: ok (...)`, or each forbidden crate found and the path that pulls it in,
# and exits 1. crates/dockwarden-policy/tests/layering.rs runs the same check under `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

forbidden='^(tokio|tokio-[a-z-]+|hyper|hyper-[a-z-]+|mio|nix|libc|rustix|socket2) '
tree() { cargo tree --locked --offline "$@" 2>/dev/null || cargo tree --locked "$@"; }

deps=$(tree -p dockwarden-policy -e normal --prefix none)
# A tree without the crate itself means the check looked at nothing.
grep -q '^dockwarden-policy ' <<<"$deps" || {
  echo "gate layering: FAILED: cargo tree printed no dockwarden-policy" >&2
  exit 1
}
found=$(grep -E "$forbidden" <<<"$deps" | sed 's/ (\*)$//' | sort -u || true)
if [ -n "$found" ]; then
  echo "gate layering: FAILED: dockwarden-policy depends on:" >&2
  while read -r name version _; do
    echo "  $name $version, through:" >&2
    tree -p dockwarden-policy -e normal -i "$name@${version#v}" | sed 's/^/    /' >&2
  done <<<"$found"
  exit 1
fi
# The arrows between our crates point one way (ARCHITECTURE.md): each crate may depend only on
# the ones listed for it.
arrows_ok=1
while read -r krate allowed; do
  ours=$(tree -p "$krate" -e normal --prefix none --format '{p}' | awk '{print $1}' |
    grep '^dockwarden' | grep -vx "$krate" | sort -u || true)
  for dep in $ours; do
    case " $allowed " in
      *" $dep "*) ;;
      *) echo "gate layering: FAILED: $krate depends on $dep, not one of the crates below it" >&2; arrows_ok=0 ;;
    esac
  done
done <<'EOF2'
dockwarden-policy
dockwarden-sys
dockwarden-proxy dockwarden-policy dockwarden-sys
dockwarden-workspace dockwarden-policy dockwarden-sys dockwarden-proxy
EOF2
[ "$arrows_ok" = 1 ] || exit 1
echo "gate layering: ok (dockwarden-policy has no tokio, nix, libc; policy, sys <- proxy <- workspace <- dockwarden)"
