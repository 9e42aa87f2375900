"""The GPU instance types EC2 describes (DescribeInstanceTypes, aioboto3): each one's GPUs, their
model and memory, and its vCPUs, as `kernel.instance_types.kind_from_ec2` reads them. Thin:
boto stays here, its errors leave typed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kernel.aws_errors import translated
from kernel.instance_types import InstanceKind, kind_from_ec2

if TYPE_CHECKING:
    from types_aiobotocore_ec2.client import EC2Client

# Values of one DescribeInstanceTypes filter, at most.
NAMES_PER_CALL = 100


async def describe_gpu_types(
    client: EC2Client, names: Sequence[str]
) -> tuple[list[InstanceKind], dict[str, str]]:
    """The kinds of these types, and why each other one is not a GPU type FrameFleet can buy."""
    kinds: list[InstanceKind] = []
    refused = {name: "EC2 does not describe it in this region" for name in names}
    for entry in await _described(client, names):
        name = str(entry.get("InstanceType", ""))
        kind_or_why = _kind(name, entry)
        if isinstance(kind_or_why, str):
            refused[name] = kind_or_why
        else:
            kinds.append(kind_or_why)
            refused.pop(name, None)
    return kinds, refused


async def _described(client: EC2Client, names: Sequence[str]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    pages = client.get_paginator("describe_instance_types")
    for start in range(0, len(names), NAMES_PER_CALL):
        # By filter, not by name: a name EC2 does not know fails a call by names whole.
        chunk = list(names[start : start + NAMES_PER_CALL])
        with translated("DescribeInstanceTypes"):
            async for page in pages.paginate(Filters=[{"Name": "instance-type", "Values": chunk}]):
                entries.extend(dict(entry) for entry in page.get("InstanceTypes", []))
    return entries


def _kind(name: str, entry: dict[str, Any]) -> InstanceKind | str:
    """The type's kind, or why it has none."""
    gpus = entry.get("GpuInfo", {}).get("Gpus", [])
    if not gpus:
        return "EC2 lists no GPU for it"
    gpu = gpus[0]
    kind = kind_from_ec2(
        name,
        str(gpu.get("Name", "")),
        int(gpu.get("Count", 0)),
        int(gpu.get("MemoryInfo", {}).get("SizeInMiB", 0)),
        int(entry.get("VCpuInfo", {}).get("DefaultVCpus", 0)),
    )
    return kind or f"its GPU ({gpu.get('Name')}) is not a family FrameFleet knows"
