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


def subscribe_to_notices(aws: dict[str, Any], outputs: dict[str, Any]) -> str:
    """README, "Completion notices": an operator's rule on the Terraform bus sends every
    notice to a queue of theirs. Returns the queue."""
    bus = outputs["notice_bus_name"]
    queue = aws["sqs"].create_queue(QueueName="rehearsal-notices")["QueueUrl"]
    arn = aws["sqs"].get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    pattern = json.dumps({"source": ["framefleet"]})
    aws["events"].put_rule(Name="framefleet-notices", EventBusName=bus, EventPattern=pattern)
    aws["events"].put_targets(
        Rule="framefleet-notices",
        EventBusName=bus,
        Targets=[{"Id": "queue", "Arn": arn["Attributes"]["QueueArn"]}],
    )
    return str(queue)


def the_jobs_end_reaches_the_bus(aws: dict[str, Any], queue: str, job_id: str) -> None:
    """The control plane put the job's end on the Terraform bus, with its own role."""
    heard: list[dict[str, Any]] = []

    def succeeded() -> bool:
        for message in (
            aws["sqs"].receive_message(QueueUrl=queue, WaitTimeSeconds=1).get("Messages", [])
        ):
            heard.append(json.loads(message["Body"]))
        return any(
            e["detail-type"] == "job.succeeded" and e["detail"]["job_id"] == job_id for e in heard
        )

    wait_until(succeeded, timeout=90, what="the job's end on the notices bus")


def ecs_exec_has_its_volumes(launches: dict[str, TaskLaunch]) -> None:
    """ECS Exec's agent writes to volumes of the task's own: the root stays read-only."""
    for launch in launches.values():
        assert launch.read_only_root
        assert launch.exec_paths == (
            "/managed-agents",
            "/var/lib/amazon/ssm",
            "/var/log/amazon/ssm",
        )


def the_console_signs_people_on(aws: dict[str, Any], control_plane: TaskLaunch) -> None:
    """The console's pages need a person signed on at the load balancer; the API's routes pass
    a session on and let tokens through; the API believes that load balancer only."""
    balancers = aws["elbv2"].describe_load_balancers()["LoadBalancers"]
    [balancer] = [b for b in balancers if b["Type"] == "application"]  # the broker's is not
    [listener] = aws["elbv2"].describe_listeners(LoadBalancerArn=balancer["LoadBalancerArn"])[
        "Listeners"
    ]
    rules = aws["elbv2"].describe_rules(ListenerArn=listener["ListenerArn"])["Rules"]
    signing = {
        _paths(rule["Conditions"][0]): rule["Actions"][0]
        for rule in rules
        if rule["Actions"] and rule["Actions"][0]["Type"] == "authenticate-oidc"
    }
    allowed = {
        paths: action["AuthenticateOidcConfig"]["OnUnauthenticatedRequest"]
        for paths, action in signing.items()
    }
    expected = {
        frozenset({"/console*", "/static/*", "/"}): "authenticate",
        frozenset({"/v1/*"}): "allow",
    }
    assert allowed == expected, rules
    env = control_plane.environment
    assert env["FRAMEFLEET_API__SSO__LOAD_BALANCER_ARN"] == balancer["LoadBalancerArn"]
    assert json.loads(env["FRAMEFLEET_API__SSO__TEAM_GROUPS"]) == {"video-research": ["research"]}


def _paths(condition: dict[str, Any]) -> frozenset[str]:
    return frozenset(condition.get("PathPatternConfig", {}).get("Values") or condition["Values"])
