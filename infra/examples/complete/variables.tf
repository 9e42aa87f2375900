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

variable "broker_host" {
  type        = string
  description = "The MQTT broker's address as the workers reach it."
}

variable "broker_cidr" {
  type        = string
  description = "The broker's address range (the workers' egress rule to it)."
}

variable "broker_password_parameter_name" {
  type        = string
  default     = "/framefleet/broker/worker-password"
  description = "An SSM SecureString parameter with the workers' MQTT password (create it first)."
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
