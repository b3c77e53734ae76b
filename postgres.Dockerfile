# The host's Postgres (datastores = "host"): the release's image with pgBackRest,
# from the PGDG apt repository the image already uses, so the WAL archive's tool
# matches the server. docker-compose.datastores.yaml builds it on the host.
FROM postgres:16.9-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends pgbackrest \
    && rm -rf /var/lib/apt/lists/*
