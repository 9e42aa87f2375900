# The control plane (`framefleet serve`) and the autoscaler (`framefleet autoscaler run`) as
# ECS Fargate services from the repository's Dockerfile: private subnets, no public address,
# logs to CloudWatch, the database password injected from the secret RDS keeps, each with the
# task role of its own from the iam module. `replicas` tasks each; leases in the database decide
# which control plane schedules and which autoscaler buys.

resource "aws_ecs_cluster" "this" {
  name = var.name
  setting {
    name  = "containerInsights"
    value = "enabled"
  }
  tags = var.tags
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/framefleet/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.kms_key_arn
  tags              = var.tags
}

resource "aws_security_group" "services" {
  name        = "${var.name}-services"
  description = "FrameFleet control plane and autoscaler: in only to the API from api_allowed_cidrs; out to AWS APIs, the store and the broker"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

# The HTTP API and console: only from the networks named (a TLS load balancer's subnets, a
# VPN); none by default.
resource "aws_vpc_security_group_ingress_rule" "api" {
  for_each          = toset(var.api_allowed_cidrs)
  security_group_id = aws_security_group.services.id
  description       = "The HTTP API and console"
  ip_protocol       = "tcp"
  from_port         = var.api_port
  to_port           = var.api_port
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_egress_rule" "https" {
  security_group_id = aws_security_group.services.id
  description       = "AWS APIs over TLS (SQS, SES, EC2, Pricing, ECR, CloudWatch Logs)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = "0.0.0.0/0"
}

resource "aws_vpc_security_group_egress_rule" "database" {
  security_group_id = aws_security_group.services.id
  description       = "The store (PostgreSQL)"
  ip_protocol       = "tcp"
  from_port         = 5432
  to_port           = 5432
  cidr_ipv4         = var.vpc_cidr
}

resource "aws_vpc_security_group_egress_rule" "broker" {
  security_group_id = aws_security_group.services.id
  description       = "The MQTT broker"
  ip_protocol       = "tcp"
  from_port         = var.broker_port
  to_port           = var.broker_port
  cidr_ipv4         = var.broker_cidr
}

# The execution role: pull the image, write logs, read the database and broker passwords.
data "aws_iam_policy_document" "assume_ecs_task" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "execution" {
  name               = "${var.name}-execution"
  assume_role_policy = data.aws_iam_policy_document.assume_ecs_task.json
  tags               = var.tags
}

resource "aws_iam_role_policy_attachment" "execution" {
  role       = aws_iam_role.execution.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"
}

data "aws_iam_policy_document" "secrets" {
  statement {
    sid     = "DatabaseAndBrokerPasswords"
    actions = ["secretsmanager:GetSecretValue"]
    resources = compact([
      var.database_secret_arn, var.broker_admin_secret_arn, var.control_plane_broker_secret_arn,
      var.webhook_secret_arn,
    ])
  }
}

resource "aws_iam_role_policy" "secrets" {
  name   = "${var.name}-service-secrets"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.secrets.json
}

locals {
  processes = {
    control-plane = {
      command   = ["serve"]
      task_role = var.control_plane_role_arn
      port_env  = "FRAMEFLEET_METRICS_PORT"
      secrets = merge(
        { FRAMEFLEET_MQTT__PASSWORD = var.control_plane_broker_secret_arn },
        var.webhook_secret_arn == null ? {} : { FRAMEFLEET_NOTICES__WEBHOOK_SECRET = var.webhook_secret_arn },
      )
      ports = [var.api_port]
      env = merge({
        FRAMEFLEET_MQTT__HOST = var.broker_host
        FRAMEFLEET_MQTT__PORT = tostring(var.broker_port)
        FRAMEFLEET_MQTT__TLS  = "true"
        # Behind the load balancer that ends TLS: the console's cookie is sent over HTTPS only.
        FRAMEFLEET_API__PORT          = tostring(var.api_port)
        FRAMEFLEET_API__HOST          = "0.0.0.0"
        FRAMEFLEET_API__SECURE_COOKIE = "true"
        # The client address the failed-authentication throttle counts: X-Forwarded-For,
        # believed only from the load balancer's nodes.
        FRAMEFLEET_API__TRUSTED_PROXIES = jsonencode(
          local.api_load_balancer ? coalesce(var.api_load_balancer_cidrs, [var.vpc_cidr]) : []
        )
        # Completion notices: every job's end on the bus (empty: none).
        FRAMEFLEET_NOTICES__EVENT_BUS = var.notice_bus_name == null ? "" : var.notice_bus_name
      }, local.sso_env)
    }
    # The broker's admin: it makes each worker's account, and keeps the control plane's.
    autoscaler = {
      command   = ["autoscaler", "run"]
      task_role = var.autoscaler_role_arn
      port_env  = "FRAMEFLEET_AUTOSCALER__METRICS_PORT"
      ports     = []
      secrets = {
        FRAMEFLEET_AUTOSCALER__BROKER_ADMIN__PASSWORD               = var.broker_admin_secret_arn
        FRAMEFLEET_AUTOSCALER__BROKER_ADMIN__CONTROL_PLANE_PASSWORD = var.control_plane_broker_secret_arn
      }
      env = {
        FRAMEFLEET_AUTOSCALER__BROKER_ADMIN__HOST = var.broker_host
        FRAMEFLEET_AUTOSCALER__BROKER_ADMIN__PORT = tostring(var.broker_port)
      }
    }
  }
}

locals {
  # Single sign-on: the claims the API believes, from this load balancer only.
  sso_env = local.sso ? {
    FRAMEFLEET_API__SSO__LOAD_BALANCER_ARN = aws_lb.api[0].arn
    FRAMEFLEET_API__SSO__REGION            = var.region
    FRAMEFLEET_API__SSO__GROUP_CLAIM       = var.console_oidc.group_claim
    FRAMEFLEET_API__SSO__OPERATOR_GROUPS   = jsonencode(var.console_oidc.operator_groups)
    FRAMEFLEET_API__SSO__TEAM_GROUPS       = jsonencode(var.console_oidc.team_groups)
  } : {}
  # ECS Exec's SSM agent writes where these point; with a read-only root file system they are
  # volumes of the task's own (Fargate's storage), as AWS's containers-roadmap#1359 describes.
  exec_volumes = var.ecs_exec ? {
    ssm-agent-state   = "/var/lib/amazon/ssm"
    ssm-agent-logs    = "/var/log/amazon/ssm"
    ssm-managed-agent = "/managed-agents"
  } : {}
}

locals {
  # The root file system is read-only; the task's scratch volume (Fargate's own storage) is the
  # one place the processes write: temp files, matplotlib's cache, the finance reports' files.
  scratch = "/var/lib/framefleet"
  containers = {
    for process, spec in local.processes : process => {
      name                   = process
      image                  = var.image
      command                = spec.command
      essential              = true
      readonlyRootFilesystem = true
      mountPoints = concat(
        [{ sourceVolume = "scratch", containerPath = local.scratch, readOnly = false }],
        [for volume, path in local.exec_volumes : { sourceVolume = volume, containerPath = path, readOnly = false }],
      )
      portMappings = [for port in spec.ports : { containerPort = port, protocol = "tcp" }]
      environment = [for name, value in merge(var.settings, spec.env, {
        (spec.port_env)              = tostring(var.metrics_port)
        FRAMEFLEET_HEALTH_PORT       = tostring(var.metrics_port)
        FRAMEFLEET_DATABASE_URL      = var.database_url
        TMPDIR                       = local.scratch
        MPLCONFIGDIR                 = "${local.scratch}/matplotlib"
        FRAMEFLEET_COSTS__REPORT_DIR = "${local.scratch}/reports"
      }) : { name = name, value = value }]
      secrets = concat(
        [{ name = "FRAMEFLEET_DATABASE_PASSWORD", valueFrom = "${var.database_secret_arn}:password::" }],
        [for name, arn in spec.secrets : { name = name, valueFrom = arn }],
      )
      # ECS ignores the image's HEALTHCHECK: the task's own, on the process's /healthz.
      healthCheck = {
        command = ["CMD", "python", "-c",
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${var.metrics_port}/healthz', timeout=4)"]
        interval    = 30
        timeout     = 5
        retries     = 3
        startPeriod = 60
      }
      logConfiguration = {
        logDriver = "awslogs"
        options = {
          awslogs-group         = aws_cloudwatch_log_group.this.name
          awslogs-region        = var.region
          awslogs-stream-prefix = process
        }
      }
    }
  }
}

# The metrics collector beside each process (AWS Distro for OpenTelemetry): it scrapes the
# process's /metrics on the task's own loopback, and the control plane's also scrapes the
# workers (EC2 discovery by the fleet tag), then writes to the Prometheus workspace where the
# shipped rules run (modules/alarms). Not essential: a collector that dies takes no work down.
locals {
  collectors = {
    for process, spec in local.processes : process => var.metrics_remote_write_url == null ? [] : [{
      name                   = "metrics-collector"
      image                  = var.collector_image
      essential              = false
      readonlyRootFilesystem = true
      mountPoints            = [{ sourceVolume = "scratch", containerPath = "/tmp", readOnly = false }]
      environment = [{
        name = "AOT_CONFIG_CONTENT"
        value = yamlencode({
          extensions = { sigv4auth = { region = var.region, service = "aps" } }
          receivers = {
            prometheus = {
              config = {
                global = { scrape_interval = "30s" }
                scrape_configs = concat(
                  [{
                    job_name       = "framefleet-${process}"
                    static_configs = [{ targets = ["127.0.0.1:${var.metrics_port}"] }]
                  }],
                  process == "control-plane" ? [{
                    job_name = "framefleet-workers"
                    ec2_sd_configs = [{
                      region  = var.region
                      port    = var.worker_metrics_port
                      filters = [{ name = "tag:framefleet:fleet", values = [var.fleet_id] }]
                    }]
                  }] : [],
                )
              }
            }
          }
          exporters = {
            prometheusremotewrite = {
              endpoint = var.metrics_remote_write_url
              auth     = { authenticator = "sigv4auth" }
            }
          }
          service = {
            extensions = ["sigv4auth"]
            pipelines  = { metrics = { receivers = ["prometheus"], exporters = ["prometheusremotewrite"] } }
          }
        })
      }]
      logConfiguration = local.containers[process].logConfiguration
    }]
  }
}

resource "aws_ecs_task_definition" "this" {
  for_each                 = local.processes
  family                   = "${var.name}-${each.key}"
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = 512
  memory                   = 1024
  execution_role_arn       = aws_iam_role.execution.arn
  task_role_arn            = each.value.task_role
  container_definitions    = jsonencode(concat([local.containers[each.key]], local.collectors[each.key]))
  volume {
    name = "scratch"
  }
  dynamic "volume" {
    for_each = local.exec_volumes
    content {
      name = volume.key
    }
  }
  tags = var.tags
}

resource "aws_ecs_service" "this" {
  for_each        = local.processes
  name            = each.key
  cluster         = aws_ecs_cluster.this.id
  task_definition = aws_ecs_task_definition.this[each.key].arn
  desired_count   = var.replicas
  launch_type     = "FARGATE"
  # Replicas share the database; the leases decide which one schedules and which one buys, so
  # a rolling deployment may start the new tasks before it stops the old ones.
  enable_execute_command             = var.ecs_exec
  deployment_maximum_percent         = 200
  deployment_minimum_healthy_percent = 100
  # A deployment whose tasks never become healthy stops and rolls back to the last one that did.
  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }
  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.services.id]
    assign_public_ip = false
  }
  dynamic "load_balancer" {
    for_each = local.api_load_balancer && each.key == "control-plane" ? [1] : []
    content {
      target_group_arn = aws_lb_target_group.api[0].arn
      container_name   = "control-plane"
      container_port   = var.api_port
    }
  }
  depends_on = [aws_lb_listener.api]
  tags       = var.tags
}

# The first API token, written here by a one-off task of the control plane's definition
# (README, "Deploy steps": `framefleet tokens create --into-secret`), never printed to a log.
resource "aws_secretsmanager_secret" "first_token" {
  # checkov:skip=CKV2_AWS_57: a token has no rotation function; revoke it with `framefleet tokens revoke`
  name                    = "${var.name}/api-first-token"
  description             = "FrameFleet ${var.name}: the first API token (framefleet tokens create --into-secret)"
  kms_key_id              = var.kms_key_arn
  recovery_window_in_days = 7
  tags                    = var.tags
}
