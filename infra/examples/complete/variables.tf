variable "name" {
  type        = string
  default     = "framefleet"
  description = "The deployment's name: prefix of every resource and the fleet tag (autoscaler.fleet_id)."
}

variable "region" {
  type        = string
  default     = "us-east-1"
  description = "The AWS region to deploy to."
}

variable "bucket_name" {
  type        = string
  description = "A globally unique name for the models/checkpoints/outputs bucket."
}

variable "vpc_id" {
  type        = string
  description = "The VPC the workers, services and store run in."
}

variable "private_subnet_ids" {
  type        = list(string)
  description = "Private subnets (two zones at least) for the services and the store, with NAT or VPC endpoints."
}

variable "image" {
  type        = string
  description = "The control plane and autoscaler image: the repository's Dockerfile, pushed to ECR."
}

variable "finance_recipients" {
  type        = list(string)
  default     = []
  description = "Who gets the daily and weekly cost reports."
}

variable "worker_ami_id" {
  type        = string
  description = "The worker image (packer build worker_ami/packer)."
}

variable "family_ami_ids" {
  type        = map(string)
  default     = {}
  description = "GPU family to a worker image of its own; the other families use worker_ami_id."
}

variable "warm_models" {
  type        = list(string)
  default     = []
  description = "Models each worker fetches into its cache at boot."
}

variable "broker_image" {
  type        = string
  description = "The broker image: infra/mosquitto's Dockerfile, pushed to ECR."
}

variable "broker_domain" {
  type        = string
  description = "The broker's host name (for example mqtt.framefleet.example.com): its certificate's name."
}

variable "broker_certificate_arn" {
  type        = string
  description = "An ACM certificate for broker_domain (the load balancer ends TLS with it)."
}

variable "broker_zone_id" {
  type        = string
  default     = null
  description = "Route 53 zone for broker_domain's alias record (null: make the record yourself)."
}

variable "broker_admin_secret_arn" {
  type        = string
  description = "Secrets Manager secret with the broker admin's (the autoscaler's) password (create it first)."
}

variable "control_plane_broker_secret_arn" {
  type        = string
  description = "Secrets Manager secret with the control plane's broker password (create it first)."
}

variable "report_sender" {
  type        = string
  description = "The address finance reports come from (SES verifies it: click the link it mails)."
}

variable "alarm_emails" {
  type        = list(string)
  default     = []
  description = "Addresses the alarm topic mails."
}
