terraform {
  # 1.9+ for validations that compare two variables.
  required_version = ">= 1.9"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.100"
    }
  }

  # The state belongs in S3, locked while one operator plans or applies:
  # backend.tf.example is the block (S3 with a lock file next to the state, no
  # DynamoDB table). Copy it to backend.tf, name your state bucket, run
  # `terraform init` (docs/deploy.md, "Remote state"). Without it the state stays
  # in terraform.tfstate here, unlocked: for one operator trying things out.
  # scripts/check-infra runs `terraform init -backend=false`, which ignores a
  # backend block either way.
}
