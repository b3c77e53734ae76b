#!/bin/bash
# The first start of the host's Postgres (datastores = "host"): the roles of
# docs/deploy.md, made once, on an empty volume. docker-compose.datastores.yaml
# mounts this into /docker-entrypoint-initdb.d; the image runs it as the
# superuser POSTGRES_USER (crawlfleet_admin) after creating the database.
#
#   crawlfleet         owns the database and everything the migrations create;
#                      cannot log in
#   crawlfleet_blue,   the two login roles that take turns: each acts as
#   crawlfleet_green   crawlfleet (SET role), so either runs the fleet and its
#                      migrations while the other's password changes (a rotation
#                      without an outage, tests/it/rotation.rs)
#
# The one Parameter Store's postgres-user names gets postgres-password (the image
# read it from POSTGRES_PASSWORD_FILE); the other has none until a rotation. The
# superuser's password is removed: it logs in over the container's own socket
# only (`docker compose exec postgres psql -U crawlfleet_admin -d crawlfleet`).
set -euo pipefail

user=$(cat /run/crawlfleet/datastores/postgres-user)
psql --no-psqlrc -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v admin="$POSTGRES_USER" -v user="$user" -v password="$POSTGRES_PASSWORD" <<'SQL'
CREATE ROLE crawlfleet NOLOGIN;
ALTER DATABASE crawlfleet OWNER TO crawlfleet;
CREATE ROLE crawlfleet_blue LOGIN IN ROLE crawlfleet;
CREATE ROLE crawlfleet_green LOGIN IN ROLE crawlfleet;
ALTER ROLE crawlfleet_blue SET role = 'crawlfleet';
ALTER ROLE crawlfleet_green SET role = 'crawlfleet';
ALTER ROLE :"user" PASSWORD :'password';
ALTER ROLE :"admin" PASSWORD NULL;
SQL
echo "postgres-init.sh: roles crawlfleet, crawlfleet_blue and crawlfleet_green made; $user logs in"
