variable "name" {
  type        = string
  description = "The database's identifier and the prefix of its subnet and parameter groups."
}

variable "vpc_id" {
  type        = string
  description = "The VPC of the database."
}

variable "subnet_ids" {
  type        = list(string)
  description = "Private subnets in at least two zones."
}

variable "client_security_group_id" {
  type        = string
  description = "The services' security group, the only one that may connect."
}

variable "instance_class" {
  type        = string
  default     = "db.t4g.medium"
  description = "The RDS instance class."
}

variable "storage_gib" {
  type        = number
  default     = 50
  description = "Initial storage (grows up to four times this on its own)."
}

variable "multi_az" {
  type        = bool
  default     = true
  description = "A standby in another zone."
}

variable "backup_days" {
  type        = number
  default     = 7
  description = "Days of automated backups (point-in-time recovery)."
}

variable "kms_key_arn" {
  type        = string
  default     = null
  description = "A KMS key for storage and Performance Insights; null uses the AWS-managed key."
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "Refuse to delete it; set false and apply before a `terraform destroy`."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}
