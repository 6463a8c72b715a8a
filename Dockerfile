# Multi-stage build of the dockwarden sidecar image.
#   docker build -t dockwarden .
#   docker run -d --name dockwarden --privileged --pid host --cgroupns host \
#     -v /var/run/docker.sock:/var/run/docker.sock \
#     -v /run/dockwarden:/run/dockwarden:rshared \
#     -v /workspace:/workspace \
#     -v /sys/fs/cgroup:/sys/fs/cgroup \
#     dockwarden proxy --workspace /workspace
# The sidecar is started by the VM image as root, directly on the daemon (never through the
# proxy): pins are bind mounts that must propagate to the host (`rshared`), the workspace and
# the pin directory must have the same paths inside and outside, and the budget writes cgroups.
# The base images are arguments so an offline machine can substitute local ones.
ARG BUILDER_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY policy ./policy
COPY benches ./benches
RUN cargo build --release --locked --bin dockwarden \
 && strip target/release/dockwarden

FROM ${RUNTIME_IMAGE}
COPY --from=build /src/target/release/dockwarden /usr/local/bin/dockwarden
# The proxy needs root on the host side (pins, chown-back, cgroups), never a shell.
USER root
ENTRYPOINT ["/usr/local/bin/dockwarden"]
CMD ["proxy", "--workspace", "/workspace"]
