"""The rehearsal's one-off and long-running ECS tasks: started from a task definition read back
from ECS (tests/infra/ecs.py) in a network namespace of their own."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

from tests.infra.ecs import TaskLaunch, Volume, start_in_namespace
from tests.infra.network import TaskNetwork

JOB_ID = f"rehearsal-{uuid.uuid4().hex[:8]}"
Started = list[tuple[str, subprocess.Popen[bytes], Path]]


def tail(path: Path, size: int = 3000) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else ""


def start_task(
    tmp_path: Path,
    network: TaskNetwork,
    hosts: Path,
    launch: TaskLaunch,
    platform: dict[str, str],
    processes: Started,
    command: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    index = len(network.namespaces)
    volume = tmp_path / f"volume-{launch.family}-{index}"
    volume.mkdir()
    log = tmp_path / f"{launch.family}-{index}.log"
    env = platform | {"HOME": launch.scratch} | launch.environment
    recorded = tuple(p for p in [os.environ.get("FRAMEFLEET_AWS_ACTIONS_LOG")] if p)
    mount = Volume(volume, launch.scratch, launch.read_only_root, recorded)
    process = start_in_namespace(network.add(), hosts, launch.argv(command), env, log, mount)
    processes.append((launch.family, process, log))
    return process
