"""Whether a GPU holds a job: the one rule the autoscaler buys by and the scheduler assigns by.

Both sides compare the same facts: the job's need in GiB against the GPU's memory as the GPU
reports it (the catalogue's measured table for a type not yet up, the worker's NVML report for
a slot that is), and the job's allowed families. Where the two ever disagree (a worker that
shares its GPUs or slices them by MIG reports smaller slots than the type's GPU), the
autoscaler learns it from a reservation the scheduler did not use (`autoscaler/reservations.py`).
"""

from __future__ import annotations

from collections.abc import Collection


def gpu_fits(family: str, vram_gib: float, need_gib: float, families: Collection[str]) -> bool:
    """A GPU of `family` with `vram_gib` (as it reports it) holds a job needing `need_gib` of
    one of `families` (empty: any)."""
    return vram_gib >= need_gib and (not families or family in families)
