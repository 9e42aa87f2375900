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

variable "api_certificate_arn" {
  type        = string
  default     = null
  description = "An ACM certificate for the API's name: an HTTPS load balancer in front of the API and console (null: none)."
}

variable "api_allowed_cidrs" {
  type        = list(string)
  default     = []
  description = "Who may reach the API: through the load balancer with api_certificate_arn, else the tasks directly."
}

variable "api_load_balancer_internal" {
  type        = bool
  default     = true
  description = "The API load balancer stays inside the VPC (false: on the internet, in api_load_balancer_subnet_ids)."
}

variable "api_load_balancer_subnet_ids" {
  type        = list(string)
  default     = null
  description = "The API load balancer's subnets (null: private_subnet_ids)."
}

variable "s3_gateway_endpoint" {
  type        = bool
  default     = true
  description = "Add an S3 gateway endpoint to the VPC's route tables (false: the VPC has one already)."
}

variable "private_route_table_ids" {
  type        = list(string)
  default     = null
  description = "The route tables the S3 gateway endpoint joins (null: every route table of the VPC)."
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "The store and the broker's load balancer refuse deletion. To tear down: set false, apply, empty the bucket, then destroy."
}

variable "rehearsal_omits" {
  type        = set(string)
  default     = []
  description = "For the deploy rehearsal against moto only (tests/infra/): what the stand-in endpoint cannot create, left out. Leave empty in a real deployment."
  validation {
    condition     = length(setsubtract(var.rehearsal_omits, ["efs_backup_policy", "sqs_redrive_allow_policy", "s3_tls_only_policy"])) == 0
    error_message = "rehearsal_omits names only efs_backup_policy, sqs_redrive_allow_policy and s3_tls_only_policy."
  }
}

variable "webhook_secret_arn" {
  type        = string
  default     = null
  description = "A Secrets Manager secret of yours (plain text, a long random string) that signs the completion notices sent to the webhooks jobs name; null: no webhooks (the EventBridge bus still hears every job's end)."
}

variable "console_oidc" {
  type = object({
    issuer                 = string
    authorization_endpoint = string
    token_endpoint         = string
    user_info_endpoint     = string
    client_id              = string
    scope                  = optional(string, "openid email groups")
    group_claim            = optional(string, "groups")
    operator_groups        = optional(list(string), [])
    team_groups            = optional(map(list(string)), {})
  })
  default     = null
  description = "Single sign-on for the console through the load balancer (the service module's console_oidc); null: token login."
}

variable "console_oidc_client_secret" {
  type        = string
  default     = null
  sensitive   = true
  description = "The identity provider's client secret for console_oidc (the load balancer keeps it)."
}

variable "settings" {
  type        = map(string)
  default     = {}
  description = "Any FrameFleet setting by its dotted name as in framefleet.toml (\"autoscaler.max_instances\" = \"40\"), as text: lists and tables as JSON. Checked at plan time against settings.json beside this module (framefleet schema --of settings); the inputs below and the module's own wiring (queues, bucket, fleet) win over it."

  validation {
    condition     = length(setsubtract(keys(var.settings), keys(local.setting_kinds))) == 0
    error_message = "Not FrameFleet settings: ${join(", ", sort(setsubtract(keys(var.settings), keys(local.setting_kinds))))} (infra/modules/framefleet/settings.json lists every one)."
  }
  validation {
    condition = alltrue([
      for name, value in var.settings : (
        try(local.setting_kinds[name].kind, "string") == "json" ? can(jsondecode(value)) :
        try(local.setting_kinds[name].kind, "string") == "enum" ? contains(local.setting_kinds[name].values, value) :
        can(regex(local.setting_patterns[try(local.setting_kinds[name].kind, "string")], value))
      )
    ])
    error_message = "Settings of the wrong kind: ${join(", ", [
      for name, value in var.settings : "${name} wants ${local.setting_kinds[name].kind == "enum" ? join(" or ", local.setting_kinds[name].values) : local.setting_kinds[name].kind}, not ${jsonencode(value)}"
      if !(
        try(local.setting_kinds[name].kind, "string") == "json" ? can(jsondecode(value)) :
        try(local.setting_kinds[name].kind, "string") == "enum" ? contains(local.setting_kinds[name].values, value) :
        can(regex(local.setting_patterns[try(local.setting_kinds[name].kind, "string")], value))
      )
    ])}."
  }
}

variable "log_format" {
  type        = string
  default     = "text"
  description = "The services' log lines: text, or json (one JSON object a line, for log shippers)."
  validation {
    condition     = contains(["text", "json"], var.log_format)
    error_message = "log_format is text or json."
  }
}

variable "budget_per_hour" {
  type        = number
  default     = 250
  description = "The most the autoscaler spends on GPU instances in any hour (USD; autoscaler.budget_per_hour)."
}

variable "budget_per_day" {
  type        = number
  default     = 4000
  description = "The most the autoscaler spends on GPU instances in any day (USD; autoscaler.budget_per_day)."
}

variable "monthly_budget_usd" {
  type        = number
  default     = null
  description = "The month's budget the cost reports measure spending against (USD; costs.monthly_budget_usd); null: none."
}

variable "team_quotas" {
  type        = any
  default     = {}
  description = "Each team's share of the GPUs (control.scheduling.team_quotas), for example { research = { gpus = { h100 = 8 }, borrow = true } }; teams left out are not limited."
}

variable "report_schedule" {
  type        = list(string)
  default     = ["day", "week"]
  description = "Which cost reports are emailed to finance_recipients: day, week and/or month (costs.scheduled_reports)."
  validation {
    condition     = length(setsubtract(var.report_schedule, ["day", "week", "month"])) == 0
    error_message = "report_schedule holds day, week and month only."
  }
}
