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
  description = "Two or more AZs of the region: the public subnet goes in the first, one private subnet in each of the first N (N = number of private_subnet_cidrs)."
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

variable "public_subnet_cidr" {
  description = "Public subnet: the EC2 host and the NAT gateway."
  type        = string
  default     = "10.0.1.0/24"
}

variable "private_subnet_cidrs" {
  description = "Private subnets (one per AZ) for the Fargate workers; they reach the internet through the one NAT gateway."
  type        = list(string)
  default     = ["10.0.2.0/24", "10.0.3.0/24"]
}

variable "api_ingress_cidrs" {
  description = "Who may reach the api on port 3000. The world by default (bearer tokens guard /api); narrow it when the clients are known."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "admin_cidr" {
  description = "The one CIDR allowed to SSH into the EC2 host (e.g. your office's /32). Session Manager works without it."
  type        = string

  validation {
    condition     = can(cidrhost(var.admin_cidr, 0)) && !endswith(var.admin_cidr, "/0")
    error_message = "admin_cidr: a CIDR narrower than the whole internet, e.g. 203.0.113.7/32."
  }
}

variable "egress_ports" {
  description = "TCP ports the host and the workers may open to the internet (crawl targets, ECR, CloudWatch, SSM, apt). Add 8080 etc. when a site needs it."
  type        = list(number)
  default     = [80, 443]
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

variable "ec2_private_ip" {
  description = "Fixed private IP of the host, in the public subnet: the Fargate workers' DATABASE_URL and REDIS_URL point at it."
  type        = string
  default     = "10.0.1.10"
}

variable "ec2_root_volume_gb" {
  description = "Size of the host's root volume (Postgres data lives on it)."
  type        = number
  default     = 50
}

variable "ec2_key_name" {
  description = "Optional EC2 key pair for SSH from admin_cidr. null: use Session Manager."
  type        = string
  default     = null
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
  description = "Daily EBS snapshots of the host (Postgres data) kept this many days."
  type        = number
  default     = 7
}

# --- image ----------------------------------------------------------------------------

variable "image_tag" {
  description = "Tag in ECR of the image to run everywhere (tags are immutable: use the git commit)."
  type        = string
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
  description = "Address subscribed to the alarm topic (confirm the e-mail AWS sends). Empty: subscribe by hand."
  type        = string
  default     = ""
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

variable "log_retention_days" {
  description = "Retention of the containers' and VPC flow logs."
  type        = number
  default     = 30
}
