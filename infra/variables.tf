# --- account and placement ----------------------------------------------------------

variable "name" {
  description = "Prefix of every resource name (and the SSM parameter path /<name>/...)."
  type        = string
  default     = "crawlfleet"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,20}$", var.name))
    error_message = "name: lowercase letters, digits and '-', 2-21 characters, starting with a letter."
  }
}

variable "region" {
  description = "AWS region. Seoul by default: many crawled sites are Korean, and latency to them counts."
  type        = string
  default     = "ap-northeast-2"
}

variable "aws_account_id" {
  description = "The AWS account to deploy into. The provider refuses any other, and KMS key policies name it."
  type        = string

  validation {
    condition     = can(regex("^[0-9]{12}$", var.aws_account_id))
    error_message = "aws_account_id: 12 digits."
  }
}

variable "offline_plan" {
  description = "Only for scripts/check-infra: plan with dummy credentials and no AWS calls. Never set it for a real plan or apply."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Extra tags on every resource."
  type        = map(string)
  default     = {}
}

variable "availability_zones" {
  description = "Two or more AZs of the region: one public and one private subnet in each of the first N (N = number of private_subnet_cidrs). The NAT gateway lives in the first (one in each with nat_gateway_per_az)."
  type        = list(string)
  default     = ["ap-northeast-2a", "ap-northeast-2c"]

  validation {
    condition     = length(var.availability_zones) >= 2 && alltrue([for az in var.availability_zones : startswith(az, var.region)])
    error_message = "availability_zones: at least two, all in var.region."
  }
}

# --- network ----------------------------------------------------------------------

variable "vpc_cidr" {
  description = "CIDR of the VPC."
  type        = string
  default     = "10.0.0.0/16"
}

variable "public_subnet_cidrs" {
  description = "Public subnets (one per AZ): the NAT gateway (first AZ) and the load balancer (an ALB needs two AZs). Nothing else gets a public address. These CIDRs are the api's TRUSTED_PROXIES: the ALB's nodes live here."
  type        = list(string)
  default     = ["10.0.1.0/24", "10.0.4.0/24"]

  validation {
    condition     = length(var.public_subnet_cidrs) >= 2
    error_message = "public_subnet_cidrs: two or more (an application load balancer spans two AZs)."
  }
}

variable "private_subnet_cidrs" {
  description = "Private subnets (one per AZ): the EC2 host (first), the Fargate workers, RDS and ElastiCache. They reach the internet through the NAT gateway (their AZ's with nat_gateway_per_az); the Fargate workers use the subnets that have one in their AZ."
  type        = list(string)
  default     = ["10.0.2.0/24", "10.0.3.0/24"]

  validation {
    condition     = length(var.private_subnet_cidrs) >= 2
    error_message = "private_subnet_cidrs: two or more (RDS and ElastiCache subnet groups span two AZs)."
  }
}

variable "nat_gateway_per_az" {
  description = "false: one NAT gateway, in the first AZ, and the Fargate workers in that AZ only (no cross-AZ transfer, one egress address; that AZ down stops the crawls). true: one NAT gateway and Elastic IP per AZ, workers in every AZ (an AZ down takes its share only); each costs about $47 a month more per AZ plus its share of the traffic (docs/cost.md), and sites see one address per AZ."
  type        = bool
  default     = false
}

variable "egress_ports" {
  description = "TCP ports the host and the workers may open to the internet (crawl targets, AWS APIs, apt). Add 8080 etc. when a site needs it."
  type        = list(number)
  default     = [80, 443]
}

variable "vpc_interface_endpoints" {
  description = "Interface endpoints for ECR (api, dkr), CloudWatch Logs, SSM, ssmmessages and ec2messages in the first private subnet: manifests, logs, parameters and Session Manager stay inside the VPC, off the internet. Six endpoints cost about $57 a month in Seoul (docs/cost.md) and save little NAT processing (the image layers go through the free S3 gateway endpoint, which is always there): false sends that traffic through the NAT instead."
  type        = bool
  default     = true
}

# --- the api's front door ---------------------------------------------------------------

variable "domain" {
  description = "The api's DNS name, e.g. crawl.example.com: an internet-facing ALB with an ACM certificate for it (DNS-validated in route53_zone_id), HTTPS only (HTTP redirected). Empty: no load balancer; the api is reached through Session Manager port forwarding only (docs/deploy.md, \"Without a domain\")."
  type        = string
  default     = ""

  validation {
    condition     = var.domain == "" || can(regex("^([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)+[a-z]{2,}$", var.domain))
    error_message = "domain: a lowercase DNS name like crawl.example.com, or empty."
  }
}

variable "route53_zone_id" {
  description = "Route 53 hosted zone holding var.domain: the certificate's validation records and the api's alias record go there. Required with a domain."
  type        = string
  default     = ""

  validation {
    condition     = (var.domain == "") == (var.route53_zone_id == "")
    error_message = "route53_zone_id: set it exactly when domain is set."
  }
}

variable "api_ingress_cidrs" {
  description = "Who may reach the load balancer (443, and 80 which only redirects). The world by default: TLS and bearer tokens guard the api. Unused without a domain."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "alb_idle_timeout_secs" {
  description = "The ALB's idle timeout. Above the api's WebSocket ping (WS_PING_INTERVAL_SECS, 30 s) so a quiet /ws stays open; the api's own keep-alive (HTTP_HEADER_TIMEOUT_SECS) is set 5 s above it, so the ALB, not the api, closes idle connections (no 502 on a reused one)."
  type        = number
  default     = 60

  validation {
    condition     = var.alb_idle_timeout_secs > 30 && var.alb_idle_timeout_secs <= 4000
    error_message = "alb_idle_timeout_secs: above the api's WebSocket ping interval (30 s), at most 4000."
  }
}

variable "alb_access_log_retention_days" {
  description = "The ALB's access logs (S3) are deleted after this many days."
  type        = number
  default     = 90
}

# --- EC2 host -------------------------------------------------------------------------

variable "ec2_instance_type" {
  description = "The host of api, scheduler, Postgres, Redis and the base workers."
  type        = string
  default     = "t3.large"
}

variable "ec2_ami" {
  description = "AMI of the host: an AMI id, or resolve:ssm:<public parameter>. user_data expects Ubuntu 24.04 (apt, snap)."
  type        = string
  default     = "resolve:ssm:/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id"
}

variable "ec2_root_volume_gb" {
  description = "Size of the host's root volume: the OS, Docker and its images (Postgres lives on the data volume)."
  type        = number
  default     = 30
}

variable "data_volume_gb" {
  description = "datastores = \"host\": size of the data volume Postgres lives on (gp3, kept when the host is replaced; grows online)."
  type        = number
  default     = 50
}

variable "base_worker_replicas" {
  description = "Workers on the EC2 host (WORKER_CONCURRENCY=2 each), always on."
  type        = number
  default     = 1

  validation {
    condition     = var.base_worker_replicas >= 0 && var.base_worker_replicas <= 2
    error_message = "base_worker_replicas: 0, 1 or 2 (a t3.large has room for two)."
  }
}

variable "redis_maxmemory" {
  description = "Redis maxmemory on the host. Policy is noeviction: a full Redis refuses writes rather than dropping queue keys."
  type        = string
  default     = "1gb"
}

variable "snapshot_retention_days" {
  description = "datastores = \"host\": daily EBS snapshots of the data volume (Postgres) kept this many days."
  type        = number
  default     = 7
}

# --- datastores ---------------------------------------------------------------------------

variable "datastores" {
  description = "host: Postgres and Redis in containers on the EC2 host (docker-compose.datastores.yaml), a nightly pg_dump to S3. managed: RDS PostgreSQL 16 and ElastiCache Redis 7.1, over TLS, in the private subnets; the host runs only crawlfleet."
  type        = string
  default     = "host"

  validation {
    condition     = contains(["host", "managed"], var.datastores)
    error_message = "datastores: host or managed."
  }
}

variable "pg_dump_retention_days" {
  description = "datastores = \"host\": nightly pg_dump files kept this many days in the backup bucket (then deleted; a replaced version 7 days later)."
  type        = number
  default     = 30

  validation {
    condition     = var.pg_dump_retention_days >= 1
    error_message = "pg_dump_retention_days: at least 1."
  }
}

variable "backup_lock_days" {
  description = "datastores = \"host\": each nightly dump is locked (S3 Object Lock, governance mode) this many days after its upload: neither the host nor anyone without s3:BypassGovernanceRetention can delete it or overwrite it for good before then. At most pg_dump_retention_days."
  type        = number
  default     = 14

  validation {
    condition     = var.backup_lock_days >= 1 && var.backup_lock_days <= var.pg_dump_retention_days
    error_message = "backup_lock_days: 1 to pg_dump_retention_days (a dump cannot be locked past its expiry)."
  }
}

variable "db_instance_class" {
  description = "datastores = \"managed\": RDS instance class. db.t4g.medium (2 vCPU, 4 GB) allows ~400 connections: 50 workers x DATABASE_MAX_CONNECTIONS 4 plus the host."
  type        = string
  default     = "db.t4g.medium"
}

variable "db_allocated_storage_gb" {
  description = "datastores = \"managed\": RDS storage (gp3), grown automatically up to 4x this."
  type        = number
  default     = 50
}

variable "db_backup_retention_days" {
  description = "datastores = \"managed\": automated backups kept this many days; point-in-time recovery to any second within them."
  type        = number
  default     = 14

  validation {
    condition     = var.db_backup_retention_days >= 1 && var.db_backup_retention_days <= 35
    error_message = "db_backup_retention_days: 1 to 35 (0 would turn off backups and point-in-time recovery)."
  }
}

variable "multi_az" {
  description = "datastores = \"managed\": RDS Multi-AZ (a standby in the second AZ) and a Redis replica there with automatic failover. Doubles their cost."
  type        = bool
  default     = false
}

variable "redis_node_type" {
  description = "datastores = \"managed\": ElastiCache node type."
  type        = string
  default     = "cache.t4g.small"
}

# --- image ----------------------------------------------------------------------------

variable "image_tag" {
  description = "Tag in ECR of the image of the release (tags are immutable: use the git commit): the migrate task and the host's api, scheduler and base workers."
  type        = string
}

variable "worker_image_tag" {
  description = "Tag the Fargate workers run. Empty: image_tag. An upgrade sets it to the previous tag until the migration and the host have moved (docs/deploy.md, \"Upgrading\"), then empties it."
  type        = string
  default     = ""
}

variable "session_key_previous" {
  description = "While rotating SESSION_KEY: also hand SESSION_KEY_PREVIOUS (Parameter Store session-key-previous) to the Fargate workers, so what was sealed with the old key still opens (docs/deploy.md, \"Rotating secrets\")."
  type        = bool
  default     = false
}

# --- Fargate workers ----------------------------------------------------------------

variable "worker_cpu" {
  description = "Fargate task CPU units of one worker (1024 = 1 vCPU)."
  type        = number
  default     = 1024
}

variable "worker_memory" {
  description = "Fargate task memory of one worker, MiB."
  type        = number
  default     = 2048
}

variable "worker_concurrency" {
  description = "Crawls per Fargate worker (one Chrome each): 4 fits 1 vCPU / 2 GB."
  type        = number
  default     = 4
}

variable "worker_http_concurrency" {
  description = "Plain HTTP and JSON crawls per Fargate worker, besides its browser crawls (HTTP_CONCURRENCY): they need no browser, little memory."
  type        = number
  default     = 32
}

variable "worker_db_max_connections" {
  description = "Postgres pool of one Fargate worker. 50 workers x this must stay under the host's Postgres max_connections (300)."
  type        = number
  default     = 4
}

variable "worker_metrics_port" {
  description = "Port of a worker's /health and /metrics (METRICS_PORT)."
  type        = number
  default     = 3001
}

variable "worker_drain_timeout_secs" {
  description = "DRAIN_TIMEOUT_SECS: after SIGTERM, in-flight crawls get this long before their runs go back to the queue."
  type        = number
  default     = 25
}

variable "worker_stop_timeout_secs" {
  description = "ECS stopTimeout: SIGKILL this long after SIGTERM. Must cover the drain plus re-queueing and closing Chrome."
  type        = number
  default     = 45

  validation {
    condition     = var.worker_stop_timeout_secs >= var.worker_drain_timeout_secs + 10 && var.worker_stop_timeout_secs <= 120
    error_message = "worker_stop_timeout_secs: at least worker_drain_timeout_secs + 10, at most 120 (Fargate's limit)."
  }
}

variable "worker_protection_minutes" {
  description = "ECS_PROTECTION_MINUTES: a busy worker protects its task from scale-in this long at a time, renewing it while it holds runs; short, so a deployment waits minutes, not for the queue to drain."
  type        = number
  default     = 10
}

variable "worker_on_demand_base" {
  description = "The first this-many Fargate workers run on FARGATE (on-demand) whatever the weights."
  type        = number
  default     = 1
}

variable "worker_on_demand_weight" {
  description = "Past the base, FARGATE (on-demand) gets this share of the workers against worker_spot_weight. 0: all Spot."
  type        = number
  default     = 1
}

variable "worker_spot_weight" {
  description = "Past the base, FARGATE_SPOT gets this share against worker_on_demand_weight. A reclaimed Spot task gets SIGTERM 2 minutes ahead and drains like a scale-in; the watchdog takes back what a SIGKILL leaves. 0: no Spot."
  type        = number
  default     = 3

  validation {
    condition     = var.worker_spot_weight + var.worker_on_demand_weight > 0
    error_message = "worker_spot_weight + worker_on_demand_weight: at least one above 0."
  }
}

variable "worker_min_tasks" {
  description = "Fewest Fargate workers (0: none when there is nothing to crawl)."
  type        = number
  default     = 0
}

variable "worker_max_tasks" {
  description = "Most Fargate workers: the cost cap. Lower it to stop runaway scaling (docs/deploy.md runbook)."
  type        = number
  default     = 50
}

# --- scaling ----------------------------------------------------------------------------

variable "scaling_mode" {
  description = "step: the architecture's step policies on QueueWaitingJobs. target_tracking: backlog per running task held at backlog_per_task_target, plus a step policy for 0 -> 1 (target tracking cannot leave zero)."
  type        = string
  default     = "step"

  validation {
    condition     = contains(["step", "target_tracking"], var.scaling_mode)
    error_message = "scaling_mode: step or target_tracking."
  }
}

variable "backlog_per_task_target" {
  description = "target_tracking: acceptable (waiting + active) runs per worker task = worker_concurrency x (1 + acceptable wait / mean crawl time). 8 = one crawl's time of waiting."
  type        = number
  default     = 8
}

# --- monitoring -------------------------------------------------------------------------

variable "cloudwatch_namespace" {
  description = "Namespace the api publishes QueueWaitingJobs, CrawlsCompleted and CrawlsFailed in (CLOUDWATCH_NAMESPACE)."
  type        = string
  default     = "CrawlerService"
}

variable "alarm_email" {
  description = "Who is told: subscribed to the alarm topic (confirm the e-mail AWS sends), which every alarm, the ECS task events and the budget reach. Required unless alarms_without_recipients says nobody is, on purpose."
  type        = string
  default     = ""

  validation {
    condition     = var.alarm_email == "" ? var.alarms_without_recipients : can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", var.alarm_email))
    error_message = "alarm_email: set it to the address alarms go to (e.g. oncall@example.com), or set alarms_without_recipients = true to deploy alarms nobody receives until you subscribe to the topic by hand."
  }
}

variable "alarms_without_recipients" {
  description = "true: deploy without alarm_email, on purpose. The alarm topic then has no subscriber and every alarm goes nowhere until someone subscribes (an e-mail, a chat webhook through AWS Chatbot, a pager). For throwaway stacks."
  type        = bool
  default     = false
}

variable "queue_warning_threshold" {
  description = "QueueWaitingJobs above this for 5 minutes: warning alarm."
  type        = number
  default     = 100
}

variable "queue_critical_threshold" {
  description = "QueueWaitingJobs above this for 5 minutes: critical alarm."
  type        = number
  default     = 500
}

variable "running_tasks_cost_threshold" {
  description = "More Fargate workers than this for 15 minutes: cost alarm."
  type        = number
  default     = 40
}

variable "error_rate_threshold_percent" {
  description = "Failed / (completed + failed) crawls over 15 minutes above this: error-rate alarm."
  type        = number
  default     = 10
}

variable "host_cpu_alarm_percent" {
  description = "The host's CPU above this for 15 minutes: alarm."
  type        = number
  default     = 80
}

variable "redis_memory_alarm_percent" {
  description = "Redis memory above this % of its maxmemory for 5 minutes: alarm (host: the api's RedisMemoryUsagePercent; managed: ElastiCache's DatabaseMemoryUsagePercentage)."
  type        = number
  default     = 80
}

variable "monthly_budget_usd" {
  description = "AWS Budget of the account, USD a month: mails at 80 % actual and 100 % forecast (docs/cost.md has what to expect)."
  type        = number
  default     = 500
}

variable "budget_emails" {
  description = "Addresses the budget mails besides the alarm topic (which reaches alarm_email)."
  type        = list(string)
  default     = []
}

variable "host_memory_alarm_percent" {
  description = "The host's used memory (CloudWatch agent, mem_used_percent) above this for 10 minutes: alarm."
  type        = number
  default     = 90
}

variable "host_disk_alarm_percent" {
  description = "The host's root file system (CloudWatch agent, disk_used_percent of /) above this for 10 minutes: alarm. With datastores = \"host\" Postgres lives there."
  type        = number
  default     = 80
}

variable "db_cpu_alarm_percent" {
  description = "datastores = \"managed\": RDS CPU above this for 15 minutes: alarm."
  type        = number
  default     = 80
}

variable "db_free_storage_alarm_gb" {
  description = "datastores = \"managed\": RDS free storage below this many GB for 10 minutes: alarm (storage autoscaling grows it up to 4x db_allocated_storage_gb, then stops)."
  type        = number
  default     = 5
}

variable "db_connections_alarm_threshold" {
  description = "datastores = \"managed\": RDS connections above this for 10 minutes: alarm. db.t4g.medium allows about 400 (DBInstanceClassMemory / 9531392): 50 workers x worker_db_max_connections 4 plus the host stay near 230."
  type        = number
  default     = 320
}

variable "log_retention_days" {
  description = "Retention of the containers' and VPC flow logs."
  type        = number
  default     = 30
}
