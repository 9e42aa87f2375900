variable "name" {
  type        = string
  description = "Prefix of the topic and alarm names."
}

variable "jobs_queue_name" {
  type        = string
  description = "The jobs queue's name."
}

variable "dead_letter_queue_name" {
  type        = string
  description = "The dead-letter queue's name."
}

variable "oldest_job_seconds" {
  type        = number
  default     = 600
  description = "Alarm when a job message waits in SQS longer than this (the intake takes one in seconds)."
}

variable "alarm_emails" {
  type        = list(string)
  default     = []
  description = "Addresses subscribed to the alarm topic (each confirms by email)."
}

variable "rules_file" {
  type        = string
  default     = null
  description = "The Prometheus rules the workspace runs (null: the shipped infra/alerts/framefleet.rules.yml)."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}
