# FrameFleet in one AWS account, the module a deployment calls (infra/examples/complete calls
# it): queues and EC2 events, the bucket, the workers' launch templates, the control plane's
# and autoscaler's roles, the store, the broker, the two services, the finance sender and the
# alarms. Its inputs and outputs: README.md beside it; the README's "Deploy" walks through it.

data "aws_caller_identity" "current" {}

data "aws_vpc" "this" {
  id = var.vpc_id
}

# The workers go into the private subnets, one a zone: CreateFleet and RunInstances name the
# subnet, or they launch into the default VPC, where the launch template's security group does
# not exist.
data "aws_subnet" "private" {
  for_each = toset(var.private_subnet_ids)
  id       = each.value
}

locals {
  subnets_by_zone = { for subnet in data.aws_subnet.private : subnet.availability_zone => subnet.id... }
  worker_subnets  = { for zone, ids in local.subnets_by_zone : zone => sort(ids)[0] }
}

# S3 through a gateway endpoint: the workers' model downloads, checkpoints and videos stay off
# the NAT gateway (no per-GB NAT charge, no NAT bandwidth limit on a model of many GB).
data "aws_route_tables" "vpc" {
  count  = var.s3_gateway_endpoint && var.private_route_table_ids == null ? 1 : 0
  vpc_id = var.vpc_id
}

resource "aws_vpc_endpoint" "s3" {
  count             = var.s3_gateway_endpoint ? 1 : 0
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${var.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = coalesce(var.private_route_table_ids, try(data.aws_route_tables.vpc[0].ids, []))
  tags              = { Name = "${var.name}-s3" }
}

# The services' log group is encrypted with a key of the deployment's own.
data "aws_iam_policy_document" "logs_key" {
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
    sid       = "CloudWatchLogsUses"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"]
    principals {
      type        = "Service"
      identifiers = ["logs.${var.region}.amazonaws.com"]
    }
  }
}

resource "aws_kms_key" "logs" {
  description         = "FrameFleet ${var.name}: the services' CloudWatch logs"
  enable_key_rotation = true
  policy              = data.aws_iam_policy_document.logs_key.json
}

module "queues" {
  source                       = "../queues"
  name                         = var.name
  restrict_dead_letter_sources = !contains(var.rehearsal_omits, "sqs_redrive_allow_policy")
}

module "storage" {
  source          = "../storage"
  bucket_name     = var.bucket_name
  tls_only_policy = !contains(var.rehearsal_omits, "s3_tls_only_policy")
}

resource "aws_sesv2_email_identity" "reports" {
  email_identity = var.report_sender
}

module "workers" {
  source             = "../worker_fleet"
  name               = var.name
  region             = var.region
  fleet_id           = var.name
  vpc_id             = var.vpc_id
  worker_ami_id      = var.worker_ami_id
  family_ami_ids     = var.family_ami_ids
  bucket             = module.storage.bucket
  bucket_arn         = module.storage.bucket_arn
  model_registry_uri = "s3://${module.storage.bucket}/models/registry.json"
  warm_models        = var.warm_models
  account_id         = data.aws_caller_identity.current.account_id
  broker_host        = module.broker.host
  broker_port        = module.broker.port
  broker_cidr        = data.aws_vpc.this.cidr_block
  metrics_cidr       = data.aws_vpc.this.cidr_block
}

module "broker" {
  source              = "../broker"
  name                = var.name
  region              = var.region
  image               = var.broker_image
  vpc_id              = var.vpc_id
  vpc_cidr            = data.aws_vpc.this.cidr_block
  subnet_ids          = var.private_subnet_ids
  cluster_arn         = module.service.cluster_arn
  log_group           = module.service.log_group
  kms_key_arn         = aws_kms_key.logs.arn
  certificate_arn     = var.broker_certificate_arn
  domain_name         = var.broker_domain
  zone_id             = var.broker_zone_id
  admin_secret_arn    = var.broker_admin_secret_arn
  execution_role_arn  = module.service.execution_role_arn
  deletion_protection = var.deletion_protection
  data_backups        = !contains(var.rehearsal_omits, "efs_backup_policy")
}

module "iam" {
  source                   = "../iam"
  name                     = var.name
  account_id               = data.aws_caller_identity.current.account_id
  fleet_id                 = var.name
  jobs_queue_arn           = module.queues.jobs_queue_arn
  dead_letter_queue_arn    = module.queues.dead_letter_queue_arn
  interruptions_queue_arn  = module.queues.interruptions_queue_arn
  notice_bus_arn           = module.queues.notice_bus_arn
  ses_identity_arn         = aws_sesv2_email_identity.reports.arn
  video_objects_arn        = "${module.storage.bucket_arn}/videos/*"
  model_objects_arn        = "${module.storage.bucket_arn}/models/*"
  launch_template_arns     = module.workers.launch_template_arns
  worker_role_arn          = module.workers.worker_role_arn
  ship_metrics             = true
  prometheus_workspace_arn = module.alarms.prometheus_workspace_arn
}

module "alarms" {
  source                 = "../alarms"
  name                   = var.name
  jobs_queue_name        = module.queues.jobs_queue_name
  dead_letter_queue_name = module.queues.dead_letter_queue_name
  alarm_emails           = var.alarm_emails
}

module "database" {
  source                   = "../database"
  name                     = var.name
  vpc_id                   = var.vpc_id
  subnet_ids               = var.private_subnet_ids
  client_security_group_id = module.service.security_group_id
  deletion_protection      = var.deletion_protection
}

module "service" {
  source                          = "../service"
  name                            = var.name
  region                          = var.region
  image                           = var.image
  vpc_id                          = var.vpc_id
  vpc_cidr                        = data.aws_vpc.this.cidr_block
  subnet_ids                      = var.private_subnet_ids
  broker_host                     = module.broker.host
  broker_port                     = module.broker.port
  broker_cidr                     = data.aws_vpc.this.cidr_block
  broker_admin_secret_arn         = var.broker_admin_secret_arn
  control_plane_broker_secret_arn = var.control_plane_broker_secret_arn
  database_url                    = module.database.database_url
  database_secret_arn             = module.database.master_password_secret_arn
  control_plane_role_arn          = module.iam.control_plane_role_arn
  autoscaler_role_arn             = module.iam.autoscaler_role_arn
  kms_key_arn                     = aws_kms_key.logs.arn
  metrics_remote_write_url        = module.alarms.prometheus_remote_write_url
  fleet_id                        = var.name
  deletion_protection             = var.deletion_protection
  api_certificate_arn             = var.api_certificate_arn
  api_allowed_cidrs               = var.api_allowed_cidrs
  api_load_balancer_internal      = var.api_load_balancer_internal
  api_load_balancer_subnet_ids    = var.api_load_balancer_subnet_ids
  notice_bus_name                 = module.queues.notice_bus_name
  webhook_secret_arn              = var.webhook_secret_arn
  console_oidc                    = var.console_oidc
  console_oidc_client_secret      = var.console_oidc_client_secret
  settings                        = merge(local.chosen_settings, local.wiring_settings)
}

# -- Settings: the `settings` input by dotted name, then the inputs that name one ----------

locals {
  setting_kinds = jsondecode(file("${path.module}/settings.json")).settings
  # What each kind of setting's text must match (json and enum are checked as such).
  setting_patterns = {
    integer = "^-?[0-9]+$"
    number  = "^-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?$"
    boolean = "^(?i)(true|false|1|0)$"
    string  = "(?s).*"
  }
  named_settings = merge(var.settings, {
    "log_format"                     = var.log_format
    "autoscaler.budget_per_hour"     = tostring(var.budget_per_hour)
    "autoscaler.budget_per_day"      = tostring(var.budget_per_day)
    "control.scheduling.team_quotas" = jsonencode(var.team_quotas)
    "costs.scheduled_reports"        = jsonencode(var.report_schedule)
    }, var.monthly_budget_usd == null ? {} : {
    "costs.monthly_budget_usd" = tostring(var.monthly_budget_usd)
  })
  # As the services read them: FRAMEFLEET_, then the dotted name upper-cased, "." as "__".
  chosen_settings = {
    for name, value in local.named_settings : "FRAMEFLEET_${upper(replace(name, ".", "__"))}" => value
  }
}

# What the module wires up itself (queues, bucket, fleet, mail): never overridden by `settings`.
locals {
  wiring_settings = {
    FRAMEFLEET_REGION                       = var.region
    FRAMEFLEET_MODEL_REGISTRY               = "s3://${module.storage.bucket}/models/registry.json"
    FRAMEFLEET_JOBS_QUEUE_URL               = module.queues.jobs_queue_url
    FRAMEFLEET_DEAD_LETTER_QUEUE_URL        = module.queues.dead_letter_queue_url
    FRAMEFLEET_INTERRUPTIONS_QUEUE_URL      = module.queues.interruptions_queue_url
    FRAMEFLEET_METRICS_HOST                 = "0.0.0.0"
    FRAMEFLEET_AUTOSCALER__FLEET_ID         = var.name
    FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATE  = module.workers.launch_template_name
    FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATES = jsonencode(module.workers.family_launch_templates)
    FRAMEFLEET_AUTOSCALER__ZONES            = jsonencode(sort(keys(local.worker_subnets)))
    FRAMEFLEET_AUTOSCALER__SUBNETS          = jsonencode(local.worker_subnets)
    FRAMEFLEET_OUTPUT_PREFIXES              = jsonencode(["s3://${module.storage.bucket}/videos/"])
    FRAMEFLEET_COSTS__SENDER                = var.report_sender
    FRAMEFLEET_COSTS__FINANCE_RECIPIENTS    = jsonencode(var.finance_recipients)
  }
}
