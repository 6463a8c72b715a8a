#!/usr/bin/env bash
# Runs the proxy with its embedded default policy on a Debian machine, as root:
#   ./scripts/run-proxy.sh --workspace /path/to/checkout [more `dockwarden proxy` flags]
# It sets the machine up (dockerd, packages), builds dockwarden and serves on
# /run/dockwarden/docker.sock until SIGINT/SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
# Engine 26.1 beside the system's is for the test suites; DW_ENGINE26=1 sets it up here too
# (then `--upstream /run/docker26/docker.sock` puts the proxy in front of it).
DW_ENGINE26=${DW_ENGINE26:-0} . scripts/setup.sh
cargo build --release -q
exec ./target/release/dockwarden proxy "$@"
