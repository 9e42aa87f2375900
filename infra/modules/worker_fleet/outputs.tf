output "launch_template_name" {
  value       = aws_launch_template.worker[""].name
  description = "The default launch template (autoscaler.launch_template)."
}

output "family_launch_templates" {
  value       = { for family, template in aws_launch_template.worker : family => template.name if family != "" }
  description = "GPU family to its launch template (autoscaler.launch_templates)."
}

output "launch_template_arns" {
  value       = [for template in aws_launch_template.worker : template.arn]
  description = "Every launch template's ARN, for the autoscaler's policy."
}

output "worker_role_arn" {
  value       = aws_iam_role.worker.arn
  description = "The workers' role: the only role the autoscaler may pass."
}

output "security_group_id" {
  value       = aws_security_group.worker.id
  description = "The workers' security group (no inbound rule)."
}
