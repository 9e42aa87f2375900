# A way in over HTTP for producers and people: an application load balancer that ends TLS with
# an ACM certificate in front of the control plane's API and console. Off unless
# api_certificate_arn is set; it admits api_allowed_cidrs on 443, and the API admits it.

locals {
  api_load_balancer = var.api_certificate_arn != null
}

resource "aws_security_group" "api_load_balancer" {
  count       = local.api_load_balancer ? 1 : 0
  name        = "${var.name}-api-lb"
  description = "FrameFleet API load balancer: HTTPS from api_allowed_cidrs, to the control plane"
  vpc_id      = var.vpc_id
  tags        = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "api_https" {
  for_each          = local.api_load_balancer ? toset(var.api_allowed_cidrs) : toset([])
  security_group_id = aws_security_group.api_load_balancer[0].id
  description       = "HTTPS to the API and console"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = each.value
}

resource "aws_vpc_security_group_egress_rule" "api_to_tasks" {
  count                        = local.api_load_balancer ? 1 : 0
  security_group_id            = aws_security_group.api_load_balancer[0].id
  description                  = "To the control plane's API"
  ip_protocol                  = "tcp"
  from_port                    = var.api_port
  to_port                      = var.api_port
  referenced_security_group_id = aws_security_group.services.id
}

resource "aws_vpc_security_group_ingress_rule" "api_from_load_balancer" {
  count                        = local.api_load_balancer ? 1 : 0
  security_group_id            = aws_security_group.services.id
  description                  = "The HTTP API and console, from the load balancer"
  ip_protocol                  = "tcp"
  from_port                    = var.api_port
  to_port                      = var.api_port
  referenced_security_group_id = aws_security_group.api_load_balancer[0].id
}

resource "aws_lb" "api" {
  # checkov:skip=CKV2_AWS_28: a WAF in front is the operator's choice; the API authenticates every request
  # checkov:skip=CKV_AWS_91: access logs need a bucket of the operator's choosing (api_access_logs_bucket)
  count                      = local.api_load_balancer ? 1 : 0
  name                       = "${var.name}-api"
  internal                   = var.api_load_balancer_internal
  load_balancer_type         = "application"
  subnets                    = coalesce(var.api_load_balancer_subnet_ids, var.subnet_ids)
  security_groups            = [aws_security_group.api_load_balancer[0].id]
  drop_invalid_header_fields = true
  enable_deletion_protection = var.deletion_protection
  dynamic "access_logs" {
    for_each = var.api_access_logs_bucket == null ? [] : [var.api_access_logs_bucket]
    content {
      bucket  = access_logs.value
      prefix  = "${var.name}-api"
      enabled = true
    }
  }
  tags = var.tags
}

resource "aws_lb_target_group" "api" {
  count       = local.api_load_balancer ? 1 : 0
  name        = "${var.name}-api"
  port        = var.api_port
  protocol    = "HTTP"
  target_type = "ip"
  vpc_id      = var.vpc_id
  # Every replica answers (a standby forwards nothing: the API reads the shared store).
  health_check {
    path    = "/login"
    matcher = "200"
  }
  tags = var.tags
}

resource "aws_lb_listener" "api" {
  count             = local.api_load_balancer ? 1 : 0
  load_balancer_arn = aws_lb.api[0].arn
  port              = 443
  protocol          = "HTTPS"
  certificate_arn   = var.api_certificate_arn
  ssl_policy        = "ELBSecurityPolicy-TLS13-1-2-2021-06"
  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.api[0].arn
  }
  tags = var.tags
}

# Single sign-on (README, "Single sign-on"): the console's pages need a person signed on with
# the organisation's identity provider; the API's routes pass a person's session on when there
# is one (the console's own calls) and let token clients through untouched. The API verifies
# the load balancer's signed claims itself (orchestrator/api/alb_identity.py).
locals {
  sso = local.api_load_balancer && var.console_oidc != null
  sso_paths = {
    console = { priority = 10, paths = ["/console*", "/static/*", "/"], on_unauthenticated = "authenticate" }
    api     = { priority = 20, paths = ["/v1/*"], on_unauthenticated = "allow" }
  }
}

resource "aws_lb_listener_rule" "sso" {
  for_each     = local.sso ? local.sso_paths : {}
  listener_arn = aws_lb_listener.api[0].arn
  priority     = each.value.priority
  condition {
    path_pattern {
      values = each.value.paths
    }
  }
  action {
    type  = "authenticate-oidc"
    order = 1
    authenticate_oidc {
      issuer                     = var.console_oidc.issuer
      authorization_endpoint     = var.console_oidc.authorization_endpoint
      token_endpoint             = var.console_oidc.token_endpoint
      user_info_endpoint         = var.console_oidc.user_info_endpoint
      client_id                  = var.console_oidc.client_id
      client_secret              = var.console_oidc_client_secret
      scope                      = var.console_oidc.scope
      on_unauthenticated_request = each.value.on_unauthenticated
      session_timeout            = 43200 # 12 hours, as the console's token cookie
    }
  }
  action {
    type             = "forward"
    order            = 2
    target_group_arn = aws_lb_target_group.api[0].arn
  }
  tags = var.tags
}
