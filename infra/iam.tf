# Least privilege: each role gets the actions its holder calls, on our resources.

# --- EC2 host ---------------------------------------------------------------------------

data "aws_iam_policy_document" "ec2_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "ec2" {
  name               = "${var.name}-ec2-host"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume.json
}

data "aws_iam_policy_document" "ec2" {
  # What the SSM agent needs for Session Manager (shell without SSH) and Run Command
  # (crawlfleet-deploy), instead of AmazonSSMManagedInstanceCore: that managed policy
  # also allows ssm:GetParameter(s) on every parameter in the account, which would
  # make ReadOwnParameters below narrow nothing. State Manager, Inventory and Patch
  # Manager are not used, so their actions are not granted. The agent registers as
  # its EC2 instance; the messages actions have no resource-level permissions.
  statement {
    sid       = "SsmAgentRegisters"
    actions   = ["ssm:UpdateInstanceInformation"]
    resources = ["arn:aws:ec2:${var.region}:${var.aws_account_id}:instance/*"]
  }

  statement {
    sid = "SessionManager"
    actions = [
      "ssmmessages:CreateControlChannel",
      "ssmmessages:CreateDataChannel",
      "ssmmessages:OpenControlChannel",
      "ssmmessages:OpenDataChannel",
    ]
    resources = ["*"]
  }

  statement {
    sid = "RunCommand"
    actions = [
      "ec2messages:AcknowledgeMessage",
      "ec2messages:DeleteMessage",
      "ec2messages:FailMessage",
      "ec2messages:GetEndpoint",
      "ec2messages:GetMessages",
      "ec2messages:SendReply",
    ]
    resources = ["*"]
  }

  statement {
    sid = "PublishHostMetrics"
    # The CloudWatch agent's and the backup's metrics. The api's (the queue depth)
    # go out with the api-metrics role below, not this one. PutMetricData has no
    # resource-level permissions; the namespace condition is the only way to narrow it.
    actions   = ["cloudwatch:PutMetricData"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "cloudwatch:namespace"
      values   = ["CWAgent", local.host_metric_namespace]
    }
  }

  statement {
    sid = "AgentNamesTheGroup"
    # The CloudWatch agent's ${aws:AutoScalingGroupName} (ec2.tf) comes from the
    # instance's tags. DescribeTags has no resource-level permissions.
    actions   = ["ec2:DescribeTags"]
    resources = ["*"]
  }

  statement {
    sid       = "HandTheApiItsMetricsRole"
    actions   = ["sts:AssumeRole"]
    resources = [aws_iam_role.api_metrics.arn]
  }

  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "HandPgBackRestItsArchiveRole"
      actions   = ["sts:AssumeRole"]
      resources = [aws_iam_role.pg_archive[0].arn]
    }
  }

  # The data volume (ec2.tf): found by its tag, attached to this instance (a
  # replaced host's volume may still show as attached to the dead one: detached
  # by force). Only a volume with the tag, only to an instance of the host's group.
  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "FindTheDataVolume"
      actions   = ["ec2:DescribeVolumes", "ec2:DescribeInstances"]
      resources = ["*"] # Describe* has no resource-level permissions.
    }
  }
  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "AttachTheDataVolume"
      actions   = ["ec2:AttachVolume", "ec2:DetachVolume"]
      resources = ["arn:aws:ec2:${var.region}:${var.aws_account_id}:volume/*"]
      condition {
        test     = "StringEquals"
        variable = "aws:ResourceTag/${local.data_volume_tag}"
        values   = [var.name]
      }
    }
  }
  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "ToTheHostsInstance"
      actions   = ["ec2:AttachVolume", "ec2:DetachVolume"]
      resources = ["arn:aws:ec2:${var.region}:${var.aws_account_id}:instance/*"]
      condition {
        test     = "StringEquals"
        variable = "aws:ResourceTag/aws:autoscaling:groupName"
        values   = ["${var.name}-host"]
      }
    }
  }
  # Attaching a volume encrypted with the project's key: EBS takes a grant for it.
  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "EbsUsesTheKeyForTheVolume"
      actions   = ["kms:CreateGrant"]
      resources = [aws_kms_key.crawlfleet.arn]
      condition {
        test     = "Bool"
        variable = "kms:GrantIsForAWSResource"
        values   = ["true"]
      }
    }
  }
  # Its name in the private zone (ec2.tf), that record alone.
  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "PointTheDatastoresNameAtItself"
      actions   = ["route53:ChangeResourceRecordSets"]
      resources = [aws_route53_zone.internal[0].arn]
      condition {
        test     = "ForAllValues:StringEquals"
        variable = "route53:ChangeResourceRecordSetsNormalizedRecordNames"
        values   = [local.datastores_host_name]
      }
    }
  }
  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid       = "PublishTheDatastoresCa"
      actions   = ["ssm:PutParameter"]
      resources = [aws_ssm_parameter.datastores_ca[0].arn]
    }
  }

  dynamic "statement" {
    for_each = local.host_datastore ? [1] : []
    content {
      sid = "WriteNightlyDumps"
      # Put only: the host cannot read, list, overwrite-and-hide (versioning) or
      # delete a dump.
      actions   = ["s3:PutObject"]
      resources = ["${aws_s3_bucket.backups[0].arn}/${local.pg_dump_prefix}/*"]
    }
  }

  statement {
    sid       = "ContainerLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
    resources = ["${aws_cloudwatch_log_group.ec2.arn}:*"]
  }

  statement {
    sid     = "ReadOwnParameters"
    actions = ["ssm:GetParameter", "ssm:GetParameters"]
    resources = concat(
      [for p in aws_ssm_parameter.secret : p.arn],
      [for p in aws_ssm_parameter.compose_file : p.arn],
      [aws_ssm_parameter.host_env.arn, aws_ssm_parameter.postgres_user.arn],
      [for p in aws_ssm_parameter.datastores_ca : p.arn],
    )
  }

  statement {
    sid = "DecryptOwnParametersEncryptDumps"
    # Decrypt: the SecureString parameters. GenerateDataKey: the dumps are written
    # encrypted with the same key (the bucket's default).
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [aws_kms_key.crawlfleet.arn]
  }

  statement {
    sid       = "EcrLogin"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"] # GetAuthorizationToken has no resource-level permissions.
  }

  statement {
    sid       = "PullImage"
    actions   = ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"]
    resources = [aws_ecr_repository.crawlfleet.arn]
  }
}

resource "aws_iam_role_policy" "ec2" {
  name   = "crawlfleet-host"
  role   = aws_iam_role.ec2.id
  policy = data.aws_iam_policy_document.ec2.json
}

resource "aws_iam_instance_profile" "ec2" {
  name = "${var.name}-ec2-host"
  role = aws_iam_role.ec2.name
}

# --- the api's CloudWatch metrics -------------------------------------------------------
#
# The host's metadata service answers the host only (hop limit 1, ec2.tf), so no
# container can take the instance role. The api and the scheduler alone need AWS:
# PutMetricData of the queue depth, RedisMemoryUsagePercent and the crawl counts
# (the api), and of SchedulerHeartbeat (the scheduler). The host assumes this role
# every 15 minutes (crawlfleet-api-credentials, a systemd timer) and writes the
# one-hour credentials into a folder mounted into those two containers only; their
# AWS config runs `cat` on them as its credential_process. A compromised worker
# gets nothing; a compromised api or scheduler gets PutMetricData in one namespace.

data "aws_iam_policy_document" "api_metrics_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.ec2.arn]
    }
  }
}

resource "aws_iam_role" "api_metrics" {
  name                 = "${var.name}-api-metrics"
  assume_role_policy   = data.aws_iam_policy_document.api_metrics_assume.json
  max_session_duration = 3600
}

data "aws_iam_policy_document" "api_metrics" {
  statement {
    sid       = "PublishQueueDepth"
    actions   = ["cloudwatch:PutMetricData"]
    resources = ["*"] # no resource-level permissions; narrowed by namespace
    condition {
      test     = "StringEquals"
      variable = "cloudwatch:namespace"
      values   = [var.cloudwatch_namespace]
    }
  }
}

resource "aws_iam_role_policy" "api_metrics" {
  name   = "crawlfleet-api-metrics"
  role   = aws_iam_role.api_metrics.id
  policy = data.aws_iam_policy_document.api_metrics.json
}

# --- Fargate workers --------------------------------------------------------------------

data "aws_iam_policy_document" "ecs_tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.aws_account_id]
    }
  }
}

# Used by ECS itself to start a task (a worker, or the migrate task): pull the
# image, create the log stream, read the secrets into the container's environment.
resource "aws_iam_role" "ecs_execution" {
  name               = "${var.name}-worker-execution"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

data "aws_iam_policy_document" "ecs_execution" {
  statement {
    sid       = "EcrLogin"
    actions   = ["ecr:GetAuthorizationToken"]
    resources = ["*"] # GetAuthorizationToken has no resource-level permissions.
  }

  statement {
    sid       = "PullImage"
    actions   = ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"]
    resources = [aws_ecr_repository.crawlfleet.arn]
  }

  statement {
    sid       = "WorkerLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.workers.arn}:*"]
  }

  statement {
    sid     = "WorkerSecrets"
    actions = ["ssm:GetParameters"]
    resources = concat(
      [aws_ssm_parameter.postgres_user.arn],
      [for name in ["postgres-password", "redis-password", "session-key", "session-key-previous"] : aws_ssm_parameter.secret[name].arn],
      [for p in aws_ssm_parameter.datastores_ca : p.arn],
    )
  }

  statement {
    sid       = "DecryptWorkerSecrets"
    actions   = ["kms:Decrypt"]
    resources = [aws_kms_key.crawlfleet.arn]
  }
}

resource "aws_iam_role_policy" "ecs_execution" {
  name   = "crawlfleet-worker-start"
  role   = aws_iam_role.ecs_execution.id
  policy = data.aws_iam_policy_document.ecs_execution.json
}

# The worker's own identity. Its one AWS call is task scale-in protection
# (src/worker/scale_in.rs): it goes through the ECS agent endpoint
# ($ECS_AGENT_URI/task-protection/v1/state), but the agent makes the
# UpdateTaskProtection / GetTaskProtection call with this role's credentials.
# Without this policy every protection fails, and scale-in may stop busy workers.
resource "aws_iam_role" "ecs_task" {
  name               = "${var.name}-worker-task"
  assume_role_policy = data.aws_iam_policy_document.ecs_tasks_assume.json
}

data "aws_iam_policy_document" "ecs_task" {
  statement {
    sid     = "ProtectOwnTasksFromScaleIn"
    actions = ["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"]
    # Tasks of our cluster only (ecs/task-role-policy.json says the same).
    resources = ["arn:aws:ecs:${var.region}:${var.aws_account_id}:task/${aws_ecs_cluster.crawlfleet.name}/*"]
  }
}

resource "aws_iam_role_policy" "ecs_task" {
  name   = "crawlfleet-worker-task-protection"
  role   = aws_iam_role.ecs_task.id
  policy = data.aws_iam_policy_document.ecs_task.json
}

# --- VPC flow logs ----------------------------------------------------------------------

data "aws_iam_policy_document" "flow_logs_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["vpc-flow-logs.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.aws_account_id]
    }
  }
}

resource "aws_iam_role" "flow_logs" {
  name               = "${var.name}-vpc-flow-logs"
  assume_role_policy = data.aws_iam_policy_document.flow_logs_assume.json
}

data "aws_iam_policy_document" "flow_logs" {
  statement {
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogGroups", "logs:DescribeLogStreams"]
    resources = [aws_cloudwatch_log_group.flow_logs.arn, "${aws_cloudwatch_log_group.flow_logs.arn}:*"]
  }
}

resource "aws_iam_role_policy" "flow_logs" {
  name   = "write-flow-logs"
  role   = aws_iam_role.flow_logs.id
  policy = data.aws_iam_policy_document.flow_logs.json
}

# --- pgBackRest's WAL archive (backup.tf) ------------------------------------------------
#
# Assumed by the host every 15 minutes for an hour (crawlfleet-pg-archive-credentials)
# and handed to pgBackRest in the Postgres container alone: the repository's
# prefix of the backup bucket, and the key it is encrypted with.

data "aws_iam_policy_document" "pg_archive_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "AWS"
      identifiers = [aws_iam_role.ec2.arn]
    }
  }
}

resource "aws_iam_role" "pg_archive" {
  count                = local.host_count
  name                 = "${var.name}-pg-archive"
  assume_role_policy   = data.aws_iam_policy_document.pg_archive_assume.json
  max_session_duration = 3600
}

data "aws_iam_policy_document" "pg_archive" {
  count = local.host_count

  statement {
    sid       = "ListTheRepository"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.backups[0].arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [local.pg_archive_prefix, "${local.pg_archive_prefix}/*"]
    }
  }

  statement {
    sid = "UseTheRepository"
    # Delete: pgBackRest's retention. With versioning and the lock that only adds
    # a delete marker; the locked version stays (no s3:BypassGovernanceRetention,
    # no s3:DeleteObjectVersion).
    actions   = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
    resources = ["${aws_s3_bucket.backups[0].arn}/${local.pg_archive_prefix}/*"]
  }

  statement {
    sid       = "TheBucketsKey"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey"]
    resources = [aws_kms_key.crawlfleet.arn]
  }
}

resource "aws_iam_role_policy" "pg_archive" {
  count  = local.host_count
  name   = "pgbackrest-repository"
  role   = aws_iam_role.pg_archive[0].id
  policy = data.aws_iam_policy_document.pg_archive[0].json
}

# --- EBS snapshots (backup.tf) ----------------------------------------------------------

data "aws_iam_policy_document" "dlm_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["dlm.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "dlm" {
  count              = local.host_count
  name               = "${var.name}-snapshots"
  assume_role_policy = data.aws_iam_policy_document.dlm_assume.json
}

resource "aws_iam_role_policy_attachment" "dlm" {
  count      = local.host_count
  role       = aws_iam_role.dlm[0].name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSDataLifecycleManagerServiceRole"
}
