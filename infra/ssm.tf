# Secrets live in Parameter Store, never in plain task environment or in the state:
# Terraform creates each parameter with a placeholder and never looks at its value
# again; the operator writes the real ones (docs/deploy.md, step 3). The EC2 host
# reads them into /opt/crawlfleet/.env; the Fargate task gets them as `secrets`.

locals {
  secret_parameters = {
    "postgres-password" = "Password of the crawlfleet Postgres user (hex, URL-safe)."
    "redis-password"    = "Redis requirepass (hex, URL-safe)."
    "database-url"      = "DATABASE_URL of the Fargate workers: postgres://crawlfleet:<password>@<ec2_private_ip>:5432/crawlfleet"
    "redis-url"         = "REDIS_URL of the Fargate workers: redis://:<password>@<ec2_private_ip>:6379"
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

# The image the EC2 host runs; crawlfleet-deploy on the host reads it, so an
# upgrade is `terraform apply` + one command, with no instance replacement.
resource "aws_ssm_parameter" "image_tag" {
  name        = "${local.ssm_prefix}/image-tag"
  description = "Image tag (in ECR) the EC2 host runs."
  type        = "String"
  value       = var.image_tag
}
