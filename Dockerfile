# syntax=docker/dockerfile:1
# crawlfleet image: one binary, the role is the command. The workspace's tools
# (crates/: crawlfleet-simulate, crawlfleet-demo) are not built into it.
#
#   docker build -t crawlfleet .
#   docker run --env-file .env crawlfleet --process=worker
#
# The build needs no database: sqlx's compile-time query checks read the committed
# .sqlx/ data (SQLX_OFFLINE=true).

ARG RUST_VERSION=1.95

# --- build -------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-slim-bookworm AS builder
WORKDIR /src
ENV SQLX_OFFLINE=true \
    CARGO_TERM_COLOR=never
COPY Cargo.toml Cargo.lock build.rs ./
COPY .sqlx ./.sqlx
COPY migrations ./migrations
COPY src ./src
# Cargo.toml declares [[bench]] render_modes: cargo refuses a manifest whose declared
# bench file is missing, even to build only the binary. Never compiled here, and the
# runtime stage takes only the binary.
COPY benches ./benches
# The workspace's other members: cargo reads every member's manifest and targets
# before it builds -p crawlfleet alone.
COPY crates ./crates
# The cache mounts keep the registry and compiled dependencies between builds; the
# binary is copied out of the (mounted, so not layered) target dir in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p crawlfleet --bin crawlfleet \
    && install -D -m 0755 target/release/crawlfleet /out/crawlfleet

# --- the RDS CA bundle --------------------------------------------------------------
# With DATABASE_SSLMODE=verify-full, crawlfleet checks RDS's certificate against AWS's
# CA bundle (DATABASE_SSLROOTCERT). Fetched at every build, so CAs AWS adds reach the
# next image. A build without internet gives the file instead, as a build context
# holding out/rds-ca-bundle.pem (scripts/check-image does):
#   podman build --build-context rds-ca=DIR ...
FROM debian:bookworm-slim AS rds-ca
ARG RDS_CA_BUNDLE_URL=https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && curl --fail --silent --show-error --location --proto '=https' --tlsv1.2 \
        --retry 3 --create-dirs --output /out/rds-ca-bundle.pem "$RDS_CA_BUNDLE_URL" \
    && grep -q 'BEGIN CERTIFICATE' /out/rds-ca-bundle.pem

# --- run ---------------------------------------------------------------------------
FROM debian:bookworm-slim AS runtime

# Versions are not pinned on purpose: Debian's security archive replaces chromium
# within days of each release and drops the old version, so a pin breaks the build
# instead of making it reproducible. The image digest in ECR is what gets deployed.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        chromium \
        fonts-liberation \
        fonts-noto-cjk \
        tini \
    && rm -rf /var/lib/apt/lists/*

# Chrome runs as this user too. Its sandbox needs user namespaces, which the default
# seccomp profiles of Docker and Fargate forbid: the worker (CHROME_SANDBOX=auto)
# then starts it without, and keeps its own environment from it (non-dumpable).
RUN groupadd --system --gid 10001 crawlfleet \
    && useradd --system --uid 10001 --gid crawlfleet --create-home \
        --home-dir /home/crawlfleet --shell /usr/sbin/nologin crawlfleet

COPY --from=builder /out/crawlfleet /usr/local/bin/crawlfleet
# Readable by the crawlfleet user: DATABASE_SSLROOTCERT points here for RDS.
COPY --from=rds-ca --chmod=0644 /out/rds-ca-bundle.pem /usr/local/share/crawlfleet/rds-ca-bundle.pem

ENV LOG_FORMAT=json \
    CHROME_PATH=/usr/bin/chromium \
    API_HOST=0.0.0.0 \
    HEALTHCHECK_URL=http://127.0.0.1:3000/health

USER 10001:10001
WORKDIR /home/crawlfleet
# api (API_PORT), its metrics (API_METRICS_PORT), worker health/metrics
# (METRICS_PORT), scheduler health/metrics (SCHEDULER_PORT): the defaults of
# src/config.rs (tests/infra_agrees/ checks).
EXPOSE 3000 3001 3002 3003

# Defaults to the api's port; a scheduler or worker container sets HEALTHCHECK_URL
# (docker-compose.ec2.yaml and the ECS task definition define their own checks).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/bin/sh", "-c", "exec crawlfleet healthcheck --url \"$HEALTHCHECK_URL\""]

# tini is PID 1 so Chrome's helper processes get reaped. No `-g`: SIGTERM must reach
# crawlfleet alone, which drains its crawls and then closes its Chrome itself.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/crawlfleet"]
CMD ["--process=all"]
