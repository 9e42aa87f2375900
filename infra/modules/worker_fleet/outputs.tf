output "launch_template_name" {
  value       = aws_launch_template.worker.name
  description = "The launch template the autoscaler launches from (autoscaler.launch_template)."
}

output "launch_template_arn" {
  value       = aws_launch_template.worker.arn
  description = "The launch template's ARN, for the autoscaler's policy."
}

output "worker_role_arn" {
  value       = aws_iam_role.worker.arn
  description = "The workers' role: the only role the autoscaler may pass."
}

output "security_group_id" {
  value       = aws_security_group.worker.id
  description = "The workers' security group (no inbound rule)."
}
