# The one mostrador binary in a small non-root image.
#
#   docker build -t mostrador .
#   docker run --rm mostrador --help
#
# Builds offline from the committed query cache (.sqlx/): no database is needed at build time.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
ENV SQLX_OFFLINE=true CARGO_TERM_COLOR=never
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin mostrador \
    && install -D target/release/mostrador /out/mostrador

# glibc and libgcc, no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/mostrador /usr/local/bin/mostrador
# The chart runs pods as 10001 with a read-only root filesystem; the binary writes nothing.
USER 10001:10001
EXPOSE 8123 9091
ENTRYPOINT ["/usr/local/bin/mostrador"]
CMD ["--help"]
