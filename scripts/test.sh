#!/usr/bin/env bash
# Runs every test on a Debian machine as root: sets the machine up (packages, dockerd, test
# image), then unit tests, policy cases, property tests and the end-to-end suites against the
# real dockerd. Test binaries run one after another (cargo's default).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
export DOCKER_HOST=unix:///var/run/docker.sock
cargo test --release --all-targets -- --test-threads=4
