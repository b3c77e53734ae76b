# Secrets live in Parameter Store, never in plain task environment or in the state:
# Terraform creates each parameter with a placeholder and never looks at its value
# again; the operator writes the real ones (docs/deploy.md, step 3). The EC2 host
# reads them into /opt/crawlfleet/.env (api.env for the api's tokens); the Fargate
# task gets its three as `secrets`. An optional secret left at the placeholder
# means "none"; a required one stops crawlfleet-deploy.

locals {
  secret_parameters = {
    "postgres-password" = "Password of the crawlfleet Postgres user (hex, URL-safe)."
    "redis-password"    = "Redis requirepass (hex, URL-safe)."
    "database-url"      = "DATABASE_URL of the Fargate workers: postgres://crawlfleet:<password>@<ec2_private_ip>:5432/crawlfleet"
    "redis-url"         = "REDIS_URL of the Fargate workers: redis://:<password>@<ec2_private_ip>:6379"
    "session-key"       = "SESSION_KEY: 32 random bytes as 64 hex characters; seals kept site sessions, sites' header values and proxy credentials, and webhook secrets (api, scheduler and every worker)."
    "api-tokens"        = "API_TOKENS of the api alone: bearer tokens allowed to read and write, comma-separated (openssl rand -hex 32 each)."
    "api-read-tokens"   = "API_READ_TOKENS of the api alone: read-only bearer tokens, comma-separated. Optional: the placeholder means none."
  }
  secret_placeholder = "set-me-see-docs-deploy-md"
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

# The EC2 host's configuration, not secret and fully managed here: the compose file
# and the non-secret half of its .env. crawlfleet-deploy on the host reads both on
# every run, so changing them is `terraform apply` + one command on the host, with
# no instance replacement (docs/deploy.md, "Upgrading").
resource "aws_ssm_parameter" "compose_file" {
  #checkov:skip=CKV2_AWS_34:Not secret (it is in git); a String keeps plans showing what changes.
  name        = "${local.ssm_prefix}/host/docker-compose.ec2.yaml"
  description = "docker-compose.ec2.yaml of the EC2 host."
  type        = "String"
  tier        = "Intelligent-Tiering" # over 4 KB it becomes an advanced parameter
  value       = file("${path.module}/../docker-compose.ec2.yaml")
}

resource "aws_ssm_parameter" "host_env" {
  #checkov:skip=CKV2_AWS_34:Not secret (the secrets are the SecureString parameters above); a String keeps plans showing what changes.
  name        = "${local.ssm_prefix}/host/env"
  description = "Non-secret lines of the EC2 host's .env."
  type        = "String"
  value       = <<-EOT
    CRAWLFLEET_IMAGE=${local.worker_image}
    WORKER_REPLICAS=${var.base_worker_replicas}
    REDIS_MAXMEMORY=${var.redis_maxmemory}
    PRIVATE_BIND_IP=${var.ec2_private_ip}
    AWS_REGION=${var.region}
    AWS_LOG_GROUP=${aws_cloudwatch_log_group.ec2.name}
    CLOUDWATCH_NAMESPACE=${var.cloudwatch_namespace}
  EOT
}
