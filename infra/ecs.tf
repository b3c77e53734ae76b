# 0..50 extra workers on Fargate, in the private subnets, leaving through the NAT.

resource "aws_ecs_cluster" "crawlfleet" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled" # RunningTaskCount / DesiredTaskCount per service, used by scaling and the dashboard
  }
}

resource "aws_cloudwatch_log_group" "workers" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default): operational logs, not an audit trail.
  name              = "/${var.name}/workers"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.crawlfleet.arn
}

resource "aws_ecs_task_definition" "worker" {
  #checkov:skip=CKV_AWS_336:Chrome writes profiles, caches and crash dumps under /tmp and $HOME; a read-only root with a volume for each is untried, so the root stays writable (the container runs as a non-root user).
  family                   = "${var.name}-worker"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.worker_cpu
  memory                   = var.worker_memory
  execution_role_arn       = aws_iam_role.ecs_execution.arn
  task_role_arn            = aws_iam_role.ecs_task.arn
  container_definitions    = jsonencode([local.worker_container])

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64"
  }
}

resource "aws_ecs_service" "worker" {
  name            = "${var.name}-worker"
  cluster         = aws_ecs_cluster.crawlfleet.id
  task_definition = aws_ecs_task_definition.worker.arn
  launch_type     = "FARGATE"
  # Application Auto Scaling owns the count from here on (autoscaling.tf).
  desired_count = 0

  # Workers may all be replaced at once on a deploy: each drains its crawls, and
  # what did not finish goes back to the queue.
  deployment_minimum_healthy_percent = 0
  deployment_maximum_percent         = 200
  propagate_tags                     = "SERVICE"
  enable_ecs_managed_tags            = true

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = aws_subnet.private[*].id
    security_groups  = [aws_security_group.workers.id]
    assign_public_ip = false
  }

  lifecycle {
    ignore_changes = [desired_count]
  }
}
