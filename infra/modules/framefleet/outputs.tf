output "jobs_queue_url" {
  value       = module.queues.jobs_queue_url
  description = "Where producers send jobs (framefleet submit, or orchestrator.client.submit_job)."
}

output "dead_letter_queue_url" {
  value       = module.queues.dead_letter_queue_url
  description = "Refused messages, with their reasons (framefleet dead-letters)."
}

output "log_group" {
  value       = module.service.log_group
  description = "The control plane's and autoscaler's logs."
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

output "broker_load_balancer" {
  value       = module.broker.load_balancer_dns_name
  description = "Point broker_domain here if broker_zone_id was not given."
}

output "first_token_secret_arn" {
  value       = module.service.first_token_secret_arn
  description = "Where the first API token goes (README, Deploy steps: framefleet tokens create --into-secret)."
}

output "api_load_balancer_dns_name" {
  value       = module.service.api_load_balancer_dns_name
  description = "The API's HTTPS address, with api_certificate_arn."
}

output "cluster" {
  value       = module.service.cluster_arn
  description = "The ECS cluster (aws ecs run-task --cluster)."
}

output "notice_bus_name" {
  value       = module.queues.notice_bus_name
  description = "The EventBridge bus of completion notices: add a rule on it to route them (source framefleet)."
}
