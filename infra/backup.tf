# Backups with datastores = "host" (managed: RDS's automated backups and
# point-in-time recovery, datastores.tf).
#
# 1. Every night the host dumps Postgres (scripts/pg-backup's pg_dump, custom format:
#    a consistent snapshot of one moment) into the backup bucket, with the instance
#    role that may put objects under pg_dump/ and nothing else (it cannot read, list or delete
#    them). The bucket is encrypted with the project's key, versioned, closed to the
#    public and TLS-only; dumps expire after var.pg_dump_retention_days. Restore:
#    docs/deploy.md, "Restoring Postgres".
# 2. The host's volume is also snapshotted daily (crash-consistent, which Postgres
#    recovers from like from a power cut): the faster way back after losing the
#    instance.
# A night without a dump is an alarm.
#
# 3. Nobody on the host can destroy a dump: the bucket has S3 Object Lock, and each
#    dump is locked in governance mode for var.backup_lock_days from its upload.
#    Until then no version of it can be deleted or overwritten for good, by the
#    instance role (which may only put, and has no s3:BypassGovernanceRetention)
#    or by anyone else without that permission; an overwrite only adds a version.
#    Governance rather than compliance: an administrator can still bypass the lock,
#    on purpose and logged in CloudTrail, to erase a dump (a deletion request, a
#    dump that leaked data), which compliance mode forbids even to the root user.
#    An uploaded dump has a CRC32 checksum, which Object Lock requires.
#
# 4. Continuous archiving (pgBackRest, pgbackrest.conf): Postgres hands every WAL
#    segment, at least every archive_timeout (60 s), to pgBackRest, which puts it
#    under pgbackrest/ in the same bucket; the host takes a full backup every
#    night. Together: Postgres restored to any moment of the last 7 nights, losing
#    at most the last minute (scripts/pitr-drill measures it). pgBackRest runs in
#    the Postgres container, out of the instance role's reach (hop limit 1), with
#    an hour's credentials of the role pg_archive, which may use pgbackrest/ and
#    nothing else; pgBackRest sends Content-MD5 on every upload, which Object Lock
#    requires. Its own retention deletes what expired (a delete marker: the locked
#    version stays its backup_lock_days), the lifecycle rule below then the
#    versions no longer current.

locals {
  host_count = local.host_datastore ? 1 : 0
  # The host's own metrics (the backup's), put by the host with its instance role.
  host_metric_namespace = "${var.name}/host"
  # Where the nightly dumps go in the bucket: the host's script writes
  # <prefix>/YYYY-MM-DDTHHMMSSZ.dump (scripts/pg-backup's names), the instance role
  # may put there alone, and the lifecycle rule expires what is there.
  pg_dump_prefix = "pg_dump"
  # Where pgBackRest keeps its repository in the bucket (pgbackrest.conf): the WAL
  # archive and the nightly full backups. Only the role pg_archive may use it.
  pg_archive_prefix = "pgbackrest"
  # Where the host mounts its data volume (ec2.tf): DATA_DIR of
  # docker-compose.datastores.yaml.
  data_dir = "/srv/${var.name}"
}

resource "aws_s3_bucket" "backups" {
  #checkov:skip=CKV_AWS_18:Server access logs of a bucket written once a night by one role add cost and nothing CloudTrail does not show.
  #checkov:skip=CKV_AWS_144:One region; a second region's copy is a choice for the operator (docs/deploy.md).
  #checkov:skip=CKV2_AWS_62:Nothing reacts to a new dump; a missing one is an alarm.
  count         = local.host_count
  bucket        = "${var.name}-${var.aws_account_id}-${var.region}-backups"
  force_destroy = false
}

# Enabled here, not as the bucket's object_lock_enabled (which would replace a
# bucket made before, dumps and all): S3 turns Object Lock on for an existing
# versioned bucket. It cannot be turned off again.
resource "aws_s3_bucket_object_lock_configuration" "backups" {
  count               = local.host_count
  bucket              = aws_s3_bucket.backups[0].id
  object_lock_enabled = "Enabled"
  rule {
    default_retention {
      mode = "GOVERNANCE"
      days = var.backup_lock_days
    }
  }
  # Object Lock keeps versions: versioning first.
  depends_on = [aws_s3_bucket_versioning.backups]
}

resource "aws_s3_bucket_ownership_controls" "backups" {
  count  = local.host_count
  bucket = aws_s3_bucket.backups[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "backups" {
  count                   = local.host_count
  bucket                  = aws_s3_bucket.backups[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "backups" {
  count  = local.host_count
  bucket = aws_s3_bucket.backups[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = "aws:kms"
      kms_master_key_id = aws_kms_key.crawlfleet.arn
    }
    bucket_key_enabled = true
  }
}

resource "aws_s3_bucket_versioning" "backups" {
  count  = local.host_count
  bucket = aws_s3_bucket.backups[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "backups" {
  count  = local.host_count
  bucket = aws_s3_bucket.backups[0].id

  rule {
    id     = "pg-dump-retention"
    status = "Enabled"
    filter {
      prefix = "${local.pg_dump_prefix}/"
    }
    expiration {
      days = var.pg_dump_retention_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
  }

  rule {
    id     = "pg-archive-expired-versions"
    status = "Enabled"
    filter {
      prefix = "${local.pg_archive_prefix}/"
    }
    # pgBackRest expires what it no longer needs itself (repo1-retention-full);
    # what it deleted or overwrote stays a noncurrent version, locked for
    # backup_lock_days, and goes once that is over.
    noncurrent_version_expiration {
      noncurrent_days = var.backup_lock_days + 1
    }
    expiration {
      expired_object_delete_marker = true
    }
  }

  rule {
    id     = "abort-incomplete-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

data "aws_iam_policy_document" "backups" {
  count = local.host_count

  statement {
    sid       = "TlsOnly"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.backups[0].arn, "${aws_s3_bucket.backups[0].arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "backups" {
  count  = local.host_count
  bucket = aws_s3_bucket.backups[0].id
  policy = data.aws_iam_policy_document.backups[0].json
}

resource "aws_cloudwatch_metric_alarm" "pg_dump_missing" {
  count               = local.host_count
  alarm_name          = "${var.name}-pg-dump-missing"
  alarm_description   = "[WARNING] No nightly pg_dump reached the backup bucket for 26 hours: see journalctl -u crawlfleet-pg-dump on the host (docs/deploy.md)."
  namespace           = local.host_metric_namespace
  metric_name         = "PgDumpBytes"
  statistic           = "SampleCount"
  period              = 3600
  evaluation_periods  = 26
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# pgBackRest's nightly full backup (crawlfleet-pg-backup) puts how long it took
# when it succeeded: none for 26 hours is an alarm, like the dump's.
resource "aws_cloudwatch_metric_alarm" "pg_backup_missing" {
  count               = local.host_count
  alarm_name          = "${var.name}-pg-backup-missing"
  alarm_description   = "[WARNING] No nightly pgBackRest full backup succeeded for 26 hours: point-in-time recovery starts from an older one and replays more WAL. journalctl -u crawlfleet-pg-backup on the host (docs/deploy.md)."
  namespace           = local.host_metric_namespace
  metric_name         = "PgBackupSeconds"
  statistic           = "SampleCount"
  period              = 3600
  evaluation_periods  = 26
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# The WAL archive failing (crawlfleet-pg-archive-check, every 5 minutes): what a
# lost host would lose grows from a minute to everything since the last archived
# segment, and pg_wal fills the data volume. 15 minutes of it, or of no check at
# all (the host or its timer is down), is an alarm.
resource "aws_cloudwatch_metric_alarm" "pg_archive_failing" {
  count               = local.host_count
  alarm_name          = "${var.name}-pg-archive-failing"
  alarm_description   = "[CRITICAL] Postgres's WAL archive (pgBackRest to S3) has been failing for 15 minutes: a lost host would lose everything since. docker compose logs postgres on the host (docs/deploy.md runbook)."
  namespace           = local.host_metric_namespace
  metric_name         = "PgArchiveFailing"
  statistic           = "Minimum"
  period              = 300
  evaluation_periods  = 3
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

resource "aws_dlm_lifecycle_policy" "host" {
  count              = local.host_count
  description        = "${var.name} data volume daily"
  execution_role_arn = aws_iam_role.dlm[0].arn
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
