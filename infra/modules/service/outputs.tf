output "security_group_id" {
  value       = aws_security_group.services.id
  description = "The services' security group (the database admits it)."
}

output "cluster_name" {
  value       = aws_ecs_cluster.this.name
  description = "The ECS cluster."
}

output "log_group" {
  value       = aws_cloudwatch_log_group.this.name
  description = "Where both processes log."
}

output "cluster_arn" {
  value       = aws_ecs_cluster.this.arn
  description = "The ECS cluster (the broker runs in it too)."
}

output "execution_role_arn" {
  value       = aws_iam_role.execution.arn
  description = "The execution role (image pull, logs, the database and broker secrets); the broker task runs with it too."
}

output "first_token_secret_arn" {
  value       = aws_secretsmanager_secret.first_token.arn
  description = "Where `framefleet tokens create --into-secret` writes the first API token."
}

output "api_load_balancer_dns_name" {
  value       = local.api_load_balancer ? aws_lb.api[0].dns_name : null
  description = "The API's HTTPS address (point the certificate's name here); null without api_certificate_arn."
}
