"""Read-only snapshots of stored jobs, handed to policies and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from orchestrator.domain.job_spec import JobSpec
from orchestrator.domain.job_state import JobState


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
    job_faults: int = 0
    not_before: datetime | None = None


@dataclass(frozen=True)
class JobChanges:
    """Fields a transition may set together with the state (None leaves a field as it is)."""

    last_checkpoint: str | None = None
    not_before: datetime | None = None
    add_job_fault: bool = False


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


@dataclass(frozen=True)
class Placement:
    """An active job and where its current attempt runs."""

    job: JobRecord
    worker_id: str
    gpu_index: int
    since: datetime


@dataclass(frozen=True)
class Reservation:
    """The autoscaler bought (or picked) `instance_id` for a queued job; see ReservationRow."""

    job_id: str
    instance_id: str
    on_demand: bool
    expires_at: datetime


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
