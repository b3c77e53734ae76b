# One VPC: public subnets (one per AZ) with the NAT gateway and the load balancer
# only; private subnets (one per AZ) with the EC2 host, the Fargate workers and the
# managed datastores. Every crawl, the host's base workers' and the Fargate tasks',
# leaves through the NAT gateway and its Elastic IP: sites see one address (one per
# AZ with nat_gateway_per_az).

resource "aws_vpc" "main" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = { Name = var.name }
}

# The default security group allows all traffic between its members; nothing
# should use it, so it gets no rules at all.
resource "aws_default_security_group" "default" {
  vpc_id = aws_vpc.main.id
  tags   = { Name = "${var.name}-default-unused" }
}

resource "aws_internet_gateway" "main" {
  vpc_id = aws_vpc.main.id
  tags   = { Name = var.name }
}

resource "aws_subnet" "public" {
  count             = length(var.public_subnet_cidrs)
  vpc_id            = aws_vpc.main.id
  cidr_block        = var.public_subnet_cidrs[count.index]
  availability_zone = var.availability_zones[count.index]
  # Only the NAT gateway and the ALB live here; nothing gets a public address by default.
  map_public_ip_on_launch = false
  tags                    = { Name = "${var.name}-public-${var.availability_zones[count.index]}" }
}

resource "aws_subnet" "private" {
  count             = length(var.private_subnet_cidrs)
  vpc_id            = aws_vpc.main.id
  cidr_block        = var.private_subnet_cidrs[count.index]
  availability_zone = var.availability_zones[count.index]
  tags              = { Name = "${var.name}-private-${var.availability_zones[count.index]}" }
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.main.id
  tags   = { Name = "${var.name}-public" }
}

resource "aws_route" "public_internet" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.main.id
}

resource "aws_route_table_association" "public" {
  count          = length(aws_subnet.public)
  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public.id
}

# The egress addresses of the crawls: give them to sites that allow-list.
# One NAT gateway in the first AZ by default, and the Fargate workers in that AZ
# too (local.worker_subnet_ids): no crawl byte crosses an AZ on its way out
# (docs/cost.md, "Cross-AZ transfer"), and sites see one address. If that AZ fails,
# crawls stop until it is back (docs/deploy.md, runbook); the host is there anyway.
# nat_gateway_per_az: one NAT (and Elastic IP) per AZ, each private subnet leaving
# through its own, the workers spread over every AZ: an AZ outage takes only its
# share, at the price of an address and a NAT's hours per AZ.
locals {
  nat_count = var.nat_gateway_per_az ? length(aws_subnet.private) : 1
  # The Fargate workers' (and the migrate task's) subnets: where a NAT is.
  worker_subnet_ids = var.nat_gateway_per_az ? aws_subnet.private[*].id : [aws_subnet.private[0].id]
}

resource "aws_eip" "nat" {
  count  = local.nat_count
  domain = "vpc"
  tags   = { Name = "${var.name}-nat-egress-${var.availability_zones[count.index]}" }
}

resource "aws_nat_gateway" "main" {
  count         = local.nat_count
  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[count.index].id
  tags          = { Name = "${var.name}-${var.availability_zones[count.index]}" }
  depends_on    = [aws_internet_gateway.main]
}

resource "aws_route_table" "private" {
  count  = local.nat_count
  vpc_id = aws_vpc.main.id
  tags   = { Name = "${var.name}-private-${var.availability_zones[count.index]}" }
}

resource "aws_route" "private_nat" {
  count                  = local.nat_count
  route_table_id         = aws_route_table.private[count.index].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.main[count.index].id
}

# Each private subnet leaves through the NAT of its AZ, or the one NAT.
resource "aws_route_table_association" "private" {
  count          = length(aws_subnet.private)
  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[var.nat_gateway_per_az ? count.index : 0].id
}

# Stacks made before the NAT had a count keep their NAT and, above all, their
# Elastic IP (the address sites allow-list).
moved {
  from = aws_eip.nat
  to   = aws_eip.nat[0]
}

moved {
  from = aws_nat_gateway.main
  to   = aws_nat_gateway.main[0]
}

moved {
  from = aws_route_table.private
  to   = aws_route_table.private[0]
}

moved {
  from = aws_route.private_nat
  to   = aws_route.private_nat[0]
}

# A NAT gateway holds 55,000 connections to one destination (address, port,
# protocol) at a time; past that, new ones fail with ErrorPortAllocation: many
# workers crawling one site. Any such error is worth a look (docs/deploy.md runbook).
resource "aws_cloudwatch_metric_alarm" "nat_port_allocation" {
  count               = local.nat_count
  alarm_name          = "${var.name}-nat-port-allocation-${var.availability_zones[count.index]}"
  alarm_description   = "[WARNING] The NAT gateway in ${var.availability_zones[count.index]} could not allocate a source port: crawls to one site fail to connect. docs/deploy.md runbook, \"NAT port allocation errors\"."
  namespace           = "AWS/NATGateway"
  metric_name         = "ErrorPortAllocation"
  dimensions          = { NatGatewayId = aws_nat_gateway.main[count.index].id }
  statistic           = "Sum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# Flow logs: the evidence when a site says it blocked us, or we suspect it did.
resource "aws_flow_log" "vpc" {
  vpc_id               = aws_vpc.main.id
  traffic_type         = "ALL"
  log_destination_type = "cloud-watch-logs"
  log_destination      = aws_cloudwatch_log_group.flow_logs.arn
  iam_role_arn         = aws_iam_role.flow_logs.arn
}

resource "aws_cloudwatch_log_group" "flow_logs" {
  #checkov:skip=CKV_AWS_338:Retention is var.log_retention_days (30 by default): operational logs, not an audit trail.
  name              = "/${var.name}/vpc-flow-logs"
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.crawlfleet.arn
}
