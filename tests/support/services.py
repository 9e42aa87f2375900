"""The environment the services run with as ECS runs them (Terraform's task definitions)."""

from __future__ import annotations

SCRATCH = "/var/lib/framefleet"  # the scratch volume's mount point in the task


ACCOUNT = "arn:aws:secretsmanager:us-east-1:123456789012:secret"


SERVICE_VARIABLES = {
    "name": "ff",
    "region": "us-east-1",
    "image": "framefleet:test",
    "vpc_id": "vpc-1",
    "vpc_cidr": "10.0.0.0/16",
    "subnet_ids": ["subnet-1"],
    "broker_host": "broker",
    "broker_cidr": "10.0.0.0/16",
    "database_url": "postgresql+psycopg://ff@db/ff",
    "database_secret_arn": f"{ACCOUNT}:db",
    "broker_admin_secret_arn": f"{ACCOUNT}:admin",
    "control_plane_broker_secret_arn": f"{ACCOUNT}:cp",
    "control_plane_role_arn": "arn:aws:iam::123456789012:role/cp",
    "autoscaler_role_arn": "arn:aws:iam::123456789012:role/as",
    "settings": {"FRAMEFLEET_REGION": "us-east-1"},
    "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/k",
}
