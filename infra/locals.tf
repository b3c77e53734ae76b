locals {
  # Fixed by the code (src/config.rs, .env.example); tests/infra_agrees/ checks
  # that this file, ecs/*.json and docker-compose.ec2.yaml say the same. (The
  # scheduler's port stays on the host: nothing here opens it.)
  api_port = 3000

  # What the api publishes every minute (namespace: var.cloudwatch_namespace).
  queue_metric        = "QueueWaitingJobs"
  completed_metric    = "CrawlsCompleted"
  failed_metric       = "CrawlsFailed"
  redis_memory_metric = "RedisMemoryUsagePercent"

  worker_command  = ["--process=worker"]
  migrate_command = ["migrate"]
  image           = "${aws_ecr_repository.crawlfleet.repository_url}:${var.image_tag}"
  worker_image    = "${aws_ecr_repository.crawlfleet.repository_url}:${var.worker_image_tag == "" ? var.image_tag : var.worker_image_tag}"

  tls            = var.domain != ""
  host_datastore = var.datastores == "host"

  # The RDS CA bundle the image carries (the Dockerfile's rds-ca stage adds it).
  rds_ca_bundle = "/usr/local/share/crawlfleet/rds-ca-bundle.pem"

  # Where Postgres and Redis are, by parts (src/config/datastores.rs); the
  # passwords, and the Postgres user that goes with its password, come apart from
  # Parameter Store (ssm.tf: postgres-user). The host's containers reach the
  # host-mode datastores by their compose names, everything else by address.
  database_env = {
    # Host: its name in the VPC's private zone, which follows the host when it is
    # replaced (ec2.tf), and is in its datastores' certificate.
    DATABASE_HOST = local.host_datastore ? local.datastores_host_name : aws_db_instance.postgres[0].address
    DATABASE_PORT = "5432"
    DATABASE_NAME = "crawlfleet"
    # TLS in both modes, the server's name checked. Host: against the host's own
    # CA (DATABASE_SSLROOTCERT_PEM below for the tasks, a file on the host).
    DATABASE_SSLMODE = "verify-full"
    # Always given (the image carries it), so every mode's tasks have the same names.
    DATABASE_SSLROOTCERT = local.rds_ca_bundle
  }
  redis_env = {
    REDIS_HOST = local.host_datastore ? local.datastores_host_name : aws_elasticache_replication_group.redis[0].primary_endpoint_address
    REDIS_PORT = "6379"
    REDIS_TLS  = "true"
  }
  # Host: the datastores' CA, as text from Parameter Store (the host publishes it),
  # for the tasks; it wins over DATABASE_SSLROOTCERT's file. Managed: none (RDS's
  # bundle is in the image, ElastiCache's CA in the system roots).
  database_ca_secrets = local.host_datastore ? [
    { name = "DATABASE_SSLROOTCERT_PEM", valueFrom = aws_ssm_parameter.datastores_ca[0].arn },
  ] : []
  redis_ca_secrets = local.host_datastore ? [
    { name = "REDIS_CA_CERT_PEM", valueFrom = aws_ssm_parameter.datastores_ca[0].arn },
  ] : []
  # As task environment (written out, so tests/infra_agrees/ can read them).
  database_environment = [
    { name = "DATABASE_HOST", value = local.database_env.DATABASE_HOST },
    { name = "DATABASE_PORT", value = local.database_env.DATABASE_PORT },
    { name = "DATABASE_NAME", value = local.database_env.DATABASE_NAME },
    { name = "DATABASE_SSLMODE", value = local.database_env.DATABASE_SSLMODE },
    { name = "DATABASE_SSLROOTCERT", value = local.database_env.DATABASE_SSLROOTCERT },
  ]
  redis_environment = [
    { name = "REDIS_HOST", value = local.redis_env.REDIS_HOST },
    { name = "REDIS_PORT", value = local.redis_env.REDIS_PORT },
    { name = "REDIS_TLS", value = local.redis_env.REDIS_TLS },
  ]

  # The Fargate worker's container. Kept as an HCL object (not inline JSON) so the
  # agreement test can read it.
  worker_container = {
    name        = "worker"
    image       = local.worker_image
    essential   = true
    command     = local.worker_command
    stopTimeout = var.worker_stop_timeout_secs
    # Pages of the open web run in Chrome here: nothing written but the task's
    # ephemeral volumes (Chrome's profiles in /tmp, its settings and caches in the
    # home folder), no capability, the image's non-root user said again. The same
    # as the compose file's base worker; scripts/check-image runs the image so.
    readonlyRootFilesystem = true
    user                   = "10001"
    linuxParameters = {
      capabilities       = { drop = ["ALL"] }
      initProcessEnabled = false
    }
    mountPoints = [
      { sourceVolume = "tmp", containerPath = "/tmp", readOnly = false },
      { sourceVolume = "home", containerPath = "/home/crawlfleet", readOnly = false },
    ]
    environment = concat([
      { name = "LOG_FORMAT", value = "json" },
      { name = "WORKER_CONCURRENCY", value = tostring(var.worker_concurrency) },
      { name = "HTTP_CONCURRENCY", value = tostring(var.worker_http_concurrency) },
      { name = "DRAIN_TIMEOUT_SECS", value = tostring(var.worker_drain_timeout_secs) },
      { name = "ECS_PROTECTION_MINUTES", value = tostring(var.worker_protection_minutes) },
      { name = "METRICS_PORT", value = tostring(var.worker_metrics_port) },
      { name = "DATABASE_MAX_CONNECTIONS", value = tostring(var.worker_db_max_connections) },
      { name = "AWS_REGION", value = var.region },
    ], local.database_environment, local.redis_environment)
    secrets = concat([
      { name = "DATABASE_USER", valueFrom = aws_ssm_parameter.postgres_user.arn },
      { name = "DATABASE_PASSWORD", valueFrom = aws_ssm_parameter.secret["postgres-password"].arn },
      { name = "REDIS_PASSWORD", valueFrom = aws_ssm_parameter.secret["redis-password"].arn },
      { name = "SESSION_KEY", valueFrom = aws_ssm_parameter.secret["session-key"].arn },
      ], var.session_key_previous ? [
      { name = "SESSION_KEY_PREVIOUS", valueFrom = aws_ssm_parameter.secret["session-key-previous"].arn },
    ] : [], local.database_ca_secrets, local.redis_ca_secrets)
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

  # `crawlfleet migrate`, the first step of every release (docs/deploy.md): the
  # release's image, the database's parts, user and password, nothing else.
  migrate_container = {
    name                   = "migrate"
    image                  = local.image
    essential              = true
    command                = local.migrate_command
    readonlyRootFilesystem = true
    user                   = "10001"
    linuxParameters        = { capabilities = { drop = ["ALL"] } }
    environment = concat([
      { name = "LOG_FORMAT", value = "json" },
    ], local.database_environment)
    secrets = concat([
      { name = "DATABASE_USER", valueFrom = aws_ssm_parameter.postgres_user.arn },
      { name = "DATABASE_PASSWORD", valueFrom = aws_ssm_parameter.secret["postgres-password"].arn },
    ], local.database_ca_secrets)
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = aws_cloudwatch_log_group.workers.name
        awslogs-region        = var.region
        awslogs-stream-prefix = "migrate"
      }
    }
  }

  ecs_service_resource_id = "service/${aws_ecs_cluster.crawlfleet.name}/${aws_ecs_service.worker.name}"
  ssm_prefix              = "/${var.name}"
}
