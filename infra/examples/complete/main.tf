# FrameFleet in one AWS account: the root module with what a deployment must choose (and whom
# it tells); every other input at its default (infra/modules/framefleet/README.md lists them).
# The README's "Deploy" section walks through it.

module "framefleet" {
  source = "../../modules/framefleet"

  name                            = var.name
  region                          = var.region
  bucket_name                     = var.bucket_name
  vpc_id                          = var.vpc_id
  private_subnet_ids              = var.private_subnet_ids
  image                           = var.image
  worker_ami_id                   = var.worker_ami_id
  broker_image                    = var.broker_image
  broker_domain                   = var.broker_domain
  broker_certificate_arn          = var.broker_certificate_arn
  broker_admin_secret_arn         = var.broker_admin_secret_arn
  control_plane_broker_secret_arn = var.control_plane_broker_secret_arn
  report_sender                   = var.report_sender
  finance_recipients              = var.finance_recipients
  alarm_emails                    = var.alarm_emails
  api_certificate_arn             = var.api_certificate_arn
  deletion_protection             = var.deletion_protection
}
