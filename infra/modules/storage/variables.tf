variable "bucket_name" {
  type        = string
  description = "The bucket for models/, checkpoints/ and videos/ (globally unique)."
}

variable "checkpoint_days" {
  type        = number
  default     = 7
  description = "Days after which checkpoints expire (longer than any job's life)."
}

variable "noncurrent_days" {
  type        = number
  default     = 30
  description = "Days an overwritten or deleted object version is kept."
}

variable "kms_key_arn" {
  type        = string
  default     = null
  description = "A KMS key for SSE-KMS; null keeps SSE-S3 (AES256)."
}

variable "access_log_bucket" {
  type        = string
  default     = null
  description = "The account's S3 access-log bucket; null: no access logs (CloudTrail data events are the other way)."
}

variable "tls_only_policy" {
  type        = bool
  default     = true
  description = "The bucket policy that denies requests not over TLS. Off only where the endpoint ignores a policy's conditions (the deploy rehearsal's moto)."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}
