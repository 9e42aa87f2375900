"""The services started as ECS starts them, from the task definitions Terraform registered, read
back from the (moto) ECS API: the image's entrypoint (the repository's Dockerfile) with the
container's command, its environment, its secrets resolved from Secrets Manager as the ECS agent
resolves them (a JSON key after the secret's ARN picks one field), and its root file system
read-only but for its writable volumes, in a network namespace of its own (awsvpc)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def entrypoint() -> list[str]:
    """The service image's ENTRYPOINT, its program from this environment's bin folder."""
    found = re.search(r"^ENTRYPOINT (\[.*\])$", DOCKERFILE.read_text(), flags=re.M)
    assert found, "the Dockerfile has an exec-form ENTRYPOINT"
    program, *arguments = json.loads(found.group(1))
    return [str(Path(sys.executable).with_name(program)), *arguments]


def resolve_secret(secretsmanager: Any, reference: str) -> str:
    """`valueFrom` as ECS reads it: a secret's ARN, optionally followed by
    `:json-key:version-stage:version-id`."""
    parts = reference.split(":")
    arn, extra = ":".join(parts[:7]), [*parts[7:], "", "", ""]
    key, stage, version = extra[:3]
    request: dict[str, str] = {"SecretId": arn}
    if stage:
        request["VersionStage"] = stage
    if version:
        request["VersionId"] = version
    value = str(secretsmanager.get_secret_value(**request)["SecretString"])
    return str(json.loads(value)[key]) if key else value


@dataclass(frozen=True)
class TaskLaunch:
    family: str
    command: list[str]
    environment: dict[str, str]
    read_only_root: bool
    scratch: str  # the container path of its one writable volume the process uses
    exec_paths: tuple[str, ...] = ()  # where ECS Exec's agent writes (volumes of their own)

    def argv(self, command: list[str] | None = None) -> list[str]:
        """The entrypoint with the definition's command, or with an override (run-task)."""
        return [*entrypoint(), *(self.command if command is None else command)]


def task_launch(ecs: Any, secretsmanager: Any, family: str, container_name: str) -> TaskLaunch:
    """The named container of the family's newest definition (its sidecars are not run here)."""
    definition = ecs.describe_task_definition(taskDefinition=family)["taskDefinition"]
    [container] = [c for c in definition["containerDefinitions"] if c["name"] == container_name]
    environment = {item["name"]: item["value"] for item in container.get("environment", [])}
    for secret in container.get("secrets", []):
        environment[secret["name"]] = resolve_secret(secretsmanager, secret["valueFrom"])
    writable = {
        m["sourceVolume"]: m["containerPath"]
        for m in container.get("mountPoints", [])
        if not m.get("readOnly", False)
    }
    # Besides the scratch volume, only ECS Exec's agent writes (it is not run here).
    exec_paths = {name: path for name, path in writable.items() if name.startswith("ssm-")}
    assert set(writable) - set(exec_paths) == {"scratch"}, writable
    return TaskLaunch(
        family=family,
        command=list(container.get("command", [])),
        environment=environment,
        read_only_root=bool(container.get("readonlyRootFilesystem")),
        scratch=writable["scratch"],
        exec_paths=tuple(sorted(exec_paths.values())),
    )


# In the task's namespaces: the VPC's names, the volume at its path, the test's own files that
# stay writable (colon-separated: the AWS actions log), then the root read-only.
TASK_SCRIPT = (
    'mount --bind "$1" /etc/hosts && mount -t tmpfs tmpfs "$(dirname "$3")" '
    '&& mkdir -p "$3" && mount --bind "$2" "$3" '
    '&& for f in $(echo "$5" | tr ":" " "); do mount --bind "$f" "$f" || exit 1; done '
    '&& if [ "$4" = ro ]; then mount --bind / / && mount -o remount,bind,ro /; fi '
    '&& cd "$3" && shift 5 && exec "$@"'
)
HOST_SCRIPT = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'


@dataclass(frozen=True)
class Volume:
    folder: Path  # on this machine
    container_path: str
    read_only_root: bool
    test_files: tuple[str, ...] = ()  # the test's own, left writable


def start_in_namespace(
    namespace: str,
    hosts: Path,
    argv: list[str],
    env: dict[str, str],
    log: Path,
    volume: Volume | None = None,
) -> subprocess.Popen[bytes]:
    """`argv` in the network namespace, with `hosts` for /etc/hosts; with a volume, as a task:
    the volume the one writable place when the root is read-only."""
    shell = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    if volume is None:
        command = [*shell, HOST_SCRIPT, "sh", str(hosts), *argv]
    else:
        mode = "ro" if volume.read_only_root else "rw"
        test_files = ":".join(volume.test_files)
        where = [str(hosts), str(volume.folder), volume.container_path, mode, test_files]
        command = [*shell, TASK_SCRIPT, "sh", *where, *argv]
    with log.open("ab") as output:
        return subprocess.Popen(
            ["ip", "netns", "exec", namespace, *command], env=env, stdout=output, stderr=output
        )
