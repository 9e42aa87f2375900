output "jobs_queue_url" {
  value       = aws_sqs_queue.jobs.id
  description = "The jobs queue: producers send here (FRAMEFLEET_JOBS_QUEUE_URL)."
}

output "jobs_queue_arn" {
  value       = aws_sqs_queue.jobs.arn
  description = "The jobs queue's ARN, for IAM policies."
}

output "dead_letter_queue_url" {
  value       = aws_sqs_queue.dead_letters.id
  description = "The dead-letter queue (FRAMEFLEET_DEAD_LETTER_QUEUE_URL)."
}

output "dead_letter_queue_arn" {
  value       = aws_sqs_queue.dead_letters.arn
  description = "The dead-letter queue's ARN, for IAM policies."
}

output "dead_letter_queue_name" {
  value       = aws_sqs_queue.dead_letters.name
  description = "The dead-letter queue's name, for its CloudWatch alarm."
}

output "jobs_queue_name" {
  value       = aws_sqs_queue.jobs.name
  description = "The jobs queue's name, for its CloudWatch alarm."
}

output "interruptions_queue_url" {
  value       = aws_sqs_queue.interruptions.id
  description = "The EC2 events queue (FRAMEFLEET_INTERRUPTIONS_QUEUE_URL)."
}

output "interruptions_queue_arn" {
  value       = aws_sqs_queue.interruptions.arn
  description = "The EC2 events queue's ARN, for IAM policies."
}

output "notice_bus_name" {
  value       = aws_cloudwatch_event_bus.notices.name
  description = "The EventBridge bus of completion notices (notices.event_bus)."
}

output "notice_bus_arn" {
  value       = aws_cloudwatch_event_bus.notices.arn
  description = "The bus's ARN, for the control plane's events:PutEvents and the rules that route notices."
}
