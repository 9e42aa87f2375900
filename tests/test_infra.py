"""The Terraform in infra/: every file parses (python-hcl2) and is `terraform fmt` clean, every
variable and output says what it is, the secure defaults hold (encrypted queues, volumes and
bucket, no public bucket, IMDSv2 only, no inbound rule, PassRole and terminate scoped), and the
workers' user data, run against a scratch root, writes the settings the agent reads, from which
`framefleet-worker serve` starts and says hello on the broker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import boto3
import hcl2

from kernel.mosquitto import LocalMosquitto

INFRA = Path(__file__).parents[1] / "infra"
TF_FILES = sorted(INFRA.rglob("*.tf"))
USER_DATA = INFRA / "modules" / "worker_fleet" / "user-data.sh.tftpl"


def parsed(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as source:
        tree = unquoted(hcl2.load(source))
    assert isinstance(tree, dict)
    return tree


def unquoted(value: Any) -> Any:
    """python-hcl2 keeps the quotes of labels and string literals; the checks read values."""
    if isinstance(value, dict):
        return {unquoted(k): unquoted(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [unquoted(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def blocks(kind: str, type_name: str) -> list[dict[str, Any]]:
    """Every `resource "type_name"` (or data source) body across infra/."""
    found: list[dict[str, Any]] = []
    for path in TF_FILES:
        for block in parsed(path).get(kind, []):
            found.extend(body for name, body in block.items() if name == type_name)
    return [body for entry in found for body in entry.values()]


def test_every_terraform_file_parses_and_is_formatted() -> None:
    modules = {p.parent.name for p in TF_FILES}
    assert modules == {"queues", "storage", "iam", "worker_fleet", "alarms", "database",
                       "service", "complete"}  # fmt: skip
    for path in TF_FILES:
        parsed(path)
    terraform = shutil.which("terraform")
    assert terraform, "terraform is needed for `terraform fmt -check`"
    checked = subprocess.run([terraform, "fmt", "-check", "-recursive", str(INFRA)],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
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
    assert all(public[k] for k in ("block_public_acls", "block_public_policy",
                                   "ignore_public_acls", "restrict_public_buckets"))  # fmt: skip
    (template,) = blocks("resource", "aws_launch_template")
    (metadata,) = template["metadata_options"]
    assert metadata["http_tokens"] == "required"
    assert metadata["http_put_response_hop_limit"] == 2
    assert template["block_device_mappings"][0]["ebs"][0]["encrypted"] is True
    # The one inbound rule in the house: the store, from the services' security group only.
    (inbound,) = blocks("resource", "aws_vpc_security_group_ingress_rule")
    assert inbound["referenced_security_group_id"] == "${var.client_security_group_id}"
    assert "cidr_ipv4" not in inbound
    assert all("ingress" not in group for group in blocks("resource", "aws_security_group"))
    (database,) = blocks("resource", "aws_db_instance")
    assert database["storage_encrypted"] is True
    assert database["publicly_accessible"] is False
    assert database["manage_master_user_password"] is True
    assert database["backup_retention_period"] == "${var.backup_days}"
    (service,) = blocks("resource", "aws_ecs_service")
    assert service["network_configuration"][0]["assign_public_ip"] is False
    statements = {
        statement["sid"]: statement
        for document in blocks("data", "aws_iam_policy_document")
        for statement in document.get("statement", [])
        if "sid" in statement
    }
    passing = statements["PassOnlyTheWorkerRole"]
    assert passing["resources"] == ["${var.worker_role_arn}"]
    assert passing["condition"][0]["values"] == ["ec2.amazonaws.com"]
    ending = statements["EndOnlyTheFleetsInstances"]
    assert ending["condition"][0]["variable"] == "ec2:ResourceTag/framefleet:fleet"


def render(template: str, values: dict[str, str]) -> str:
    """Terraform's templatefile for this template: plain `${name}` interpolations only."""
    names = set(re.findall(r"(?<!\$)\$\{([a-z_]+)\}", template))
    assert names == set(values), names ^ set(values)
    assert "%{" not in template
    for name, value in values.items():
        template = template.replace("${" + name + "}", value)
    return template.replace("$${", "${")


async def test_the_user_data_writes_the_agents_settings_and_the_agent_starts(
    tmp_path: Path, moto_endpoint: str, broker: LocalMosquitto
) -> None:
    suffix = uuid.uuid4().hex[:8]
    bucket, parameter = f"fleet-{suffix}", f"/framefleet-{suffix}/broker/worker-password"
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket=bucket)
    registry: dict[str, dict[str, str]] = {"models": {}}
    s3.put_object(Bucket=bucket, Key="models/registry.json", Body=json.dumps(registry).encode())
    ssm = boto3.client("ssm", region_name="us-east-1", endpoint_url=moto_endpoint)
    ssm.put_parameter(Name=parameter, Value="s3cret-pass", Type="SecureString")
    script = tmp_path / "user-data.sh"
    script.write_text(render(USER_DATA.read_text(), {
        "region": "us-east-1", "broker_host": "127.0.0.1", "broker_port": str(broker.port),
        "broker_tls": "false", "broker_password_param": parameter,
        "checkpoint_bucket": bucket, "model_registry": f"s3://{bucket}/models/registry.json",
        "warm_models": "", "max_checkpoint_interval": "600",
    }))  # fmt: skip
    root = tmp_path / "root"
    env = {**os.environ, "FRAMEFLEET_ROOT": str(root), "FRAMEFLEET_PYTHON": sys.executable,
           "FRAMEFLEET_SYSTEMCTL": "true", "FRAMEFLEET_GROUP": str(os.getgid()),
           "AWS_ENDPOINT_URL": moto_endpoint, "FRAMEFLEET_AWS_ROLE": "worker",
           "FRAMEFLEET_AWS_PLACE": str(USER_DATA.relative_to(INFRA.parent))}  # fmt: skip
    user_data = await asyncio.create_subprocess_exec(
        "bash", str(script), env=env, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(120):
        _, errors = await user_data.communicate()
    assert user_data.returncode == 0, errors.decode()
    settings_file = root / "etc" / "framefleet" / "worker.env"
    assert oct(settings_file.stat().st_mode & 0o777) == "0o640"
    assert json.loads((root / "etc" / "framefleet" / "models.json").read_text()) == registry
    written = dict(line.split("=", 1) for line in settings_file.read_text().splitlines())
    assert "s3cret-pass" not in script.read_text()  # the secret is fetched, never templated
    agent_env = {**os.environ, **written, "FRAMEFLEET_WORKER_MODEL_REGISTRY":
                 str(root / "etc" / "framefleet" / "models.json")}  # fmt: skip
    # The agent itself, from exactly these settings, plus what only a test machine needs.
    agent_env |= {
        "FRAMEFLEET_WORKER_ENDPOINT_URL": moto_endpoint, "FRAMEFLEET_WORKER_IMDS_ENABLED": "false",
        "FRAMEFLEET_WORKER_WORKER_ID": f"w-{suffix}", "FRAMEFLEET_WORKER_ALLOW_CPU": "true",
        "FRAMEFLEET_WORKER_CACHE_DIR": str(tmp_path / "cache"),
    }  # fmt: skip
    assert written["FRAMEFLEET_WORKER_MQTT_PASSWORD"] == "s3cret-pass"
    assert written["FRAMEFLEET_WORKER_CHECKPOINT_BUCKET"] == bucket
    async with aiomqtt.Client("127.0.0.1", broker.port) as client:
        await client.subscribe(f"ff/v1/workers/w-{suffix}/hello", qos=1)
        agent = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "framefleet.worker_cli", "serve", env=agent_env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            async with asyncio.timeout(60):
                message = await anext(aiter(client.messages))
            hello = json.loads(bytes(message.payload))
            assert hello["type"] == "hello"
            assert hello["worker_id"] == f"w-{suffix}"
        finally:
            agent.terminate()
            await agent.wait()
