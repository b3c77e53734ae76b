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
      namespace = "CWAgent"
      # The group, not the instance: a replaced host publishes the same series.
      append_dimensions = { AutoScalingGroupName = "$${aws:AutoScalingGroupName}" }
      # Besides each metric with all its dimensions (a disk's device and fstype,
      # which the alarms cannot know in advance), one with the group alone, and
      # the scheduler's process count with its pattern: what the alarms below name.
      aggregation_dimensions = [["AutoScalingGroupName"], ["AutoScalingGroupName", "pattern"]]
      metrics_collected = {
        mem = { measurement = ["mem_used_percent"] }
        # The root file system and, with datastores = "host", the data volume.
        disk = { measurement = ["used_percent"], resources = local.host_datastore ? ["/", local.data_dir] : ["/"] }
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

# --- the host: an auto-scaling group of one --------------------------------------------
#
# Nothing on the instance is kept: it is made from the launch template, configures
# itself at first boot (user data), and with datastores = "host" takes its data
# volume and its name. When it fails its EC2 status checks, is terminated, or
# dies with its hardware, the group launches another in the same subnet (the data
# volume's AZ), which attaches the same volume and points the same name at itself:
# docs/deploy.md, "The host is lost". Never two at once (the volume attaches to one
# instance): a replacement terminates the old one first.

locals {
  # The host's name in the VPC's private zone (datastores = "host"): the Fargate
  # workers' DATABASE_HOST and REDIS_HOST, in the datastores' certificate; the host
  # points it at its own address at every boot.
  datastores_zone      = "${var.name}.internal"
  datastores_host_name = "datastores.${local.datastores_zone}"
  # The tag by which the host finds its data volume, and the instance role may
  # attach it (iam.tf).
  data_volume_tag = "DataVolume"
  # The Parameter Store parameter where the host publishes its datastores' CA.
  datastores_ca_parameter = "${local.ssm_prefix}/datastores-ca"
}

# Postgres's data (and the datastores' TLS key and CA) on a volume of its own: not
# the instance's, so it outlives the instance. Encrypted with the project's key,
# snapshotted daily (backup.tf: the Snapshot tag), and never destroyed by
# Terraform: prevent_destroy refuses any plan that would, a final snapshot is taken
# if it is deleted anyway. Switching a stack to datastores = "managed" therefore
# needs the volume removed from the state first (docs/deploy.md).
resource "aws_ebs_volume" "data" {
  count             = local.host_count
  availability_zone = aws_subnet.private[0].availability_zone
  type              = "gp3"
  size              = var.data_volume_gb
  encrypted         = true
  kms_key_id        = aws_kms_key.crawlfleet.arn
  final_snapshot    = true
  tags = {
    Name                    = "${var.name}-data"
    Snapshot                = var.name
    (local.data_volume_tag) = var.name
  }

  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_route53_zone" "internal" {
  #checkov:skip=CKV2_AWS_38:DNSSEC signs public zones; this one is private to the VPC.
  #checkov:skip=CKV2_AWS_39:Query logging is for public zones; the VPC's queries are in its flow logs' reach.
  count   = local.host_count
  name    = local.datastores_zone
  comment = "${var.name}: the host's datastores, for the Fargate workers"
  # The host's record is the host's (written at each boot), not Terraform's.
  force_destroy = true
  vpc {
    vpc_id = aws_vpc.main.id
  }
}

resource "aws_launch_template" "host" {
  name                   = "${var.name}-host"
  description            = "The crawlfleet host: api, scheduler, base workers${local.host_datastore ? ", Postgres and Redis" : ""} under docker compose."
  image_id               = var.ec2_ami
  instance_type          = var.ec2_instance_type
  vpc_security_group_ids = [aws_security_group.ec2.id]
  ebs_optimized          = true
  update_default_version = true

  iam_instance_profile {
    name = aws_iam_instance_profile.ec2.name
  }

  monitoring {
    enabled = true
  }

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
    # 1: the instance role is for the host's own processes (the SSM and CloudWatch
    # agents, dockerd's awslogs driver, crawlfleet-deploy, the backup). A container
    # is one network hop further, so its IMDSv2 token request dies on the way: no
    # container, Chrome (--no-sandbox) in a worker included, can take the role. The
    # api gets short-lived credentials of a role that may only put its metrics
    # (iam.tf, crawlfleet-api-credentials in the user data), Postgres's pgBackRest
    # those of a role that may only use the WAL archive.
    http_put_response_hop_limit = 1
    instance_metadata_tags      = "disabled"
  }

  # The root volume holds the OS, Docker and its images: nothing that must be kept.
  block_device_mappings {
    device_name = "/dev/sda1"
    ebs {
      volume_type           = "gp3"
      volume_size           = var.ec2_root_volume_gb
      encrypted             = true
      delete_on_termination = true
    }
  }

  user_data = base64encode(templatefile("${path.module}/templates/user_data.sh.tftpl", {
    region                  = var.region
    ssm_prefix              = local.ssm_prefix
    ecr_registry            = split("/", aws_ecr_repository.crawlfleet.repository_url)[0]
    secret_placeholder      = local.secret_placeholder
    cloudwatch_agent_config = local.cloudwatch_agent_config
    api_metrics_role_arn    = aws_iam_role.api_metrics.arn
    backup_bucket           = local.host_datastore ? aws_s3_bucket.backups[0].id : ""
    backup_metric_namespace = local.host_metric_namespace
    pg_dump_prefix          = local.pg_dump_prefix
    pg_archive_prefix       = local.pg_archive_prefix
    pg_archive_role_arn     = local.host_datastore ? aws_iam_role.pg_archive[0].arn : ""
    data_volume_tag         = local.data_volume_tag
    data_volume_name        = var.name
    data_dir                = local.data_dir
    datastores_zone_id      = local.host_datastore ? aws_route53_zone.internal[0].zone_id : ""
    datastores_host_name    = local.datastores_host_name
    datastores_ca_parameter = local.datastores_ca_parameter
  }))

  tag_specifications {
    resource_type = "instance"
    tags          = { Name = "${var.name}-host" }
  }
  tag_specifications {
    resource_type = "volume"
    tags          = { Name = "${var.name}-host-root" }
  }
}

resource "aws_autoscaling_group" "host" {
  name                = "${var.name}-host"
  min_size            = 1
  max_size            = 1
  desired_capacity    = 1
  vpc_zone_identifier = [aws_subnet.private[0].id] # the data volume's AZ
  # EC2: a failed system or instance status check replaces the instance. Not the
  # ALB's health check: an api that stops answering is restarted on the host
  # (crawlfleet-autoheal), a host is not replaced for it.
  health_check_type         = "EC2"
  health_check_grace_period = 600
  # The ALB's target: the group registers whichever instance it runs.
  target_group_arns = local.tls ? [aws_lb_target_group.api[0].arn] : []
  # The host waits for its secrets and image (docs/deploy.md): apply does not.
  wait_for_capacity_timeout = "0"
  enabled_metrics           = ["GroupInServiceInstances", "GroupPendingInstances", "GroupTerminatingInstances"]

  launch_template {
    id      = aws_launch_template.host.id
    version = "$Latest"
  }

  # One host at a time: the old one is terminated before the new one launches, so
  # the data volume is free to attach.
  instance_maintenance_policy {
    min_healthy_percentage = 0
    max_healthy_percentage = 100
  }

  tag {
    key                 = "Name"
    value               = "${var.name}-host"
    propagate_at_launch = true
  }

  # First boot installs packages: the way out (NAT) and to AWS (endpoints) first.
  depends_on = [aws_route.private_nat, aws_vpc_endpoint.s3, aws_vpc_endpoint.interface]
}

# A host whose status checks fail is replaced by the group; this tells someone.
resource "aws_cloudwatch_metric_alarm" "host_status_check" {
  alarm_name          = "${var.name}-host-status-check-failed"
  alarm_description   = "[CRITICAL] EC2 status check failed on the host: the auto-scaling group replaces it (a new instance, the same data volume and name). docs/deploy.md runbook, \"The host is lost\"."
  namespace           = "AWS/EC2"
  metric_name         = "StatusCheckFailed"
  dimensions          = { AutoScalingGroupName = aws_autoscaling_group.host.name }
  statistic           = "Maximum"
  period              = 60
  evaluation_periods  = 2
  threshold           = 1
  comparison_operator = "GreaterThanOrEqualToThreshold"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# No host in service (being replaced, or failing to start): tells someone.
resource "aws_cloudwatch_metric_alarm" "host_missing" {
  alarm_name          = "${var.name}-host-not-in-service"
  alarm_description   = "[CRITICAL] No host in service for 10 minutes: the auto-scaling group cannot launch one, or the new one does not come up (its bootstrap log: /var/log/crawlfleet-bootstrap.log). docs/deploy.md runbook, \"The host is lost\"."
  namespace           = "AWS/AutoScaling"
  metric_name         = "GroupInServiceInstances"
  dimensions          = { AutoScalingGroupName = aws_autoscaling_group.host.name }
  statistic           = "Minimum"
  period              = 300
  evaluation_periods  = 2
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
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
  dimensions          = { AutoScalingGroupName = aws_autoscaling_group.host.name }
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

# The scheduler's process, counted by the agent every minute (0 when there is
# none). Beside it, the heartbeat below catches a scheduler whose process lives
# but whose loop is hung.
# The agent counts its processes every
# minute (0 when there is none). Not running for 3 of 5 minutes: crashed, crash
# looping, or its container stopped (an unhealthy one is restarted by
# crawlfleet-autoheal first). No data: the agent or the host is down, also alarming.
resource "aws_cloudwatch_metric_alarm" "scheduler_down" {
  alarm_name          = "${var.name}-scheduler-down"
  alarm_description   = "[CRITICAL] No scheduler process on the host for 3 of the last 5 minutes: no run is scheduled or taken back. docs/deploy.md runbook, \"Scheduler down\"."
  namespace           = "CWAgent"
  metric_name         = "procstat_lookup_pid_count"
  dimensions          = { AutoScalingGroupName = aws_autoscaling_group.host.name, pattern = local.scheduler_process_pattern }
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

# The scheduler's leader puts SchedulerHeartbeat (1) every minute from its
# dispatch loop (src/scheduler/heartbeat.rs): a loop that hangs while the process
# lives, a scheduler that leads no more, and a CloudWatch it cannot reach all stop
# it. Fewer than one heartbeat in 3 of the last 5 minutes alarms; none at all is
# missing data, which alarms too.
resource "aws_cloudwatch_metric_alarm" "scheduler_heartbeat" {
  alarm_name          = "${var.name}-scheduler-heartbeat"
  alarm_description   = "[CRITICAL] No heartbeat from the scheduler's leader for 3 of the last 5 minutes: its loop is hung or no scheduler leads; nothing is scheduled, dispatched or taken back. docs/deploy.md runbook, \"Scheduler down\"."
  namespace           = var.cloudwatch_namespace
  metric_name         = "SchedulerHeartbeat"
  statistic           = "Sum"
  period              = 60
  evaluation_periods  = 5
  datapoints_to_alarm = 3
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}
