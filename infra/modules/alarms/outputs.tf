output "topic_arn" {
  value       = aws_sns_topic.alarms.arn
  description = "The alarm topic (also Alertmanager's SNS receiver for the Prometheus rules)."
}
