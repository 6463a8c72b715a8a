# Multi-stage build of the dockwarden sidecar image.
#   docker build -t dockwarden .
#   docker run -d --name dockwarden \
#     -v /var/run/docker.sock:/var/run/docker.sock \
#     -v /run/dockwarden:/run/dockwarden:rshared \
#     -v /workspace:/workspace \
#     dockwarden proxy --workspace /workspace
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
