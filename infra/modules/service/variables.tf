variable "name" {
  type        = string
  description = "Prefix of the cluster, services, roles and log group."
}

variable "region" {
  type        = string
  description = "The AWS region (for the log driver)."
}

variable "image" {
  type        = string
  description = "The control plane and autoscaler image (docker build of the repository's Dockerfile, pushed to ECR)."
}

variable "vpc_id" {
  type        = string
  description = "The VPC the services run in."
}

variable "vpc_cidr" {
  type        = string
  description = "The VPC's range (the store's address is in it)."
}

variable "subnet_ids" {
  type        = list(string)
  description = "Private subnets with a route to the AWS APIs (NAT or VPC endpoints)."
}

variable "broker_host" {
  type        = string
  description = "The broker's host name (TLS, its certificate's name)."
}

variable "broker_cidr" {
  type        = string
  description = "The MQTT broker's address range."
}

variable "broker_port" {
  type        = number
  default     = 8883
  description = "The MQTT broker's port (8883: MQTT over TLS)."
}

variable "database_url" {
  type        = string
  description = "FRAMEFLEET_DATABASE_URL without the password (the database module's output)."
}

variable "database_secret_arn" {
  type        = string
  description = "The Secrets Manager secret with the database password (JSON key `password`)."
}

variable "broker_admin_secret_arn" {
  type        = string
  description = "Secrets Manager secret: the broker admin's password (the autoscaler's; the broker module's admin_secret_arn)."
}

variable "control_plane_broker_secret_arn" {
  type        = string
  description = "Secrets Manager secret: the control plane's broker password (the autoscaler sets it on the broker)."
}

variable "control_plane_role_arn" {
  type        = string
  description = "The control plane's task role (iam module)."
}

variable "autoscaler_role_arn" {
  type        = string
  description = "The autoscaler's task role (iam module)."
}

variable "settings" {
  type        = map(string)
  description = "FRAMEFLEET_* environment variables both processes read (queues, fleet, costs)."
}

variable "metrics_port" {
  type        = number
  default     = 9100
  description = "Each process's /metrics, /healthz and /readyz port."
}

variable "replicas" {
  type        = number
  default     = 2
  description = "Tasks of each process: one leads (the lease in the database), the others stand by."
}

variable "api_port" {
  type        = number
  default     = 8080
  description = "The control plane's HTTP API and web console port (api.port)."
}

variable "api_allowed_cidrs" {
  type        = list(string)
  default     = []
  description = "Networks that may reach the API: put a TLS load balancer or a VPN in front, never the internet."
}

variable "log_retention_days" {
  type        = number
  default     = 365
  description = "Days CloudWatch keeps the services' logs."
}

variable "kms_key_arn" {
  type        = string
  description = "A KMS key for the log group (its key policy must let CloudWatch Logs use it)."
}

variable "metrics_remote_write_url" {
  type        = string
  default     = null
  description = "A Prometheus remote-write URL (modules/alarms' workspace): each task gets a collector that writes its metrics there (null: none)."
}

variable "collector_image" {
  type        = string
  default     = "public.ecr.aws/aws-observability/aws-otel-collector:v0.43.3"
  description = "The metrics collector's image (AWS Distro for OpenTelemetry)."
}

variable "fleet_id" {
  type        = string
  default     = "framefleet"
  description = "The fleet tag (autoscaler.fleet_id) by which the control plane's collector finds the workers to scrape."
}

variable "worker_metrics_port" {
  type        = number
  default     = 9400
  description = "The workers' /metrics port (the worker_fleet module's metrics_port)."
}

variable "api_certificate_arn" {
  type        = string
  default     = null
  description = "An ACM certificate for the API's name: turns on the HTTPS load balancer in front of the API (null: none)."
}

variable "api_load_balancer_internal" {
  type        = bool
  default     = true
  description = "The API load balancer has no public address (reach it over a VPN or peering); false puts it on the internet, in api_load_balancer_subnet_ids."
}

variable "api_load_balancer_subnet_ids" {
  type        = list(string)
  default     = null
  description = "Subnets of the API load balancer, two zones at least (null: subnet_ids; public subnets when not internal)."
}

variable "api_load_balancer_cidrs" {
  type        = list(string)
  default     = null
  description = "Where the API load balancer's nodes have their addresses: the only peers whose X-Forwarded-For names the client (null: vpc_cidr)."
}

variable "api_access_logs_bucket" {
  type        = string
  default     = null
  description = "S3 bucket for the API load balancer's access logs (null: none)."
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "The API load balancer refuses deletion; set false and apply before a destroy."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}

variable "notice_bus_name" {
  type        = string
  default     = null
  description = "The EventBridge bus completion notices go to (the queues module's); null: none."
}

variable "webhook_secret_arn" {
  type        = string
  default     = null
  description = "A Secrets Manager secret (plain text) that signs the webhooks jobs name in `notify` (HMAC-SHA256); null: this deployment sends no webhooks and refuses a job that names one."
}

variable "ecs_exec" {
  type        = bool
  default     = true
  description = "ECS Exec into the services' tasks (aws ecs execute-command); the root file system stays read-only, the SSM agent writing to volumes of the task's own."
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
  description = "Single sign-on for the console: the load balancer authenticates people with this OIDC identity provider (authenticate-oidc) and the API maps the group claim to teams (team_groups) or to every team (operator_groups). Needs api_certificate_arn. API tokens keep working; null: the console logs in with a token."
}

variable "console_oidc_client_secret" {
  type        = string
  default     = null
  sensitive   = true
  description = "The identity provider's client secret for console_oidc (the load balancer keeps it)."
}
