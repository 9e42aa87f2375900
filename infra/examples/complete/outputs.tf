output "framefleet" {
  description = "Every output of the module (queue URLs, bucket, roles, load balancers, cluster, bus): infra/modules/framefleet/README.md"
  value       = module.framefleet
}

output "jobs_queue_url" {
  description = "Where producers send jobs (the deploy steps' step 8)."
  value       = module.framefleet.jobs_queue_url
}

output "cluster" {
  description = "The ECS cluster (step 7's one-off task)."
  value       = module.framefleet.cluster
}

output "first_token_secret_arn" {
  description = "The secret the first API token goes into (step 7)."
  value       = module.framefleet.first_token_secret_arn
}

output "broker_load_balancer" {
  description = "The broker's load balancer: point broker_domain at it (step 4)."
  value       = module.framefleet.broker_load_balancer
}
