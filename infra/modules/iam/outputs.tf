output "control_plane_role_arn" {
  value       = aws_iam_role.control_plane.arn
  description = "The control plane's task role."
}

output "autoscaler_role_arn" {
  value       = aws_iam_role.autoscaler.arn
  description = "The autoscaler's task role."
}

output "producer_policy_arn" {
  value       = aws_iam_policy.producer.arn
  description = "A policy to attach to whatever submits jobs."
}
