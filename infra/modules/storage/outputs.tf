output "bucket" {
  value       = aws_s3_bucket.this.id
  description = "The bucket's name (checkpoint_bucket, model registry and outputs live there)."
}

output "bucket_arn" {
  value       = aws_s3_bucket.this.arn
  description = "The bucket's ARN, for IAM policies."
}
