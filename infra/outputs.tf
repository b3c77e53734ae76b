output "api_url" {
  description = "The api, on the EC2 host's Elastic IP."
  value       = "http://${aws_eip.host.public_ip}:${local.api_port}"
}

output "egress_ip" {
  description = "The one address Fargate workers crawl from (NAT gateway). Give it to sites that allowlist."
  value       = aws_eip.nat.public_ip
}

output "host_public_ip" {
  description = "The EC2 host's Elastic IP: the api's address, and the address its base workers crawl from."
  value       = aws_eip.host.public_ip
}

output "host_private_ip" {
  description = "Where Fargate workers reach Postgres (5432) and Redis (6379): use it in the database-url and redis-url parameters."
  value       = aws_instance.host.private_ip
}

output "host_instance_id" {
  description = "For Session Manager and Run Command (crawlfleet-deploy)."
  value       = aws_instance.host.id
}

output "ecr_repository_url" {
  description = "Push images here (tag = git commit)."
  value       = aws_ecr_repository.crawlfleet.repository_url
}

output "ecs_cluster" {
  description = "ECS cluster of the Fargate workers."
  value       = aws_ecs_cluster.crawlfleet.name
}

output "ecs_service" {
  description = "ECS service of the Fargate workers."
  value       = aws_ecs_service.worker.name
}

output "ssm_parameter_prefix" {
  description = "Parameter Store path holding the secrets to set before the first deploy."
  value       = local.ssm_prefix
}

output "alarm_topic_arn" {
  description = "SNS topic of the alarms: subscribe pager or chat here."
  value       = aws_sns_topic.alarms.arn
}

output "dashboard_url" {
  description = "The CrawlerMonitoring dashboard."
  value       = "https://${var.region}.console.aws.amazon.com/cloudwatch/home?region=${var.region}#dashboards:name=${aws_cloudwatch_dashboard.crawler.dashboard_name}"
}
