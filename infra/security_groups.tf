# Nothing faces the internet but the load balancer: the api's port admits the ALB's
# group alone (and nothing at all without a domain: Session Manager forwards it),
# no SSH anywhere (Session Manager), Postgres and Redis only from the host's and the
# workers' groups, workers with no inbound at all. Names may not start with "sg-"
# (AWS reserves it).

resource "aws_security_group" "ec2" {
  name        = "${var.name}-ec2-host"
  description = "crawlfleet EC2 host: api, scheduler, base workers (and Postgres, Redis with datastores = host)"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-ec2-host" }
}

resource "aws_security_group" "workers" {
  name        = "${var.name}-workers"
  description = "crawlfleet Fargate workers: no inbound"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-workers" }
}

# The api, from the load balancer only (alb.tf); TLS ends there.
resource "aws_vpc_security_group_ingress_rule" "api" {
  count                        = local.tls ? 1 : 0
  security_group_id            = aws_security_group.ec2.id
  description                  = "api (REST, WebSocket, health) from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = local.api_port
  to_port                      = local.api_port
  referenced_security_group_id = aws_security_group.alb[0].id
}

locals {
  # Postgres and Redis, reachable from these groups and nothing else.
  data_ports = { postgres = 5432, redis = 6379 }
  data_clients = {
    ec2     = aws_security_group.ec2.id
    workers = aws_security_group.workers.id
  }
  # Whose group each datastore sits behind: the host's, or its managed service's own.
  data_servers = local.host_datastore ? {
    postgres = aws_security_group.ec2.id
    redis    = aws_security_group.ec2.id
    } : {
    postgres = aws_security_group.rds[0].id
    redis    = aws_security_group.redis[0].id
  }
  data_rules = {
    for pair in setproduct(keys(local.data_ports), keys(local.data_clients)) :
    "${pair[0]}-from-${pair[1]}" => { port = local.data_ports[pair[0]], source = local.data_clients[pair[1]], server = local.data_servers[pair[0]] }
  }
}

resource "aws_vpc_security_group_ingress_rule" "data" {
  for_each                     = local.data_rules
  security_group_id            = each.value.server
  description                  = each.key
  ip_protocol                  = "tcp"
  from_port                    = each.value.port
  to_port                      = each.value.port
  referenced_security_group_id = each.value.source
}

# Egress: the internet on var.egress_ports (crawls, AWS APIs, packages) for both
# groups, through the NAT gateway; both reach Postgres and Redis where they are.
# DNS to the VPC resolver and the metadata endpoints are not filtered by security
# groups.
resource "aws_vpc_security_group_egress_rule" "ec2_internet" {
  for_each          = toset([for p in var.egress_ports : tostring(p)])
  security_group_id = aws_security_group.ec2.id
  description       = "internet on ${each.value} (through the NAT gateway)"
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
  description                  = "${each.key} (${local.host_datastore ? "on the EC2 host" : "managed"})"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = local.data_servers[each.key]
}

resource "aws_vpc_security_group_egress_rule" "ec2_data" {
  for_each                     = local.host_datastore ? {} : local.data_ports
  security_group_id            = aws_security_group.ec2.id
  description                  = "${each.key} (managed)"
  ip_protocol                  = "tcp"
  from_port                    = each.value
  to_port                      = each.value
  referenced_security_group_id = local.data_servers[each.key]
}
