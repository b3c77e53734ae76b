# Fixture for scripts/checkov-checks: CKV_CRAWLFLEET_1 must fail the three "bad_"
# resources and pass the "good_" ones. Never applied.

resource "aws_security_group" "bad_inline_redis" {
  name = "bad-inline-redis"
  ingress {
    from_port   = 6379
    to_port     = 6379
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
}

resource "aws_security_group_rule" "bad_postgres_in_range" {
  type              = "ingress"
  security_group_id = "sg-0123456789abcdef0"
  from_port         = 5000
  to_port           = 6000
  protocol          = "tcp"
  cidr_blocks       = ["0.0.0.0/0"]
}

resource "aws_vpc_security_group_ingress_rule" "bad_all_traffic_v6" {
  security_group_id = "sg-0123456789abcdef0"
  ip_protocol       = "-1"
  cidr_ipv6         = "::/0"
}

resource "aws_vpc_security_group_ingress_rule" "good_api" {
  security_group_id = "sg-0123456789abcdef0"
  ip_protocol       = "tcp"
  from_port         = 3000
  to_port           = 3000
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_ingress_rule" "good_redis_from_group" {
  security_group_id            = "sg-0123456789abcdef0"
  ip_protocol                  = "tcp"
  from_port                    = 6379
  to_port                      = 6379
  referenced_security_group_id = "sg-0fedcba9876543210"
}
