"""An instance's boot as EC2 runs it, for the local fleet runner: the user data EC2 holds for the
instance (the launch template's), run as a shell script against a folder that stands for the
instance's root, with the instance's IMDS emulator. What the script writes for the agent
(`/etc/framefleet/worker.env`) becomes the worker's settings, so a local worker starts from
exactly what a real instance's agent would read.

The script's test hooks (`FRAMEFLEET_ROOT`, `FRAMEFLEET_PYTHON`, `FRAMEFLEET_SYSTEMCTL`,
`FRAMEFLEET_GROUP`) point it at the folder, this Python and a no-op for systemctl; the AWS
endpoint is the runner's own (`AWS_ENDPOINT_URL`, botocore's standard variable).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kernel.errors import FrameFleetError

if TYPE_CHECKING:
    from types_aiobotocore_ec2.client import EC2Client

log = logging.getLogger(__name__)
UserDataSource = Callable[[str], Awaitable[bytes | None]]
AGENT_SETTINGS = Path("etc") / "framefleet" / "worker.env"


class BootFailed(FrameFleetError):
    """The instance's user data is missing or exited with an error."""


def ec2_user_data(ec2: EC2Client) -> UserDataSource:
    """The user data EC2 keeps for an instance (DescribeInstanceAttribute)."""

    async def read(instance_id: str) -> bytes | None:
        answer = await ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
        encoded = answer.get("UserData", {}).get("Value")
        return base64.b64decode(encoded) if encoded else None

    return read


def agent_settings(text: str, root: Path) -> dict[str, str]:
    """The `NAME=value` lines the user data wrote; a value naming a file under /etc/framefleet
    names it under the instance's root folder."""
    settings: dict[str, str] = {}
    for line in text.splitlines():
        name, found, value = line.partition("=")
        if not found or not name.startswith("FRAMEFLEET_WORKER_"):
            continue
        if value.startswith("/etc/framefleet/"):
            value = str(root / value.removeprefix("/"))
        settings[name] = value
    return settings


@dataclass(frozen=True)
class InstanceBoot:
    read_user_data: UserDataSource

    async def agent_settings(self, instance_id: str, folder: Path, imds_url: str) -> dict[str, str]:
        script = await self.read_user_data(instance_id)
        if not script:
            raise BootFailed(f"instance {instance_id} has no user data")
        path = folder / "user-data"
        path.write_bytes(script)
        root = folder / "root"
        env = dict(os.environ) | {
            "FRAMEFLEET_ROOT": str(root),
            "FRAMEFLEET_PYTHON": sys.executable,
            "FRAMEFLEET_SYSTEMCTL": "true",
            "FRAMEFLEET_GROUP": str(os.getgid()),
            "FRAMEFLEET_IMDS_URL": imds_url,
        }
        with (folder / "boot.log").open("ab") as boot_log:
            process = await asyncio.create_subprocess_exec(
                "bash", str(path), env=env, stdout=boot_log, stderr=boot_log
            )
            returncode = await process.wait()
        if returncode != 0:
            raise BootFailed(
                f"instance {instance_id}: user data exited {returncode} (see {folder}/boot.log)"
            )
        log.info("instance %s booted from its user data", instance_id)
        return agent_settings((root / AGENT_SETTINGS).read_text(), root)
