# The Fargate workers follow CrawlerService/QueueWaitingJobs (waiting + active runs,
# counted in Postgres by the api every 10 s, a high-resolution metric).
#
# scaling_mode = "step" (`crawlfleet simulate`, BENCHMARKS.md: an 8,000-run burst
# drains within 1.09x of 50 tasks started at once, the morning batch with 2 tasks):
#   high-resolution alarms, 10 s periods
#   > 20  -> +1  (cooldown 60 s): a trickle that crosses 20 (the morning batch)
#            adds a task or two, not the whole fleet (60 s rather than 30: a
#            third fewer task-hours for a batch done 15 s later)
#   > 200 -> +50 (cooldown 30 s): a burst gets the whole fleet (worker_max_tasks
#            caps it) at once; above 200 both alarms fire, +51, capped at 50
#   < 10  -> -1  (cooldown 300 s)     = 0 for 3 periods (30 s) -> 0 tasks
# scaling_mode = "target_tracking":
#   backlog per running task (metric math) held at var.backlog_per_task_target,
#   plus a step policy 0 -> 1 (target tracking has no data with 0 tasks) and
#   "= 0 for 10 minutes -> 0", on 60 s periods: target tracking's own alarms are
#   AWS's 1-minute ones, and the from-zero alarm reads Container Insights'
#   RunningTaskCount, which has a datapoint a minute.

locals {
  step_mode = var.scaling_mode == "step"

  # The period of the step policies' alarms. 10 s (a high-resolution alarm) needs
  # a datapoint in every period: the api puts QueueWaitingJobs every
  # METRIC_INTERVAL_SECS (10), at StorageResolution 1.
  step_alarm_period = local.step_mode ? 10 : 60

  step_policies = {
    scale-out-small = { threshold = 20, comparison = "GreaterThanThreshold", periods = 1, adjustment_type = "ChangeInCapacity", adjustment = 1, cooldown = 60, enabled = local.step_mode }
    scale-out-large = { threshold = 200, comparison = "GreaterThanThreshold", periods = 1, adjustment_type = "ChangeInCapacity", adjustment = 50, cooldown = 30, enabled = local.step_mode }
    scale-in        = { threshold = 10, comparison = "LessThanThreshold", periods = 1, adjustment_type = "ChangeInCapacity", adjustment = -1, cooldown = 300, enabled = local.step_mode }
    # Step mode: 3 empty 10 s periods; target tracking: 10 empty minutes.
    scale-to-zero = { threshold = 0, comparison = "LessThanOrEqualToThreshold", periods = local.step_mode ? 3 : 10, adjustment_type = "ExactCapacity", adjustment = 0, cooldown = 300, enabled = true }
  }
  active_step_policies = { for k, p in local.step_policies : k => p if p.enabled }

  ecs_service_dimensions = {
    ClusterName = aws_ecs_cluster.crawlfleet.name
    ServiceName = aws_ecs_service.worker.name
  }
}

resource "aws_appautoscaling_target" "workers" {
  service_namespace  = "ecs"
  scalable_dimension = "ecs:service:DesiredCount"
  resource_id        = local.ecs_service_resource_id
  min_capacity       = var.worker_min_tasks
  max_capacity       = var.worker_max_tasks
}

resource "aws_appautoscaling_policy" "step" {
  for_each           = local.active_step_policies
  name               = "${var.name}-${each.key}"
  policy_type        = "StepScaling"
  service_namespace  = aws_appautoscaling_target.workers.service_namespace
  scalable_dimension = aws_appautoscaling_target.workers.scalable_dimension
  resource_id        = aws_appautoscaling_target.workers.resource_id

  step_scaling_policy_configuration {
    adjustment_type         = each.value.adjustment_type
    cooldown                = each.value.cooldown
    metric_aggregation_type = "Maximum"

    step_adjustment {
      scaling_adjustment = each.value.adjustment
      # Relative to the alarm's threshold: the whole side of it that breaches.
      metric_interval_lower_bound = startswith(each.value.comparison, "Greater") ? 0 : null
      metric_interval_upper_bound = startswith(each.value.comparison, "Greater") ? null : 0
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "step" {
  for_each            = local.active_step_policies
  alarm_name          = "${var.name}-queue-${each.key}"
  alarm_description   = "Scaling (${each.key}): ${local.queue_metric} ${each.value.comparison} ${each.value.threshold}."
  namespace           = var.cloudwatch_namespace
  metric_name         = local.queue_metric
  statistic           = "Maximum"
  period              = local.step_alarm_period
  evaluation_periods  = each.value.periods
  threshold           = each.value.threshold
  comparison_operator = each.value.comparison
  # No data means the api is not publishing (queue-metric-missing alarm says so):
  # then the fleet stays as it is instead of scaling on a guess.
  treat_missing_data = "notBreaching"
  alarm_actions      = [aws_appautoscaling_policy.step[each.key].arn]
}

# --- target tracking mode ------------------------------------------------------------

resource "aws_appautoscaling_policy" "backlog_per_task" {
  count              = local.step_mode ? 0 : 1
  name               = "${var.name}-backlog-per-task"
  policy_type        = "TargetTrackingScaling"
  service_namespace  = aws_appautoscaling_target.workers.service_namespace
  scalable_dimension = aws_appautoscaling_target.workers.scalable_dimension
  resource_id        = aws_appautoscaling_target.workers.resource_id

  target_tracking_scaling_policy_configuration {
    target_value       = var.backlog_per_task_target
    scale_out_cooldown = 60
    scale_in_cooldown  = 300

    customized_metric_specification {
      metrics {
        id          = "backlog"
        return_data = false
        metric_stat {
          stat = "Maximum"
          metric {
            namespace   = var.cloudwatch_namespace
            metric_name = local.queue_metric
          }
        }
      }
      metrics {
        id          = "tasks"
        return_data = false
        metric_stat {
          stat = "Average"
          metric {
            namespace   = "ECS/ContainerInsights"
            metric_name = "RunningTaskCount"
            dimensions {
              name  = "ClusterName"
              value = aws_ecs_cluster.crawlfleet.name
            }
            dimensions {
              name  = "ServiceName"
              value = aws_ecs_service.worker.name
            }
          }
        }
      }
      metrics {
        id          = "backlog_per_task"
        label       = "waiting + active runs per running worker task"
        expression  = "backlog / tasks"
        return_data = true
      }
    }
  }
}

resource "aws_appautoscaling_policy" "from_zero" {
  count              = local.step_mode ? 0 : 1
  name               = "${var.name}-scale-from-zero"
  policy_type        = "StepScaling"
  service_namespace  = aws_appautoscaling_target.workers.service_namespace
  scalable_dimension = aws_appautoscaling_target.workers.scalable_dimension
  resource_id        = aws_appautoscaling_target.workers.resource_id

  step_scaling_policy_configuration {
    adjustment_type         = "ChangeInCapacity"
    cooldown                = 60
    metric_aggregation_type = "Maximum"

    step_adjustment {
      scaling_adjustment          = 1
      metric_interval_lower_bound = 0
    }
  }
}

# Work waiting and no worker running: the one case target tracking cannot see.
# 60 s periods: RunningTaskCount (Container Insights) has a datapoint a minute, so
# a shorter period would find no tasks (FILL: 0) while tasks run.
resource "aws_cloudwatch_metric_alarm" "from_zero" {
  count               = local.step_mode ? 0 : 1
  alarm_name          = "${var.name}-queue-scale-from-zero"
  alarm_description   = "Scaling: runs waiting while no Fargate worker runs."
  evaluation_periods  = 1
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_appautoscaling_policy.from_zero[0].arn]

  metric_query {
    id          = "backlog"
    return_data = false
    metric {
      namespace   = var.cloudwatch_namespace
      metric_name = local.queue_metric
      stat        = "Maximum"
      period      = 60
    }
  }

  metric_query {
    id          = "tasks"
    return_data = false
    metric {
      namespace   = "ECS/ContainerInsights"
      metric_name = "RunningTaskCount"
      dimensions  = local.ecs_service_dimensions
      stat        = "Average"
      period      = 60
    }
  }

  metric_query {
    id          = "starved"
    label       = "1 when runs wait and no worker task runs"
    expression  = "IF(backlog > 0 AND FILL(tasks, 0) == 0, 1, 0)"
    return_data = true
  }
}
