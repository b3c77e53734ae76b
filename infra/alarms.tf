# Alarms for people (scaling alarms are in autoscaling.tf), all to one SNS topic.

resource "aws_sns_topic" "alarms" {
  name              = "${var.name}-alarms"
  kms_master_key_id = aws_kms_key.crawlfleet.id
}

resource "aws_sns_topic_subscription" "email" {
  count     = var.alarm_email == "" ? 0 : 1
  topic_arn = aws_sns_topic.alarms.arn
  protocol  = "email"
  endpoint  = var.alarm_email
}

locals {
  alarm_topic = [aws_sns_topic.alarms.arn]

  queue_alarms = {
    warning  = var.queue_warning_threshold
    critical = var.queue_critical_threshold
  }
}

resource "aws_cloudwatch_metric_alarm" "queue" {
  for_each            = local.queue_alarms
  alarm_name          = "${var.name}-queue-${each.key}"
  alarm_description   = "[${upper(each.key)}] More than ${each.value} runs waiting or active for 5 minutes: the fleet is not keeping up (see CrawlerMonitoring; runbook in docs/deploy.md)."
  namespace           = var.cloudwatch_namespace
  metric_name         = local.queue_metric
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 5
  threshold           = each.value
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# Scaling runs on this metric: its absence is itself an incident.
resource "aws_cloudwatch_metric_alarm" "queue_metric_missing" {
  alarm_name          = "${var.name}-queue-metric-missing"
  alarm_description   = "[CRITICAL] No ${local.queue_metric} for 5 minutes: the api is down or cannot publish; Fargate workers no longer scale."
  namespace           = var.cloudwatch_namespace
  metric_name         = local.queue_metric
  statistic           = "SampleCount"
  period              = 60
  evaluation_periods  = 5
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

resource "aws_cloudwatch_metric_alarm" "running_tasks_cost" {
  alarm_name          = "${var.name}-workers-cost"
  alarm_description   = "[COST] More than ${var.running_tasks_cost_threshold} Fargate workers for 15 minutes (cap: ${var.worker_max_tasks}). Check the error rate: failing crawls keep the queue full (docs/deploy.md runbook)."
  namespace           = "ECS/ContainerInsights"
  metric_name         = "RunningTaskCount"
  dimensions          = local.ecs_service_dimensions
  statistic           = "Average"
  period              = 300
  evaluation_periods  = 3
  threshold           = var.running_tasks_cost_threshold
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

resource "aws_cloudwatch_metric_alarm" "error_rate" {
  alarm_name          = "${var.name}-crawl-error-rate"
  alarm_description   = "[WARNING] More than ${var.error_rate_threshold_percent}% of finished crawls failed over 15 minutes (at least 10 finished)."
  evaluation_periods  = 3
  threshold           = var.error_rate_threshold_percent
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic

  metric_query {
    id          = "completed"
    return_data = false
    metric {
      namespace   = var.cloudwatch_namespace
      metric_name = local.completed_metric
      stat        = "Sum"
      period      = 300
    }
  }

  metric_query {
    id          = "failed"
    return_data = false
    metric {
      namespace   = var.cloudwatch_namespace
      metric_name = local.failed_metric
      stat        = "Sum"
      period      = 300
    }
  }

  metric_query {
    id    = "error_rate"
    label = "failed / (completed + failed) %"
    # A handful of crawls is no rate: 1 failure out of 2 must not page anyone.
    expression  = "IF(FILL(completed, 0) + FILL(failed, 0) >= 10, 100 * FILL(failed, 0) / (FILL(completed, 0) + FILL(failed, 0)), 0)"
    return_data = true
  }
}

# --- Redis memory -------------------------------------------------------------------------
#
# Redis refuses writes when full (noeviction): dispatching stops while Postgres keeps
# the backlog. Warn at var.redis_memory_alarm_percent of maxmemory. Host: the api
# publishes RedisMemoryUsagePercent (used_memory / maxmemory) with the queue depth;
# managed: ElastiCache's own DatabaseMemoryUsagePercentage, per node.

resource "aws_cloudwatch_metric_alarm" "redis_memory_host" {
  count               = local.host_datastore ? 1 : 0
  alarm_name          = "${var.name}-redis-memory"
  alarm_description   = "[WARNING] Redis above ${var.redis_memory_alarm_percent}% of its maxmemory for 5 minutes; when full, dispatching stops (docs/deploy.md, \"Redis memory pressure\")."
  namespace           = var.cloudwatch_namespace
  metric_name         = local.redis_memory_metric
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 5
  threshold           = var.redis_memory_alarm_percent
  comparison_operator = "GreaterThanThreshold"
  # No data: the api is not publishing, which queue-metric-missing already says.
  treat_missing_data = "notBreaching"
  alarm_actions      = local.alarm_topic
  ok_actions         = local.alarm_topic
}

resource "aws_cloudwatch_metric_alarm" "redis_memory_managed" {
  # The replication group's nodes are named <id>-001, <id>-002.
  count               = local.host_datastore ? 0 : (var.multi_az ? 2 : 1)
  alarm_name          = "${var.name}-redis-memory-${format("%03d", count.index + 1)}"
  alarm_description   = "[WARNING] ElastiCache node ${format("%03d", count.index + 1)} above ${var.redis_memory_alarm_percent}% of its maxmemory for 5 minutes; when full, dispatching stops (docs/deploy.md, \"Redis memory pressure\")."
  namespace           = "AWS/ElastiCache"
  metric_name         = "DatabaseMemoryUsagePercentage"
  dimensions          = { CacheClusterId = "${aws_elasticache_replication_group.redis[0].id}-${format("%03d", count.index + 1)}" }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 5
  threshold           = var.redis_memory_alarm_percent
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# --- tasks that cannot start ------------------------------------------------------------
#
# A worker or migrate task that never starts (image not pulled, secret unreadable,
# no Spot capacity, subnet out of addresses) stops with stopCode TaskFailedToStart;
# the service keeps trying and the circuit breaker may roll back, silently. Say it.

resource "aws_cloudwatch_event_rule" "task_failed_to_start" {
  name        = "${var.name}-task-failed-to-start"
  description = "crawlfleet ECS tasks that stopped before they started"
  event_pattern = jsonencode({
    source        = ["aws.ecs"]
    "detail-type" = ["ECS Task State Change"]
    detail = {
      clusterArn = [aws_ecs_cluster.crawlfleet.arn]
      lastStatus = ["STOPPED"]
      stopCode   = ["TaskFailedToStart"]
    }
  })
}

resource "aws_cloudwatch_event_target" "task_failed_to_start" {
  rule      = aws_cloudwatch_event_rule.task_failed_to_start.name
  target_id = "alarm-topic"
  arn       = aws_sns_topic.alarms.arn

  input_transformer {
    input_paths = {
      group  = "$.detail.group"
      reason = "$.detail.stoppedReason"
      task   = "$.detail.taskArn"
    }
    input_template = "\"[WARNING] ${var.name}: an ECS task of <group> failed to start: <reason> (<task>). docs/deploy.md runbook.\""
  }
}

# --- workers that crash ------------------------------------------------------------------
#
# A Fargate worker whose container exits non-zero crashed (a drained worker, on
# scale-in, a deployment or a Spot reclaim, exits 0): each crash is a message with
# its exit code and reason, and three within 15 minutes (the service replacing a
# task that keeps dying) a crash-loop alarm.

resource "aws_cloudwatch_event_rule" "worker_crashed" {
  name        = "${var.name}-worker-crashed"
  description = "crawlfleet Fargate workers whose container exited non-zero"
  event_pattern = jsonencode({
    source        = ["aws.ecs"]
    "detail-type" = ["ECS Task State Change"]
    detail = {
      clusterArn = [aws_ecs_cluster.crawlfleet.arn]
      group      = ["service:${aws_ecs_service.worker.name}"]
      lastStatus = ["STOPPED"]
      containers = { exitCode = [{ numeric = [">", 0] }] }
    }
  })
}

resource "aws_cloudwatch_event_target" "worker_crashed" {
  rule      = aws_cloudwatch_event_rule.worker_crashed.name
  target_id = "alarm-topic"
  arn       = aws_sns_topic.alarms.arn

  input_transformer {
    input_paths = {
      exit   = "$.detail.containers[0].exitCode"
      reason = "$.detail.stoppedReason"
      task   = "$.detail.taskArn"
    }
    input_template = "\"[WARNING] ${var.name}: a Fargate worker exited with code <exit>: <reason> (<task>). Its logs: /${var.name}/workers. docs/deploy.md runbook (Workers crash).\""
  }
}

resource "aws_cloudwatch_metric_alarm" "worker_crash_loop" {
  alarm_name          = "${var.name}-worker-crash-loop"
  alarm_description   = "[CRITICAL] 3 or more Fargate workers crashed within 15 minutes: a crash loop (a bad release, memory, a poisoned page). docs/deploy.md runbook, \"Workers crash\"."
  namespace           = "AWS/Events"
  metric_name         = "MatchedEvents"
  dimensions          = { RuleName = aws_cloudwatch_event_rule.worker_crashed.name }
  statistic           = "Sum"
  period              = 900
  evaluation_periods  = 1
  threshold           = 3
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# --- releases that fail ------------------------------------------------------------------
#
# scripts/release stops at the first step that fails and says so on the operator's
# terminal; these say it to the topic too, for a release left running unattended:
# a worker deployment the circuit breaker rolled back, and a task scripts/release
# started (the migration, the smoke) that exited non-zero.

resource "aws_cloudwatch_event_rule" "deployment_failed" {
  name        = "${var.name}-deployment-failed"
  description = "crawlfleet worker deployments that failed (rolled back by the circuit breaker)"
  event_pattern = jsonencode({
    source        = ["aws.ecs"]
    "detail-type" = ["ECS Deployment State Change"]
    resources     = [aws_ecs_service.worker.id]
    detail = {
      eventName = ["SERVICE_DEPLOYMENT_FAILED"]
    }
  })
}

resource "aws_cloudwatch_event_target" "deployment_failed" {
  rule      = aws_cloudwatch_event_rule.deployment_failed.name
  target_id = "alarm-topic"
  arn       = aws_sns_topic.alarms.arn

  input_transformer {
    input_paths = {
      deployment = "$.detail.deploymentId"
      reason     = "$.detail.reason"
    }
    input_template = "\"[CRITICAL] ${var.name}: the worker deployment <deployment> failed: <reason>. docs/deploy.md, Upgrading.\""
  }
}

resource "aws_cloudwatch_event_rule" "release_task_failed" {
  name        = "${var.name}-release-task-failed"
  description = "crawlfleet release tasks (migrate, smoke) whose container exited non-zero"
  event_pattern = jsonencode({
    source        = ["aws.ecs"]
    "detail-type" = ["ECS Task State Change"]
    detail = {
      clusterArn = [aws_ecs_cluster.crawlfleet.arn]
      startedBy  = ["crawlfleet-release"]
      lastStatus = ["STOPPED"]
      containers = { exitCode = [{ numeric = [">", 0] }] }
    }
  })
}

resource "aws_cloudwatch_event_target" "release_task_failed" {
  rule      = aws_cloudwatch_event_rule.release_task_failed.name
  target_id = "alarm-topic"
  arn       = aws_sns_topic.alarms.arn

  input_transformer {
    input_paths = {
      exit  = "$.detail.containers[0].exitCode"
      group = "$.detail.group"
      task  = "$.detail.taskArn"
    }
    input_template = "\"[CRITICAL] ${var.name}: a release task of <group> exited with code <exit> (<task>); the release stopped there. Its logs: /${var.name}/workers.\""
  }
}

data "aws_iam_policy_document" "alarm_topic" {
  statement {
    sid       = "AccountOwnsTheTopic"
    actions   = ["sns:Publish", "sns:Subscribe", "sns:GetTopicAttributes", "sns:SetTopicAttributes", "sns:ListSubscriptionsByTopic"]
    resources = [aws_sns_topic.alarms.arn]
    principals {
      type        = "AWS"
      identifiers = [local.account_root]
    }
  }

  statement {
    sid       = "CloudWatchAlarmsPublish"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alarms.arn]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.aws_account_id]
    }
  }

  statement {
    sid       = "EventBridgePublishesTaskFailures"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alarms.arn]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_cloudwatch_event_rule.task_failed_to_start.arn, aws_cloudwatch_event_rule.worker_crashed.arn, aws_cloudwatch_event_rule.deployment_failed.arn, aws_cloudwatch_event_rule.release_task_failed.arn]
    }
  }

  statement {
    sid       = "BudgetsPublish"
    actions   = ["sns:Publish"]
    resources = [aws_sns_topic.alarms.arn]
    principals {
      type        = "Service"
      identifiers = ["budgets.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [var.aws_account_id]
    }
  }
}

resource "aws_sns_topic_policy" "alarms" {
  arn    = aws_sns_topic.alarms.arn
  policy = data.aws_iam_policy_document.alarm_topic.json
}

# --- the bill -------------------------------------------------------------------------------
#
# The whole account's cost (give crawlfleet its own account, or read it as such):
# mail at 80 % of var.monthly_budget_usd spent and when the month's forecast passes
# it. docs/cost.md says what to expect at idle, 10 and 50 workers.
resource "aws_budgets_budget" "monthly" {
  name         = "${var.name}-monthly"
  account_id   = var.aws_account_id
  budget_type  = "COST"
  limit_amount = tostring(var.monthly_budget_usd)
  limit_unit   = "USD"
  time_unit    = "MONTHLY"

  notification {
    comparison_operator        = "GREATER_THAN"
    notification_type          = "ACTUAL"
    threshold                  = 80
    threshold_type             = "PERCENTAGE"
    subscriber_email_addresses = var.budget_emails
    subscriber_sns_topic_arns  = [aws_sns_topic.alarms.arn]
  }

  notification {
    comparison_operator        = "GREATER_THAN"
    notification_type          = "FORECASTED"
    threshold                  = 100
    threshold_type             = "PERCENTAGE"
    subscriber_email_addresses = var.budget_emails
    subscriber_sns_topic_arns  = [aws_sns_topic.alarms.arn]
  }
}
