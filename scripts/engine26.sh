#!/usr/bin/env bash
# Engine 26.1 next to the system's Engine 20.10 (docs/ci.md). Sourced by scripts/setup.sh; also
# runs on its own (as root): `scripts/engine26.sh`.
#
# 1. Install: Debian trixie's docker.io (26.1), containerd (1.7), docker-buildx (0.13) and
#    docker-compose (2.26) are downloaded from the machine's own Debian source with the suite
#    changed (scripts/debian-source.sh) with a private apt configuration (own sources list,
#    lists, cache, empty status and preferences) and unpacked with `dpkg -x` into $D26_PREFIX.
#    Nothing from trixie is installed into the system; runc is bookworm's (/usr/sbin/runc, a
#    dependency of the system's docker.io: trixie's runc needs glibc 2.38).
# 2. Plugins: buildx and Compose v2 are copied into $D26_PLUGINS (`docker buildx`, `docker compose`).
# 3. Start: a second dockerd in its own network namespace (/run/netns/$D26_NETNS), entered with
#    `nsenter --net` (`ip netns exec` remounts /sys and dockerd then finds no devices cgroup),
#    with its own data root, exec root, pidfile, socket and non-overlapping address pools.
#    Skipped when its socket already answers.
# 4. The test image is copied from the 20.10 daemon (`docker save | docker load`).
#
# Every path can be overridden (to try the install and start paths on a scratch prefix):
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/debian-source.sh"
D26_PREFIX=${D26_PREFIX:-/opt/docker26}
D26_APT=${D26_APT:-/var/cache/dockwarden-trixie}
D26_PLUGINS=${D26_PLUGINS:-/usr/local/lib/docker/cli-plugins}
D26_RUN=${D26_RUN:-/run/docker26}
D26_DATA=${D26_DATA:-/var/lib/docker26}
D26_NETNS=${D26_NETNS:-docker26}
D26_BIP=${D26_BIP:-172.29.0.1/16}
D26_POOL=${D26_POOL:-10.226.0.0/16}
D26_IMAGE=${D26_IMAGE:-dockwarden-test:latest}
D26_SOCK="$D26_RUN/docker.sock"
D26_NETNS_PATH="/run/netns/$D26_NETNS"

d26_log() { echo "engine26: $*"; }

# Downloads and unpacks the trixie packages into $D26_PREFIX unless dockerd is already there.
d26_install() {
  local pkgs=(docker.io containerd docker-buildx docker-compose)
  if [ -x "$D26_PREFIX/usr/sbin/dockerd" ] && [ -x "$D26_PREFIX/usr/bin/containerd" ] &&
     [ -x "$D26_PREFIX/usr/libexec/docker/cli-plugins/docker-buildx" ] &&
     [ -x "$D26_PREFIX/usr/libexec/docker/cli-plugins/docker-compose" ]; then
    return 0
  fi
  d26_log "downloading ${pkgs[*]} from trixie into $D26_PREFIX"
  mkdir -p "$D26_APT"/{lists/partial,cache/archives/partial,prefs.d,debs}
  # The machine's own Debian source (its mirror, proxy or snapshot), with the suite changed.
  debian_source_line trixie >"$D26_APT/sources.list"
  d26_log "trixie from: $(cat "$D26_APT/sources.list")"
  local opts=(-o "Dir::Etc::SourceList=$D26_APT/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$D26_APT/lists" -o "Dir::Cache=$D26_APT/cache"
              -o Dir::State::Status=/dev/null -o Dir::Etc::Preferences=/dev/null
              -o "Dir::Etc::PreferencesParts=$D26_APT/prefs.d" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" update -qq
  (cd "$D26_APT/debs" && rm -f ./*.deb && apt-get "${opts[@]}" download -qq "${pkgs[@]}")
  mkdir -p "$D26_PREFIX"
  for deb in "$D26_APT"/debs/*.deb; do dpkg -x "$deb" "$D26_PREFIX"; done
  [ -x "$D26_PREFIX/usr/sbin/dockerd" ] || { d26_log "no dockerd in $D26_PREFIX" >&2; return 1; }
}

# Copies the buildx and Compose v2 plugins where every Docker CLI finds them.
d26_plugins() {
  mkdir -p "$D26_PLUGINS"
  local p
  for p in docker-buildx docker-compose; do
    if ! cmp -s "$D26_PREFIX/usr/libexec/docker/cli-plugins/$p" "$D26_PLUGINS/$p"; then
      install -m 0755 "$D26_PREFIX/usr/libexec/docker/cli-plugins/$p" "$D26_PLUGINS/$p"
    fi
  done
}

# True when $1 is a running (not zombie) dockerd.
d26_live_dockerd() {
  [ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  case "$stat" in *"(dockerd) Z"*) return 1 ;; *"(dockerd) "*) return 0 ;; *) return 1 ;; esac
}

d26_ping() { curl -sf --max-time 5 --unix-socket "$D26_SOCK" http://docker/_ping >/dev/null 2>&1; }

# Starts the second dockerd in its network namespace unless its socket answers.
d26_start() {
  d26_ping && return 0
  [ -x /usr/sbin/runc ] || { d26_log "bookworm's runc (/usr/sbin/runc) is missing" >&2; return 1; }
  if [ ! -e "$D26_NETNS_PATH" ]; then
    ip netns add "$D26_NETNS"
  fi
  nsenter --net="$D26_NETNS_PATH" ip link set lo up
  mkdir -p "$D26_RUN" "$D26_DATA"
  # Its own paths and address pools, plus the settings the proxy expects of every daemon
  # (packaging/daemon.json: entitlements off, the budget's cgroup parent).
  cat >"$D26_RUN/daemon.base.json" <<EOF
{"data-root":"$D26_DATA","exec-root":"$D26_RUN/exec","pidfile":"$D26_RUN/docker.pid","hosts":["unix://$D26_SOCK"],"bip":"$D26_BIP","default-address-pools":[{"base":"$D26_POOL","size":24}]}
EOF
  "$(dirname "${BASH_SOURCE[0]}")/daemon-config.py" merge "$D26_RUN/daemon.base.json" \
    $( [ -d /run/systemd/system ] && [ -f /sys/fs/cgroup/cgroup.controllers ] && echo --systemd ) \
    >"$D26_RUN/daemon.json"
  # A daemon that holds the pidfile may be starting or dying: wait for it to answer or go.
  local pid _
  pid=$(cat "$D26_RUN/docker.pid" 2>/dev/null || true)
  for _ in $(seq 1 30); do
    d26_live_dockerd "$pid" || break
    d26_ping && return 0
    sleep 1
  done
  if d26_live_dockerd "$pid"; then
    d26_log "dockerd $pid holds $D26_RUN/docker.pid but does not answer on $D26_SOCK" >&2
    return 1
  fi
  # A pidfile of a dead daemon would stop the start.
  rm -f "$D26_RUN/docker.pid"
  d26_log "starting dockerd 26 on $D26_SOCK in netns $D26_NETNS (log: $D26_RUN/dockerd.log)"
  # containerd, docker-proxy and docker-init come from the prefix; runc from /usr/sbin.
  (PATH="$D26_PREFIX/usr/sbin:$D26_PREFIX/usr/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
     setsid nsenter --net="$D26_NETNS_PATH" "$D26_PREFIX/usr/sbin/dockerd" --config-file "$D26_RUN/daemon.json" \
     </dev/null >>"$D26_RUN/dockerd.log" 2>&1 &)
  for _ in $(seq 1 60); do d26_ping && break; sleep 1; done
  d26_ping || { tail -40 "$D26_RUN/dockerd.log" >&2; return 1; }
}

# Loads the test image from the system daemon into Engine 26 unless it is there.
d26_image() {
  local cli=/usr/bin/docker
  [ -x /usr/local/bin/docker ] && cli=/usr/local/bin/docker
  if ! "$cli" -H "unix://$D26_SOCK" image inspect "$D26_IMAGE" >/dev/null 2>&1; then
    d26_log "loading $D26_IMAGE into Engine 26"
    "$cli" -H unix:///var/run/docker.sock save "$D26_IMAGE" | "$cli" -H "unix://$D26_SOCK" load -q >/dev/null
  fi
}

d26_all() {
  d26_install
  d26_plugins
  d26_start
  d26_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  d26_all
fi
