"""When a deadline job is at risk: its latest start on the slowest GPU it may run on.

The control plane reads the queue a window at a time; a job whose deadline is near must be in
every read however long the backlog. Judged on the slowest family the job may use (and whose
memory holds it) the estimate is never optimistic, so such a job is read early rather than late.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime, timedelta

from kernel.instance_types import CATALOG
from kernel.job_spec import JobSpec
from kernel.model_memory import gpu_need_gib
from kernel.step_time import KNOWN_MODELS, architecture_of, step_seconds

# The most memory one GPU of each family has (the catalogue's types).
FAMILY_VRAM_GIB: Mapping[str, float] = {
    family: max(kind.vram_gib for kind in CATALOG.values() if kind.family.value == family)
    for family in {kind.family.value for kind in CATALOG.values()}
}


def planning_seconds_per_step(spec: JobSpec, families: frozenset[str] = frozenset()) -> float:
    """Seconds per step on the slowest family the job may run on whose GPUs hold it
    (`families`: where it may run, when not its spec's; empty: any)."""
    allowed = (
        families or frozenset(f.value for f in spec.gpu.families) or frozenset(FAMILY_VRAM_GIB)
    )
    return _slowest_pace(
        spec.model,
        (spec.width, spec.height, spec.num_frames),
        spec.guidance > 1,
        allowed,
        gpu_need_gib(spec),
    )


@functools.lru_cache(maxsize=4096)
def _slowest_pace(
    model: str, size: tuple[int, int, int], guided: bool, allowed: frozenset[str], vram: float
) -> float:
    # A tick asks for each waiting deadline job: the few shapes in a queue are computed once.
    holding = [f for f in allowed if FAMILY_VRAM_GIB.get(f, 0.0) >= vram]
    arch = architecture_of(model, KNOWN_MODELS)
    paces = [step_seconds(arch, *size, family, guided=guided) for family in holding or allowed]
    # Nothing holds it: it cannot run anywhere, and the fastest pace reads it no sooner.
    return max(paces) if holding else min(paces)


def start_by(
    spec: JobSpec,
    steps_left: int | None = None,
    seconds_per_step: float | None = None,
    families: frozenset[str] = frozenset(),
) -> datetime | None:
    """The latest moment the job can start (before any start-up) and still meet its deadline;
    None without one. `seconds_per_step`: a known pace (else the planning one)."""
    if spec.deadline is None:
        return None
    pace = seconds_per_step or planning_seconds_per_step(spec, families)
    steps = spec.steps if steps_left is None else steps_left
    return spec.deadline - timedelta(seconds=pace * max(0, steps))
