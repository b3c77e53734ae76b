# Postgres is the truth: the host's volume is snapshotted daily (crash-consistent,
# which Postgres recovers from like from a power cut). Restore: docs/deploy.md.
resource "aws_dlm_lifecycle_policy" "host" {
  description        = "${var.name} host volume daily"
  execution_role_arn = aws_iam_role.dlm.arn
  state              = "ENABLED"

  policy_details {
    resource_types = ["VOLUME"]
    target_tags    = { Snapshot = var.name }

    schedule {
      name      = "daily"
      copy_tags = true

      create_rule {
        interval      = 24
        interval_unit = "HOURS"
        times         = ["18:00"] # UTC: 03:00 in Seoul
      }

      retain_rule {
        count = var.snapshot_retention_days
      }
    }
  }
}
