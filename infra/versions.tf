terraform {
  # 1.9+ for validations that compare two variables.
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.100"
    }
  }

  # Remote state is optional: without this block the state stays in
  # terraform.tfstate next to this file (fine for one operator; keep it safe, it
  # holds the placeholder secrets' metadata). For a team, create the bucket and
  # table once, uncomment, and run `terraform init -migrate-state`
  # (docs/deploy.md, "Remote state").
  #
  # backend "s3" {
  #   bucket         = "my-org-terraform-state"
  #   key            = "crawlfleet/terraform.tfstate"
  #   region         = "ap-northeast-2"
  #   dynamodb_table = "terraform-locks"
  #   encrypt        = true
  # }
}
