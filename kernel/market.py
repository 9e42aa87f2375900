"""The words for capacity, one spelling each: the market an instance is bought on, and the
GPU families EC2 offers (what a job may ask for, what the catalog sells, what a worker reports)."""

from __future__ import annotations

from enum import StrEnum


class Market(StrEnum):
    SPOT = "spot"
    ON_DEMAND = "on-demand"


class GpuFamily(StrEnum):
    """NVIDIA GPU models offered by EC2 GPU instance families."""

    T4 = "t4"  # g4dn
    A10G = "a10g"  # g5
    L4 = "l4"  # g6
    L40S = "l40s"  # g6e
    V100 = "v100"  # p3
    A100 = "a100"  # p4d, p4de
    H100 = "h100"  # p5
    H200 = "h200"  # p5e, p5en


# Longest names first: "l40s" must win over "l4", "h200" over "h100"'s prefix checks.
_BY_NAME_LENGTH = sorted(GpuFamily, key=lambda family: -len(family.value))


def family_of_gpu(name: str) -> str:
    """The family of a GPU as NVML names it ("NVIDIA L40S" -> "l40s"); a GPU of no known family
    keeps its own name, squeezed to what the worker protocol allows."""
    lowered = name.lower()
    for family in _BY_NAME_LENGTH:
        if family.value in lowered:
            return family.value
    return "".join(ch for ch in lowered if ch.isalnum())[:16] or "unknown"
