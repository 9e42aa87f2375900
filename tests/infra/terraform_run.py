"""`infra/examples/complete` (its call of the root module) applied to moto, as the README's
deploy steps apply it to AWS: the user's part first (a VPC with two private subnets, the
broker's two secrets and its ACM certificate), then `terraform apply` with the provider's
endpoints pointed at moto and the further inputs of the module's call added by Terraform
override files (the example itself is not edited), and `terraform destroy` at the end."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from tests.support.terraform_support import infra_copy, init, terraform

REGION = "us-east-1"
BROKER_DOMAIN = "mqtt.rehearsal.example"
API_DOMAIN = "framefleet.rehearsal.example"
# Moto lacks these (keep them out by the example's variable, say which): EFS backup policies
# (PutBackupPolicy) and SQS's RedriveAllowPolicy attribute, for which the provider waits forever;
# and a bucket policy's conditions, which moto ignores, so the TLS-only Deny denies everything.
MOTO_LACKS = ["efs_backup_policy", "sqs_redrive_allow_policy", "s3_tls_only_policy"]
# The provider's endpoint names of every service the example uses.
SERVICES = "acm amp cloudwatch cloudwatchlogs ec2 ecs efs elbv2 events iam kms rds route53 s3"
SERVICES += " secretsmanager sesv2 sns sqs ssm sts"


def clients(endpoint: str) -> dict[str, Any]:
    names = [
        "ec2",
        "ecs",
        "events",
        "rds",
        "s3",
        "secretsmanager",
        "ses",
        "sqs",
        "acm",
        "amp",
        "elbv2",
    ]
    session = boto3.Session(region_name=REGION)
    return {name: session.client(name, endpoint_url=endpoint) for name in names}  # type: ignore[call-overload]


def override(endpoint: str) -> str:
    endpoints = "\n".join(f'    {service} = "{endpoint}"' for service in SERVICES.split())
    return (
        'provider "aws" {\n'
        "  region                      = var.region\n"
        '  access_key                  = "rehearsal"\n'
        '  secret_key                  = "rehearsal"\n'
        "  skip_credentials_validation = true\n"
        "  skip_metadata_api_check     = true\n"
        "  skip_requesting_account_id  = true\n"
        "  s3_use_path_style           = true\n"
        f"  endpoints {{\n{endpoints}\n  }}\n}}\n"
    )


@dataclass(frozen=True)
class UserPart:
    """What the README's step 3 has the user make before Terraform."""

    vpc_id: str
    subnet_ids: list[str]
    broker_admin_secret_arn: str
    control_plane_secret_arn: str
    certificate_arn: str
    api_certificate_arn: str


def user_part(aws: dict[str, Any]) -> UserPart:
    ec2 = aws["ec2"]
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24", AvailabilityZone=zone)
        for i, zone in enumerate(["us-east-1a", "us-east-1b"])
    ]
    secrets = aws["secretsmanager"]
    admin = secrets.create_secret(Name="framefleet/broker-admin", SecretString="admin-Pw_1")
    plane = secrets.create_secret(Name="framefleet/broker-control-plane", SecretString="cp-Pw_2")
    certificate = aws["acm"].request_certificate(DomainName=BROKER_DOMAIN)
    api_certificate = aws["acm"].request_certificate(DomainName=API_DOMAIN)
    return UserPart(
        vpc_id=vpc,
        subnet_ids=[s["Subnet"]["SubnetId"] for s in subnets],
        broker_admin_secret_arn=admin["ARN"],
        control_plane_secret_arn=plane["ARN"],
        certificate_arn=certificate["CertificateArn"],
        api_certificate_arn=api_certificate["CertificateArn"],
    )


# README, "Single sign-on": the organisation's identity provider (never called here).
CONSOLE_OIDC = {
    "issuer": "https://idp.rehearsal.example",
    "authorization_endpoint": "https://idp.rehearsal.example/authorize",
    "token_endpoint": "https://idp.rehearsal.example/token",
    "user_info_endpoint": "https://idp.rehearsal.example/userinfo",
    "client_id": "framefleet-console",
    "operator_groups": ["platform"],
    "team_groups": {"video-research": ["research"]},
}


class Deployment:
    """The example in a folder of its own, applied and destroyed with Terraform."""

    def __init__(self, folder: Path, endpoint: str, user: UserPart) -> None:
        self.folder = infra_copy(folder) / "examples" / "complete"
        (self.folder / "rehearsal_override.tf").write_text(override(endpoint))
        # The example's own variables: what a deployment must choose.
        self.variables: dict[str, object] = {
            "name": "framefleet",
            "bucket_name": "framefleet-rehearsal",
            "vpc_id": user.vpc_id,
            "private_subnet_ids": user.subnet_ids,
            "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/framefleet:rehearsal",
            "broker_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/broker:rehearsal",
            "worker_ami_id": "ami-12c6146b",
            "broker_domain": BROKER_DOMAIN,
            "broker_certificate_arn": user.certificate_arn,
            "broker_admin_secret_arn": user.broker_admin_secret_arn,
            "control_plane_broker_secret_arn": user.control_plane_secret_arn,
            "report_sender": "costs@rehearsal.example",
            "finance_recipients": ["finance@rehearsal.example"],
            "alarm_emails": ["oncall@rehearsal.example"],
            "api_certificate_arn": user.api_certificate_arn,
        }
        # Further inputs of the root module, as a user adds them to the example's call (here
        # through an override file, merged into the call by Terraform).
        self.inputs: dict[str, object] = {
            "rehearsal_omits": MOTO_LACKS,
            "api_allowed_cidrs": ["10.30.0.0/16"],
            "console_oidc": CONSOLE_OIDC,
            "console_oidc_client_secret": "rehearsal-client-secret",
        }

    def _run(self, *args: str) -> str:
        (self.folder / "terraform.tfvars.json").write_text(json.dumps(self.variables))
        module = {"module": {"framefleet": self.inputs}}
        (self.folder / "rehearsal_module_override.tf.json").write_text(json.dumps(module))
        done = terraform(self.folder, *args, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
        return done.stdout

    def apply(self) -> dict[str, Any]:
        init(self.folder)
        self._run("apply", "-auto-approve", "-input=false", "-parallelism=30")
        outputs = json.loads(self._run("output", "-json"))
        found: dict[str, Any] = outputs["framefleet"]["value"]  # the module's, all of them
        return found

    def destroy(self, aws: dict[str, Any], bucket: str) -> None:
        """As the README's teardown: protection off, the bucket emptied, then destroy."""
        self.variables["deletion_protection"] = False
        self._run("apply", "-auto-approve", "-input=false", "-parallelism=30")
        s3 = aws["s3"]
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for item in page.get("Versions", []) + page.get("DeleteMarkers", []):
                s3.delete_object(Bucket=bucket, Key=item["Key"], VersionId=item["VersionId"])
        self._run("destroy", "-auto-approve", "-input=false", "-parallelism=30")
