#!/usr/bin/env bash
# The machine's own Debian source, for fetching packages of another suite (trixie's Engine 26.1
# in scripts/engine26.sh, the bookworm trees of the sidecar image's base images): never a
# hard-coded mirror, so offline mirrors, proxies and snapshot sources keep working.
#
#   debian_source_uri   prints the URI of the apt source that serves this machine's own suite
#                       (VERSION_CODENAME of /etc/os-release) with `main` packages, as apt
#                       itself resolved it (`apt-get indextargets`: one-line and deb822 files,
#                       sources.list.d, and whatever APT::* configuration the machine has).
#   debian_source_line SUITE   prints a one-line sources.list entry for SUITE from that URI.
#
# Sourced by scripts/engine26.sh; also runs on its own: `scripts/debian-source.sh [SUITE]`.

debian_source_uri() {
  local codename uri
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || { echo "debian-source: no VERSION_CODENAME in /etc/os-release" >&2; return 1; }
  uri=$(apt-get indextargets --no-release-info --format '$(TARGET_OF) $(RELEASE) $(COMPONENT) $(IDENTIFIER) $(REPO_URI)' 2>/dev/null |
        awk -v s="$codename" '$1 == "deb" && $2 == s && $3 == "main" && $4 == "Packages" { print $5; exit }')
  if [ -z "$uri" ]; then
    echo "debian-source: no apt source serves '$codename main' on this machine (run apt-get update, or add a Debian source)" >&2
    return 1
  fi
  echo "$uri"
}

debian_source_line() {
  local uri keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  uri=$(debian_source_uri) || return 1
  echo "deb [signed-by=$keyring] $uri $1 main"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  if [ $# -gt 0 ]; then debian_source_line "$1"; else debian_source_uri; fi
fi
