"""Least privilege, both ways: the AWS actions the test suite saw the code call, per process
role (tests/support/aws_actions.py), against the actions each IAM policy in infra/ grants.
Nothing the code calls may be missing from its role's policy, and nothing granted may go unused,
but for the exceptions below, each with its reason. Run after the whole suite (`make unit` does):

    python -m tests.support.iam_check [--calls-only] [.aws-actions.jsonl]

Prints the table (action, role, the code that calls it) and exits 1 on any difference."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from tests.support.paths import INFRA
from tools.terraform_docs import parsed

# Policy documents in infra/ and the role each belongs to.
POLICIES = {
    ("worker_fleet", "worker"): "worker",
    ("iam", "control_plane"): "control-plane",
    ("iam", "autoscaler"): "autoscaler",
    ("iam", "producer"): "producer",
}
# botocore operations whose IAM action has another name.
ACTIONS = {
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "DeleteObjects"): "s3:DeleteObject",
    ("s3", "CreateMultipartUpload"): "s3:PutObject",
    ("s3", "UploadPart"): "s3:PutObject",
    ("s3", "CompleteMultipartUpload"): "s3:PutObject",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
}
# Granted, though the code never calls them: AWS checks them inside another call (EC2 inside
# CreateFleet/RunInstances, S3 when a presigned link is followed).
IMPLIED = {
    ("autoscaler", "iam:PassRole"): "EC2 checks it when a launch passes the worker profile",
    ("autoscaler", "ec2:CreateTags"): "EC2 checks it for the tags a launch carries",
    ("autoscaler", "iam:CreateServiceLinkedRole"): "EC2 Fleet and Spot create their roles once",
    ("autoscaler", "ssm:AddTagsToResource"): "SSM checks it for the tags PutParameter carries",
    ("control-plane", "s3:GetObject"): (
        "S3 checks it when a presigned video link the API signed is followed"
    ),
}
# Granted for a path of the code the suite does not reach.
UNREACHED = {
    ("worker", "s3:AbortMultipartUpload"): (
        "object_store._put_multipart aborts an upload whose part failed; no test fails a part"
    ),
}
# Called, though not granted in the Terraform deployment.
NOT_GRANTED = {
    ("autoscaler", "sts:GetCallerIdentity"): (
        "needs no permission (AWS allows it to every caller); the account for the instance "
        "ARNs the broker passwords are tagged with"
    ),
    ("autoscaler", "ec2:CreateLaunchTemplate"): (
        "only with autoscaler.image_id set, for a deployment without Terraform; Terraform "
        "creates the launch template"
    ),
}


def granted() -> dict[str, set[str]]:
    by_role: dict[str, set[str]] = defaultdict(set)
    for (module, document), role in POLICIES.items():
        tree = parsed(INFRA / "modules" / module / "main.tf")
        for block in tree.get("data", []):
            for body in (block.get("aws_iam_policy_document", {}).get(document, {}),):
                for statement in body.get("statement", []):
                    if statement.get("effect", "Allow") == "Allow":
                        by_role[role].update(statement["actions"])
    return by_role


def called(log: Path) -> dict[tuple[str, str], set[str]]:
    """(role, IAM action) -> the places in the code that call it."""
    places: dict[tuple[str, str], set[str]] = defaultdict(set)
    for line in log.read_text().splitlines():
        entry = json.loads(line)
        if entry["role"] == "setup":
            continue
        service, operation = entry["service"], entry["operation"]
        action = ACTIONS.get((service, operation), f"{service}:{operation}")
        places[(entry["role"], action)].add(entry["place"])
    return places


def main(argv: list[str]) -> int:
    # --calls-only: a run of part of the code (the loaded demo) is held to "every call is
    # granted"; "every grant is called" needs the whole suite's log.
    calls_only = "--calls-only" in argv
    paths = [arg for arg in argv if arg != "--calls-only"]
    log = Path(paths[0]) if paths else Path(".aws-actions.jsonl")
    grants, calls = granted(), called(log)
    print(f"{'action':36} {'role':14} code that calls it")
    for (role, action), places in sorted(calls.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{action:36} {role:14} {', '.join(sorted(places))}")
    problems = []
    for role, action in sorted(calls):
        if action not in grants.get(role, set()) and (role, action) not in NOT_GRANTED:
            problems.append(f"{role} calls {action}, which its policy does not grant")
    for role, actions in sorted(grants.items()):
        for action in sorted(actions) if not calls_only else ():
            if (role, action) not in calls and (role, action) not in {**IMPLIED, **UNREACHED}:
                problems.append(f"{role}'s policy grants {action}, which no code calls")
    for (role, action), why in {**IMPLIED, **UNREACHED, **NOT_GRANTED}.items():
        print(f"exception: {role} {action}: {why}")
    for problem in problems:
        print(f"IAM: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
