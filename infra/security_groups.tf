# Exactly the architecture's rules: api open (configurable), SSH from one admin
# CIDR, Redis and Postgres only from the host's own group and the workers' group,
# workers with no inbound at all. Names may not start with "sg-" (AWS reserves it).

resource "aws_security_group" "ec2" {
  name        = "${var.name}-ec2-host"
  description = "crawlfleet EC2 host: api, scheduler, Postgres, Redis, base workers"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-ec2-host" }
}

resource "aws_security_group" "workers" {
  name        = "${var.name}-workers"
  description = "crawlfleet Fargate workers: no inbound"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-workers" }
}

resource "aws_vpc_security_group_ingress_rule" "api" {
  for_each          = toset(var.api_ingress_cidrs)
  security_group_id = aws_security_group.ec2.id
  description       = "api (REST, WebSocket, health)"
  ip_protocol       = "tcp"
  from_port         = local.api_port
  to_port           = local.api_port
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_ingress_rule" "ssh" {
  security_group_id = aws_security_group.ec2.id
  description       = "SSH from the admin CIDR only"
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_ipv4         = var.admin_cidr
}

locals {
  # Postgres and Redis, reachable from these groups and nothing else.
  data_ports = { postgres = 5432, redis = 6379 }
  data_clients = {
    ec2     = aws_security_group.ec2.id
    workers = aws_security_group.workers.id
  }
  data_rules = {
    for pair in setproduct(keys(local.data_ports), keys(local.data_clients)) :
    "${pair[0]}-from-${pair[1]}" => { port = local.data_ports[pair[0]], source = local.data_clients[pair[1]] }
  }
}

resource "aws_vpc_security_group_ingress_rule" "data" {
  for_each                     = local.data_rules
  security_group_id            = aws_security_group.ec2.id
  description                  = each.key
  ip_protocol                  = "tcp"
  from_port                    = each.value.port
  to_port                      = each.value.port
  referenced_security_group_id = each.value.source
}

# Egress: the internet on var.egress_ports (crawls, ECR, AWS APIs, packages) for
# both groups; the workers also reach Postgres and Redis on the host. DNS to the
# VPC resolver and the metadata endpoints are not filtered by security groups.
resource "aws_vpc_security_group_egress_rule" "ec2_internet" {
  for_each          = toset([for p in var.egress_ports : tostring(p)])
  security_group_id = aws_security_group.ec2.id
  description       = "internet on ${each.value}"
  ip_protocol       = "tcp"
  from_port         = tonumber(each.value)
  to_port           = tonumber(each.value)
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "workers_internet" {
  for_each          = toset([for p in var.egress_ports : tostring(p)])
  security_group_id = aws_security_group.workers.id
  description       = "internet on ${each.value} (through the NAT gateway)"
  ip_protocol       = "tcp"
  from_port         = tonumber(each.value)
  to_port           = tonumber(each.value)
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "workers_data" {
  for_each                     = local.data_ports
  security_group_id            = aws_security_group.workers.id
  description                  = "${each.key} on the EC2 host"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = aws_security_group.ec2.id
}
