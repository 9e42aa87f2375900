variable "name" {
  type        = string
  description = "Prefix of every queue and rule name (the deployment's name)."
}

variable "visibility_timeout_seconds" {
  type        = number
  default     = 60
  description = "The jobs queue's visibility timeout; the intake extends it while a batch is slow (intake.visibility_timeout)."
}

variable "max_receive_count" {
  type        = number
  default     = 5
  description = "Receives of one jobs-queue message before SQS moves it to the dead-letter queue."
}

variable "restrict_dead_letter_sources" {
  type        = bool
  default     = true
  description = "Let only the jobs queue use the dead-letter queue (its redrive allow policy). Off only where the endpoint lacks the attribute (the deploy rehearsal's moto)."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}
