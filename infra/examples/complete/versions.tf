terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 5.100, < 6.0" # the range the modules are tested with
    }
  }
}

provider "aws" {
  region = var.region
  default_tags {
    tags = { "framefleet:deployment" = var.name }
  }
}
