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
# The daemon configuration the proxy expects (packaging/daemon.json): BuildKit's host-network
# and insecure entitlements off, and `cgroup-parent` at the shared budget's parent cgroup, so
# every build step counts in the budget (docs/limits.md). On the systemd cgroup driver (cgroup
# v2 under systemd) the parent is the slice `dockwarden.slice`.
dw_systemd=""
if [ -d /run/systemd/system ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then dw_systemd=--systemd; fi
dw_daemon_json=/etc/docker/daemon.json
if ! ping_daemon; then
  # Setup starts dockerd itself: with the proxy's settings merged into daemon.json (every other
  # key kept; the file as it was is kept beside it).
  mkdir -p /etc/docker
  merged=$("$top/scripts/daemon-config.py" merge "$dw_daemon_json" $dw_systemd)
  if [ "$merged" != "$(cat "$dw_daemon_json" 2>/dev/null)" ]; then
    [ -f "$dw_daemon_json" ] && cp -n "$dw_daemon_json" "$dw_daemon_json.before-dockwarden"
    printf '%s\n' "$merged" >"$dw_daemon_json"
    echo "setup: wrote the proxy's daemon settings into $dw_daemon_json (packaging/daemon.json)"
  fi
  echo "setup: starting dockerd --config-file $dw_daemon_json (log: /var/log/dockerd-dockwarden.log)"
  (dockerd --config-file "$dw_daemon_json" >/var/log/dockerd-dockwarden.log 2>&1 &)
  for _ in $(seq 1 60); do ping_daemon && break; sleep 1; done
  ping_daemon || { tail -50 /var/log/dockerd-dockwarden.log >&2; exit 1; }
else
  # A dockerd already runs: its settings are not changed here (that needs a restart), but what
  # differs is said once, with what the proxy does about it. Its configuration file is the one
  # on its command line, if any; a `--cgroup-parent` flag wins (dockerd refuses both at once).
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  args=()
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && mapfile -d '' args <"/proc/$pid/cmdline"
  conf=$dw_daemon_json flag=""
  for ((i = 0; i < ${#args[@]}; i++)); do
    case "${args[$i]}" in
      --config-file=*) conf=${args[$i]#*=} ;;
      --config-file) conf=${args[$((i + 1))]:-} ;;
      --cgroup-parent=*) flag=${args[$i]#*=} ;;
      --cgroup-parent) flag=${args[$((i + 1))]:-} ;;
    esac
  done
  diffs=$("$top/scripts/daemon-config.py" diff "$conf" $dw_systemd)
  want=$("$top/scripts/daemon-config.py" merge /dev/null $dw_systemd | python3 -c 'import json,sys; print(json.load(sys.stdin)["cgroup-parent"])')
  if [ -n "$flag" ]; then
    diffs=$(printf '%s\n' "$diffs" | grep -v '^cgroup-parent ' || true)
    [ "$flag" = "$want" ] || diffs+=$'\n'"cgroup-parent is \"$flag\" (a dockerd flag), the proxy expects \"$want\""
  fi
  diffs=$(printf '%s\n' "$diffs" | sed '/^$/d')
  if [ -n "$diffs" ]; then
    echo "setup: the running dockerd (pid ${pid:-unknown}, $conf) differs from packaging/daemon.json:"
    printf '%s\n' "$diffs" | sed 's/^/setup:   /'
    echo "setup: the proxy refuses the entitlements itself; builds it cannot place in the budget" \
      "(BuildKit's /build?version=2, /grpc on Engine 20.10) are refused with rule limits.build_budget" \
      "until dockerd runs with these settings (merge them: scripts/daemon-config.py merge $conf), or" \
      "the proxy is started with --allow-unbudgeted-builds"
  fi
fi

DOCKER_HOST=unix:///var/run/docker.sock "$top/fixtures/make-test-image.sh"

# Engine 26.1, buildx and Compose v2 (trixie's packages, unpacked into /opt/docker26), unless
# DW_ENGINE26=0 (scripts/run-proxy.sh needs only the system's engine).
. "$top/scripts/engine26.sh"
if [ "${DW_ENGINE26:-1}" != 0 ]; then
  d26_all
fi
