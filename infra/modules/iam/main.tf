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
    # framefleet/tokens_cli.py through orchestrator/aws/secrets.py: the deployment's first API
    # token, written by a one-off task into the secret the service module makes.
    sid       = "FirstApiToken"
    actions   = ["secretsmanager:PutSecretValue"]
    resources = ["arn:aws:secretsmanager:*:${var.account_id}:secret:${var.name}/api-first-token-*"]
  }
  statement {
    # The API's links to finished videos are presigned with this role's credentials: S3
    # checks them against this role when the link is followed (framefleet/api_server.py).
    sid       = "PresignedVideoLinks"
    actions   = ["s3:GetObject"]
    resources = [var.video_objects_arn]
  }
  statement {
    # orchestrator/notices/eventbridge.py: each job's end (and interruptions, resumes) on the
    # deployment's bus.
    sid       = "CompletionNotices"
    actions   = ["events:PutEvents"]
    resources = [var.notice_bus_arn]
  }
  statement {
    # orchestrator/aws/model_registry.py: the model registry and each published model's
    # manifest (its weights' sizes), read at the model door.
    sid       = "ReadTheModelRegistry"
    actions   = ["s3:GetObject"]
    resources = [var.model_objects_arn]
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
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeLaunchTemplates",
      "ec2:DescribeSpotPriceHistory",
    ]
    resources = ["*"] # Describe* calls take no resource-level permissions
  }
  statement {
    # autoscaler/market/aws_quotas.py: the account's G/VT and P vCPU quotas, to plan within.
    sid       = "ReadTheEc2Quotas"
    actions   = ["servicequotas:GetServiceQuota"]
    resources = ["arn:aws:servicequotas:*:${var.account_id}:ec2/*"]
  }
  statement {
    sid       = "ReadTheEc2QuotaDefaults" # a quota never changed: its AWS default
    actions   = ["servicequotas:GetAWSDefaultServiceQuota"]
    resources = ["*"] # takes no resource-level permissions
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
    # As Karpenter scopes its launches: an instance may be made only when the request itself
    # carries this fleet's tag (adapter._tags), so the role cannot launch untagged instances
    # it could then never see or end.
    sid       = "LaunchOnlyFleetTaggedInstances"
    actions   = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = ["arn:aws:ec2:*:${var.account_id}:instance/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/framefleet:fleet"
      values   = [var.fleet_id]
    }
  }
  statement {
    sid     = "LaunchTaggedInstances"
    actions = ["ec2:CreateFleet", "ec2:RunInstances"]
    resources = [
      "arn:aws:ec2:*:${var.account_id}:fleet/*",
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

# -- the services' metrics collectors (modules/service): not FrameFleet's code, so kept apart
# from the policies above, which tests/support/iam_check.py holds to the code's calls.

data "aws_iam_policy_document" "ship_metrics" {
  count = var.ship_metrics ? 1 : 0
  statement {
    sid       = "WriteMetrics"
    actions   = ["aps:RemoteWrite"]
    resources = [var.prometheus_workspace_arn]
  }
  statement {
    # EC2 discovery of the workers to scrape (the control plane's collector); a Describe
    # action takes no resource but "*".
    sid       = "FindWorkers"
    actions   = ["ec2:DescribeInstances"]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "ship_metrics" {
  for_each = !var.ship_metrics ? {} : {
    control-plane = aws_iam_role.control_plane.id
    autoscaler    = aws_iam_role.autoscaler.id
  }
  name   = "${var.name}-${each.key}-metrics"
  role   = each.value
  policy = data.aws_iam_policy_document.ship_metrics[0].json
}

# ECS Exec (`aws ecs execute-command`): the SSM agent ECS puts in each task opens its channels
# with the task's role. Operators need ecs:ExecuteCommand on the cluster in their own policy.
data "aws_iam_policy_document" "ecs_exec" {
  # checkov:skip=CKV_AWS_356: the SSM message channels take no resource-level permissions
  # checkov:skip=CKV_AWS_111: the SSM message channels take no resource-level permissions
  statement {
    sid = "EcsExecChannels"
    actions = [
      "ssmmessages:CreateControlChannel",
      "ssmmessages:CreateDataChannel",
      "ssmmessages:OpenControlChannel",
      "ssmmessages:OpenDataChannel",
    ]
    resources = ["*"]
  }
}

resource "aws_iam_role_policy" "ecs_exec" {
  for_each = var.ecs_exec ? {
    control-plane = aws_iam_role.control_plane.id
    autoscaler    = aws_iam_role.autoscaler.id
  } : {}
  name   = "${var.name}-${each.key}-ecs-exec"
  role   = each.value
  policy = data.aws_iam_policy_document.ecs_exec.json
}
