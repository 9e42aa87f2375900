"""SQLModel tables. Change them only together with a new alembic migration."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, DateTime, Index, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel


def _utc_column(*, nullable: bool = False, index: bool = False) -> Column[datetime]:
    return Column(DateTime(timezone=True), nullable=nullable, index=index)


def _one_open_per_gpu(name: str) -> Index:
    """A partial unique index: at most one row per (worker, GPU) whose `ended_at` is null."""
    return Index(
        name,
        "worker_id",
        "gpu_index",
        unique=True,
        sqlite_where=text("ended_at IS NULL"),
        postgresql_where=text("ended_at IS NULL"),
    )


class JobRow(SQLModel, table=True):
    __tablename__ = "jobs"

    job_id: str = Field(primary_key=True, max_length=128)
    state: str = Field(max_length=16, index=True)
    # Optimistic concurrency: every write says which version it read.
    version: int = Field(default=1)
    attempt: int = Field(default=0)
    priority: int
    deadline: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    # The deadline less the whole run on the slowest GPU the job may use
    # (`kernel.deadline_risk`): past it, less a start-up, every read of the queue includes it.
    start_by: datetime | None = Field(
        default=None, sa_column=_utc_column(nullable=True, index=True)
    )
    model: str = Field(max_length=130)
    spec_json: str = Field(sa_column=Column(Text, nullable=False))
    spec_sha256: str = Field(max_length=64)
    # The fingerprint of the spec as submitted, once an operator changed it (None: unchanged):
    # a resend of the submitted spec is a duplicate still.
    submitted_sha256: str | None = Field(default=None, max_length=64)
    source_message_id: str = Field(max_length=128)
    created_at: datetime = Field(sa_column=_utc_column(index=True))
    updated_at: datetime = Field(sa_column=_utc_column())
    # The newest durable checkpoint's manifest key: where the next attempt resumes.
    last_checkpoint: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # Its step: the denoising steps a resume does not do again.
    checkpoint_step: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # The GPU family that computed it: a job that asked for `exact` resumes only there.
    checkpoint_family: str | None = Field(default=None, max_length=16)
    # Failures that were the job's own fault (bad model, out of memory, NaN latents).
    job_faults: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # Retry backoff: not to be assigned before this time.
    not_before: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    # The spec's cost tags, as columns so that the job list can filter by them.
    team: str | None = Field(default=None, max_length=128, index=True)
    customer: str | None = Field(default=None, max_length=128, index=True)
    project: str | None = Field(default=None, max_length=128, index=True)
    # Why a queued job waits, where the scheduler knows (its team's quota); None otherwise.
    wait_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # Why the autoscaler bought no GPU for it in its last round (None: it did, or had none).
    capacity_wait: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # The stage its next attempt runs, for a render split into stages (None: whole).
    stage: str | None = Field(default=None, max_length=16)


class JobAttemptRow(SQLModel, table=True):
    __tablename__ = "job_attempts"
    # One GPU holds one attempt at a time, whatever any control plane decides: the database
    # refuses a second open attempt on the same (worker, GPU).
    __table_args__ = (_one_open_per_gpu("uq_job_attempts_active_gpu"),)

    job_id: str = Field(primary_key=True, foreign_key="jobs.job_id", max_length=128)
    attempt: int = Field(primary_key=True)
    worker_id: str | None = Field(default=None, max_length=128)
    gpu_index: int | None = Field(default=None)
    started_at: datetime = Field(sa_column=_utc_column())
    ended_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    outcome: str | None = Field(default=None, max_length=16, index=True)
    denoise_seconds: float | None = Field(default=None)  # a finished attempt's steps
    # For the cost ledger: what loading the model and writing checkpoints took, and when the
    # last checkpoint became durable (work after it is lost if the attempt does not finish).
    model_load_seconds: float = Field(default=0.0, sa_column_kwargs={"server_default": "0"})
    checkpoint_seconds: float = Field(default=0.0, sa_column_kwargs={"server_default": "0"})
    checkpointed_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    checkpoints: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class AttemptGpuRow(SQLModel, table=True):
    """Each GPU an attempt holds: one row for a one-GPU attempt, one per GPU for a job that
    spans several. Its index is what keeps two open attempts off one GPU for spans too (the
    attempts' own index sees only each attempt's lead GPU)."""

    __tablename__ = "job_attempt_gpus"
    __table_args__ = (_one_open_per_gpu("uq_job_attempt_gpus_open"),)

    job_id: str = Field(primary_key=True, foreign_key="jobs.job_id", max_length=128)
    attempt: int = Field(primary_key=True)
    gpu_index: int = Field(primary_key=True)
    worker_id: str = Field(max_length=128)
    ended_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))


class JobEventRow(SQLModel, table=True):
    """Append-only: rows are inserted, never updated or deleted."""

    __tablename__ = "job_events"
    __table_args__ = (UniqueConstraint("job_id", "version", name="uq_job_events_job_version"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(foreign_key="jobs.job_id", max_length=128, index=True)
    at: datetime = Field(sa_column=_utc_column())
    from_state: str | None = Field(default=None, max_length=16)
    to_state: str = Field(max_length=16)
    version: int
    attempt: int
    actor: str = Field(max_length=128)
    reason: str = Field(sa_column=Column(Text, nullable=False))


class RejectedMessageRow(SQLModel, table=True):
    """The ledger of dead-lettered messages, keyed by SQS message id so a redelivery of a bad
    message is recorded once."""

    __tablename__ = "rejected_messages"

    message_id: str = Field(primary_key=True, max_length=128)
    received_at: datetime = Field(sa_column=_utc_column(index=True))
    reason: str = Field(max_length=32)
    errors_json: str = Field(sa_column=Column(Text, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    dead_lettered_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))


class ReservationRow(SQLModel, table=True):
    """Capacity the autoscaler bought (or picked) for a queued job. The scheduler gives that
    instance's GPU to the job first, and keeps a job it bought on-demand capacity for off spot
    GPUs, until the reservation expires."""

    __tablename__ = "reservations"

    job_id: str = Field(primary_key=True, foreign_key="jobs.job_id", max_length=128)
    instance_id: str = Field(max_length=128)  # empty once the job was placed
    on_demand: bool
    expires_at: datetime = Field(sa_column=_utc_column(index=True))  # of the instance claim
    # The job's pace and the cost of a start-up plus one interruption, for the scheduler's
    # deadline guard (0: unknown).
    seconds_per_step: float = Field(default=0.0)
    margin_seconds: float = Field(default=0.0)


class InstanceRow(SQLModel, table=True):
    """Each instance of the fleet, in one state machine (`kernel.instance_state`) that the
    autoscaler and every control-plane replica write and read: scale-in drains, rebalance,
    spot warnings and ends alike. Instance ids are never reused, so a hello from an instance
    that is gone or warned (a retained message, a zombie) is refused."""

    __tablename__ = "instances"

    instance_id: str = Field(primary_key=True, max_length=64)
    state: str = Field(max_length=16, index=True)
    reason: str = Field(sa_column=Column(Text, nullable=False))  # of the last move
    since: datetime = Field(sa_column=_utc_column(index=True))  # of the last move
    # A drain: why it was asked (DrainKind), when, and when nothing ran there any more.
    drain_kind: str | None = Field(default=None, max_length=16)
    drain_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    drain_asked_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    drained_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))


class InstanceChangeRow(SQLModel, table=True):
    """Append-only: each move of an instance, who made it and why."""

    __tablename__ = "instance_changes"

    id: int | None = Field(default=None, primary_key=True)
    instance_id: str = Field(max_length=64, index=True)
    at: datetime = Field(sa_column=_utc_column())
    from_state: str | None = Field(default=None, max_length=16)
    to_state: str = Field(max_length=16)
    actor: str = Field(max_length=32)
    reason: str = Field(sa_column=Column(Text, nullable=False))


class PreemptionHoldRow(SQLModel, table=True):
    """A GPU a preemption is freeing for one job: while its victim checkpoints no second
    victim is evicted for that job, and once it is free the job takes it first. Durable, so a
    new leader keeps the hold."""

    __tablename__ = "preemption_holds"

    worker_id: str = Field(primary_key=True, max_length=64)
    gpu_index: int = Field(primary_key=True)
    job_id: str = Field(max_length=128)
    since: datetime = Field(sa_column=_utc_column())


class GpuFaultRow(SQLModel, table=True):
    """A fault seen on one GPU (a stall, uncorrected errors, a slow pace), or its quarantine:
    the control plane of any replica reads them to keep work off a sick GPU."""

    __tablename__ = "gpu_faults"

    id: int | None = Field(default=None, primary_key=True)
    worker_id: str = Field(max_length=64, index=True)
    instance_id: str = Field(max_length=64)
    gpu_index: int
    kind: str = Field(max_length=16)  # GpuFaultKind
    detail: str = Field(sa_column=Column(Text, nullable=False))
    job_id: str | None = Field(default=None, max_length=128)
    at: datetime = Field(sa_column=_utc_column())


class PoolRateRow(SQLModel, table=True):
    """A spot pool's interruption rate as the autoscaler last measured it."""

    __tablename__ = "pool_rates"

    instance_type: str = Field(primary_key=True, max_length=64)
    availability_zone: str = Field(primary_key=True, max_length=64)
    interruptions_per_hour: float
    measured_at: datetime = Field(sa_column=_utc_column())


class InstanceLifeRow(SQLModel, table=True):
    """One EC2 instance's life as EC2 reported it (the autoscaler's reconcile, EventBridge):
    what the cost ledger bills. `ended_at` keeps the earliest end anyone reported."""

    __tablename__ = "instance_lives"

    instance_id: str = Field(primary_key=True, max_length=64)
    instance_type: str = Field(max_length=64)
    availability_zone: str = Field(max_length=64)
    market: str = Field(max_length=16)
    launched_at: datetime = Field(sa_column=_utc_column(index=True))  # EC2's LaunchTime
    ready_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    gpus: int = Field(default=1)
    gpu_family: str = Field(default="", max_length=16)
    # Where MIG splits its GPUs: [[slot, GPU, part of the GPU's compute], ...] from its
    # worker's first hello; None: one slot per GPU.
    gpu_layout: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    draining_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    ended_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    end_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class PriceChangeRow(SQLModel, table=True):
    """A pool's price from `at` until its next row: the price in effect over time. Prices are
    decimal strings (USD per hour), never floats, so the ledger is exact."""

    __tablename__ = "price_changes"

    instance_type: str = Field(primary_key=True, max_length=64)
    availability_zone: str = Field(primary_key=True, max_length=64)
    market: str = Field(primary_key=True, max_length=16)
    at: datetime = Field(sa_column=Column(DateTime(timezone=True), primary_key=True))
    usd_per_hour: str = Field(max_length=32)


class ReportSendRow(SQLModel, table=True):
    """A finance report for one period: sent once; a failed send is kept and retried."""

    __tablename__ = "report_sends"

    period: str = Field(primary_key=True, max_length=8)  # day | week | month
    period_start: datetime = Field(sa_column=Column(DateTime(timezone=True), primary_key=True))
    state: str = Field(max_length=16)  # sending | sent | failed
    tries: int = Field(default=0)
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    message_id: str | None = Field(default=None, max_length=128)
    updated_at: datetime = Field(sa_column=_utc_column())


class ApiTokenRow(SQLModel, table=True):
    """An API token: its SHA-256 only (a token is 32 random bytes, so a fast digest is as safe
    as a slow hash), its scopes and teams, when it expires and when it was revoked."""

    __tablename__ = "api_tokens"

    token_id: str = Field(primary_key=True, max_length=32)  # public: names the token
    name: str = Field(max_length=128)
    scopes: str = Field(max_length=128)  # comma-separated
    sha256: str = Field(max_length=64, unique=True, index=True)
    created_at: datetime = Field(sa_column=_utc_column())
    revoked_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))
    # The teams whose jobs it may see and submit, comma-separated; None: every team (an
    # operator's token).
    teams: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    expires_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))


class JobProgressRow(SQLModel, table=True):
    """A running attempt's progress as its worker last reported it (heartbeats), and its first
    report, from which its pace follows."""

    __tablename__ = "job_progress"

    job_id: str = Field(primary_key=True, foreign_key="jobs.job_id", max_length=128)
    attempt: int
    step: int
    total_steps: int
    reported_at: datetime = Field(sa_column=_utc_column())
    first_step: int
    first_at: datetime = Field(sa_column=_utc_column())


class LeaseRow(SQLModel, table=True):
    """Who may act alone (schedule, buy) until `expires_at`. `fence` grows with every new
    holder; each write of the holder checks it, so a deposed holder's late write fails."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=128)
    fence: int = Field(sa_column=Column(BigInteger, nullable=False))
    expires_at: datetime = Field(sa_column=_utc_column())


class PoolMarkRow(SQLModel, table=True):
    """A pool the autoscaler avoids for a while, or saw interrupted (kernel PoolMark)."""

    __tablename__ = "pool_marks"

    id: int | None = Field(default=None, primary_key=True)
    instance_type: str = Field(max_length=64)
    availability_zone: str = Field(max_length=64)
    market: str = Field(max_length=16)
    at: datetime = Field(sa_column=_utc_column(index=True))
    until: datetime = Field(sa_column=_utc_column(index=True))
    reason: str = Field(sa_column=Column(Text, nullable=False))
    interruption: bool = Field(default=False)


class InstanceKindRow(SQLModel, table=True):
    """A GPU instance type as EC2 described it to the autoscaler (`kernel.instance_types`)."""

    __tablename__ = "instance_kinds"

    instance_type: str = Field(primary_key=True, max_length=64)
    family: str = Field(max_length=16)
    gpus: int
    vram_gib: float  # per GPU, as a worker will report it
    vcpus: int
    described_at: datetime = Field(sa_column=_utc_column())


class NoticeRow(SQLModel, table=True):
    """A completion notice to deliver (the outbox): made from a job's history line in the same
    transaction that moves the relay's cursor past it, so a failover neither loses nor doubles
    one; sent by the leader until delivered, then kept; `dead` after the last try."""

    __tablename__ = "notices"
    __table_args__ = (UniqueConstraint("notice_id", "target", name="uq_notices_notice_target"),)

    id: int | None = Field(default=None, primary_key=True)
    notice_id: str = Field(max_length=64)  # the idempotency key a receiver sees
    target: str = Field(max_length=16)  # webhook | eventbridge
    job_id: str = Field(max_length=128, index=True)
    kind: str = Field(max_length=32)  # job.succeeded, job.failed, job.interrupted, ...
    body: str = Field(sa_column=Column(Text, nullable=False))  # framefleet.notice/v1 JSON
    url: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    state: str = Field(max_length=16, index=True)  # pending | delivered | dead
    attempts: int = Field(default=0)
    next_at: datetime = Field(sa_column=_utc_column(index=True))
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(sa_column=_utc_column())
    delivered_at: datetime | None = Field(default=None, sa_column=_utc_column(nullable=True))


class NoticeCursorRow(SQLModel, table=True):
    """How far the relay has read the job history (its last line's id)."""

    __tablename__ = "notice_cursor"

    name: str = Field(primary_key=True, max_length=32)
    last_event_id: int = Field(sa_column=Column(BigInteger, nullable=False))
