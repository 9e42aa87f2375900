"""Read-only snapshots of stored jobs, handed to policies and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.render_stage import RenderStage

QUOTA_WAIT = "quota: "  # how a wait reason of a team's quota begins


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    state: JobState
    version: int
    attempt: int
    priority: int
    deadline: datetime | None
    spec: JobSpec
    created_at: datetime
    updated_at: datetime
    last_checkpoint: str | None = None
    checkpoint_step: int = 0  # the steps behind `last_checkpoint`
    checkpoint_family: str | None = None  # the GPU family that computed it
    job_faults: int = 0
    not_before: datetime | None = None
    # The worker the current attempt was given to: the only one whose events may move the job
    # (None before the first assignment, and where a query does not need it).
    worker_id: str | None = None
    # Why a queued job waits, where the scheduler knows (its team's quota: QUOTA_WAIT ...).
    wait_reason: str | None = None
    # Why the autoscaler bought no GPU for it in its last round, if it waits for one.
    capacity_wait: str | None = None
    # The stage its next attempt runs, for a render split into stages; None: it renders whole.
    stage: RenderStage | None = None

    @property
    def waiting_for(self) -> str | None:
        """Why a queued job waits: its team's quota first, then the capacity it waits for."""
        if self.state is not JobState.QUEUED:
            return None
        return self.wait_reason or self.capacity_wait

    @property
    def held_by_quota(self) -> bool:
        """Its team's quota holds it back: no GPU is worth buying for it now."""
        return (self.wait_reason or "").startswith(QUOTA_WAIT)

    def families(self) -> frozenset[str]:
        """The GPU families it may run on: its spec's (empty: any), or, for a job that asked
        for `exact` and has a checkpoint, only the family that computed it (elsewhere the
        checkpoint would not be resumed and its work would start over)."""
        if self.spec.exact and self.last_checkpoint and self.checkpoint_family:
            return frozenset({self.checkpoint_family})
        return frozenset(f.value for f in self.spec.gpu.families)


@dataclass(frozen=True)
class JobChanges:
    """Fields a transition may set together with the state (None leaves a field as it is)."""

    last_checkpoint: str | None = None
    checkpoint_step: int = 0  # with last_checkpoint: its step
    checkpoint_family: str | None = None  # with last_checkpoint: the GPU family it was made on
    not_before: datetime | None = None
    add_job_fault: bool = False
    # The attempt ends through its worker's fault, a failed preflight there, a stall or a job
    # fault there: that worker is not given this job again.
    worker_fault: bool = False
    # A finished attempt: GPU seconds its denoising steps took, as the worker measured them.
    denoise_seconds: float | None = None
    # The attempt's costs in time (the ledger's checkpoint overhead and start-up).
    checkpoint_write_seconds: float = 0.0
    model_load_seconds: float | None = None
    # The stage the job goes on with: set on a queued job the autoscaler splits (encoding
    # first), and with a move back to the queue when an attempt finished its stage.
    stage: RenderStage | None = None


@dataclass(frozen=True)
class JobMove:
    """One job's part of a batch write: walk `path` from `expected_version` (each step checked
    by the state machine); `changes` ride on the last step. An empty path records `changes`
    without a state change (still a new version)."""

    job_id: str
    expected_version: int
    path: tuple[JobState, ...]
    reason: str
    changes: JobChanges = field(default_factory=JobChanges)
    worker_id: str | None = None
    gpu_index: int | None = None
    span: tuple[int, ...] = ()  # an assignment's other GPUs, for a job that spans several


class DrainKind(StrEnum):
    # The autoscaler scales in: what runs there checkpoints and moves now.
    SCALE_IN = "scale-in"
    # AWS recommends replacing the instance (rebalance): what runs there goes on to its end.
    REBALANCE = "rebalance"


@dataclass(frozen=True)
class DrainRequest:
    """An instance to empty, then terminate; no new work goes there meanwhile."""

    instance_id: str
    reason: str
    asked_at: datetime
    drained_at: datetime | None = None  # set by the control plane once nothing runs there
    kind: DrainKind = DrainKind.SCALE_IN


@dataclass(frozen=True)
class FinishedRun:
    """A job that succeeded in one attempt, start to end on one worker: how long its steps
    took there (what the autoscaler's throughput model learns from)."""

    job_id: str
    spec: JobSpec
    worker_id: str
    denoise_seconds: float  # all its steps, as the worker measured them
    finished_at: datetime


@dataclass(frozen=True)
class Placement:
    """An active job and where its current attempt runs."""

    job: JobRecord
    worker_id: str
    gpu_index: int  # the lead GPU (a spanned render's rank 0)
    since: datetime
    span: tuple[int, ...] = ()  # the other GPUs of a job that spans several

    @property
    def gpus(self) -> tuple[int, ...]:
        return (self.gpu_index, *self.span)


@dataclass(frozen=True)
class Reservation:
    """What the autoscaler decided for a queued job; see ReservationRow.

    `instance_id` (empty once the job was placed) is claimed until `expires_at`, on-demand
    when `on_demand`. `seconds_per_step` and `margin_seconds` (a start-up and one
    interruption) outlive the claim: with them the scheduler knows, at any moment, whether
    the job's deadline could still take a spot interruption."""

    job_id: str
    instance_id: str
    on_demand: bool
    expires_at: datetime
    seconds_per_step: float = 0.0
    margin_seconds: float = 0.0

    def holds(self, now: datetime) -> bool:
        return bool(self.instance_id) and now < self.expires_at

    def spot_until(self, deadline: datetime | None, steps_left: int) -> datetime | None:
        """The last moment the job may (re)start on a spot GPU and still meet its deadline
        after one interruption; None when that is not known."""
        if deadline is None or self.seconds_per_step <= 0:
            return None
        work = steps_left * self.seconds_per_step
        return deadline - timedelta(seconds=work + self.margin_seconds)


@dataclass(frozen=True)
class JobEvent:
    """One line of a job's append-only history: who moved it, why, and when."""

    job_id: str
    at: datetime
    from_state: JobState | None
    to_state: JobState
    version: int
    attempt: int
    actor: str
    reason: str


class AcceptOutcome(StrEnum):
    ACCEPTED = "accepted"
    # Same job_id, same spec: a redelivery or a producer retry; nothing to do.
    DUPLICATE = "duplicate"
    # Same job_id, different spec: a producer bug; dead-lettered so nobody loses the second spec.
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Submission:
    """A validated job together with the message that carried it."""

    spec: JobSpec
    message_id: str


@dataclass(frozen=True)
class Rejection:
    """Why a message was not accepted; becomes a dead-letter entry."""

    message_id: str
    reason: str
    errors: tuple[str, ...]
    body: str
