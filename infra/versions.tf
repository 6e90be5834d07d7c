# Terraform and provider versions. Providers cannot be downloaded on the development machines
# (no registry access), so `terraform init` only runs where the deploy runs (`make deploy`).

terraform {
  required_version = ">= 1.6"

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.80"
    }
  }

  # State stays local by default (infra/terraform.tfstate, ignored by git). For a shared or
  # long-lived deployment, keep it in S3 instead: create the bucket once by hand, then uncomment
  # and run `terraform -chdir=infra init -migrate-state` (use_lockfile needs Terraform >= 1.10).
  #
  # backend "s3" {
  #   bucket       = "my-terraform-state"
  #   key          = "nib/terraform.tfstate"
  #   region       = "eu-west-1"
  #   encrypt      = true
  #   use_lockfile = true
  # }
}

provider "aws" {
  region = var.region

  default_tags {
    tags = {
      project    = "nib"
      managed_by = "terraform"
      deployment = var.name_prefix
    }
  }
}

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}
