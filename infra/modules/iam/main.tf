# The control plane's and the autoscaler's roles, each with only what its code calls (the
# README's IAM table lists every action and the code behind it). Both run as ECS tasks.
# Two roles, not one: the control plane never touches EC2, and the autoscaler never reads a job
# message or sends email.

data "aws_iam_policy_document" "assume_ecs_task" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# -- the control plane: SQS intake and dead letters, EC2 events, finance email -------------

resource "aws_iam_role" "control_plane" {
  name               = "${var.name}-control-plane"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_task.json
  tags               = var.tags
}

data "aws_iam_policy_document" "control_plane" {
  statement {
    sid = "ConsumeJobsAndEvents" # orchestrator/aws/sqs.py: SqsQueue
    actions = [
      "sqs:ReceiveMessage",
      "sqs:DeleteMessage",
      "sqs:ChangeMessageVisibility",
      "sqs:GetQueueAttributes",
    ]
    resources = [var.jobs_queue_arn, var.interruptions_queue_arn]
  }
  statement {
    # SqsDeadLetterQueue.send; queue_depth for the metric; `framefleet dead-letters` peeks
    # (receives, then makes visible again).
    sid = "DeadLetters"
    actions = [
      "sqs:SendMessage",
      "sqs:GetQueueAttributes",
      "sqs:ReceiveMessage",
      "sqs:ChangeMessageVisibility",
    ]
    resources = [var.dead_letter_queue_arn]
  }
  statement {
    sid       = "FinanceReports" # orchestrator/aws/ses.py: SesSender.send_raw
    actions   = ["ses:SendRawEmail"]
    resources = [var.ses_identity_arn]
  }
  statement {
    # The API's links to finished videos are presigned with this role's credentials: S3
    # checks them against this role when the link is followed (framefleet/api_server.py).
    sid       = "PresignedVideoLinks"
    actions   = ["s3:GetObject"]
    resources = [var.video_objects_arn]
  }
}

resource "aws_iam_role_policy" "control_plane" {
  name   = "${var.name}-control-plane"
  role   = aws_iam_role.control_plane.id
  policy = data.aws_iam_policy_document.control_plane.json
}

# -- the autoscaler: buy, list and end the fleet's instances; read prices ------------------

resource "aws_iam_role" "autoscaler" {
  name               = "${var.name}-autoscaler"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_task.json
  tags               = var.tags
}

data "aws_iam_policy_document" "autoscaler" {
  statement {
    sid = "ReadTheFleetAndTheMarket" # autoscaler/ec2/adapter.py, autoscaler/market/aws_prices.py
    actions = [
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribeSpotPriceHistory",
    ]
    resources = ["*"] # Describe* calls take no resource-level permissions
  }
  statement {
    sid       = "OnDemandPrices" # autoscaler/market/aws_prices.py: the Price List API
    actions   = ["pricing:GetProducts"]
    resources = ["*"]
  }
  statement {
    sid       = "LaunchFromTheWorkerTemplate" # adapter.launch: CreateFleet (instant) or RunInstances
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = var.launch_template_arns
  }
  statement {
    sid     = "LaunchTaggedInstances"
    actions = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = [
      "arn:aws:ec2:*:${var.account_id}:fleet/*",
      "arn:aws:ec2:*:${var.account_id}:instance/*",
      "arn:aws:ec2:*:${var.account_id}:volume/*",
      "arn:aws:ec2:*:${var.account_id}:network-interface/*",
      "arn:aws:ec2:*:${var.account_id}:spot-instances-request/*",
      "arn:aws:ec2:*:${var.account_id}:subnet/*",
      "arn:aws:ec2:*:${var.account_id}:security-group/*",
      "arn:aws:ec2:*::image/*",
    ]
  }
  statement {
    sid       = "TagAtLaunchOnly"
    actions   = ["ec2:CreateTags"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["CreateFleet", "RunInstances"]
    }
  }
  statement {
    sid       = "EndOnlyTheFleetsInstances" # adapter.terminate
    actions   = ["ec2:TerminateInstances"]
    resources = ["arn:aws:ec2:*:${var.account_id}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/framefleet:fleet"
      values   = [var.fleet_id]
    }
  }
  statement {
    sid       = "PassOnlyTheWorkerRole" # the launch template's instance profile
    actions   = ["iam:PassRole"]
    resources = [var.worker_role_arn]
    condition {
      test     = "StringEquals"
      variable = "iam:PassedToService"
      values   = ["ec2.amazonaws.com"]
    }
  }
  statement {
    # autoscaler/credentials/ssm.py: each instance's broker password, tagged with its ARN
    # (AddTagsToResource: SSM checks it for the tags PutParameter carries).
    sid       = "WorkerBrokerPasswords"
    actions   = ["ssm:PutParameter", "ssm:GetParameter", "ssm:DeleteParameter", "ssm:AddTagsToResource"]
    resources = ["arn:aws:ssm:*:${var.account_id}:parameter${var.worker_credentials_path}/*"]
  }
  statement {
    sid       = "SpotServiceLinkedRoles" # created once per account by EC2 Fleet and Spot
    actions   = ["iam:CreateServiceLinkedRole"]
    resources = ["*"]
    condition {
      test     = "StringEquals"
      variable = "iam:AWSServiceName"
      values   = ["spot.amazonaws.com", "ec2fleet.amazonaws.com"]
    }
  }
}

resource "aws_iam_role_policy" "autoscaler" {
  name   = "${var.name}-autoscaler"
  role   = aws_iam_role.autoscaler.id
  policy = data.aws_iam_policy_document.autoscaler.json
}

# -- producers: may send jobs, nothing else ------------------------------------------------

data "aws_iam_policy_document" "producer" {
  statement {
    sid       = "SubmitJobs" # orchestrator/client.py: submit_job
    actions   = ["sqs:SendMessage"]
    resources = [var.jobs_queue_arn]
  }
}

resource "aws_iam_policy" "producer" {
  name        = "${var.name}-producer"
  description = "Send FrameFleet jobs to the jobs queue (attach to a producer's role)"
  policy      = data.aws_iam_policy_document.producer.json
  tags        = var.tags
}
