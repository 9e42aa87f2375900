# The jobs queue with its dead-letter queue, and the interruptions queue that EventBridge fills
# with the EC2 events the control plane acts on. Every queue is encrypted (SSE-SQS).

resource "aws_sqs_queue" "dead_letters" {
  name                      = "${var.name}-dead-letters"
  message_retention_seconds = 1209600 # 14 days: time for a person to look
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue" "jobs" {
  name                       = "${var.name}-jobs"
  visibility_timeout_seconds = var.visibility_timeout_seconds
  receive_wait_time_seconds  = 20
  message_retention_seconds  = 1209600
  max_message_size           = 262144
  sqs_managed_sse_enabled    = true
  # The control plane dead-letters bad messages itself, with the reason; this catches a message
  # that crashes every receive.
  redrive_policy = jsonencode({
    deadLetterTargetArn = aws_sqs_queue.dead_letters.arn
    maxReceiveCount     = var.max_receive_count
  })
  tags = var.tags
}

# Only the jobs queue may send its messages here.
resource "aws_sqs_queue_redrive_allow_policy" "dead_letters" {
  count     = var.restrict_dead_letter_sources ? 1 : 0
  queue_url = aws_sqs_queue.dead_letters.id
  redrive_allow_policy = jsonencode({
    redrivePermission = "byQueue"
    sourceQueueArns   = [aws_sqs_queue.jobs.arn]
  })
}

resource "aws_sqs_queue" "interruptions" {
  name                       = "${var.name}-ec2-events"
  visibility_timeout_seconds = 60
  receive_wait_time_seconds  = 20
  message_retention_seconds  = 86400 # an event older than a day describes a gone instance
  sqs_managed_sse_enabled    = true
  tags                       = var.tags
}

locals {
  # The events the control plane reads (orchestrator/interruptions/events.py): three from EC2,
  # and AWS Health's scheduled changes to EC2 (a retirement or maintenance of the host under
  # an instance, which spot and on-demand instances alike get), acted on like a rebalance.
  ec2_events = {
    spot-warning = { source = "aws.ec2", detail-type = "EC2 Spot Instance Interruption Warning", detail = null }
    rebalance    = { source = "aws.ec2", detail-type = "EC2 Instance Rebalance Recommendation", detail = null }
    state-change = { source = "aws.ec2", detail-type = "EC2 Instance State-change Notification", detail = null }
    scheduled-change = {
      source      = "aws.health"
      detail-type = "AWS Health Event"
      detail      = { service = ["EC2"], eventTypeCategory = ["scheduledChange"] }
    }
  }
}

resource "aws_cloudwatch_event_rule" "ec2" {
  for_each    = local.ec2_events
  name        = "${var.name}-${each.key}"
  description = "${each.value.detail-type} (${each.key}) to the FrameFleet interruptions queue"
  event_pattern = jsonencode(merge(
    { source = [each.value.source], "detail-type" = [each.value.detail-type] },
    each.value.detail == null ? {} : { detail = each.value.detail },
  ))
  tags = var.tags
}

resource "aws_cloudwatch_event_target" "ec2" {
  for_each = aws_cloudwatch_event_rule.ec2
  rule     = each.value.name
  arn      = aws_sqs_queue.interruptions.arn
}

# EventBridge may send to the interruptions queue, and only for these rules.
data "aws_iam_policy_document" "interruptions" {
  statement {
    sid       = "EventBridgeRules"
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.interruptions.arn]
    principals {
      type        = "Service"
      identifiers = ["events.amazonaws.com"]
    }
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [for rule in aws_cloudwatch_event_rule.ec2 : rule.arn]
    }
  }
}

resource "aws_sqs_queue_policy" "interruptions" {
  queue_url = aws_sqs_queue.interruptions.id
  policy    = data.aws_iam_policy_document.interruptions.json
}

# Completion notices (README, "Completion notices"): the control plane puts every job's end,
# interruption and resume here (source `framefleet`); a rule of the operator's routes them on
# (a queue, a Lambda, an SNS topic).
resource "aws_cloudwatch_event_bus" "notices" {
  name = "${var.name}-notices"
  tags = var.tags
}
