variable "name" {
  type        = string
  description = "Prefix of the role and policy names."
}

variable "account_id" {
  type        = string
  description = "The AWS account the fleet runs in (for resource ARNs)."
}

variable "worker_credentials_path" {
  type        = string
  default     = "/framefleet/workers"
  description = "SSM path under which the autoscaler drops each instance's broker password (autoscaler.worker_credentials_path)."
}

variable "fleet_id" {
  type        = string
  default     = "framefleet"
  description = "The fleet tag value: the autoscaler may terminate only instances that carry it."
}

variable "jobs_queue_arn" {
  type        = string
  description = "The jobs queue."
}

variable "dead_letter_queue_arn" {
  type        = string
  description = "The dead-letter queue."
}

variable "interruptions_queue_arn" {
  type        = string
  description = "The EC2 events queue."
}

variable "video_objects_arn" {
  type        = string
  description = "ARN of the finished videos' objects (bucket ARN/prefix/*): the API presigns GET links to them."
}

variable "model_objects_arn" {
  description = "ARN of the objects under the models prefix (the registry and the published models' manifests), which the control plane reads."
  type        = string
}

variable "ses_identity_arn" {
  type        = string
  description = "The SES identity the finance reports are sent from."
}

variable "launch_template_arns" {
  type        = list(string)
  description = "The workers' launch templates."
}

variable "worker_role_arn" {
  type        = string
  description = "The workers' role, the only one the autoscaler may pass."
}

variable "ship_metrics" {
  type        = bool
  default     = false
  description = "Let the services' metrics collectors write to prometheus_workspace_arn (a bool of its own: the workspace's ARN is unknown until apply, and count cannot wait for it)."
}

variable "prometheus_workspace_arn" {
  type        = string
  default     = null
  description = "The Prometheus workspace the services' metrics collectors write to (with ship_metrics)."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}

variable "notice_bus_arn" {
  type        = string
  description = "The EventBridge bus the control plane puts completion notices on."
}

variable "ecs_exec" {
  type        = bool
  default     = true
  description = "Let operators open a shell in the services' tasks with ECS Exec (aws ecs execute-command): the SSM channels the task role needs."
}
