# Alerts that reach a person, all through one SNS topic:
# - CloudWatch alarms on what AWS measures itself: the dead-letter queue is not empty, the
#   oldest job message waits too long;
# - the shipped Prometheus rules (infra/alerts/framefleet.rules.yml, the file itself) in an
#   Amazon Managed Service for Prometheus workspace, whose alert manager publishes to the topic.
#   The services' collector sidecars (modules/service) write their /metrics there.
# The topic is encrypted with a key of its own: CloudWatch and the alert manager cannot publish
# to a topic under the AWS-managed SNS key, whose policy no one can extend.

data "aws_caller_identity" "current" {}

data "aws_region" "current" {}

data "aws_iam_policy_document" "topic_key" {
  # checkov:skip=CKV_AWS_111: a key policy's "*" resource is the key itself
  # checkov:skip=CKV_AWS_356: a key policy's "*" resource is the key itself
  # checkov:skip=CKV_AWS_109: the account administers its own key, as AWS's default key policy does
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"]
    principals {
      type        = "AWS"
      identifiers = ["arn:aws:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }
  statement {
    sid       = "PublishersUseTheKey"
    actions   = ["kms:Decrypt", "kms:GenerateDataKey*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com", "aps.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

resource "aws_kms_key" "topic" {
  description         = "FrameFleet ${var.name}: the alarm topic"
  enable_key_rotation = true
  policy              = data.aws_iam_policy_document.topic_key.json
  tags                = var.tags
}

resource "aws_sns_topic" "alarms" {
  name              = "${var.name}-alarms"
  kms_master_key_id = aws_kms_key.topic.arn
  tags              = var.tags
}

# Who may publish: the account's CloudWatch alarms and this workspace's alert manager.
data "aws_iam_policy_document" "topic" {
  statement {
    sid     = "CloudWatchAlarmsPublish"
    actions = ["sns:Publish"]
    principals {
      type        = "Service"
      identifiers = ["cloudwatch.amazonaws.com"]
    }
    resources = [aws_sns_topic.alarms.arn]
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
  statement {
    sid     = "PrometheusAlertManagerPublishes"
    actions = ["sns:Publish", "sns:GetTopicAttributes"]
    principals {
      type        = "Service"
      identifiers = ["aps.amazonaws.com"]
    }
    resources = [aws_sns_topic.alarms.arn]
    condition {
      test     = "ArnEquals"
      variable = "aws:SourceArn"
      values   = [aws_prometheus_workspace.this.arn]
    }
  }
}

resource "aws_sns_topic_policy" "alarms" {
  arn    = aws_sns_topic.alarms.arn
  policy = data.aws_iam_policy_document.topic.json
}

# -- the Prometheus rules, as shipped -------------------------------------------------------

resource "aws_prometheus_workspace" "this" {
  alias = var.name
  tags  = var.tags
}

resource "aws_prometheus_rule_group_namespace" "framefleet" {
  name         = "framefleet"
  workspace_id = aws_prometheus_workspace.this.id
  data         = file(coalesce(var.rules_file, "${path.module}/../../alerts/framefleet.rules.yml"))
}

resource "aws_prometheus_alert_manager_definition" "this" {
  workspace_id = aws_prometheus_workspace.this.id
  definition = yamlencode({
    alertmanager_config = yamlencode({
      route = { receiver = "alarm-topic", group_by = ["alertname"] }
      receivers = [{
        name = "alarm-topic"
        sns_configs = [{
          topic_arn = aws_sns_topic.alarms.arn
          sigv4     = { region = data.aws_region.current.name }
          subject   = "FrameFleet ${var.name}: {{ .CommonLabels.alertname }}"
        }]
      }]
    })
  })
}

resource "aws_sns_topic_subscription" "email" {
  for_each  = toset(var.alarm_emails)
  topic_arn = aws_sns_topic.alarms.arn
  protocol  = "email"
  endpoint  = each.value
}

resource "aws_cloudwatch_metric_alarm" "dead_letters" {
  alarm_name          = "${var.name}-dead-letters"
  alarm_description   = "Messages in the FrameFleet dead-letter queue: `framefleet dead-letters` lists them with their reasons."
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateNumberOfMessagesVisible"
  dimensions          = { QueueName = var.dead_letter_queue_name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = 0
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
  tags                = var.tags
}

resource "aws_cloudwatch_metric_alarm" "oldest_job" {
  alarm_name          = "${var.name}-oldest-job"
  alarm_description   = "A job message has waited in the jobs queue for over ${var.oldest_job_seconds} s: is the control plane running?"
  namespace           = "AWS/SQS"
  metric_name         = "ApproximateAgeOfOldestMessage"
  dimensions          = { QueueName = var.jobs_queue_name }
  statistic           = "Maximum"
  period              = 300
  evaluation_periods  = 1
  threshold           = var.oldest_job_seconds
  comparison_operator = "GreaterThanThreshold"
  treat_missing_data  = "notBreaching"
  alarm_actions       = [aws_sns_topic.alarms.arn]
  ok_actions          = [aws_sns_topic.alarms.arn]
  tags                = var.tags
}
