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
variable "worker_ami_id" {
  type        = string
  description = "The worker image (packer build worker_ami/packer)."
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
variable "finance_recipients" {
  type        = list(string)
  default     = []
  description = "Who gets the daily and weekly cost reports."
}
variable "alarm_emails" {
  type        = list(string)
  default     = []
  description = "Addresses the alarm topic mails."
}
variable "api_certificate_arn" {
  type        = string
  default     = null
  description = "An ACM certificate for the API's name: an HTTPS load balancer in front of the API and console (null: none)."
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "The store and the broker's load balancer refuse deletion. To tear down: set false, apply, empty the bucket, then destroy."
}
