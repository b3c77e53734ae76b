resource "aws_ecr_repository" "crawlfleet" {
  name = var.name
  # A tag names one build forever: deploys and rollbacks are exact.
  image_tag_mutability = "IMMUTABLE"

  image_scanning_configuration {
    scan_on_push = true
  }

  encryption_configuration {
    encryption_type = "KMS"
  }
}

resource "aws_ecr_lifecycle_policy" "crawlfleet" {
  repository = aws_ecr_repository.crawlfleet.name
  policy = jsonencode({
    rules = [{
      rulePriority = 1
      description  = "keep the 30 newest images (rollback room)"
      selection    = { tagStatus = "any", countType = "imageCountMoreThan", countNumber = 30 }
      action       = { type = "expire" }
    }]
  })
}
