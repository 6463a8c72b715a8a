# Multi-stage build of the dockwarden sidecar image.
#   docker build -t dockwarden .
#   docker run -d --name dockwarden --privileged --pid host --cgroupns host \
#     -v /var/run/docker.sock:/var/run/docker.sock \
#     -v /run/dockwarden:/run/dockwarden:rshared \
#     -v /workspace:/workspace \
#     -v /sys/fs/cgroup:/sys/fs/cgroup \
#     dockwarden proxy --workspace /workspace
# The sidecar is started by the VM image as root, directly on the daemon (never through the
# proxy): pins are bind mounts that must propagate to the host (`rshared`, so /run/dockwarden
# must be a shared mount on the host), the workspace and the pin directory must have the same
# paths inside and outside, and the budget writes cgroups.
#
# BuildKit builds it (`RUN --mount`; the default builder since Engine 23). The base images are
# arguments so an offline machine can substitute local ones, and the context may carry the
# crates in vendor/ (then nothing is fetched from crates.io). scripts/sidecar-base-images.sh
# makes both and prints the arguments and the context to use:
#   docker build -f Dockerfile --build-arg BUILDER_IMAGE=... --build-arg RUNTIME_IMAGE=... \
#     target/sidecar-context
ARG BUILDER_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
# .dockerignore keeps the context to Cargo.toml, Cargo.lock, src, crates, policy, benches and
# vendor.
COPY . .
# Vendored crates when the context has them; only the binary, without debug info (the release
# profile's `debug = 1` is for profiling). target/ is a BuildKit cache mount, so a rebuild after a
# source change compiles the dockwarden crate again, not its dependencies.
RUN --mount=type=cache,target=/src/target,id=dockwarden-target,sharing=locked \
    if [ -d vendor ]; then \
      mkdir -p .cargo \
      && printf '%s\n' '[source.crates-io]' 'replace-with = "vendored"' \
           '[source.vendored]' 'directory = "vendor"' '[net]' 'offline = true' >.cargo/config.toml; \
    fi \
 && CARGO_PROFILE_RELEASE_DEBUG=0 cargo build --release --locked --bin dockwarden \
 && strip -o /usr/local/bin/dockwarden target/release/dockwarden

FROM ${RUNTIME_IMAGE}
COPY --from=build /usr/local/bin/dockwarden /usr/local/bin/dockwarden
# The proxy needs root on the host side (pins, chown-back, cgroups), never a shell.
USER root
ENTRYPOINT ["/usr/local/bin/dockwarden"]
CMD ["proxy", "--workspace", "/workspace"]
