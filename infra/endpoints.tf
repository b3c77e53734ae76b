# VPC endpoints: what the fleet says to AWS stays inside the VPC instead of paying
# the NAT gateway per GB. S3 (gateway, free): ECR's image layers, which are most
# of an image pull, and the backups. Interface endpoints (var.vpc_interface_endpoints):
# ECR's API and registry, CloudWatch Logs, and SSM with ssmmessages and ec2messages
# (Parameter Store, Session Manager, Run Command), private DNS on, so the SDKs and
# the agents use them without configuration.
#
# The interface endpoints sit in the first private subnet only: each costs per AZ
# and hour (docs/cost.md), and a second AZ would buy no availability, since the
# host and the NAT gateway (every crawl's way out) are in the first AZ already.
# Workers in the other AZ reach them across the AZ boundary (manifests, logs: a
# few GB, at the inter-AZ rate).

resource "aws_vpc_endpoint" "s3" {
  vpc_id            = aws_vpc.main.id
  service_name      = "com.amazonaws.${var.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = aws_route_table.private[*].id
  tags              = { Name = "${var.name}-s3" }
}

locals {
  interface_endpoints = var.vpc_interface_endpoints ? toset([
    "ecr.api", "ecr.dkr", "logs", "ssm", "ssmmessages", "ec2messages",
  ]) : toset([])
}

resource "aws_security_group" "endpoints" {
  count       = var.vpc_interface_endpoints ? 1 : 0
  name        = "${var.name}-vpc-endpoints"
  description = "crawlfleet VPC interface endpoints: HTTPS from the host and the workers"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-vpc-endpoints" }
}

resource "aws_vpc_security_group_ingress_rule" "endpoints" {
  for_each = var.vpc_interface_endpoints ? {
    host    = aws_security_group.ec2.id
    workers = aws_security_group.workers.id
  } : {}
  security_group_id            = aws_security_group.endpoints[0].id
  description                  = "HTTPS from the ${each.key}"
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  referenced_security_group_id = each.value
}

resource "aws_vpc_endpoint" "interface" {
  for_each            = local.interface_endpoints
  vpc_id              = aws_vpc.main.id
  service_name        = "com.amazonaws.${var.region}.${each.key}"
  vpc_endpoint_type   = "Interface"
  subnet_ids          = [aws_subnet.private[0].id]
  security_group_ids  = [aws_security_group.endpoints[0].id]
  private_dns_enabled = true
  tags                = { Name = "${var.name}-${each.key}" }
}
