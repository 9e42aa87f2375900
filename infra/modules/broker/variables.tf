variable "name" {
  type        = string
  description = "Prefix of every resource's name."
}

variable "region" {
  type        = string
  description = "The AWS region (for the task's logs)."
}

variable "image" {
  type        = string
  description = "The broker image: infra/mosquitto's Dockerfile, pushed to ECR."
}

variable "vpc_id" {
  type        = string
  description = "The VPC the broker, the services and the workers share."
}

variable "vpc_cidr" {
  type        = string
  description = "The VPC's address range: who may reach the broker's TLS port."
}

variable "subnet_ids" {
  type        = list(string)
  description = "Private subnets for the load balancer, the task and the data's mount targets."
}

variable "cluster_arn" {
  type        = string
  description = "The ECS cluster to run the broker in (the service module's)."
}

variable "log_group" {
  type        = string
  description = "The CloudWatch log group for the broker's log (the service module's)."
}

variable "kms_key_arn" {
  type        = string
  description = "KMS key that encrypts the broker's data on EFS."
}

variable "certificate_arn" {
  type        = string
  description = "ACM certificate for domain_name, which the load balancer presents on 8883."
}

variable "domain_name" {
  type        = string
  description = "The broker's name as clients reach it (the certificate's name; mqtt.host, the workers' broker_host)."
}

variable "zone_id" {
  type        = string
  default     = null
  description = "Route 53 zone in which to point domain_name at the load balancer (null: point it yourself)."
}

variable "execution_role_arn" {
  type        = string
  description = "The ECS execution role that pulls the image, writes the logs and reads admin_secret_arn (the service module's, which injects the same secret into the autoscaler)."
}

variable "admin_secret_arn" {
  type        = string
  description = "Secrets Manager secret: the broker admin's password, read on the first start only."
}

variable "access_logs_bucket" {
  type        = string
  default     = null
  description = "S3 bucket for the load balancer's access logs (null: none)."
}

variable "cpu" {
  type        = number
  default     = 1024
  description = "The task's CPU units (1024: one vCPU, thousands of workers)."
}

variable "memory" {
  type        = number
  default     = 2048
  description = "The task's memory in MiB."
}

variable "data_backups" {
  type        = bool
  default     = true
  description = "AWS Backup's daily backups of the broker's data (EFS). Off only where the endpoint lacks EFS backup policies (the deploy rehearsal's moto)."
}

variable "deletion_protection" {
  type        = bool
  default     = true
  description = "Refuse to delete it; set false and apply before a `terraform destroy`."
}

variable "tags" {
  type        = map(string)
  default     = {}
  description = "Tags on every resource."
}
