# datastores = "managed": RDS PostgreSQL 16 and ElastiCache Redis 7.1 in the
# private subnets, each behind its own group that admits the host and the workers
# (security_groups.tf), both encrypted at rest with the project's key and spoken to
# over TLS only. With datastores = "host" none of this exists (the host runs them,
# docker-compose.datastores.yaml).
#
# Passwords, each in one place and never in the Terraform state:
#   - RDS's master user (crawlfleet_admin) is RDS's own: it keeps the password in
#     Secrets Manager (output db_master_secret_arn) and rotates it. Only an operator
#     uses it, once, to create the application's role (docs/deploy.md, step 3).
#   - The application's role (crawlfleet) has the password in Parameter Store's
#     postgres-password, as in host mode.
#   - Redis's AUTH token is Parameter Store's redis-password, given to ElastiCache
#     by the operator (docs/deploy.md, step 3), never by Terraform.

locals {
  managed_count = local.host_datastore ? 0 : 1
}

resource "aws_security_group" "rds" {
  count       = local.managed_count
  name        = "${var.name}-postgres"
  description = "crawlfleet RDS PostgreSQL: 5432 from the host and the workers"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-postgres" }
}

resource "aws_security_group" "redis" {
  count       = local.managed_count
  name        = "${var.name}-redis"
  description = "crawlfleet ElastiCache Redis: 6379 from the host and the workers"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-redis" }
}

# --- Postgres ----------------------------------------------------------------------------

resource "aws_db_subnet_group" "postgres" {
  count      = local.managed_count
  name       = "${var.name}-postgres"
  subnet_ids = aws_subnet.private[*].id
}

resource "aws_db_parameter_group" "postgres" {
  count  = local.managed_count
  name   = "${var.name}-postgres16"
  family = "postgres16"

  # Refuse any connection without TLS (crawlfleet asks sslmode=verify-full).
  parameter {
    name  = "rds.force_ssl"
    value = "1"
  }

  # Slow statements and DDL in the log (exported to CloudWatch Logs).
  parameter {
    name  = "log_min_duration_statement"
    value = "1000"
  }

  parameter {
    name  = "log_statement"
    value = "ddl"
  }

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_iam_role" "rds_monitoring" {
  count              = local.managed_count
  name               = "${var.name}-rds-monitoring"
  assume_role_policy = data.aws_iam_policy_document.rds_monitoring_assume.json
}

data "aws_iam_policy_document" "rds_monitoring_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["monitoring.rds.amazonaws.com"]
    }
  }
}

resource "aws_iam_role_policy_attachment" "rds_monitoring" {
  count      = local.managed_count
  role       = aws_iam_role.rds_monitoring[0].name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonRDSEnhancedMonitoringRole"
}

resource "aws_db_instance" "postgres" {
  #checkov:skip=CKV_AWS_157:Multi-AZ is var.multi_az (off by default: it doubles the instance's cost); backups with point-in-time recovery are always on.
  count          = local.managed_count
  identifier     = var.name
  engine         = "postgres"
  engine_version = "16"
  instance_class = var.db_instance_class

  storage_type          = "gp3"
  allocated_storage     = var.db_allocated_storage_gb
  max_allocated_storage = var.db_allocated_storage_gb * 4
  storage_encrypted     = true
  kms_key_id            = aws_kms_key.crawlfleet.arn

  db_name                       = "crawlfleet"
  username                      = "crawlfleet_admin"
  manage_master_user_password   = true
  master_user_secret_kms_key_id = aws_kms_key.crawlfleet.arn
  # Tokens for IAM users are allowed besides passwords (an operator's psql without
  # the master password); crawlfleet itself uses its password.
  iam_database_authentication_enabled = true

  db_subnet_group_name   = aws_db_subnet_group.postgres[0].name
  vpc_security_group_ids = [aws_security_group.rds[0].id]
  publicly_accessible    = false
  multi_az               = var.multi_az
  parameter_group_name   = aws_db_parameter_group.postgres[0].name
  # The CA whose bundle the image carries (DATABASE_SSLROOTCERT).
  ca_cert_identifier = "rds-ca-rsa2048-g1"

  # Automated backups: daily snapshots plus the WAL, so point-in-time recovery to
  # any second of the retention.
  backup_retention_period   = var.db_backup_retention_days
  backup_window             = "17:00-17:30" # UTC: 02:00 in Seoul
  maintenance_window        = "sun:18:00-sun:18:30"
  copy_tags_to_snapshot     = true
  delete_automated_backups  = false
  deletion_protection       = true
  skip_final_snapshot       = false
  final_snapshot_identifier = "${var.name}-final"

  auto_minor_version_upgrade      = true
  allow_major_version_upgrade     = false
  apply_immediately               = false
  enabled_cloudwatch_logs_exports = ["postgresql", "upgrade"]
  monitoring_interval             = 60
  monitoring_role_arn             = aws_iam_role.rds_monitoring[0].arn
  performance_insights_enabled    = true
  performance_insights_kms_key_id = aws_kms_key.crawlfleet.arn

  depends_on = [aws_iam_role_policy_attachment.rds_monitoring]
}

# --- Redis ---------------------------------------------------------------------------------

resource "aws_elasticache_subnet_group" "redis" {
  count      = local.managed_count
  name       = "${var.name}-redis"
  subnet_ids = aws_subnet.private[*].id
}

resource "aws_elasticache_parameter_group" "redis" {
  count  = local.managed_count
  name   = "${var.name}-redis7"
  family = "redis7"

  # As on the host: a full Redis refuses writes rather than dropping queue keys.
  parameter {
    name  = "maxmemory-policy"
    value = "noeviction"
  }
}

resource "aws_elasticache_replication_group" "redis" {
  #checkov:skip=CKV_AWS_31:The AUTH token is set by the operator from Parameter Store (aws elasticache modify-replication-group --auth-token, docs/deploy.md step 3), so it is never in the Terraform state; Terraform ignores it from then on.
  #checkov:skip=CKV2_AWS_50:Multi-AZ with automatic failover is var.multi_az (off by default: a replica doubles the cost, and a lost Redis loses nothing, Postgres holds the backlog).
  count                = local.managed_count
  replication_group_id = var.name
  description          = "crawlfleet job transport, events and rate limits"
  engine               = "redis"
  engine_version       = "7.1"
  node_type            = var.redis_node_type
  port                 = 6379
  parameter_group_name = aws_elasticache_parameter_group.redis[0].name
  subnet_group_name    = aws_elasticache_subnet_group.redis[0].name
  security_group_ids   = [aws_security_group.redis[0].id]

  num_cache_clusters         = var.multi_az ? 2 : 1
  automatic_failover_enabled = var.multi_az
  multi_az_enabled           = var.multi_az

  at_rest_encryption_enabled = true
  kms_key_id                 = aws_kms_key.crawlfleet.arn
  transit_encryption_enabled = true
  transit_encryption_mode    = "required"

  snapshot_retention_limit   = 0
  auto_minor_version_upgrade = true
  maintenance_window         = "sun:18:30-sun:19:30"
  apply_immediately          = false

  lifecycle {
    ignore_changes = [auth_token, auth_token_update_strategy]
  }
}

# --- alarms --------------------------------------------------------------------------------
#
# RDS's and ElastiCache's essentials (the Redis memory alarm is in alarms.tf, beside
# the host's): a busy, full or crowded Postgres, and a Redis that drops keys.

locals {
  db_alarms = {
    cpu = {
      metric      = "CPUUtilization"
      statistic   = "Average"
      period      = 300
      periods     = 3
      threshold   = var.db_cpu_alarm_percent
      comparison  = "GreaterThanThreshold"
      description = "[WARNING] RDS CPU above ${var.db_cpu_alarm_percent}% for 15 minutes: slow queries or too many workers (Performance Insights shows which)."
    }
    free-storage = {
      metric      = "FreeStorageSpace"
      statistic   = "Minimum"
      period      = 300
      periods     = 2
      threshold   = var.db_free_storage_alarm_gb * 1024 * 1024 * 1024
      comparison  = "LessThanThreshold"
      description = "[CRITICAL] RDS has less than ${var.db_free_storage_alarm_gb} GB free for 10 minutes; storage autoscaling stops at ${var.db_allocated_storage_gb * 4} GB, and a full instance stops writing."
    }
    connections = {
      metric      = "DatabaseConnections"
      statistic   = "Maximum"
      period      = 300
      periods     = 2
      threshold   = var.db_connections_alarm_threshold
      comparison  = "GreaterThanThreshold"
      description = "[WARNING] More than ${var.db_connections_alarm_threshold} connections to RDS for 10 minutes: near max_connections, new workers will fail to connect."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "db" {
  for_each            = local.host_datastore ? {} : local.db_alarms
  alarm_name          = "${var.name}-rds-${each.key}"
  alarm_description   = "${each.value.description} docs/deploy.md runbook."
  namespace           = "AWS/RDS"
  metric_name         = each.value.metric
  dimensions          = { DBInstanceIdentifier = aws_db_instance.postgres[0].identifier }
  statistic           = each.value.statistic
  period              = each.value.period
  evaluation_periods  = each.value.periods
  threshold           = each.value.threshold
  comparison_operator = each.value.comparison
  treat_missing_data  = "missing"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# noeviction: Redis refuses writes rather than evicting, so any eviction means the
# policy is not the one this file sets (and queue keys are being lost).
resource "aws_cloudwatch_metric_alarm" "redis_evictions" {
  count               = local.host_datastore ? 0 : (var.multi_az ? 2 : 1)
  alarm_name          = "${var.name}-redis-evictions-${format("%03d", count.index + 1)}"
  alarm_description   = "[CRITICAL] ElastiCache node ${format("%03d", count.index + 1)} evicted keys: its maxmemory-policy is not noeviction, and queue keys are lost. docs/deploy.md runbook, \"Redis memory pressure\"."
  namespace           = "AWS/ElastiCache"
  metric_name         = "Evictions"
  dimensions          = { CacheClusterId = "${aws_elasticache_replication_group.redis[0].id}-${format("%03d", count.index + 1)}" }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}
