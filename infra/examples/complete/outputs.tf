output "settings" {
  value = {
    FRAMEFLEET_REGION                      = var.region
    FRAMEFLEET_JOBS_QUEUE_URL              = module.queues.jobs_queue_url
    FRAMEFLEET_DEAD_LETTER_QUEUE_URL       = module.queues.dead_letter_queue_url
    FRAMEFLEET_INTERRUPTIONS_QUEUE_URL     = module.queues.interruptions_queue_url
    FRAMEFLEET_AUTOSCALER__FLEET_ID        = var.name
    FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATE = module.workers.launch_template_name
    FRAMEFLEET_COSTS__SENDER               = var.report_sender
  }
  description = "The control plane's and autoscaler's settings for this deployment (environment variables)."
}

output "bucket" {
  value       = module.storage.bucket
  description = "Put the model registry at s3://BUCKET/models/registry.json (framefleet-worker publish-model)."
}

output "control_plane_role_arn" {
  value       = module.iam.control_plane_role_arn
  description = "The control plane's task role."
}

output "autoscaler_role_arn" {
  value       = module.iam.autoscaler_role_arn
  description = "The autoscaler's task role."
}

output "producer_policy_arn" {
  value       = module.iam.producer_policy_arn
  description = "Attach to the role of whatever submits jobs."
}

output "alarm_topic_arn" {
  value       = module.alarms.topic_arn
  description = "Where the alarms go."
}
