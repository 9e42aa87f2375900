"""A render process's share of its host: memory, threads, GPU memory and CPU weight."""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class RenderLimits:
    memory_bytes: int | None = None
    threads: int | None = None
    gpu_memory_fraction: float | None = None
    cpu_weight: int = 100  # cgroup v2 cpu.weight: equal shares between jobs


def limits_for(
    memory_gib: float | None,
    threads: int | None,
    gpu_fraction: float,
    slots: int,
    host_memory_bytes: int,
    host_cpus: int,
) -> RenderLimits:
    """A job's share of the host: what the settings say, else an even split between its GPUs
    of 90% of the memory (the rest is the agent's and the system's) and of the cores."""
    memory = (
        int(memory_gib * GIB)
        if memory_gib is not None
        else int(host_memory_bytes * 0.9 / max(1, slots))
    )
    return RenderLimits(
        memory_bytes=memory,
        threads=threads or max(1, host_cpus // max(1, slots)),
        gpu_memory_fraction=gpu_fraction,
    )


def host_memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
