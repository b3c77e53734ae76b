provider "aws" {
  region = var.region

  # Refuse to touch any other account (a wrong AWS_PROFILE is the classic mistake).
  # Offline plans cannot know the account, so the guard is off for them.
  allowed_account_ids = var.offline_plan ? null : [var.aws_account_id]

  # scripts/check-infra plans with dummy keys and no network: nothing may call AWS.
  skip_credentials_validation = var.offline_plan
  skip_requesting_account_id  = var.offline_plan
  skip_metadata_api_check     = var.offline_plan
  skip_region_validation      = var.offline_plan

  default_tags {
    tags = merge(var.tags, {
      Project   = var.name
      ManagedBy = "terraform"
    })
  }
}
