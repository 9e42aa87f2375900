"""The GPU instance types FrameFleet knows how to buy: GPU family, count and memory per GPU.

From the EC2 instance type pages (also what DescribeInstanceTypes returns for them); the family
names are the job spec's `gpu.families`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel.errors import ConfigurationError


@dataclass(frozen=True)
class InstanceKind:
    instance_type: str
    family: str
    gpus: int
    vram_gib: float


_KINDS = [
    InstanceKind("g4dn.xlarge", "t4", 1, 16),
    InstanceKind("g4dn.2xlarge", "t4", 1, 16),
    InstanceKind("g4dn.12xlarge", "t4", 4, 16),
    InstanceKind("g5.xlarge", "a10g", 1, 24),
    InstanceKind("g5.2xlarge", "a10g", 1, 24),
    InstanceKind("g5.12xlarge", "a10g", 4, 24),
    InstanceKind("g5.48xlarge", "a10g", 8, 24),
    InstanceKind("g6.xlarge", "l4", 1, 24),
    InstanceKind("g6.2xlarge", "l4", 1, 24),
    InstanceKind("g6.12xlarge", "l4", 4, 24),
    InstanceKind("g6e.xlarge", "l40s", 1, 48),
    InstanceKind("g6e.2xlarge", "l40s", 1, 48),
    InstanceKind("g6e.12xlarge", "l40s", 4, 48),
    InstanceKind("p3.2xlarge", "v100", 1, 16),
    InstanceKind("p3.8xlarge", "v100", 4, 16),
    InstanceKind("p4d.24xlarge", "a100", 8, 40),
    InstanceKind("p5.48xlarge", "h100", 8, 80),
]
CATALOG: dict[str, InstanceKind] = {kind.instance_type: kind for kind in _KINDS}


def kind_of(instance_type: str) -> InstanceKind:
    try:
        return CATALOG[instance_type]
    except KeyError:
        known = ", ".join(sorted(CATALOG))
        raise ConfigurationError(
            f"unknown GPU instance type {instance_type!r}; known: {known}"
        ) from None
