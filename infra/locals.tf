locals {
  # Fixed by the code (src/config.rs, .env.example); tests/infra_agrees/ checks
  # that this file, ecs/*.json and docker-compose.ec2.yaml say the same. (The
  # scheduler's port stays on the host: nothing here opens it.)
  api_port = 3000

  # What the api publishes every minute (namespace: var.cloudwatch_namespace).
  queue_metric     = "QueueWaitingJobs"
  completed_metric = "CrawlsCompleted"
  failed_metric    = "CrawlsFailed"

  worker_command = ["--process=worker"]
  worker_image   = "${aws_ecr_repository.crawlfleet.repository_url}:${var.image_tag}"

  # The Fargate worker's container. Kept as an HCL object (not inline JSON) so the
  # agreement test can read it.
  worker_container = {
    name                   = "worker"
    image                  = local.worker_image
    essential              = true
    command                = local.worker_command
    stopTimeout            = var.worker_stop_timeout_secs
    readonlyRootFilesystem = false
    environment = [
      { name = "LOG_FORMAT", value = "json" },
      { name = "WORKER_CONCURRENCY", value = tostring(var.worker_concurrency) },
      { name = "HTTP_CONCURRENCY", value = tostring(var.worker_http_concurrency) },
      { name = "DRAIN_TIMEOUT_SECS", value = tostring(var.worker_drain_timeout_secs) },
      { name = "METRICS_PORT", value = tostring(var.worker_metrics_port) },
      { name = "DATABASE_MAX_CONNECTIONS", value = tostring(var.worker_db_max_connections) },
      { name = "AWS_REGION", value = var.region },
    ]
    secrets = [
      { name = "DATABASE_URL", valueFrom = aws_ssm_parameter.secret["database-url"].arn },
      { name = "REDIS_URL", valueFrom = aws_ssm_parameter.secret["redis-url"].arn },
      { name = "SESSION_KEY", valueFrom = aws_ssm_parameter.secret["session-key"].arn },
    ]
    portMappings = [
      { containerPort = var.worker_metrics_port, protocol = "tcp" },
    ]
    healthCheck = {
      command     = ["CMD", "crawlfleet", "healthcheck", "--url", "http://127.0.0.1:${var.worker_metrics_port}/health"]
      interval    = 30
      timeout     = 5
      retries     = 3
      startPeriod = 60
    }
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.workers.name
        awslogs-region        = var.region
        awslogs-stream-prefix = "worker"
      }
    }
  }

  ecs_service_resource_id = "service/${aws_ecs_cluster.crawlfleet.name}/${aws_ecs_service.worker.name}"
  ssm_prefix              = "/${var.name}"
}
