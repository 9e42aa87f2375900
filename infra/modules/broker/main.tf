# The MQTT broker: Mosquitto 2 with the dynamic-security plugin (the image in infra/mosquitto)
# as one ECS Fargate task, its accounts and sessions on encrypted EFS, behind an internal
# network load balancer that ends TLS on 8883 with an ACM certificate for `domain_name`.
# Every client logs in with an account of its own: the autoscaler (the plugin's admin, made
# on first start from its secret), the control plane and each worker instance (both made by
# the autoscaler). Why self-managed and not AWS IoT Core: README, "The broker".

resource "aws_security_group" "load_balancer" {
  name        = "${var.name}-broker-lb"
  description = "FrameFleet broker load balancer: MQTT over TLS from the VPC"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "mqtt_tls" {
  security_group_id = aws_security_group.load_balancer.id
  description       = "MQTT over TLS from the workers and the services"
  ip_protocol       = "tcp"
  from_port         = 8883
  to_port           = 8883
  cidr_ipv4         = var.vpc_cidr
}

resource "aws_vpc_security_group_egress_rule" "to_broker" {
  security_group_id            = aws_security_group.load_balancer.id
  description                  = "To the broker task"
  ip_protocol                  = "tcp"
  from_port                    = 1883
  to_port                      = 1883
  referenced_security_group_id = aws_security_group.broker.id
}

resource "aws_security_group" "broker" {
  name        = "${var.name}-broker"
  description = "FrameFleet broker task: MQTT from the load balancer only"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "from_load_balancer" {
  security_group_id            = aws_security_group.broker.id
  description                  = "MQTT from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = 1883
  to_port                      = 1883
  referenced_security_group_id = aws_security_group.load_balancer.id
}

resource "aws_vpc_security_group_egress_rule" "broker_https" {
  security_group_id = aws_security_group.broker.id
  description       = "ECR, CloudWatch Logs and Secrets Manager over TLS"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "broker_nfs" {
  security_group_id            = aws_security_group.broker.id
  description                  = "Its data on EFS"
  ip_protocol                  = "tcp"
  from_port                    = 2049
  to_port                      = 2049
  referenced_security_group_id = aws_security_group.data.id
}

resource "aws_security_group" "data" {
  name        = "${var.name}-broker-data"
  description = "FrameFleet broker data (EFS): NFS from the broker task only"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "nfs" {
  security_group_id            = aws_security_group.data.id
  description                  = "NFS from the broker task"
  ip_protocol                  = "tcp"
  from_port                    = 2049
  to_port                      = 2049
  referenced_security_group_id = aws_security_group.broker.id
}

# -- data: the plugin's accounts file, persistent sessions and retained messages -----------

resource "aws_efs_file_system" "data" {
  creation_token = "${var.name}-broker"
  encrypted      = true
  kms_key_id     = var.kms_key_arn
  tags           = merge(var.tags, { Name = "${var.name}-broker" })
}

resource "aws_efs_backup_policy" "data" {
  count          = var.data_backups ? 1 : 0
  file_system_id = aws_efs_file_system.data.id
  backup_policy {
    status = "ENABLED"
  }
}

resource "aws_efs_mount_target" "data" {
  for_each        = toset(var.subnet_ids)
  file_system_id  = aws_efs_file_system.data.id
  subnet_id       = each.value
  security_groups = [aws_security_group.data.id]
}

# The image's mosquitto user (uid and gid 1883) owns the folder.
resource "aws_efs_access_point" "data" {
  file_system_id = aws_efs_file_system.data.id
  posix_user {
    uid = 1883
    gid = 1883
  }
  root_directory {
    path = "/mosquitto"
    creation_info {
      owner_uid   = 1883
      owner_gid   = 1883
      permissions = "0700"
    }
  }
  tags = var.tags
}

# -- the task ------------------------------------------------------------------------------

data "aws_iam_policy_document" "assume_ecs_task" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

# The task's own role: mount and write its access point, nothing else.
resource "aws_iam_role" "task" {
  name               = "${var.name}-broker"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_task.json
  tags               = var.tags
}

data "aws_iam_policy_document" "task" {
  statement {
    sid       = "MountItsData"
    actions   = ["elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite"]
    resources = [aws_efs_file_system.data.arn]
    condition {
      test     = "StringEquals"
      variable = "elasticfilesystem:AccessPointArn"
      values   = [aws_efs_access_point.data.arn]
    }
  }
}

resource "aws_iam_role_policy" "task" {
  name   = "${var.name}-broker"
  role   = aws_iam_role.task.id
  policy = data.aws_iam_policy_document.task.json
}

resource "aws_ecs_task_definition" "broker" {
  family                   = "${var.name}-broker"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  execution_role_arn       = var.execution_role_arn
  task_role_arn            = aws_iam_role.task.arn
  volume {
    name = "data"
    efs_volume_configuration {
      file_system_id     = aws_efs_file_system.data.id
      transit_encryption = "ENABLED"
      authorization_config {
        access_point_id = aws_efs_access_point.data.id
        iam             = "ENABLED"
      }
    }
  }
  container_definitions = jsonencode([{
    name                   = "broker"
    image                  = var.image
    essential              = true
    readonlyRootFilesystem = true
    portMappings           = [{ containerPort = 1883, protocol = "tcp" }]
    mountPoints            = [{ sourceVolume = "data", containerPath = "/mosquitto/data" }]
    secrets                = [{ name = "FRAMEFLEET_BROKER_ADMIN_PASSWORD", valueFrom = var.admin_secret_arn }]
    ulimits                = [{ name = "nofile", softLimit = 65536, hardLimit = 65536 }]
    logConfiguration = {
      logDriver = "awslogs"
      options = {
        awslogs-group         = var.log_group
        awslogs-region        = var.region
        awslogs-stream-prefix = "broker"
      }
    }
  }])
  tags = var.tags
}

resource "aws_ecs_service" "broker" {
  name            = "broker"
  cluster         = var.cluster_arn
  task_definition = aws_ecs_task_definition.broker.arn
  desired_count   = 1
  launch_type     = "FARGATE"
  # One broker owns the accounts file at a time; clients reconnect across a replacement.
  deployment_maximum_percent         = 100
  deployment_minimum_healthy_percent = 0
  # A deployment whose tasks never become healthy stops and rolls back to the last one that did.
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }
  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.broker.id]
    assign_public_ip = false
  }
  load_balancer {
    target_group_arn = aws_lb_target_group.broker.arn
    container_name   = "broker"
    container_port   = 1883
  }
  depends_on = [aws_lb_listener.mqtt_tls, aws_efs_mount_target.data]
  tags       = var.tags
}

# -- TLS in front --------------------------------------------------------------------------

resource "aws_lb" "broker" {
  name                             = "${var.name}-broker"
  internal                         = true
  load_balancer_type               = "network"
  subnets                          = var.subnet_ids
  security_groups                  = [aws_security_group.load_balancer.id]
  enable_deletion_protection       = var.deletion_protection
  enable_cross_zone_load_balancing = true
  dynamic "access_logs" {
    for_each = var.access_logs_bucket == null ? [] : [var.access_logs_bucket]
    content {
      bucket  = access_logs.value
      prefix  = "${var.name}-broker"
      enabled = true
    }
  }
  tags = var.tags
}

resource "aws_lb_target_group" "broker" {
  name                 = "${var.name}-broker"
  port                 = 1883
  protocol             = "TCP"
  target_type          = "ip"
  vpc_id               = var.vpc_id
  deregistration_delay = 30
  health_check {
    protocol = "TCP"
  }
  tags = var.tags
}

resource "aws_lb_listener" "mqtt_tls" {
  load_balancer_arn = aws_lb.broker.arn
  port              = 8883
  protocol          = "TLS"
  certificate_arn   = var.certificate_arn
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.broker.arn
  }
  tags = var.tags
}

resource "aws_route53_record" "broker" {
  count   = var.zone_id == null ? 0 : 1
  zone_id = var.zone_id
  name    = var.domain_name
  type    = "A"
  alias {
    name                   = aws_lb.broker.dns_name
    zone_id                = aws_lb.broker.zone_id
    evaluate_target_health = true
  }
}
