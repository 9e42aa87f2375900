variable "name" {
  type        = string
  default     = "framefleet"
  description = "The root module's name (infra/modules/framefleet/README.md)."
}

variable "region" {
  type        = string
  default     = "us-east-1"
  description = "The root module's region (infra/modules/framefleet/README.md)."
}

variable "bucket_name" {
  type        = string
  description = "The root module's bucket_name (infra/modules/framefleet/README.md)."
}

variable "vpc_id" {
  type        = string
  description = "The root module's vpc_id (infra/modules/framefleet/README.md)."
}

variable "private_subnet_ids" {
  type        = list(string)
  description = "The root module's private_subnet_ids (infra/modules/framefleet/README.md)."
}

variable "image" {
  type        = string
  description = "The root module's image (infra/modules/framefleet/README.md)."
}

variable "worker_ami_id" {
  type        = string
  description = "The root module's worker_ami_id (infra/modules/framefleet/README.md)."
}

variable "broker_image" {
  type        = string
  description = "The root module's broker_image (infra/modules/framefleet/README.md)."
}

variable "broker_domain" {
  type        = string
  description = "The root module's broker_domain (infra/modules/framefleet/README.md)."
}

variable "broker_certificate_arn" {
  type        = string
  description = "The root module's broker_certificate_arn (infra/modules/framefleet/README.md)."
}

variable "broker_admin_secret_arn" {
  type        = string
  description = "The root module's broker_admin_secret_arn (infra/modules/framefleet/README.md)."
}

variable "control_plane_broker_secret_arn" {
  type        = string
  description = "The root module's control_plane_broker_secret_arn (infra/modules/framefleet/README.md)."
}

variable "report_sender" {
  type        = string
  description = "The root module's report_sender (infra/modules/framefleet/README.md)."
}

variable "finance_recipients" {
  type        = list(string)
  default     = []
  description = "The root module's finance_recipients (infra/modules/framefleet/README.md)."
}

variable "alarm_emails" {
  type        = list(string)
  default     = []
  description = "The root module's alarm_emails (infra/modules/framefleet/README.md)."
}

variable "api_certificate_arn" {
  type        = string
  default     = null
  description = "The root module's api_certificate_arn (infra/modules/framefleet/README.md)."
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "The root module's deletion_protection (infra/modules/framefleet/README.md)."
}
