# 0..50 extra workers on Fargate (on-demand and Spot), in the private subnets
# that have a NAT gateway in their AZ (network.tf), leaving through it; and the migrate task, the first step of every release.

resource "aws_ecs_cluster" "crawlfleet" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled" # RunningTaskCount / DesiredTaskCount per service, used by scaling and the dashboard
  }
}

# Spot for most workers: a reclaimed task gets SIGTERM two minutes ahead, drains
# (DRAIN_TIMEOUT_SECS) and hands back what it held; the watchdog takes back what a
# SIGKILL leaves. The first var.worker_on_demand_base tasks, and a share past them,
# stay on-demand so a Spot shortage slows the fleet instead of stopping it.
resource "aws_ecs_cluster_capacity_providers" "crawlfleet" {
  cluster_name       = aws_ecs_cluster.crawlfleet.name
  capacity_providers = ["FARGATE", "FARGATE_SPOT"]

  default_capacity_provider_strategy {
    capacity_provider = "FARGATE"
    base              = 0
    weight            = 1
  }
}

resource "aws_cloudwatch_log_group" "workers" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default): operational logs, not an audit trail.
  name              = "/${var.name}/workers"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.crawlfleet.arn
}

resource "aws_ecs_task_definition" "worker" {
  family                   = "${var.name}-worker"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.worker_cpu
  memory                   = var.worker_memory
  execution_role_arn       = aws_iam_role.ecs_execution.arn
  task_role_arn            = aws_iam_role.ecs_task.arn
  container_definitions    = jsonencode([local.worker_container])

  # The task's ephemeral storage, the only places the worker's root lets it write
  # (local.worker_container's mountPoints).
  volume {
    name = "tmp"
  }

  volume {
    name = "home"
  }

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }
}

resource "aws_ecs_service" "worker" {
  name            = "${var.name}-worker"
  cluster         = aws_ecs_cluster.crawlfleet.id
  task_definition = aws_ecs_task_definition.worker.arn
  # Application Auto Scaling owns the count from here on (autoscaling.tf).
  desired_count = 0

  capacity_provider_strategy {
    capacity_provider = "FARGATE"
    base              = var.worker_on_demand_base
    weight            = var.worker_on_demand_weight
  }

  capacity_provider_strategy {
    capacity_provider = "FARGATE_SPOT"
    weight            = var.worker_spot_weight
  }

  # Workers may all be replaced at once on a deploy: each drains its crawls, and
  # what did not finish goes back to the queue. A busy worker's scale-in protection
  # lasts var.worker_protection_minutes at a time, so a deployment waits that long
  # at most, not for the queue to drain.
  deployment_minimum_healthy_percent = 0
  deployment_maximum_percent         = 200
  propagate_tags                     = "SERVICE"
  enable_ecs_managed_tags            = true

  # A release whose workers never get healthy is rolled back to the last one that did.
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = local.worker_subnet_ids
    security_groups  = [aws_security_group.workers.id]
    assign_public_ip = false
  }

  # Application Auto Scaling owns the count; scripts/release owns the task
  # definition the service runs: it moves the workers to a release only after the
  # migration, the host and a smoke task of that release succeeded. An apply alone
  # registers the new revision but never hands it to the service, so it cannot put
  # workers ahead of the schema (docs/deploy.md, "Upgrading").
  lifecycle {
    ignore_changes = [desired_count, task_definition]
  }

  depends_on = [aws_ecs_cluster_capacity_providers.crawlfleet]
}

# `crawlfleet migrate` as a one-off task (docs/deploy.md, "Upgrading"): run before
# the host's api and scheduler and before the workers of a release, with the
# release's image, in the workers' subnets and group (which reach Postgres).
resource "aws_ecs_task_definition" "migrate" {
  family                   = "${var.name}-migrate"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 256
  memory                   = 512
  execution_role_arn       = aws_iam_role.ecs_execution.arn
  container_definitions    = jsonencode([local.migrate_container])

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }
}
