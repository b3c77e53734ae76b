output "api_url" {
  description = "The api: HTTPS on var.domain through the ALB; without a domain, the local end of a Session Manager port forward (see ssm_port_forward_command)."
  value       = local.tls ? "https://${var.domain}" : "http://127.0.0.1:${local.api_port} (after ssm_port_forward_command)"
}

output "ssm_port_forward_command" {
  description = "Reach the api (and /ws) from your machine through Session Manager: no port is open to the internet."
  value       = "aws ssm start-session --region ${var.region} --target $(${local.host_instance_command}) --document-name AWS-StartPortForwardingSession --parameters portNumber=${local.api_port},localPortNumber=${local.api_port}"
}

output "alb_dns_name" {
  description = "The load balancer's name (var.domain is an alias of it); null without a domain."
  value       = local.tls ? aws_lb.api[0].dns_name : null
}

output "egress_ip" {
  description = "Allow-list this address: every crawl, the host's base workers' and the Fargate workers', leaves from it (the NAT gateway's Elastic IP). With nat_gateway_per_az, the first AZ's: egress_ips has them all."
  value       = aws_eip.nat[0].public_ip
}

output "egress_ips" {
  description = "Every NAT gateway's Elastic IP: one, or one per AZ with nat_gateway_per_az. Sites that allow-list need them all."
  value       = aws_eip.nat[*].public_ip
}

locals {
  # The host is whichever instance its auto-scaling group runs now.
  host_instance_command = "aws autoscaling describe-auto-scaling-groups --region ${var.region} --auto-scaling-group-names ${aws_autoscaling_group.host.name} --query 'AutoScalingGroups[0].Instances[?LifecycleState==`InService`].InstanceId' --output text"
}

output "host_group_name" {
  description = "The host's auto-scaling group (one instance, replaced when it fails)."
  value       = aws_autoscaling_group.host.name
}

output "host_instance_command" {
  description = "Prints the host's instance id, for Session Manager and Run Command (crawlfleet-deploy): HOST=$(...)."
  value       = local.host_instance_command
}

output "data_volume_id" {
  description = "datastores = \"host\": the volume Postgres lives on, kept when the host is replaced; null with managed datastores."
  value       = local.host_datastore ? aws_ebs_volume.data[0].id : null
}

output "database_host" {
  description = "DATABASE_HOST the Fargate workers and the migrate task use: the host's address, or RDS's."
  value       = local.database_env.DATABASE_HOST
}

output "redis_host" {
  description = "REDIS_HOST the Fargate workers use: the host's address, or ElastiCache's primary endpoint."
  value       = local.redis_env.REDIS_HOST
}

output "db_master_secret_arn" {
  description = "datastores = \"managed\": Secrets Manager secret of RDS's master user crawlfleet_admin (RDS keeps and rotates it): for creating the crawlfleet role (docs/deploy.md step 3) and for administration only."
  value       = local.host_datastore ? null : aws_db_instance.postgres[0].master_user_secret[0].secret_arn
}

output "redis_replication_group_id" {
  description = "datastores = \"managed\": the ElastiCache replication group, for setting and rotating its AUTH token (docs/deploy.md)."
  value       = local.host_datastore ? null : aws_elasticache_replication_group.redis[0].id
}

output "backup_bucket" {
  description = "datastores = \"host\": where the nightly dumps go (pg_dump/YYYY-MM-DDTHHMMSSZ.dump, scripts/pg-backup's names)."
  value       = local.host_datastore ? aws_s3_bucket.backups[0].id : null
}

output "ecr_repository_url" {
  description = "Push images here (tag = git commit)."
  value       = aws_ecr_repository.crawlfleet.repository_url
}

output "image_tag" {
  description = "The release the migrate task and the host run."
  value       = var.image_tag
}

output "worker_image_tag" {
  description = "The release the Fargate workers run (image_tag unless an upgrade holds them back)."
  value       = var.worker_image_tag == "" ? var.image_tag : var.worker_image_tag
}

output "ecs_cluster" {
  description = "ECS cluster of the Fargate workers and the migrate task."
  value       = aws_ecs_cluster.crawlfleet.name
}

output "ecs_service" {
  description = "ECS service of the Fargate workers."
  value       = aws_ecs_service.worker.name
}

output "migrate_task_definition" {
  description = "Task definition of `crawlfleet migrate` (family:revision), for aws ecs run-task."
  value       = "${aws_ecs_task_definition.migrate.family}:${aws_ecs_task_definition.migrate.revision}"
}

output "worker_task_definition" {
  description = "The workers' newest task definition (family:revision): scripts/release smokes it, then hands it to the service."
  value       = "${aws_ecs_task_definition.worker.family}:${aws_ecs_task_definition.worker.revision}"
}

output "migrate_network_configuration" {
  description = "--network-configuration of the migrate task's run-task: the workers' subnets and group."
  value       = "awsvpcConfiguration={subnets=[${join(",", local.worker_subnet_ids)}],securityGroups=[${aws_security_group.workers.id}],assignPublicIp=DISABLED}"
}

output "ssm_parameter_prefix" {
  description = "Parameter Store path holding the secrets to set before the first deploy."
  value       = local.ssm_prefix
}

output "alarm_topic_arn" {
  description = "SNS topic of the alarms, failed task starts and the budget: subscribe pager or chat here."
  value       = aws_sns_topic.alarms.arn
}

output "dashboard_url" {
  description = "The CrawlerMonitoring dashboard."
  value       = "https://${var.region}.console.aws.amazon.com/cloudwatch/home?region=${var.region}#dashboards:name=${aws_cloudwatch_dashboard.crawler.dashboard_name}"
}
