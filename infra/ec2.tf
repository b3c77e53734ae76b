# The one EC2 host: api, scheduler, Postgres, Redis and the base workers under
# docker compose (docker-compose.ec2.yaml), with its own Elastic IP for the api.

resource "aws_cloudwatch_log_group" "ec2" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default): operational logs, not an audit trail.
  name              = "/${var.name}/ec2"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.crawlfleet.arn
}

locals {
  cloudwatch_agent_config = jsonencode({
    agent = { metrics_collection_interval = 60 }
    metrics = {
      namespace         = "CWAgent"
      append_dimensions = { InstanceId = "$${aws:InstanceId}" }
      metrics_collected = {
        mem  = { measurement = ["mem_used_percent"] }
        disk = { measurement = ["used_percent"], resources = ["/"] }
        # Redis memory for the dashboard (it runs in a container, but it is a host process).
        procstat = [{ exe = "redis-server", measurement = ["memory_rss"] }]
      }
    }
  })
}

resource "aws_instance" "host" {
  ami                         = var.ec2_ami
  instance_type               = var.ec2_instance_type
  subnet_id                   = aws_subnet.public.id
  private_ip                  = var.ec2_private_ip
  vpc_security_group_ids      = [aws_security_group.ec2.id]
  iam_instance_profile        = aws_iam_instance_profile.ec2.name
  key_name                    = var.ec2_key_name
  associate_public_ip_address = false # the Elastic IP below is its address
  monitoring                  = true
  ebs_optimized               = true
  disable_api_termination     = true # it holds Postgres

  metadata_options {
    http_endpoint = "enabled"
    http_tokens   = "required"
    # 2: containers (one network hop further) need the instance role too: the api
    # publishes the queue depth, Docker's awslogs driver writes the logs.
    http_put_response_hop_limit = 2
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
  })

  tags = { Name = "${var.name}-host" }

  lifecycle {
    # ami: resolve:ssm reads back as the AMI id it resolved to. user_data: it only
    # runs at first boot; later changes reach the host through Parameter Store and
    # crawlfleet-deploy, never by replacing the host (and its Postgres).
    ignore_changes = [ami, user_data]
  }
}

resource "aws_eip" "host" {
  domain   = "vpc"
  instance = aws_instance.host.id
  tags     = { Name = "${var.name}-host" }
}

# A host whose hardware failed comes back on new hardware with the same volume,
# addresses and Elastic IP (docs/deploy.md, "EC2 host lost").
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
