"""The GPU instance types FrameFleet knows how to buy: GPU family, count and memory per GPU.

Types, GPU counts and vCPUs from the EC2 instance type pages (also what DescribeInstanceTypes
returns for them); the family names are the job spec's `gpu.families`. Memory is what the GPU
reports, not what it is sold as: the autoscaler buys by it and the scheduler assigns by the
worker's NVML report, so both must count the same GiB (an L40S sold as 48 GB reports 44.99
GiB; bought by 48 for a 46.8 GiB job, it would sit idle and billed beside it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kernel.errors import ConfigurationError
from kernel.market import GpuFamily

# EC2's instance ids (never reused): the names of worker accounts and of instances in events.
INSTANCE_ID_PATTERN = r"^i-[0-9a-f]{8,32}$"


# GiB per GPU as NVML reports it (nvidia-smi's total in MiB, as public outputs on these types
# show it): what a worker's hello says. Exact, not rounded up: 44.99 would pass a 44.988 GPU.
T4_GIB = 15360 / 1024
V100_GIB = 16160 / 1024
A10G_GIB = 23028 / 1024
L4_GIB = 23034 / 1024
L40S_GIB = 46068 / 1024
A100_40_GIB = 40960 / 1024
A100_80_GIB = 81920 / 1024
H100_GIB = 81559 / 1024
H200_GIB = 143771 / 1024


@dataclass(frozen=True)
class InstanceKind:
    instance_type: str
    family: GpuFamily
    gpus: int
    vram_gib: float  # per GPU, as the GPU reports it
    vcpus: int  # what the account's vCPU quotas count


_KINDS = [
    InstanceKind("g4dn.xlarge", GpuFamily.T4, 1, T4_GIB, 4),
    InstanceKind("g4dn.2xlarge", GpuFamily.T4, 1, T4_GIB, 8),
    InstanceKind("g4dn.12xlarge", GpuFamily.T4, 4, T4_GIB, 48),
    InstanceKind("g5.xlarge", GpuFamily.A10G, 1, A10G_GIB, 4),
    InstanceKind("g5.2xlarge", GpuFamily.A10G, 1, A10G_GIB, 8),
    InstanceKind("g5.12xlarge", GpuFamily.A10G, 4, A10G_GIB, 48),
    InstanceKind("g5.48xlarge", GpuFamily.A10G, 8, A10G_GIB, 192),
    InstanceKind("g6.xlarge", GpuFamily.L4, 1, L4_GIB, 4),
    InstanceKind("g6.2xlarge", GpuFamily.L4, 1, L4_GIB, 8),
    InstanceKind("g6.12xlarge", GpuFamily.L4, 4, L4_GIB, 48),
    InstanceKind("g6e.xlarge", GpuFamily.L40S, 1, L40S_GIB, 4),
    InstanceKind("g6e.2xlarge", GpuFamily.L40S, 1, L40S_GIB, 8),
    InstanceKind("g6e.12xlarge", GpuFamily.L40S, 4, L40S_GIB, 48),
    InstanceKind("p3.2xlarge", GpuFamily.V100, 1, V100_GIB, 8),
    InstanceKind("p3.8xlarge", GpuFamily.V100, 4, V100_GIB, 32),
    InstanceKind("p4d.24xlarge", GpuFamily.A100, 8, A100_40_GIB, 96),
    InstanceKind("p5.48xlarge", GpuFamily.H100, 8, H100_GIB, 192),
    # Today's other GPU types (2025-06), so an operator may allow them by name; the dated
    # on-demand table (`autoscaler/market/on_demand.py`) prices the ones above only, so these
    # are bought where the Pricing API answers.
    InstanceKind("g4dn.4xlarge", GpuFamily.T4, 1, T4_GIB, 16),
    InstanceKind("g4dn.8xlarge", GpuFamily.T4, 1, T4_GIB, 32),
    InstanceKind("g4dn.16xlarge", GpuFamily.T4, 1, T4_GIB, 64),
    InstanceKind("g4dn.metal", GpuFamily.T4, 8, T4_GIB, 96),
    InstanceKind("g5.4xlarge", GpuFamily.A10G, 1, A10G_GIB, 16),
    InstanceKind("g5.8xlarge", GpuFamily.A10G, 1, A10G_GIB, 32),
    InstanceKind("g5.16xlarge", GpuFamily.A10G, 1, A10G_GIB, 64),
    InstanceKind("g5.24xlarge", GpuFamily.A10G, 4, A10G_GIB, 96),
    InstanceKind("g6.4xlarge", GpuFamily.L4, 1, L4_GIB, 16),
    InstanceKind("g6.8xlarge", GpuFamily.L4, 1, L4_GIB, 32),
    InstanceKind("g6.16xlarge", GpuFamily.L4, 1, L4_GIB, 64),
    InstanceKind("g6.24xlarge", GpuFamily.L4, 4, L4_GIB, 96),
    InstanceKind("g6.48xlarge", GpuFamily.L4, 8, L4_GIB, 192),
    InstanceKind("gr6.4xlarge", GpuFamily.L4, 1, L4_GIB, 16),
    InstanceKind("gr6.8xlarge", GpuFamily.L4, 1, L4_GIB, 32),
    InstanceKind("g6e.4xlarge", GpuFamily.L40S, 1, L40S_GIB, 16),
    InstanceKind("g6e.8xlarge", GpuFamily.L40S, 1, L40S_GIB, 32),
    InstanceKind("g6e.16xlarge", GpuFamily.L40S, 1, L40S_GIB, 64),
    InstanceKind("g6e.24xlarge", GpuFamily.L40S, 4, L40S_GIB, 96),
    InstanceKind("g6e.48xlarge", GpuFamily.L40S, 8, L40S_GIB, 192),
    InstanceKind("p4de.24xlarge", GpuFamily.A100, 8, A100_80_GIB, 96),
    InstanceKind("p5e.48xlarge", GpuFamily.H200, 8, H200_GIB, 192),
    InstanceKind("p5en.48xlarge", GpuFamily.H200, 8, H200_GIB, 192),
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


# NVML's total per GPU (the figures above) by the GPU's name and memory as EC2's
# DescribeInstanceTypes lists them: EC2 lists a GPU's memory as sold or as its driver once
# said (a T4: 16384 MiB, an L40S: 45776), a worker reports what NVML says (15360, 46068).
REPORTED_GIB = {
    ("T4", 16384): T4_GIB,
    ("V100", 16384): V100_GIB,
    ("A10G", 22888): A10G_GIB,
    ("A10G", 24576): A10G_GIB,
    ("L4", 22888): L4_GIB,
    ("L40S", 45776): L40S_GIB,
    ("L40S", 49152): L40S_GIB,
    ("A100", 40960): A100_40_GIB,
    ("A100", 81920): A100_80_GIB,
    ("H100", 81920): H100_GIB,
    ("H200", 144384): H200_GIB,
    ("H200", 143360): H200_GIB,
}
# A GPU the table lacks is taken at EC2's memory less the widest gap the table shows (a T4:
# 16384 MiB listed, 15360 reported) until measured: buying by more than a worker will report
# would leave a job beside an idle, billed instance.
UNMEASURED_SHARE = T4_GIB * 1024 / 16384


def kind_from_ec2(
    instance_type: str, gpu_name: str, gpus: int, memory_mib: int, vcpus: int
) -> InstanceKind | None:
    """A type as DescribeInstanceTypes describes it; None for one with no whole GPU of a
    family FrameFleet knows (its jobs' `gpu.families` could not name it)."""
    try:
        family = GpuFamily(gpu_name.lower())
    except ValueError:
        return None
    if gpus < 1 or memory_mib < 1:
        return None
    unmeasured = memory_mib * UNMEASURED_SHARE / 1024
    reported = REPORTED_GIB.get((gpu_name.upper(), memory_mib), unmeasured)
    return InstanceKind(instance_type, family, gpus, reported, vcpus)


def learn(kinds: Iterable[InstanceKind]) -> None:
    """Types described by EC2 (or its copy in the store) join the catalogue for this process's
    life, replacing the shipped offline figures: an operator may name any GPU type in
    `autoscaler.candidate_types`."""
    for kind in kinds:
        CATALOG[kind.instance_type] = kind
