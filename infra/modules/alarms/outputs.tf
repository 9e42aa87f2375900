output "topic_arn" {
  value       = aws_sns_topic.alarms.arn
  description = "The alarm topic (also Alertmanager's SNS receiver for the Prometheus rules)."
}

output "prometheus_workspace_arn" {
  value       = aws_prometheus_workspace.this.arn
  description = "The workspace the collectors write to (aps:RemoteWrite)."
}

output "prometheus_remote_write_url" {
  value       = "${aws_prometheus_workspace.this.prometheus_endpoint}api/v1/remote_write"
  description = "Where the services' collector sidecars write their metrics."
}
