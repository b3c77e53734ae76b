# The one EC2 host: api, scheduler and the base workers (and with datastores =
# "host" Postgres and Redis) under docker compose, in the first private subnet: no
# public address, no SSH (Session Manager), reached by the ALB only, crawling
# through the NAT gateway like the Fargate workers.

resource "aws_cloudwatch_log_group" "ec2" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default): operational logs, not an audit trail.
  name              = "/${var.name}/ec2"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.crawlfleet.arn
}

locals {
  # The scheduler's command line, as docker-compose.ec2.yaml starts it: the agent
  # counts the processes whose command line contains it (tini's and crawlfleet's).
  scheduler_process_pattern = "--process=scheduler"

  cloudwatch_agent_config = jsonencode({
    agent = { metrics_collection_interval = 60 }
    metrics = {
      namespace         = "CWAgent"
      append_dimensions = { InstanceId = "$${aws:InstanceId}" }
      # Besides each metric with all its dimensions (a disk's device and fstype,
      # which the alarms cannot know in advance), one with the instance alone, and
      # the scheduler's process count with its pattern: what the alarms below name.
      aggregation_dimensions = [["InstanceId"], ["InstanceId", "pattern"]]
      metrics_collected = {
        mem  = { measurement = ["mem_used_percent"] }
        disk = { measurement = ["used_percent"], resources = ["/"] }
        procstat = [
          # Redis memory for the dashboard (with datastores = "host" it runs in a
          # container, but it is a host process).
          { exe = "redis-server", measurement = ["memory_rss"] },
          # The scheduler's liveness: it publishes nothing to CloudWatch itself.
          { pattern = local.scheduler_process_pattern, measurement = ["pid_count"] },
        ]
      }
    }
  })
}

resource "aws_instance" "host" {
  ami                         = var.ec2_ami
  instance_type               = var.ec2_instance_type
  subnet_id                   = aws_subnet.private[0].id
  private_ip                  = var.ec2_private_ip
  vpc_security_group_ids      = [aws_security_group.ec2.id]
  iam_instance_profile        = aws_iam_instance_profile.ec2.name
  associate_public_ip_address = false # private subnet; crawls leave through the NAT
  monitoring                  = true
  ebs_optimized               = true
  disable_api_termination     = true # with datastores = "host" it holds Postgres

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
    # 1: the instance role is for the host's own processes (the SSM and CloudWatch
    # agents, dockerd's awslogs driver, crawlfleet-deploy, the backup). A container
    # is one network hop further, so its IMDSv2 token request dies on the way: no
    # container, Chrome (--no-sandbox) in a worker included, can take the role. The
    # api gets short-lived credentials of a role that may only put its metrics
    # (iam.tf, crawlfleet-api-credentials in the user data).
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type = "gp3"
    volume_size = var.ec2_root_volume_gb
    encrypted   = true
    tags        = { Name = "${var.name}-host", Snapshot = var.name }
  }

  user_data = templatefile("${path.module}/templates/user_data.sh.tftpl", {
    region                  = var.region
    ssm_prefix              = local.ssm_prefix
    ecr_registry            = split("/", aws_ecr_repository.crawlfleet.repository_url)[0]
    secret_placeholder      = local.secret_placeholder
    cloudwatch_agent_config = local.cloudwatch_agent_config
    api_metrics_role_arn    = aws_iam_role.api_metrics.arn
    backup_bucket           = local.host_datastore ? aws_s3_bucket.backups[0].id : ""
    backup_metric_namespace = local.host_metric_namespace
    pg_dump_prefix          = local.pg_dump_prefix
  })

  tags = { Name = "${var.name}-host" }

  # First boot installs packages: the way out (NAT) and to AWS (endpoints) first.
  depends_on = [aws_route.private_nat, aws_vpc_endpoint.s3, aws_vpc_endpoint.interface]

  lifecycle {
    # ami: resolve:ssm reads back as the AMI id it resolved to. user_data: it only
    # runs at first boot; later changes reach the host through Parameter Store and
    # crawlfleet-deploy, never by replacing the host (and its Postgres).
    ignore_changes = [ami, user_data]
  }
}

# A host whose hardware failed comes back on new hardware with the same volume and
# address (docs/deploy.md, "EC2 host lost").
resource "aws_cloudwatch_metric_alarm" "host_recover" {
  alarm_name          = "${var.name}-host-system-check-failed"
  alarm_description   = "EC2 system status check failed: the host is being recovered onto new hardware."
  namespace           = "AWS/EC2"
  metric_name         = "StatusCheckFailed_System"
  dimensions          = { InstanceId = aws_instance.host.id }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 2
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  alarm_actions       = ["arn:aws:automate:${var.region}:ec2:recover", aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
}

resource "aws_cloudwatch_metric_alarm" "host_instance_check" {
  alarm_name          = "${var.name}-host-instance-check-failed"
  alarm_description   = "EC2 instance status check failed (OS hung, out of memory): the host is rebooted."
  namespace           = "AWS/EC2"
  metric_name         = "StatusCheckFailed_Instance"
  dimensions          = { InstanceId = aws_instance.host.id }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 3
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  alarm_actions       = ["arn:aws:automate:${var.region}:ec2:reboot", aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
}

# --- the host's CPU (EC2), memory and disk (the CloudWatch agent, user data) ----------

locals {
  host_usage_alarms = {
    cpu = {
      namespace   = "AWS/EC2"
      metric      = "CPUUtilization"
      statistic   = "Average"
      periods     = 3
      threshold   = var.host_cpu_alarm_percent
      description = "The host's CPU above ${var.host_cpu_alarm_percent}% for 15 minutes: api, scheduler and base workers${local.host_datastore ? ", Postgres and Redis" : ""} compete for it (t3: and its CPU credits run out)."
    }
    memory = {
      namespace   = "CWAgent"
      metric      = "mem_used_percent"
      statistic   = "Average"
      periods     = 2
      threshold   = var.host_memory_alarm_percent
      description = "The host's memory above ${var.host_memory_alarm_percent}% for 10 minutes: the next Chrome or Postgres allocation may meet the OOM killer."
    }
    disk = {
      namespace   = "CWAgent"
      metric      = "disk_used_percent"
      statistic   = "Maximum"
      periods     = 2
      threshold   = var.host_disk_alarm_percent
      description = "The host's root file system above ${var.host_disk_alarm_percent}% for 10 minutes${local.host_datastore ? ": Postgres lives there and stops when it is full" : ""}."
    }
  }
}

resource "aws_cloudwatch_metric_alarm" "host_usage" {
  for_each            = local.host_usage_alarms
  alarm_name          = "${var.name}-host-${each.key}"
  alarm_description   = "[WARNING] ${each.value.description} docs/deploy.md runbook."
  namespace           = each.value.namespace
  metric_name         = each.value.metric
  dimensions          = { InstanceId = aws_instance.host.id }
  statistic           = each.value.statistic
  period              = 300
  evaluation_periods  = each.value.periods
  threshold           = each.value.threshold
  comparison_operator = "GreaterThanThreshold"
  # No data: the agent or the host is down; the status-check alarms say the latter.
  treat_missing_data = "missing"
  alarm_actions      = local.alarm_topic
  ok_actions         = local.alarm_topic
}

# The CPU alarm of stacks made before, kept.
moved {
  from = aws_cloudwatch_metric_alarm.host_cpu
  to   = aws_cloudwatch_metric_alarm.host_usage["cpu"]
}

# The scheduler puts no metric of its own; the agent counts its processes every
# minute (0 when there is none). Not running for 3 of 5 minutes: crashed, crash
# looping, or its container stopped (an unhealthy one is restarted by
# crawlfleet-autoheal first). No data: the agent or the host is down, also alarming.
resource "aws_cloudwatch_metric_alarm" "scheduler_down" {
  alarm_name          = "${var.name}-scheduler-down"
  alarm_description   = "[CRITICAL] No scheduler process on the host for 3 of the last 5 minutes: no run is scheduled or taken back. docs/deploy.md runbook, \"Scheduler down\"."
  namespace           = "CWAgent"
  metric_name         = "procstat_lookup_pid_count"
  dimensions          = { InstanceId = aws_instance.host.id, pattern = local.scheduler_process_pattern }
  statistic           = "Minimum"
  period              = 60
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}
