#!/usr/bin/env bash
# Prepares a Debian machine (as root): installs missing packages, starts dockerd (Engine 20.10)
# if none answers, imports the busybox test image, and installs and starts Engine 26.1 with
# buildx and Compose v2 from Debian trixie beside it (scripts/engine26.sh, docs/ci.md). Sourced by scripts/test.sh and scripts/run-proxy.sh.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

need=()
have_py_docker() { /usr/bin/python3 -c 'import docker' 2>/dev/null; }
for pkg_cmd in docker.io:dockerd docker-compose:docker-compose busybox-static:busybox \
               golang-go:go haproxy:haproxy python3-docker:__py iptables:iptables git:git \
               bsdutils:script curl:curl socat:socat util-linux:unshare \
               util-linux:nsenter iproute2:ip restic:restic rsync:rsync \
               xfsprogs:mkfs.xfs e2fsprogs:filefrag valgrind:callgrind_control mmdebstrap:mmdebstrap; do
  pkg=${pkg_cmd%%:*}; cmd=${pkg_cmd#*:}
  if [ "$cmd" = __py ]; then have_py_docker || need+=("$pkg")
  elif ! command -v "$cmd" >/dev/null 2>&1; then need+=("$pkg"); fi
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "setup: cargo (Rust 1.85+) is required" >&2; exit 1; }

ping_daemon() { curl -sf --unix-socket /var/run/docker.sock http://docker/_ping >/dev/null 2>&1; }
if ! ping_daemon; then
  echo "setup: starting dockerd (log: /var/log/dockerd-dockwarden.log)"
  (dockerd >/var/log/dockerd-dockwarden.log 2>&1 &)
  for _ in $(seq 1 60); do ping_daemon && break; sleep 1; done
  ping_daemon || { tail -50 /var/log/dockerd-dockwarden.log >&2; exit 1; }
fi

DOCKER_HOST=unix:///var/run/docker.sock "$top/fixtures/make-test-image.sh"

# Engine 26.1, buildx and Compose v2 (trixie's packages, unpacked into /opt/docker26), unless
# DW_ENGINE26=0 (scripts/run-proxy.sh needs only the system's engine).
. "$top/scripts/engine26.sh"
if [ "${DW_ENGINE26:-1}" != 0 ]; then
  d26_all
fi
