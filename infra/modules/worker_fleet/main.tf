# The workers: their IAM role and instance profile, a security group that admits only the metrics
# scraper, and the launch templates the autoscaler launches from: the default one
# (autoscaler.launch_template) and one per GPU family given an image of its own
# (autoscaler.launch_templates); the autoscaler sets the instance type and subnet per pool. Each
# template carries its image, IMDSv2 only with hop limit 2, an encrypted root volume, and user data
# that writes the agent's settings and starts it.

data "aws_iam_policy_document" "assume_ec2" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "worker" {
  name               = "${var.name}-worker"
  assume_role_policy = data.aws_iam_policy_document.assume_ec2.json
  tags               = var.tags
}

# What the agent calls (worker_ami/agent/object_store.py, model_cache.py, checkpoint.py) and
# what its user data reads: the bucket's objects and the instance's own broker password.
data "aws_iam_policy_document" "worker" {
  statement {
    sid       = "ListTheBucket"
    actions   = ["s3:ListBucket"]
    resources = [var.bucket_arn]
  }
  statement {
    sid = "ModelsCheckpointsOutputs"
    actions = [
      "s3:GetObject",
      "s3:PutObject",
      "s3:DeleteObject",
      "s3:AbortMultipartUpload",
    ]
    resources = ["${var.bucket_arn}/*"]
  }
  statement {
    # The autoscaler tags each password with its instance's ARN; an instance reads only the
    # parameter whose tag is its own ARN, so no worker can log in as another.
    sid       = "OwnBrokerPassword"
    actions   = ["ssm:GetParameter"]
    resources = ["arn:aws:ssm:${var.region}:${var.account_id}:parameter${var.credentials_path}/*"]
    condition {
      test     = "StringEquals"
      variable = "aws:ResourceTag/framefleet-instance"
      values   = ["$${ec2:SourceInstanceARN}"]
    }
  }
}

resource "aws_iam_role_policy" "worker" {
  name   = "${var.name}-worker"
  role   = aws_iam_role.worker.id
  policy = data.aws_iam_policy_document.worker.json
}

resource "aws_iam_instance_profile" "worker" {
  name = "${var.name}-worker"
  role = aws_iam_role.worker.name
  tags = var.tags
}

# Workers connect out (broker, S3, IMDS); nothing connects in.
resource "aws_security_group" "worker" {
  name        = "${var.name}-worker"
  description = "FrameFleet GPU workers: inbound only to the agent metrics, outbound to the broker, S3 and AWS APIs"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_egress_rule" "https" {
  security_group_id = aws_security_group.worker.id
  description       = "AWS APIs, S3 and package mirrors over TLS"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "broker" {
  security_group_id = aws_security_group.worker.id
  description       = "The MQTT broker"
  ip_protocol       = "tcp"
  from_port         = var.broker_port
  to_port           = var.broker_port
  cidr_ipv4         = var.broker_cidr
}

# The control plane's metrics collector scrapes each worker's /metrics (modules/service).
resource "aws_vpc_security_group_ingress_rule" "metrics" {
  count             = var.metrics_cidr == null ? 0 : 1
  security_group_id = aws_security_group.worker.id
  description       = "The worker agent's /metrics, from the metrics collector"
  ip_protocol       = "tcp"
  from_port         = var.metrics_port
  to_port           = var.metrics_port
  cidr_ipv4         = var.metrics_cidr
}

locals {
  # The default template (key ""), and one per GPU family with an image of its own.
  images = merge({ "" = var.worker_ami_id }, var.family_ami_ids)
}

resource "aws_launch_template" "worker" {
  # checkov:skip=CKV_AWS_341: hop limit 2 lets the agent reach IMDSv2 from a container too; tokens are still required
  for_each    = local.images
  name        = each.key == "" ? var.launch_template_name : "${var.launch_template_name}-${each.key}"
  description = "FrameFleet GPU worker${each.key == "" ? "" : " (${each.key})"}: the autoscaler picks the instance type per launch"
  image_id    = each.value
  iam_instance_profile {
    arn = aws_iam_instance_profile.worker.arn
  }
  vpc_security_group_ids = [aws_security_group.worker.id]
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
    instance_metadata_tags      = "enabled"
  }
  block_device_mappings {
    device_name = "/dev/sda1"
    ebs {
      volume_size           = var.root_volume_gib
      volume_type           = "gp3"
      encrypted             = true
      delete_on_termination = true
    }
  }
  monitoring {
    enabled = true
  }
  user_data = base64encode(templatefile("${path.module}/user-data.sh.tftpl", {
    region                  = var.region
    broker_host             = var.broker_host
    broker_port             = var.broker_port
    broker_tls              = var.broker_tls
    credentials_path        = var.credentials_path
    checkpoint_bucket       = var.bucket
    model_registry          = var.model_registry_uri
    warm_models             = join(" ", var.warm_models)
    max_checkpoint_interval = var.max_checkpoint_interval_seconds
    metrics_port            = var.metrics_port
    jobs_per_gpu            = var.jobs_per_gpu
    mig_slots               = var.mig_slots
  }))
  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { "framefleet:fleet" = var.fleet_id })
  }
  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, { "framefleet:fleet" = var.fleet_id })
  }
  tags = var.tags
}
