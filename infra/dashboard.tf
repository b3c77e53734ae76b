# The dashboard is defined once, in ecs/dashboard.json (the AWS CLI path renders it
# with envsubst; Terraform with templatefile: same ${NAME} placeholders).
resource "aws_cloudwatch_dashboard" "crawler" {
  dashboard_name = "CrawlerMonitoring"
  dashboard_body = templatefile("${path.module}/../ecs/dashboard.json", {
    AWS_REGION           = var.region
    CLOUDWATCH_NAMESPACE = var.cloudwatch_namespace
    CLUSTER_NAME         = aws_ecs_cluster.crawlfleet.name
    SERVICE_NAME         = aws_ecs_service.worker.name
    HOST_GROUP_NAME      = aws_autoscaling_group.host.name
  })
}
