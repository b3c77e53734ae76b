# Secrets live in Parameter Store, each in exactly one SecureString, never in plain
# task environment, never in a URL typed by hand and never in the state: Terraform
# creates each parameter with a placeholder and never looks at its value again; the
# operator writes the real ones (docs/deploy.md, step 3). The EC2 host reads them
# into /opt/crawlfleet/.env (api.env for the api's tokens); the Fargate tasks get
# theirs as `secrets`. crawlfleet assembles its URLs from the parts (DATABASE_HOST,
# DATABASE_PASSWORD...). An optional secret left at the placeholder means "none"; a
# required one stops crawlfleet-deploy.

locals {
  secret_parameters = {
    "postgres-password"    = "DATABASE_PASSWORD: password of the Postgres login role that postgres-user names (crawlfleet_blue or crawlfleet_green). openssl rand -hex 24. Rotation: docs/deploy.md."
    "redis-password"       = "REDIS_PASSWORD: Redis's password (host: requirepass; managed: ElastiCache's AUTH token, 16-128 characters). openssl rand -hex 24. Rotation: docs/deploy.md."
    "session-key"          = "SESSION_KEY: 32 random bytes as 64 hex characters; seals kept site sessions, sites' header values and proxy credentials, and webhook secrets (api, scheduler and every worker)."
    "session-key-previous" = "SESSION_KEY_PREVIOUS: the session key before the last rotation, still accepted to open what it sealed. Optional: the placeholder means none."
    "api-tokens"           = "API_TOKENS of the api alone: bearer tokens allowed to read and write, comma-separated (openssl rand -hex 32 each)."
    "api-read-tokens"      = "API_READ_TOKENS of the api alone: read-only bearer tokens, comma-separated. Optional: the placeholder means none."
  }
  secret_placeholder = "set-me-see-docs-deploy-md"

  # The compose files the host runs: crawlfleet's, and with datastores = "host"
  # Postgres and Redis beside it.
  compose_files = concat(
    ["docker-compose.ec2.yaml"],
    local.host_datastore ? ["docker-compose.datastores.yaml"] : [],
  )
  # Every file crawlfleet-deploy writes into /opt/crawlfleet from git: the compose
  # files, and with Postgres on the host the script that makes its roles on first
  # start (mounted into /docker-entrypoint-initdb.d), who may connect how
  # (TLS only) and pgBackRest's settings.
  host_files = concat(
    local.compose_files,
    local.host_datastore ? ["postgres-init.sh", "postgres-hba.conf", "pgbackrest.conf", "postgres.Dockerfile"] : [],
  )
}

# DATABASE_USER: which of the two Postgres login roles the fleet logs in as. Both
# act as the owner role crawlfleet (docs/deploy.md, first deploy), so a password is
# rotated without an outage by giving the idle one a new password, pointing this
# and postgres-password at it, rolling the fleet, then revoking the other's
# (tests/it/rotation.rs). The operator flips it; Terraform sets only the first value.
locals {
  postgres_login_roles = ["crawlfleet_blue", "crawlfleet_green"]
}

resource "aws_ssm_parameter" "postgres_user" {
  #checkov:skip=CKV2_AWS_34:A role's name, not a secret; a String, so the execution role and the host read it without KMS.
  name        = "${local.ssm_prefix}/postgres-user"
  description = "DATABASE_USER: the Postgres login role in use, ${join(" or ", local.postgres_login_roles)}; its password is postgres-password. Flipped at each password rotation (docs/deploy.md)."
  type        = "String"
  value       = local.postgres_login_roles[0]

  lifecycle {
    ignore_changes = [value]
  }
}

resource "aws_ssm_parameter" "secret" {
  for_each    = local.secret_parameters
  name        = "${local.ssm_prefix}/${each.key}"
  description = each.value
  type        = "SecureString"
  key_id      = aws_kms_key.crawlfleet.arn
  value       = local.secret_placeholder

  lifecycle {
    ignore_changes = [value]
  }
}

# The CA of the host's datastores (datastores = "host"): made by the host at its
# first boot and kept on the data volume, published here by the host (its role may
# put this parameter alone), read by the Fargate workers and the migrate task as
# DATABASE_SSLROOTCERT_PEM and REDIS_CA_CERT_PEM. A certificate, not a secret.
resource "aws_ssm_parameter" "datastores_ca" {
  #checkov:skip=CKV2_AWS_34:A CA certificate is public; a String, so the execution role reads it without KMS.
  count       = local.host_count
  name        = local.datastores_ca_parameter
  description = "The CA certificate (PEM) of the host's Postgres and Redis: put by the host at its first boot."
  type        = "String"
  value       = local.secret_placeholder

  lifecycle {
    ignore_changes = [value]
  }
}

# The EC2 host's configuration, not secret and fully managed here: the compose files
# (with host datastores also postgres-init.sh) and the non-secret half of its .env. crawlfleet-deploy on the host reads them on
# every run, so changing them is `terraform apply` + one command on the host, with
# no instance replacement (docs/deploy.md, "Upgrading").
resource "aws_ssm_parameter" "compose_file" {
  #checkov:skip=CKV2_AWS_34:Not secret (it is in git); a String keeps plans showing what changes.
  for_each    = toset(local.host_files)
  name        = "${local.ssm_prefix}/host/${each.key}"
  description = "${each.key} of the EC2 host."
  type        = "String"
  tier        = "Intelligent-Tiering" # over 4 KB it becomes an advanced parameter
  value       = file("${path.module}/../${each.key}")
}

resource "aws_ssm_parameter" "host_env" {
  #checkov:skip=CKV2_AWS_34:Not secret (the secrets are the SecureString parameters above); a String keeps plans showing what changes.
  name        = "${local.ssm_prefix}/host/env"
  description = "Non-secret lines of the EC2 host's .env."
  type        = "String"
  tier        = "Intelligent-Tiering"
  # Every crawlfleet container on the host reads these (env_file: .env); compose
  # interpolates some of them into docker-compose*.yaml. With datastores = "host"
  # the host's containers reach Postgres and Redis by their compose names.
  value = join("\n", concat([
    "COMPOSE_FILE=${join(":", local.compose_files)}",
    "HOST_FILES=${join(":", local.host_files)}",
    "CRAWLFLEET_IMAGE=${local.image}",
    "WORKER_REPLICAS=${var.base_worker_replicas}",
    "REDIS_MAXMEMORY=${var.redis_maxmemory}",
    # The host's address changes when it is replaced: every address, which its
    # security group narrows to the workers.
    "PRIVATE_BIND_IP=0.0.0.0",
    "DATA_DIR=${local.data_dir}",
    "AWS_REGION=${var.region}",
    "AWS_LOG_GROUP=${aws_cloudwatch_log_group.ec2.name}",
    "CLOUDWATCH_NAMESPACE=${var.cloudwatch_namespace}",
    "TRUSTED_PROXIES=${local.trusted_proxies}",
    "API_HTTP_HEADER_TIMEOUT_SECS=${local.tls ? var.alb_idle_timeout_secs + 5 : 10}",
    ], [
    for name, value in merge(local.database_env, local.redis_env) :
    "${name}=${local.host_datastore && contains(["DATABASE_HOST", "REDIS_HOST"], name) ? (name == "DATABASE_HOST" ? "postgres" : "redis") : value}"
  ], [""]))
}
