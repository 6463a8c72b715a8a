#!/usr/bin/env bash
# Runs every test: unit and policy cases, then the end-to-end suites against the real dockerd.
# Test binaries run one after another (cargo's default), so the container-cap test sees a quiet daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
export DOCKER_HOST=unix:///var/run/docker.sock
cargo test --release --all-targets -- --test-threads=4
