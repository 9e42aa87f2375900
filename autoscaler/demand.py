"""What the control plane's database says the autoscaler must serve: queued jobs with their
progress, and how many GPUs each instance has busy (a worker's id is its instance id)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from autoscaler.snapshot import JobDemand, RunningDemand
from autoscaler.throughput import WorkShape
from kernel.instance_state import InstanceChange, InstanceState, InstanceStatus
from kernel.instance_types import InstanceKind
from kernel.job_record import DrainRequest, FinishedRun, JobRecord, Placement, Reservation
from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage, stage_need_gib

# How far ahead of its latest start a deadline job is read, whatever the backlog before it.
PLANNING_HORIZON = timedelta(hours=24)


def shape_of(spec: JobSpec) -> WorkShape:
    return WorkShape(spec.model, spec.width, spec.height, spec.num_frames)


def demand_of(
    spec: JobSpec,
    submitted_at: datetime,
    deadline: datetime | None,
    done: int = 0,
    families: frozenset[str] | None = None,
    stage: RenderStage | None = None,
    may_split: bool = False,
) -> JobDemand:
    """`families`: where it may run, when not its spec's (an exact job's checkpoint family);
    `stage`: the stage its next attempt runs, whose GPU need is its own."""
    return JobDemand(
        job_id=spec.job_id,
        priority=spec.priority,
        submitted_at=submitted_at,
        deadline=deadline,
        shape=shape_of(spec),
        steps_total=spec.steps,
        steps_done=min(done, spec.steps),
        min_vram_gib=stage_need_gib(spec, stage),
        families=families
        if families is not None
        else frozenset(f.value for f in spec.gpu.families),
        max_cost_usd=spec.max_cost_usd,
        gpus=spec.gpu.count,
        stage=stage,
        may_split=may_split,
    )


def moving_off(
    running: Sequence[RunningDemand], instances: set[str], queued: Sequence[JobDemand]
) -> list[JobDemand]:
    """The jobs running on these instances (spot-warned: checkpointing to move), not queued
    yet: demand to buy for now."""
    waiting = {job.job_id for job in queued}
    return [
        job.demand
        for job in running
        if job.instance_id in instances and job.demand.job_id not in waiting
    ]


def job_demand(job: JobRecord) -> JobDemand:
    never_ran = job.attempt == 0 and job.last_checkpoint is None and job.stage is None
    return demand_of(
        job.spec,
        job.created_at,
        job.deadline,
        job.checkpoint_step,
        job.families(),
        job.stage,
        may_split=never_ran and job.spec.gpu.count == 1 and not job.spec.exact,
    )


class DemandSource(Protocol):
    """What the autoscaler loop reads and writes of the control plane's jobs."""

    def queued(self, now: datetime) -> list[JobDemand]: ...

    def busy_gpus(self) -> Counter[str]: ...

    def reserve(self, reservations: Sequence[Reservation]) -> None: ...

    def reservations(self, now: datetime, job_ids: Sequence[str]) -> dict[str, str]: ...

    def claims(
        self, now: datetime, job_ids: Sequence[str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """job -> the instance still claimed for it, and job -> the instance whose claim for
        it ran out before the scheduler used it: one read of the reservations."""
        ...

    def finished_since(self, since: datetime) -> list[FinishedWork]: ...

    def ask_to_drain(self, instance_ids: Sequence[str], reason: str) -> None: ...

    def drains(self) -> dict[str, DrainRequest]: ...

    def instance_statuses(self, states: Iterable[InstanceState]) -> dict[str, InstanceStatus]:
        """The instances whose one record (shared with the control plane) is in `states`."""
        ...

    def record_moves(self, moves: Sequence[InstanceChange]) -> None:
        """The autoscaler's moves of instances (launched, working, terminating, gone)."""
        ...

    def record_pool_rates(self, rates: Mapping[tuple[str, str], float]) -> None:
        """(instance type, zone) -> interruptions per hour of its spot pool."""
        ...

    def arrivals_since(self, since: datetime) -> list[datetime]:
        """When the jobs accepted after `since` arrived (for the forecast)."""
        ...

    def running(self) -> list[RunningDemand]:
        """The jobs on GPUs now, with their progress (steps of their last checkpoint)."""
        ...

    def split_into_stages(self, reasons: Mapping[str, str]) -> list[str]:
        """Split these queued renders into stages (job -> why); returns those split (a job
        placed meanwhile renders whole)."""
        ...

    def instance_kinds(self) -> list[InstanceKind]:
        """The GPU types as EC2 described them, lowered where workers reported less memory."""
        ...


@dataclass(frozen=True)
class FinishedWork:
    """Steps a worker ran start to end, and how long they took."""

    worker_id: str
    shape: WorkShape
    steps: int
    seconds: float
    finished_at: datetime


class Reservations(Protocol):
    """The capacity bought or picked for each job, kept until the job ends."""

    def reserve(self, reservations: Sequence[Reservation]) -> None: ...

    def of(self, job_ids: Sequence[str]) -> dict[str, Reservation]: ...


class RateBook(Protocol):
    def record_pool_rates(self, rates: Mapping[tuple[str, str], float]) -> None: ...


class KindBook(Protocol):
    def kinds(self) -> list[InstanceKind]: ...


class InstanceRecords(Protocol):
    """Each instance's one record: its state, and the drains asked of it."""

    def ask_to_drain(self, instance_ids: Sequence[str], reason: str) -> None: ...

    def drain_requests(self) -> dict[str, DrainRequest]: ...

    def instance_statuses(
        self, states: Iterable[InstanceState] | None = ...
    ) -> dict[str, InstanceStatus]: ...

    def move_instances(
        self, instance_ids: Sequence[str], after: InstanceState, reason: str, actor: str
    ) -> list[str]: ...


class JobSource(Protocol):
    """The part of the control plane's job store the autoscaler reads and writes (declared
    here so the autoscaler never imports the control plane; JobStore has these)."""

    def schedulable(
        self, now: datetime, limit: int = ..., risk_horizon: timedelta = ...
    ) -> list[JobRecord]: ...

    def placements(self) -> list[Placement]: ...

    def finished_since(self, since: datetime, limit: int = ...) -> list[FinishedRun]: ...

    @property
    def reservations(self) -> Reservations: ...

    @property
    def instance_records(self) -> InstanceRecords: ...

    @property
    def rates(self) -> RateBook: ...

    @property
    def instance_kinds(self) -> KindBook: ...

    def arrivals_since(self, since: datetime, limit: int = ...) -> list[datetime]: ...

    def split_into_stages(self, reasons: Mapping[str, str], actor: str) -> list[str]: ...


class StoreDemand:
    def __init__(self, store: JobSource) -> None:
        self._store = store

    def queued(self, now: datetime) -> list[JobDemand]:
        # Every deadline job due to start within PLANNING_HORIZON is read, however long the
        # backlog before it: its market is planned from its arrival on. A job its team's quota
        # holds back gets no GPU bought for it until the quota lets it.
        queued = self._store.schedulable(now, risk_horizon=PLANNING_HORIZON)
        return [job_demand(job) for job in queued if not job.held_by_quota]

    def reserve(self, reservations: Sequence[Reservation]) -> None:
        if reservations:
            self._store.reservations.reserve(reservations)

    def reservations(self, now: datetime, job_ids: Sequence[str]) -> dict[str, str]:
        """job -> the instance still claimed for it."""
        return self.claims(now, job_ids)[0]

    def claims(
        self, now: datetime, job_ids: Sequence[str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        held: dict[str, str] = {}
        lapsed: dict[str, str] = {}
        for job_id, r in self._store.reservations.of(job_ids).items():
            if r.holds(now):
                held[job_id] = r.instance_id
            elif r.instance_id:
                lapsed[job_id] = r.instance_id
        return held, lapsed

    def busy_gpus(self) -> Counter[str]:
        # Every GPU of a job that spans several is busy, not only its lead.
        busy: Counter[str] = Counter()
        for placement in self._store.placements():
            busy[placement.worker_id] += len(placement.gpus)
        return busy

    def ask_to_drain(self, instance_ids: Sequence[str], reason: str) -> None:
        self._store.instance_records.ask_to_drain(instance_ids, reason)

    def drains(self) -> dict[str, DrainRequest]:
        return self._store.instance_records.drain_requests()

    def instance_statuses(self, states: Iterable[InstanceState]) -> dict[str, InstanceStatus]:
        return self._store.instance_records.instance_statuses(states)

    def record_moves(self, moves: Sequence[InstanceChange]) -> None:
        for move in moves:
            self._store.instance_records.move_instances(
                [move.instance_id], move.after, move.reason, move.actor
            )

    def record_pool_rates(self, rates: Mapping[tuple[str, str], float]) -> None:
        self._store.rates.record_pool_rates(rates)

    def arrivals_since(self, since: datetime) -> list[datetime]:
        return self._store.arrivals_since(since)

    def running(self) -> list[RunningDemand]:
        return [RunningDemand(job_demand(p.job), p.worker_id) for p in self._store.placements()]

    def split_into_stages(self, reasons: Mapping[str, str]) -> list[str]:
        return self._store.split_into_stages(reasons, actor="autoscaler")

    def instance_kinds(self) -> list[InstanceKind]:
        return self._store.instance_kinds.kinds()

    def finished_since(self, since: datetime) -> list[FinishedWork]:
        return [
            FinishedWork(
                run.worker_id,
                shape_of(run.spec),
                run.spec.steps,
                run.denoise_seconds,
                run.finished_at,
            )
            for run in self._store.finished_since(since)
        ]
