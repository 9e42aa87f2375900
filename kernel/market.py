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


FAMILY_MOST = 16  # characters of a family in the worker protocol


def mig_family(family: str, slices: int) -> str:
    """A MIG instance's family: its GPU's, marked with its compute slices ("a100mig3"). A slice
    is not its whole GPU: its steps are slower and its kernels may round differently, so its
    pace is learned, and its checkpoints resumed exactly, apart from the whole GPU's. A job
    that names the whole GPU's family in `gpu.families` does not run on a slice of it."""
    suffix = f"mig{slices}" if slices > 0 else "mig"
    return family[: FAMILY_MOST - len(suffix)] + suffix


def is_slice_of(family: str, whole: str) -> bool:
    """`family` names a MIG slice of a `whole` GPU family (`mig_family`)."""
    return any(family == mig_family(whole, slices) for slices in range(8))
