"""The control plane's settings, counters and the ports it declares (its store, its link to
the workers, its memory of gone instances), so the service depends on no adapter."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from kernel.errors import FrameFleetError
from kernel.instance_types import InstanceKind
from kernel.job_record import (
    DrainKind,
    JobMove,
    JobRecord,
    Placement,
    Reservation,
)
from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.control.budgets import MessageBudget
from orchestrator.control.checkpoint_pace import PoolRates
from orchestrator.control.drains import DrainStore
from orchestrator.control.gpu_watch import GpuFaultStore, WatchSettings
from orchestrator.control.job_events import RetryPolicy
from orchestrator.control.readiness import ReadinessStore
from orchestrator.control.scheduling_view import QueueReads
from orchestrator.scheduling.snapshots import SchedulerSettings
from orchestrator.store.leases import Fence

ACTOR = "control-plane"


@dataclass(frozen=True)
class ControlSettings:
    tick_seconds: float = 0.5
    resend_after: timedelta = timedelta(seconds=3)
    resend_max: timedelta = timedelta(seconds=30)
    suspect_after: timedelta = timedelta(seconds=10)
    lost_after: timedelta = timedelta(seconds=30)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    queue_reads: QueueReads = field(default_factory=QueueReads)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_batch: int = 500  # worker messages written in one transaction
    watch: WatchSettings = field(default_factory=WatchSettings)  # stalls and sick GPUs
    # Believe workers on no EC2 instance (a development fleet on a shared broker account):
    # nothing vouches for their identity or hardware (see `identity`).
    workers_off_ec2: bool = False
    budget: MessageBudget = field(default_factory=MessageBudget)  # per worker, see `budgets`


def _ignore(_seconds: float) -> None:
    pass


def _ignore_kind(_kind: str) -> None:
    pass


@dataclass
class ControlStats:
    ignored_messages: int = 0
    stale_events: int = 0
    commands_sent: int = 0
    assignments: int = 0
    # Seconds per scheduling decision (the pure scheduler call), the most recent ones.
    schedule_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=10_000))
    # Metrics hooks (the composition root points them at histograms): seconds a job waited
    # in the queue before its assignment, and a checkpoint write a worker reported.
    observe_assignment: Callable[[float], None] = _ignore
    observe_checkpoint_write: Callable[[float], None] = _ignore
    on_gpu_fault: Callable[[str], None] = _ignore_kind  # a stall or a quarantine, by kind


class WorkerLink(Protocol):
    """How commands reach workers: MQTT in production, in memory in the simulator."""

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None: ...

    async def run(self, stop: asyncio.Event) -> None: ...


MessageHandler = Callable[[str, bytes], Awaitable[None]]
Admit = Callable[[str], bool]  # a message on this topic is read at all (see `reception`)
# Builds the service's link: what workers publish goes to the handler it is given, if `admit`
# lets it in as it arrives (a link in memory may let everything in).
ConnectLink = Callable[[MessageHandler, Admit], WorkerLink]


class PreemptionHolds(Protocol):
    """The GPUs being freed for a job: (worker, GPU) -> the job it is freed for."""

    def preemption_holds(self) -> dict[tuple[str, int], str]: ...

    def keep_preemption_holds(
        self, holds: Mapping[tuple[str, int], str], fence: Fence | None = ...
    ) -> None: ...


class LiveReservations(Protocol):
    def live(self) -> dict[str, Reservation]:
        """The reservations of the jobs queued or on a GPU."""
        ...

    def lapse(self, job_ids: Sequence[str]) -> None:
        """End these jobs' claims now: their instances are up and cannot run them."""
        ...


class SchedulingWaits(Protocol):
    def note_waits(self, reasons: Mapping[str, str | None], fence: Fence | None = ...) -> None:
        """Why each queued job waits (None: it no longer does)."""
        ...


class InstanceFacts(Protocol):
    """Where instances that are gone are remembered, and what EC2 said of each instance the
    autoscaler saw (the store's instance records)."""

    def record_gone(self, instance_id: str, reason: str, ended: bool = ...) -> None: ...

    def gone_since(self, since: datetime) -> list[str]: ...

    def launched_as(self, instance_id: str) -> tuple[str, Market] | None: ...

    def listed_among(self, instance_ids: Sequence[str]) -> set[str]: ...

    def described_kinds(self) -> list[InstanceKind]:
        """The GPU types EC2 described to the autoscaler: an operator's named types."""
        ...

    def lower_memory(self, kind: InstanceKind, reported_gib: float) -> None:
        """A worker of `kind` reported less memory per GPU: the autoscaler buys by that."""
        ...


class InstanceRecords(DrainStore, InstanceFacts, Protocol):
    """Each instance's one record: its state, the drains asked of it, and what is known of
    it once gone."""

    def ask_to_drain(
        self, instance_ids: Sequence[str], reason: str, kind: DrainKind = ..., actor: str = ...
    ) -> None: ...


class ControlStore(Protocol):
    """The job store operations the control plane uses (JobStore has them)."""

    def find_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]: ...

    def get(self, job_id: str) -> JobRecord: ...

    def transition(
        self, job_id: str, target: JobState, *, expected_version: int, actor: str, reason: str
    ) -> JobRecord: ...

    def apply_moves(
        self, moves: Sequence[JobMove], actor: str, fence: Fence | None = None
    ) -> list[JobRecord | FrameFleetError]: ...

    def placements(self) -> list[Placement]: ...

    def schedulable(
        self, now: datetime, limit: int, risk_horizon: timedelta, at_risk_most: int
    ) -> list[JobRecord]: ...

    def faulted_on(self, job_ids: Sequence[str]) -> dict[str, set[str]]: ...

    @property
    def instance_records(self) -> InstanceRecords: ...

    @property
    def reservations(self) -> LiveReservations: ...

    @property
    def wait_notes(self) -> SchedulingWaits: ...

    @property
    def cost_facts(self) -> ReadinessStore: ...

    @property
    def holds(self) -> PreemptionHolds: ...

    @property
    def rates(self) -> PoolRates: ...

    @property
    def faults(self) -> GpuFaultStore: ...
