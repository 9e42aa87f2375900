"""Frozen inputs and outputs of the scheduler."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from orchestrator.scheduling.quotas import TeamQuota


@dataclass(frozen=True)
class Work:
    """What a job has left to render, for the pace of jobs that share a GPU (`turns`)."""

    model: str
    width: int
    height: int
    frames: int
    steps_left: int


@dataclass(frozen=True)
class PendingJob:
    """A queued job waiting for a GPU."""

    job_id: str
    priority: int
    deadline: datetime | None
    queued_since: datetime
    min_vram_gib: float
    families: frozenset[str] = frozenset()  # empty: any family
    # Workers on the instance the autoscaler bought (or picked) for this job: their free GPU
    # goes to it before anyone else.
    reserved_on: frozenset[str] = frozenset()
    # The autoscaler bought on-demand capacity for it (its deadline cannot take a spot
    # interruption): it takes on-demand GPUs only.
    on_demand_only: bool = False
    # Workers an earlier attempt failed on through the worker's fault: never again there.
    avoid: frozenset[str] = frozenset()
    # An instance bought for it is on its way: it waits for that instead of preempting.
    capacity_coming: bool = False
    # After this moment its deadline cannot take a spot interruption: on-demand GPUs only.
    spot_until: datetime | None = None
    # Its model (`warm_key`: with the stage its next attempt runs, if split): among GPUs
    # equally good for it, one that holds that loaded wins.
    model: str = ""
    # The latest moment it can start and meet its deadline (its deadline less its remaining
    # steps at its pace): among jobs of equal aged priority the least slack goes first.
    start_by: datetime | None = None
    team: str | None = None  # its cost tag: what its team's quota counts it against
    gpus: int = 1  # of one instance, all at once (`gang_round`)
    work: Work | None = None

    @property
    def latest_start(self) -> datetime | None:
        return self.start_by or self.deadline


@dataclass(frozen=True)
class RunningJob:
    job_id: str
    priority: int
    deadline: datetime | None
    started_at: datetime
    # Preempting costs the work since the last checkpoint; a job in the middle of
    # checkpointing or finishing is not a candidate.
    preemptible: bool = True
    team: str | None = None
    work: Work | None = None


@dataclass(frozen=True)
class GpuSlot:
    worker_id: str
    index: int
    family: str
    vram_gib: float
    running: RunningJob | None = None
    reserved_for: str | None = None  # a job waiting for this GPU to be freed by a preemption
    spot: bool = False  # on a spot instance (may be interrupted)
    # The model this (free) GPU holds loaded from its last job: the next job of it starts
    # without a load.
    warm_model: str | None = None
    # A slot that takes turns on its GPU (number `physical`) with the GPU's other slots.
    physical: int | None = None
    time_shared: bool = False


@dataclass(frozen=True)
class WorkerSnapshot:
    worker_id: str
    gpus: tuple[GpuSlot, ...]
    # False when draining, interrupted, suspect or lost: nothing new goes there.
    accepting: bool = True


@dataclass(frozen=True)
class SchedulerSettings:
    # Priority points a job gains per hour of waiting, so low priority never starves.
    aging_per_hour: float = 1.0
    # A job may preempt only one at least this many (base) priority points below it.
    preemption_margin: int = 2
    # Priority points a job gains once its deadline is at risk (its latest start within this
    # margin of now: a start-up, and the wait for a GPU to free in a busy fleet): it goes
    # before jobs of its own priority that merely waited longer.
    at_risk_boost: float = 2.0
    at_risk_startup_seconds: float = 1800.0
    # Team -> its share of GPUs (`quotas`); teams left out are not limited.
    quotas: Mapping[str, TeamQuota] = field(default_factory=dict)
    # The team of a job that names none: a quota for it limits those jobs like any team's.
    default_team: str = "default"


@dataclass(frozen=True)
class Assignment:
    job_id: str
    worker_id: str
    gpu_index: int  # the lead GPU: a spanned render's rank 0
    reason: str
    span: tuple[int, ...] = ()  # the other GPUs of a job that spans several


@dataclass(frozen=True)
class Preemption:
    victim_job_id: str
    worker_id: str
    gpu_index: int
    for_job_id: str
    reason: str


@dataclass(frozen=True)
class QuotaWait:
    """A job left waiting and why: a free GPU would have fitted it but its team's quota held it
    back, or it spans GPUs that are not free together."""

    job_id: str
    reason: str


@dataclass(frozen=True)
class Decisions:
    assignments: tuple[Assignment, ...] = field(default_factory=tuple)
    preemptions: tuple[Preemption, ...] = field(default_factory=tuple)
    waits: tuple[QuotaWait, ...] = field(default_factory=tuple)
    # Worker -> the spanning job it is held for (kept for the next tick's `held_before`).
    holds: Mapping[str, str] = field(default_factory=dict)
