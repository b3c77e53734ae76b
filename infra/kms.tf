# One customer-managed key for what crawlfleet keeps at rest in AWS: the secrets in
# Parameter Store, the log groups, the alarm topic, the backups, and with
# datastores = "managed" RDS (storage, Performance Insights, the master password's
# secret) and ElastiCache. A customer-managed key (not
# the AWS-managed ones) because CloudWatch alarms cannot publish to a topic
# encrypted with alias/aws/sns.

locals {
  account_root = "arn:aws:iam::${var.aws_account_id}:root"
}

data "aws_iam_policy_document" "kms" {
  #checkov:skip=CKV_AWS_109:In a key policy, Resource "*" means this key and nothing else.
  #checkov:skip=CKV_AWS_111:In a key policy, Resource "*" means this key and nothing else.
  #checkov:skip=CKV_AWS_356:In a key policy, Resource "*" means this key and nothing else.
  statement {
    sid       = "AccountAdministersTheKeyThroughIAM"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = [local.account_root]
    }
  }

  statement {
    sid       = "CloudWatchLogsEncryptsOurLogGroups"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${var.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:aws:logs:${var.region}:${var.aws_account_id}:log-group:*"]
    }
  }

  statement {
    sid       = "AlarmsTaskEventsAndBudgetsPublishToOurTopic"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com", "events.amazonaws.com", "budgets.amazonaws.com"]
    }
  }
}

resource "aws_kms_key" "crawlfleet" {
  description             = "${var.name}: secrets, logs, alarm topic"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.kms.json
}

resource "aws_kms_alias" "crawlfleet" {
  name          = "alias/${var.name}"
  target_key_id = aws_kms_key.crawlfleet.key_id
}
