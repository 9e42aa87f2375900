variable "name" {
  type        = string
  description = "Prefix of the role, profile, security group and launch template names."
}

variable "region" {
  type        = string
  description = "The AWS region the workers run in."
}

variable "fleet_id" {
  type        = string
  default     = "framefleet"
  description = "The fleet tag (framefleet:fleet) the autoscaler finds its instances by (autoscaler.fleet_id)."
}

variable "vpc_id" {
  type        = string
  description = "The VPC of the workers' security group."
}

variable "worker_ami_id" {
  type        = string
  description = "The worker image built by worker_ami/packer (the default template's)."
}

variable "family_ami_ids" {
  type        = map(string)
  default     = {}
  description = "GPU family (l4, a10g, l40s, ...) to an image of its own, e.g. with that family's driver; each gets a launch template."
}

variable "launch_template_name" {
  type        = string
  default     = "framefleet-worker"
  description = "The launch template's name (autoscaler.launch_template)."
}

variable "root_volume_gib" {
  type        = number
  default     = 200
  description = "Each worker's encrypted gp3 root volume (the model cache lives there; costs.ebs_gib)."
}

variable "bucket" {
  type        = string
  description = "The bucket for models, checkpoints and outputs."
}

variable "bucket_arn" {
  type        = string
  description = "That bucket's ARN."
}

variable "model_registry_uri" {
  type        = string
  description = "s3:// URI of the model registry JSON the agent reads (worker_ami/agent/model_cache.py)."
}

variable "warm_models" {
  type        = list(string)
  default     = []
  description = "Models fetched into the cache at boot, before the agent says hello."
}

variable "broker_host" {
  type        = string
  description = "The MQTT broker's address, as the workers reach it."
}

variable "broker_port" {
  type        = number
  default     = 8883
  description = "The MQTT broker's port (8883: MQTT over TLS)."
}

variable "broker_tls" {
  type        = bool
  default     = true
  description = "Workers speak TLS to the broker, verified against the system's CAs."
}

variable "broker_cidr" {
  type        = string
  description = "The broker's address range, for the workers' only non-HTTPS egress rule."
}

variable "account_id" {
  type        = string
  description = "The AWS account the workers run in (for the password parameters' ARN)."
}

variable "credentials_path" {
  type        = string
  default     = "/framefleet/workers"
  description = "SSM path of the per-instance broker passwords the autoscaler drops (autoscaler.worker_credentials_path)."
}

variable "max_checkpoint_interval_seconds" {
  type        = number
  default     = 600
  description = "Longest time between checkpoints on spot (the autoscaler's deadline rule counts on it)."
}

variable "jobs_per_gpu" {
  type        = number
  default     = 1
  description = "Jobs a whole GPU runs at once, each with an even part of its memory (the worker's jobs_per_gpu)."
  validation {
    condition     = var.jobs_per_gpu >= 1 && var.jobs_per_gpu <= 8 && floor(var.jobs_per_gpu) == var.jobs_per_gpu
    error_message = "jobs_per_gpu is a whole number from 1 to 8."
  }
}

variable "mig_slots" {
  type        = bool
  default     = true
  description = "Offer a GPU in MIG mode as one slot per MIG instance (the worker's mig_slots); false: the GPU whole."
}

variable "metrics_port" {
  type        = number
  default     = 9400
  description = "The worker agent's /metrics, /healthz and /readyz port (worker metrics_port)."
}

variable "metrics_cidr" {
  type        = string
  default     = null
  description = "Who may scrape the workers' metrics port (the services' subnets or the VPC; null: no one)."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}
