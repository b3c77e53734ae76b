# The api's front door when var.domain is set: an internet-facing ALB in the public
# subnets with an ACM certificate for the domain (DNS-validated in
# var.route53_zone_id), HTTPS with TLS 1.2 or 1.3 only, HTTP answered with a
# redirect, WebSockets passed through (the idle timeout is above the api's ping),
# and access logs in S3. The ALB forwards to the host's port 3000, which admits the
# ALB's group and nothing else. The api trusts X-Forwarded-For only from the public
# subnets' addresses (TRUSTED_PROXIES), where the ALB's nodes are.
#
# Without a domain none of this exists: nothing listens on the internet, and the
# api is reached through Session Manager port forwarding (docs/deploy.md).

locals {
  alb_count = local.tls ? 1 : 0
  # The api's X-Forwarded-For comes from these addresses only (ssm.tf passes them).
  trusted_proxies = local.tls ? join(",", var.public_subnet_cidrs) : ""
}

resource "aws_acm_certificate" "api" {
  count             = local.alb_count
  domain_name       = var.domain
  validation_method = "DNS"

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_route53_record" "api_validation" {
  for_each = local.tls ? {
    for option in aws_acm_certificate.api[0].domain_validation_options : option.domain_name => option
  } : {}
  zone_id         = var.route53_zone_id
  name            = each.value.resource_record_name
  type            = each.value.resource_record_type
  records         = [each.value.resource_record_value]
  ttl             = 300
  allow_overwrite = true
}

resource "aws_acm_certificate_validation" "api" {
  count                   = local.alb_count
  certificate_arn         = aws_acm_certificate.api[0].arn
  validation_record_fqdns = [for record in aws_route53_record.api_validation : record.fqdn]
}

resource "aws_route53_record" "api" {
  count   = local.alb_count
  zone_id = var.route53_zone_id
  name    = var.domain
  type    = "A"

  alias {
    name                   = aws_lb.api[0].dns_name
    zone_id                = aws_lb.api[0].zone_id
    evaluate_target_health = true
  }
}

# --- the load balancer ------------------------------------------------------------------

resource "aws_security_group" "alb" {
  count       = local.alb_count
  name        = "${var.name}-alb"
  description = "crawlfleet api load balancer: HTTPS (and HTTP, redirected) from api_ingress_cidrs"
  vpc_id      = aws_vpc.main.id
  tags        = { Name = "${var.name}-alb" }
}

resource "aws_vpc_security_group_ingress_rule" "alb" {
  for_each = local.tls ? {
    for pair in setproduct(["80", "443"], var.api_ingress_cidrs) : "${pair[0]}-${pair[1]}" => { port = tonumber(pair[0]), cidr = pair[1] }
  } : {}
  security_group_id = aws_security_group.alb[0].id
  description       = each.value.port == 443 ? "HTTPS" : "HTTP, answered with a redirect to HTTPS"
  ip_protocol       = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_ipv4         = each.value.cidr
}

resource "aws_vpc_security_group_egress_rule" "alb_to_api" {
  count                        = local.alb_count
  security_group_id            = aws_security_group.alb[0].id
  description                  = "the api on the EC2 host"
  ip_protocol                  = "tcp"
  from_port                    = local.api_port
  to_port                      = local.api_port
  referenced_security_group_id = aws_security_group.ec2.id
}

resource "aws_lb" "api" {
  #checkov:skip=CKV2_AWS_28:No WAF by default: every route but /health and /ready needs a bearer token (/metrics is on another port) and the api bounds its own clients (README, "Hostile input and hostile clients"); a web ACL costs $5/month plus rules and requests: add one when unknown clients matter (docs/deploy.md).
  count                      = local.alb_count
  name                       = "${var.name}-api"
  load_balancer_type         = "application"
  internal                   = false
  subnets                    = aws_subnet.public[*].id
  security_groups            = [aws_security_group.alb[0].id]
  idle_timeout               = var.alb_idle_timeout_secs
  drop_invalid_header_fields = true
  enable_deletion_protection = true
  # The ALB appends the address it saw to whatever X-Forwarded-For a client sent:
  # the api must take the rightmost address that is not a TRUSTED_PROXIES one.
  xff_header_processing_mode = "append"

  access_logs {
    bucket  = aws_s3_bucket.alb_logs[0].id
    prefix  = "api"
    enabled = true
  }

  depends_on = [aws_s3_bucket_policy.alb_logs]
}

resource "aws_lb_target_group" "api" {
  count                = local.alb_count
  name                 = "${var.name}-api"
  port                 = local.api_port
  protocol             = "HTTP"
  target_type          = "instance"
  vpc_id               = aws_vpc.main.id
  deregistration_delay = 30

  health_check {
    path                = "/health"
    port                = "traffic-port"
    protocol            = "HTTP"
    matcher             = "200"
    interval            = 15
    timeout             = 5
    healthy_threshold   = 2
    unhealthy_threshold = 3
  }
}

# The host registers itself: the auto-scaling group names this target group (ec2.tf).

resource "aws_lb_listener" "https" {
  count             = local.alb_count
  load_balancer_arn = aws_lb.api[0].arn
  port              = 443
  protocol          = "HTTPS"
  # TLS 1.3 and 1.2 with forward-secret ciphers only.
  ssl_policy      = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  certificate_arn = aws_acm_certificate_validation.api[0].certificate_arn

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.api[0].arn
  }
}

# /metrics is for the fleet's own eyes (README, "Auth"): the api serves it on its
# metrics port (API_METRICS_PORT, the host's loopback), never on the port behind
# this listener; the rule keeps the front door shut should that ever change.
resource "aws_lb_listener_rule" "no_metrics" {
  count        = local.alb_count
  listener_arn = aws_lb_listener.https[0].arn
  priority     = 10

  condition {
    path_pattern {
      values = ["/metrics", "/metrics/*"]
    }
  }

  action {
    type = "fixed-response"
    fixed_response {
      content_type = "text/plain"
      message_body = "not found"
      status_code  = "404"
    }
  }
}

resource "aws_lb_listener" "http_redirect" {
  count             = local.alb_count
  load_balancer_arn = aws_lb.api[0].arn
  port              = 80
  protocol          = "HTTP"

  default_action {
    type = "redirect"
    redirect {
      port        = "443"
      protocol    = "HTTPS"
      status_code = "HTTP_301"
    }
  }
}

# The api behind it, seen from outside: no healthy target is a page.
resource "aws_cloudwatch_metric_alarm" "api_unhealthy" {
  count               = local.alb_count
  alarm_name          = "${var.name}-api-unhealthy"
  alarm_description   = "[CRITICAL] The load balancer sees no healthy api for 3 minutes: the api is down or its /health fails."
  namespace           = "AWS/ApplicationELB"
  metric_name         = "HealthyHostCount"
  dimensions          = { LoadBalancer = aws_lb.api[0].arn_suffix, TargetGroup = aws_lb_target_group.api[0].arn_suffix }
  statistic           = "Minimum"
  period              = 60
  evaluation_periods  = 3
  threshold           = 1
  comparison_operator = "LessThanThreshold"
  treat_missing_data  = "breaching"
  alarm_actions       = local.alarm_topic
  ok_actions          = local.alarm_topic
}

# --- access logs ---------------------------------------------------------------------------

resource "aws_s3_bucket" "alb_logs" {
  #checkov:skip=CKV_AWS_18:This is the log bucket; logging it into itself would loop.
  #checkov:skip=CKV_AWS_144:Access logs are not worth a second region's copy.
  #checkov:skip=CKV2_AWS_62:Nothing reacts to new log files.
  #checkov:skip=CKV_AWS_145:ALB access logs can only be written to a bucket encrypted with SSE-S3 (AWS's limitation); it is encrypted, with S3's keys.
  count         = local.alb_count
  bucket        = "${var.name}-${var.aws_account_id}-${var.region}-alb-logs"
  force_destroy = false
}

resource "aws_s3_bucket_ownership_controls" "alb_logs" {
  count  = local.alb_count
  bucket = aws_s3_bucket.alb_logs[0].id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "alb_logs" {
  count                   = local.alb_count
  bucket                  = aws_s3_bucket.alb_logs[0].id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "alb_logs" {
  count  = local.alb_count
  bucket = aws_s3_bucket.alb_logs[0].id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_versioning" "alb_logs" {
  count  = local.alb_count
  bucket = aws_s3_bucket.alb_logs[0].id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "alb_logs" {
  count  = local.alb_count
  bucket = aws_s3_bucket.alb_logs[0].id

  rule {
    id     = "expire"
    status = "Enabled"
    filter {}
    expiration {
      days = var.alb_access_log_retention_days
    }
    noncurrent_version_expiration {
      noncurrent_days = 7
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }
}

# Who may write the logs: the regional ELB account (regions older than 2022-08)
# and the log delivery service (newer ones); both, so the region does not matter.
data "aws_elb_service_account" "main" {}

data "aws_iam_policy_document" "alb_logs" {
  count = local.alb_count

  statement {
    sid       = "ElbWritesAccessLogs"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.alb_logs[0].arn}/api/AWSLogs/${var.aws_account_id}/*"]
    principals {
      type        = "AWS"
      identifiers = [data.aws_elb_service_account.main.arn]
    }
  }

  statement {
    sid       = "LogDeliveryWritesAccessLogs"
    actions   = ["s3:PutObject"]
    resources = ["${aws_s3_bucket.alb_logs[0].arn}/api/AWSLogs/${var.aws_account_id}/*"]
    principals {
      type        = "Service"
      identifiers = ["logdelivery.elasticloadbalancing.amazonaws.com"]
    }
  }

  statement {
    sid       = "TlsOnly"
    effect    = "Deny"
    actions   = ["s3:*"]
    resources = [aws_s3_bucket.alb_logs[0].arn, "${aws_s3_bucket.alb_logs[0].arn}/*"]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "alb_logs" {
  count  = local.alb_count
  bucket = aws_s3_bucket.alb_logs[0].id
  policy = data.aws_iam_policy_document.alb_logs[0].json
}
