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
