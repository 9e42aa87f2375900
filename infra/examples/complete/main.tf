# FrameFleet in one AWS account: queues and EC2 events, the bucket, the workers' launch
# template, the control plane's and autoscaler's roles, the finance sender and the alarms.
# The README's "Deploy" section walks through it.

data "aws_caller_identity" "current" {}

data "aws_ssm_parameter" "broker_password" {
  name = var.broker_password_parameter_name
}

module "queues" {
  source = "../../modules/queues"
  name   = var.name
}

module "storage" {
  source      = "../../modules/storage"
  bucket_name = var.bucket_name
}

resource "aws_sesv2_email_identity" "reports" {
  email_identity = var.report_sender
}

module "workers" {
  source                         = "../../modules/worker_fleet"
  name                           = var.name
  region                         = var.region
  fleet_id                       = var.name
  vpc_id                         = var.vpc_id
  worker_ami_id                  = var.worker_ami_id
  bucket                         = module.storage.bucket
  bucket_arn                     = module.storage.bucket_arn
  model_registry_uri             = "s3://${module.storage.bucket}/models/registry.json"
  warm_models                    = var.warm_models
  broker_host                    = var.broker_host
  broker_cidr                    = var.broker_cidr
  broker_password_parameter_name = var.broker_password_parameter_name
  broker_password_parameter_arn  = data.aws_ssm_parameter.broker_password.arn
}

module "iam" {
  source                  = "../../modules/iam"
  name                    = var.name
  account_id              = data.aws_caller_identity.current.account_id
  fleet_id                = var.name
  jobs_queue_arn          = module.queues.jobs_queue_arn
  dead_letter_queue_arn   = module.queues.dead_letter_queue_arn
  interruptions_queue_arn = module.queues.interruptions_queue_arn
  ses_identity_arn        = aws_sesv2_email_identity.reports.arn
  launch_template_arn     = module.workers.launch_template_arn
  worker_role_arn         = module.workers.worker_role_arn
}

module "alarms" {
  source                 = "../../modules/alarms"
  name                   = var.name
  jobs_queue_name        = module.queues.jobs_queue_name
  dead_letter_queue_name = module.queues.dead_letter_queue_name
  alarm_emails           = var.alarm_emails
}
