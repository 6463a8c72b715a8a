#!/usr/bin/env bash
# Makes what the sidecar image's build needs on a machine with no container registry (the
# Dockerfile, tests/packaging.rs), as root:
#
# 1. The runtime base image: a Debian bookworm `--variant=minbase` tree from mmdebstrap (merged
#    /usr; docs, man pages and locales left out), brought in with `docker import`.
# 2. The builder base image: the same tree plus what the build needs (gcc and libc6-dev for
#    rustc's linker and the C parts of libsqlite3-sys and zstd-sys, ca-certificates) plus this
#    machine's Rust toolchain (`rustc --print sysroot`: its cargo, rustc and lib/ under
#    /usr/local; Debian's rustc 1.63 is too old for edition 2024).
# 3. The build context: Cargo.toml, Cargo.lock, src, crates, policy and benches, plus `cargo
#    vendor`'s crates in vendor/ (nothing reaches crates.io from inside a build), in
#    target/sidecar-context (gitignored; DW_SIDECAR_CONTEXT overrides it).
#
# The mirror is the machine's own Debian source (scripts/debian-source.sh), never a hard-coded
# one. Both images are tagged with a key over their inputs (this script, the source line, the
# package list, the toolchain's version), so a rerun with the same inputs skips them, and the
# mmdebstrap tarballs are cached under $DW_SIDECAR_CACHE (/var/cache/dockwarden-sidecar).
# The vendor step is skipped when Cargo.lock is unchanged. Prints, as its last lines:
#
#   BUILDER_IMAGE=dockwarden-base/builder:bookworm-<key>
#   RUNTIME_IMAGE=dockwarden-base/runtime:bookworm-<key>
#   CONTEXT=<the build context directory>
#
# DOCKER_HOST names the daemon the images go to.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$top/scripts/debian-source.sh"
suite=bookworm
cache=${DW_SIDECAR_CACHE:-/var/cache/dockwarden-sidecar}
context=${DW_SIDECAR_CONTEXT:-$top/target/sidecar-context}
build_pkgs=gcc,libc6-dev,ca-certificates

log() { echo "sidecar-base-images: $*" >&2; }
die() { log "$*"; exit 1; }

command -v mmdebstrap >/dev/null || die "mmdebstrap is missing: apt-get install mmdebstrap (scripts/setup.sh installs it)"
command -v docker >/dev/null || die "docker (the CLI) is missing: apt-get install docker.io (scripts/setup.sh installs it)"
docker version >/dev/null 2>&1 || die "no Docker daemon answers on ${DOCKER_HOST:-the default socket} (scripts/setup.sh starts one)"
command -v rustc >/dev/null && command -v cargo >/dev/null ||
  die "rustc and cargo are missing: install a Rust toolchain with rustup (https://rustup.rs)"
sysroot=$(rustc --print sysroot)
[ -x "$sysroot/bin/cargo" ] && [ -x "$sysroot/bin/rustc" ] && [ -d "$sysroot/lib/rustlib" ] ||
  die "the toolchain at $sysroot has no bin/cargo, bin/rustc and lib/rustlib: install one with rustup (rustup toolchain install stable)"
source_line=$(debian_source_line "$suite") || die "no Debian source for $suite (see above)"

# A key over the inputs: the same inputs give the same tag, and a present tag is skipped.
key() { { cat "${BASH_SOURCE[0]}"; printf '%s\n' "$@"; } | sha256sum | cut -c1-12; }
runtime_key=$(key runtime "$suite" "$source_line")
builder_key=$(key builder "$suite" "$source_line" "$build_pkgs" "$(rustc -vV)" "$("$sysroot/bin/cargo" -V)")
runtime_image=dockwarden-base/runtime:$suite-$runtime_key
builder_image=dockwarden-base/builder:$suite-$builder_key

# Merged /usr by mmdebstrap's hook (usr-is-merged, not usrmerge and the perl it pulls in); docs,
# man pages and locales stay out of both trees, as in Debian's own slim images.
slim=(--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*'
      --dpkgopt='path-exclude=/usr/share/info/*')

# make_image TAG TARBALL [MMDEBSTRAP ARGS...]: the tarball from the cache or mmdebstrap, imported.
make_image() {
  local tag=$1 tar=$2; shift 2
  if docker image inspect "$tag" >/dev/null 2>&1; then
    log "$tag is present"
    return 0
  fi
  mkdir -p "$cache"
  if [ ! -s "$tar" ]; then
    log "mmdebstrap $suite --variant=minbase $* from: $source_line"
    rm -f "$tar.part"
    mmdebstrap --quiet --variant=minbase --format=tar "${slim[@]}" "$@" \
      "$suite" "$tar.part" "$source_line"
    mv "$tar.part" "$tar"
  fi
  log "importing $tar as $tag"
  docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tar" "$tag" >/dev/null
  # Older trees of the same name go: only the current key's image is kept.
  docker image ls --format '{{.Repository}}:{{.Tag}}' "${tag%%:*}" |
    grep -vxF "$tag" | xargs -r docker rmi >/dev/null || true
}

make_image "$runtime_image" "$cache/runtime-$suite-$runtime_key.tar"
# The toolchain goes in by a customize hook (the hook's $1 is the tree), docs and the tools a
# build does not run (clippy, rustfmt, rustdoc, rust-analyzer's server) left out.
make_image "$builder_image" "$cache/builder-$suite-$builder_key.tar" \
  --include="$build_pkgs" \
  --customize-hook="tar -C '$sysroot' -c bin/cargo bin/rustc lib | tar -C \"\$1/usr/local\" -x"

# The build context: only what the build stage copies, and the vendored crates.
mkdir -p "$context"
rsync -a --delete "$top/src" "$top/crates" "$top/policy" "$top/benches" "$top/Cargo.toml" \
  "$top/Cargo.lock" "$context/"
stamp=$(sha256sum "$top/Cargo.lock" "$top/Cargo.toml" | sha256sum | cut -c1-16)
if [ "$(cat "$context.stamp" 2>/dev/null)" != "$stamp" ]; then
  log "cargo vendor into $context/vendor"
  rm -f "$context.stamp"
  cargo vendor --quiet --locked --manifest-path "$top/Cargo.toml" "$context/vendor" >/dev/null
  echo "$stamp" >"$context.stamp"
fi

echo "BUILDER_IMAGE=$builder_image"
echo "RUNTIME_IMAGE=$runtime_image"
echo "CONTEXT=$context"
