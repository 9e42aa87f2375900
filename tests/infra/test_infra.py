"""The Terraform in infra/: every file parses (python-hcl2) and is `terraform fmt` clean, every
variable and output says what it is, and the secure defaults hold (encrypted queues, volumes,
bucket and broker data, no public bucket, IMDSv2 only, no inbound rule but from a security group
or to the broker's TLS port, PassRole, terminate and the broker passwords scoped). The workers'
user data has a test of its own (test_worker_user_data.py)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from tests.support.paths import INFRA
from tools.terraform_docs import parsed

TF_FILES = sorted(INFRA.rglob("*.tf"))


def blocks(kind: str, type_name: str) -> list[dict[str, Any]]:
    """Every `resource "type_name"` (or data source) body across infra/."""
    found: list[dict[str, Any]] = []
    for path in TF_FILES:
        for block in parsed(path).get(kind, []):
            found.extend(body for name, body in block.items() if name == type_name)
    return [body for entry in found for body in entry.values()]


def policy_statements() -> dict[str, dict[str, Any]]:
    """Every IAM policy statement across infra/, by its sid."""
    return {
        statement["sid"]: statement
        for document in blocks("data", "aws_iam_policy_document")
        for statement in document.get("statement", [])
        if "sid" in statement
    }


def wiring(root: dict[str, Any]) -> dict[str, Any]:
    """The settings the root module gives both services itself."""
    [found] = [block["wiring_settings"] for block in root["locals"] if "wiring_settings" in block]
    assert isinstance(found, dict)
    return found


def test_every_terraform_file_parses_and_is_formatted() -> None:
    modules = {p.parent.name for p in TF_FILES}
    assert modules == {
        "queues",
        "storage",
        "iam",
        "worker_fleet",
        "alarms",
        "database",
        "service",
        "broker",
        "framefleet",
        "complete",
    }
    for path in TF_FILES:
        parsed(path)
    terraform = shutil.which("terraform")
    assert terraform, "terraform is needed for `terraform fmt -check`"
    checked = subprocess.run(
        [terraform, "fmt", "-check", "-recursive", str(INFRA)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_variable_and_output_has_a_description() -> None:
    missing = []
    for path in TF_FILES:
        tree = parsed(path)
        for kind in ("variable", "output"):
            for block in tree.get(kind, []):
                for name, body in block.items():
                    if not str(body.get("description", "")).strip():
                        missing.append(f"{path.relative_to(INFRA)}: {kind} {name}")
    assert missing == []


def test_secure_defaults() -> None:
    assert all(q["sqs_managed_sse_enabled"] for q in blocks("resource", "aws_sqs_queue"))
    (public,) = blocks("resource", "aws_s3_bucket_public_access_block")
    assert all(
        public[k]
        for k in (
            "block_public_acls",
            "block_public_policy",
            "ignore_public_acls",
            "restrict_public_buckets",
        )
    )
    (template,) = blocks("resource", "aws_launch_template")
    (metadata,) = template["metadata_options"]
    assert metadata["http_tokens"] == "required"
    assert metadata["http_put_response_hop_limit"] == 2
    assert template["block_device_mappings"][0]["ebs"][0]["encrypted"] is True
    # Inbound rules: the store from the services, the broker's data from the broker task, the
    # task from its load balancer (each a security group, not an address range), the
    # load balancer's TLS port from the VPC alone, and the API from the networks named (none
    # by default).
    inbound = blocks("resource", "aws_vpc_security_group_ingress_rule")
    api = [rule for rule in inbound if rule.get("description") == "The HTTP API and console"]
    assert [rule["for_each"] for rule in api] == ["${toset(var.api_allowed_cidrs)}"]
    # With the API's load balancer (api_certificate_arn): HTTPS from the same networks to it,
    # and the API from it alone.
    https = [rule for rule in inbound if rule.get("description") == "HTTPS to the API and console"]
    assert [rule["for_each"] for rule in https] == [
        "${local.api_load_balancer ? toset(var.api_allowed_cidrs) : toset([])}"
    ]
    api += https
    # The workers' metrics port, from the network named (none unless given).
    metrics = [rule for rule in inbound if "metrics" in rule.get("description", "")]
    assert [rule["count"] for rule in metrics] == ["${var.metrics_cidr == null ? 0 : 1}"]
    inbound = [rule for rule in inbound if rule not in api and rule not in metrics]
    by_group = {"cidr_ipv4" in rule: rule for rule in inbound}
    assert len(inbound) == 5
    assert [r["from_port"] for r in inbound if "cidr_ipv4" in r] == [8883]
    assert by_group[True]["cidr_ipv4"] == "${var.vpc_cidr}"
    assert sum("referenced_security_group_id" in rule for rule in inbound) == 4
    assert all("ingress" not in group for group in blocks("resource", "aws_security_group"))
    (database,) = blocks("resource", "aws_db_instance")
    assert database["storage_encrypted"] is True
    assert database["publicly_accessible"] is False
    assert database["manage_master_user_password"] is True
    assert database["backup_retention_period"] == "${var.backup_days}"
    services = blocks("resource", "aws_ecs_service")
    assert len(services) == 2  # the two processes (for_each) and the broker
    assert all(s["network_configuration"][0]["assign_public_ip"] is False for s in services)
    (broker_data,) = blocks("resource", "aws_efs_file_system")
    assert broker_data["encrypted"] is True
    broker_balancer, api_balancer = blocks("resource", "aws_lb")
    assert broker_balancer["internal"] is True
    assert api_balancer["internal"] == "${var.api_load_balancer_internal}"  # true by default
    assert api_balancer["drop_invalid_header_fields"] is True
    for listener in blocks("resource", "aws_lb_listener"):
        assert listener["protocol"] in ("TLS", "HTTPS")
        assert listener["ssl_policy"].startswith("ELBSecurityPolicy-TLS13")
    statements = policy_statements()
    passing = statements["PassOnlyTheWorkerRole"]
    assert passing["resources"] == ["${var.worker_role_arn}"]
    assert passing["condition"][0]["values"] == ["ec2.amazonaws.com"]
    own_password = statements["OwnBrokerPassword"]
    assert own_password["condition"][0]["variable"] == "aws:ResourceTag/framefleet-instance"
    assert own_password["condition"][0]["values"] == ["$${ec2:SourceInstanceARN}"]
    ending = statements["EndOnlyTheFleetsInstances"]
    assert ending["condition"][0]["variable"] == "ec2:ResourceTag/framefleet:fleet"


def test_the_control_plane_may_read_the_videos_it_presigns_links_to() -> None:
    """A presigned link is checked against the signer's permissions when it is followed: the
    control plane's role needs s3:GetObject on the videos, or every link returns 403."""
    statements = policy_statements()
    links = statements["PresignedVideoLinks"]
    assert links["actions"] == ["s3:GetObject"]
    assert links["resources"] == ["${var.video_objects_arn}"]
    root = parsed(INFRA / "modules" / "framefleet" / "main.tf")
    (iam,) = [body for block in root["module"] for name, body in block.items() if name == "iam"]
    assert iam["video_objects_arn"] == "${module.storage.bucket_arn}/videos/*"


def test_the_autoscaler_launches_into_the_deployments_subnets() -> None:
    """Without a subnet, CreateFleet and RunInstances launch into the default VPC, where the
    launch template's security group does not exist: the root module gives the autoscaler a
    private subnet a zone, and those zones."""
    root = parsed(INFRA / "modules" / "framefleet" / "main.tf")
    settings = wiring(root)
    assert settings["FRAMEFLEET_AUTOSCALER__SUBNETS"] == "${jsonencode(local.worker_subnets)}"
    assert settings["FRAMEFLEET_AUTOSCALER__ZONES"] == (
        "${jsonencode(sort(keys(local.worker_subnets)))}"
    )
    subnets = [b for block in root["data"] for n, b in block.items() if n == "aws_subnet"]
    assert subnets[0]["private"]["for_each"] == "${toset(var.private_subnet_ids)}"


def test_the_deployment_refuses_outputs_its_workers_cannot_write() -> None:
    """The workers may write the bucket's videos/ only: the control plane is told so, and
    refuses any other output at submit instead of failing the upload after the render."""
    root = parsed(INFRA / "modules" / "framefleet" / "main.tf")
    prefixes = wiring(root)["FRAMEFLEET_OUTPUT_PREFIXES"]
    assert prefixes == '${jsonencode(["s3://${module.storage.bucket}/videos/"])}'


def test_instances_are_launched_only_with_the_fleets_tag_in_the_request() -> None:
    statements = policy_statements()
    scoped = statements["LaunchOnlyFleetTaggedInstances"]
    assert scoped["resources"] == ["arn:aws:ec2:*:${var.account_id}:instance/*"]
    [condition] = scoped["condition"]
    assert condition["variable"] == "aws:RequestTag/framefleet:fleet"
    assert condition["values"] == ["${var.fleet_id}"]
    # No other launch statement grants instances.
    for sid, statement in statements.items():
        if "ec2:RunInstances" in statement.get("actions", []) and sid != scoped.get("sid"):
            assert not any(":instance/" in r for r in statement["resources"]), sid


def test_s3_traffic_goes_through_a_gateway_endpoint() -> None:
    (endpoint,) = blocks("resource", "aws_vpc_endpoint")
    assert endpoint["vpc_endpoint_type"] == "Gateway"
    assert endpoint["service_name"] == "com.amazonaws.${var.region}.s3"
    assert endpoint["count"] == "${var.s3_gateway_endpoint ? 1 : 0}"
