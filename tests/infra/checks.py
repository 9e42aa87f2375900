"""What the rehearsal checks once the job is done: where the launches landed, the finance report
through SES, a Health retirement drain, the first token into its secret and through the API, and
the alert workspace."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.store.job_store import JobStore
from tests.infra.ecs import TaskLaunch
from tests.infra.network import TaskNetwork
from tests.infra.tasks import JOB_ID, start_task, tail
from tests.support.paths import INFRA
from tests.support.waits import wait_until

RULES = INFRA / "alerts" / "framefleet.rules.yml"


def launched_into_the_deployment(
    aws: dict[str, Any], outputs: dict[str, Any], fleet: dict[str, str]
) -> None:
    subnets = set(json.loads(fleet["FRAMEFLEET_AUTOSCALER__SUBNETS"]).values())
    template = aws["ec2"].describe_launch_templates(
        LaunchTemplateNames=[fleet["FRAMEFLEET_AUTOSCALER__LAUNCH_TEMPLATE"]]
    )["LaunchTemplates"][0]
    data = aws["ec2"].describe_launch_template_versions(
        LaunchTemplateId=template["LaunchTemplateId"]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    tag = {"Name": "tag:framefleet:fleet", "Values": [fleet["FRAMEFLEET_AUTOSCALER__FLEET_ID"]]}
    reservations = aws["ec2"].describe_instances(Filters=[tag])["Reservations"]
    instances = [i for r in reservations for i in r["Instances"]]
    assert len(instances) >= 2
    for instance in instances:
        assert instance["SubnetId"] in subnets
        assert instance["ImageId"] == data["ImageId"]
        # Not the security groups nor the instance profile: moto's CreateFleet reads a
        # template's `GroupSet`, not the `SecurityGroupIds` Terraform writes (the instance gets
        # the VPC's default group), and drops the profile.


def the_report_reaches_finance(
    tmp_path: Path,
    network: TaskNetwork,
    hosts: Path,
    control_plane: TaskLaunch,
    platform: dict[str, str],
    aws: dict[str, Any],
) -> None:
    """The day's report, as a one-off task of the control plane's definition (an ECS run-task
    with a command override), through the Terraform SES identity."""
    before = sent(aws)
    today = datetime.now(UTC).date().isoformat()
    ran: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    report = start_task(
        tmp_path,
        network,
        hosts,
        control_plane,
        platform,
        ran,
        ["report", "--period", "day", "--since", today],
    )
    assert report.wait(timeout=180) == 0, tail(ran[0][2])
    assert "emailed to finance@rehearsal.example" in ran[0][2].read_text()
    assert sent(aws) > before  # SES took it from the Terraform identity's sender


def sent(aws: dict[str, Any]) -> int:
    points = aws["ses"].get_send_statistics()["SendDataPoints"]
    return sum(int(p["DeliveryAttempts"]) for p in points)


def a_scheduled_retirement_drains_the_instance(store: JobStore, aws: dict[str, Any]) -> None:
    """AWS Health's scheduled change for the instance the job finished on, through the
    Terraform rule: the control plane asks for it to be drained, as for a rebalance."""
    instance = store.get(JOB_ID).worker_id
    assert instance is not None
    detail = {
        "service": "EC2",
        "eventTypeCategory": "scheduledChange",
        "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "affectedEntities": [{"entityValue": instance}],
    }
    entry = {"Source": "aws.health", "DetailType": "AWS Health Event", "Detail": json.dumps(detail)}
    aws["events"].put_events(Entries=[entry])
    wait_until(
        lambda: instance in store.instance_records.drain_requests(),
        timeout=60,
        what="a drain request",
    )


def the_first_token_opens_the_api(
    tmp_path: Path,
    network: TaskNetwork,
    hosts: Path,
    control_plane: TaskLaunch,
    platform: dict[str, str],
    aws: dict[str, Any],
    outputs: dict[str, Any],
    api: str,
) -> None:
    """README's first token: a one-off task writes it into the Terraform secret, not its log."""
    secret = outputs["first_token_secret_arn"]
    ran: list[tuple[str, subprocess.Popen[bytes], Path]] = []
    command = ["tokens", "create", "--name", "platform-team", "--scopes", "admin"]
    task = start_task(
        tmp_path, network, hosts, control_plane, platform, ran, [*command, "--into-secret", secret]
    )
    assert task.wait(timeout=120) == 0, tail(ran[0][2])
    token = aws["secretsmanager"].get_secret_value(SecretId=secret)["SecretString"]
    assert token not in ran[0][2].read_text()
    url = f"{api}/v1/jobs/{JOB_ID}"  # http to the task itself (the load balancer ends TLS)
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310
        assert json.loads(answer.read())["state"] == "succeeded"


def the_alerts_are_deployed(aws: dict[str, Any], outputs: dict[str, Any]) -> None:
    """The workspace runs the shipped rules file as it is; its alert manager publishes to the
    alarm topic."""
    amp = aws["amp"]
    [workspace] = amp.list_workspaces()["workspaces"]
    namespace = amp.describe_rule_groups_namespace(
        workspaceId=workspace["workspaceId"], name="framefleet"
    )["ruleGroupsNamespace"]
    assert namespace["data"] == RULES.read_bytes()
    definition = amp.describe_alert_manager_definition(workspaceId=workspace["workspaceId"])
    assert outputs["alarm_topic_arn"] in definition["alertManagerDefinition"]["data"].decode()
