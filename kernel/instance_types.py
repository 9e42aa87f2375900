"""The GPU instance types FrameFleet knows how to buy: GPU family, count and memory per GPU.

From the EC2 instance type pages (also what DescribeInstanceTypes returns for them); the family
names are the job spec's `gpu.families`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel.errors import ConfigurationError
from kernel.market import GpuFamily

# EC2's instance ids (never reused): the names of worker accounts and of instances in events.
INSTANCE_ID_PATTERN = r"^i-[0-9a-f]{8,32}$"


@dataclass(frozen=True)
class InstanceKind:
    instance_type: str
    family: GpuFamily
    gpus: int
    vram_gib: float
    vcpus: int  # what the account's vCPU quotas count


_KINDS = [
    InstanceKind("g4dn.xlarge", GpuFamily.T4, 1, 16, 4),
    InstanceKind("g4dn.2xlarge", GpuFamily.T4, 1, 16, 8),
    InstanceKind("g4dn.12xlarge", GpuFamily.T4, 4, 16, 48),
    InstanceKind("g5.xlarge", GpuFamily.A10G, 1, 24, 4),
    InstanceKind("g5.2xlarge", GpuFamily.A10G, 1, 24, 8),
    InstanceKind("g5.12xlarge", GpuFamily.A10G, 4, 24, 48),
    InstanceKind("g5.48xlarge", GpuFamily.A10G, 8, 24, 192),
    InstanceKind("g6.xlarge", GpuFamily.L4, 1, 24, 4),
    InstanceKind("g6.2xlarge", GpuFamily.L4, 1, 24, 8),
    InstanceKind("g6.12xlarge", GpuFamily.L4, 4, 24, 48),
    InstanceKind("g6e.xlarge", GpuFamily.L40S, 1, 48, 4),
    InstanceKind("g6e.2xlarge", GpuFamily.L40S, 1, 48, 8),
    InstanceKind("g6e.12xlarge", GpuFamily.L40S, 4, 48, 48),
    InstanceKind("p3.2xlarge", GpuFamily.V100, 1, 16, 8),
    InstanceKind("p3.8xlarge", GpuFamily.V100, 4, 16, 32),
    InstanceKind("p4d.24xlarge", GpuFamily.A100, 8, 40, 96),
    InstanceKind("p5.48xlarge", GpuFamily.H100, 8, 80, 192),
    # Today's other GPU types (2025-06), so an operator may allow them by name; the dated
    # on-demand table (`autoscaler/market/on_demand.py`) prices the ones above only, so these
    # are bought where the Pricing API answers.
    InstanceKind("g4dn.4xlarge", GpuFamily.T4, 1, 16, 16),
    InstanceKind("g4dn.8xlarge", GpuFamily.T4, 1, 16, 32),
    InstanceKind("g4dn.16xlarge", GpuFamily.T4, 1, 16, 64),
    InstanceKind("g4dn.metal", GpuFamily.T4, 8, 16, 96),
    InstanceKind("g5.4xlarge", GpuFamily.A10G, 1, 24, 16),
    InstanceKind("g5.8xlarge", GpuFamily.A10G, 1, 24, 32),
    InstanceKind("g5.16xlarge", GpuFamily.A10G, 1, 24, 64),
    InstanceKind("g5.24xlarge", GpuFamily.A10G, 4, 24, 96),
    InstanceKind("g6.4xlarge", GpuFamily.L4, 1, 24, 16),
    InstanceKind("g6.8xlarge", GpuFamily.L4, 1, 24, 32),
    InstanceKind("g6.16xlarge", GpuFamily.L4, 1, 24, 64),
    InstanceKind("g6.24xlarge", GpuFamily.L4, 4, 24, 96),
    InstanceKind("g6.48xlarge", GpuFamily.L4, 8, 24, 192),
    InstanceKind("gr6.4xlarge", GpuFamily.L4, 1, 24, 16),
    InstanceKind("gr6.8xlarge", GpuFamily.L4, 1, 24, 32),
    InstanceKind("g6e.4xlarge", GpuFamily.L40S, 1, 48, 16),
    InstanceKind("g6e.8xlarge", GpuFamily.L40S, 1, 48, 32),
    InstanceKind("g6e.16xlarge", GpuFamily.L40S, 1, 48, 64),
    InstanceKind("g6e.24xlarge", GpuFamily.L40S, 4, 48, 96),
    InstanceKind("g6e.48xlarge", GpuFamily.L40S, 8, 48, 192),
    InstanceKind("p4de.24xlarge", GpuFamily.A100, 8, 80, 96),
    InstanceKind("p5e.48xlarge", GpuFamily.H200, 8, 141, 192),
    InstanceKind("p5en.48xlarge", GpuFamily.H200, 8, 141, 192),
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
