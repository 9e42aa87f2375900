"""What the API needs of the rest of the control plane, declared here, wired by the
composition root: the store's reads and writes, the cost ledger, and S3 links."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Protocol

from kernel.clock import Clock
from kernel.fleet_facts import GpuFault
from kernel.instance_state import InstanceChange
from kernel.job_record import (
    AcceptOutcome,
    DrainKind,
    DrainRequest,
    JobEvent,
    JobRecord,
    Placement,
    Reservation,
    Submission,
)
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.notify_spec import WebhookRule
from orchestrator.api.auth import Caller, TokenBook
from orchestrator.costs.focus import FocusExport
from orchestrator.costs.job_cost import JobCostParts
from orchestrator.costs.summary import CostSummary
from orchestrator.intake.model_door import DoorRefusal
from orchestrator.store.cost_facts import InstanceLife, PoolKey
from orchestrator.store.history_facts import DeadlineOutcome, StateMove
from orchestrator.store.job_pages import (
    AttemptFacts,
    GoneInstance,
    JobFilter,
    PageCursor,
    StoredProgress,
)
from orchestrator.store.notice_book import StoredNotice


class ApiStore(Protocol):
    """The job store as the API reads and moves jobs; the other tables through its parts."""

    def find(self, job_id: str) -> JobRecord | None: ...

    def get(self, job_id: str) -> JobRecord: ...

    def transition(
        self, job_id: str, target: JobState, *, expected_version: int, actor: str, reason: str
    ) -> JobRecord: ...

    def history(self, job_id: str) -> list[JobEvent]: ...

    def placements(self) -> list[Placement]: ...

    def count_by_state(self, teams: Sequence[str] | None = ...) -> dict[JobState, int]: ...

    def find_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]: ...

    @property
    def intake(self) -> ApiIntake: ...

    @property
    def reservations(self) -> ReservationsRead: ...

    @property
    def pages(self) -> JobPages: ...

    @property
    def cost_facts(self) -> LivesAndPrices: ...

    @property
    def api_tokens(self) -> TokenBook: ...

    @property
    def faults(self) -> GpuFaultReader: ...

    @property
    def instance_records(self) -> InstanceAsks: ...

    @property
    def changes(self) -> QueuedChanges: ...

    @property
    def notices(self) -> NoticeRecords: ...


class NoticeRecords(Protocol):
    """The completion notices' outbox, as an operator reads it."""

    def notices(
        self, state: str | None = ..., job_id: str | None = ..., limit: int = ...
    ) -> list[StoredNotice]: ...

    def redeliver(self, row_id: int) -> bool: ...


class QueuedChanges(Protocol):
    """An operator's change to a queued job's spec (its priority or deadline)."""

    def replace_queued_spec(
        self, spec: JobSpec, *, expected_version: int, actor: str, reason: str
    ) -> JobRecord: ...


class ReservationsRead(Protocol):
    def of(self, job_ids: Sequence[str]) -> dict[str, Reservation]: ...


class ApiIntake(Protocol):
    def accept_batch(
        self, submissions: Sequence[Submission], actor: str = ..., via: str = ...
    ) -> list[AcceptOutcome]: ...


class JobPages(Protocol):
    """The queue a page at a time, each job's attempts and progress, the event feed."""

    def job_page(
        self, where: JobFilter, after: PageCursor | None, limit: int
    ) -> list[JobRecord]: ...

    def attempts_facts(self, job_id: str) -> list[AttemptFacts]: ...

    def progress_of(self, job_id: str) -> StoredProgress | None: ...

    def progress_of_jobs(self, job_ids: Sequence[str]) -> dict[str, StoredProgress]: ...

    def job_events_after(self, after_id: int, limit: int = 500) -> list[tuple[int, JobEvent]]: ...

    def last_job_event_id(self) -> int: ...

    def gone_between(self, since: datetime, until: datetime) -> list[GoneInstance]: ...


class LivesAndPrices(Protocol):
    """Instances' lives and pools' prices (the fleet's cost over a period)."""

    def instance_lives(self, since: datetime, until: datetime) -> list[InstanceLife]: ...

    def price_changes(
        self, pools: Sequence[PoolKey], until: datetime
    ) -> dict[PoolKey, list[tuple[datetime, Decimal]]]: ...


class InstanceAsks(Protocol):
    """An instance's history, and an operator's ask to drain it (the autoscaler terminates it
    once the control plane has emptied it)."""

    def instance_history(self, instance_id: str) -> list[InstanceChange]: ...

    def ask_to_drain(
        self, instance_ids: Sequence[str], reason: str, kind: DrainKind = ..., actor: str = ...
    ) -> None: ...

    def drain_requests(self) -> dict[str, DrainRequest]: ...


class GpuFaultReader(Protocol):
    """The GPU faults recorded and the GPUs quarantined (the console's GPU page), and an
    operator's release of a quarantine."""

    def gpu_faults(self, worker_id: str | None = ...) -> list[GpuFault]: ...

    def quarantined_gpus(self) -> set[tuple[str, int]]: ...

    def release_gpu(self, worker_id: str, gpu_index: int, actor: str) -> GpuFault | None: ...


class HistoryPort(Protocol):
    """The facts behind the console's history page (orchestrator/store/history_facts.py)."""

    def state_moves_until(self, until: datetime, limit: int = ...) -> list[StateMove]: ...

    def deadline_outcomes(self, since: datetime, until: datetime) -> list[DeadlineOutcome]: ...


@dataclass(frozen=True)
class DeadLetterView:
    """A message the intake refused, as the console lists it (its body cut short)."""

    message_id: str
    reason: str
    errors: str
    body: str


@dataclass(frozen=True)
class ApiSettings:
    max_body_bytes: int = 256 * 1024  # the SQS intake's limit
    requests_per_minute: int = 600  # per token, in each replica
    failed_auth_per_minute: int = 20  # per client address and token prefix, in each replica
    event_poll_seconds: float = 1.0  # how often an event stream reads the store
    max_streams_per_token: int = 4  # event streams one token may hold open at once
    output_link_seconds: int = 3600
    secure_cookie: bool = False  # behind TLS (a load balancer): the console's cookie says so
    output_prefixes: tuple[str, ...] = ()  # where a job's output may go (none: anywhere)
    webhooks: WebhookRule = field(default_factory=WebhookRule)  # where `notify` may point


@dataclass(frozen=True)
class ApiServices:
    store: ApiStore
    clock: Clock
    job_cost: Callable[[str], JobCostParts | None]
    # (since, until, teams) -> the summary (of those teams' jobs only; None: the whole fleet),
    # and why its numbers may be short
    period_costs: Callable[
        [datetime, datetime, tuple[str, ...] | None], tuple[CostSummary, list[str]]
    ]
    # (bucket, key, seconds) -> a presigned GET URL
    presign: Callable[[str, str, int], str]
    settings: ApiSettings = ApiSettings()
    history: HistoryPort | None = None
    # (bucket, key, at most bytes) -> the object's text (None: there is none): job logs
    read_text: Callable[[str, str, int], str | None] | None = None
    # The dead-letter queue's messages, read without taking them (None: no queue configured)
    dead_letters: Callable[[], list[DeadLetterView]] | None = None
    # One dead letter sent to the jobs queue again, or deleted (False: no such message)
    redrive_dead_letter: Callable[[str], bool] | None = None
    discard_dead_letter: Callable[[str], bool] | None = None
    # The model registry's check at the door: the job as accepted, or why not (None: any
    # model is accepted)
    admit: Callable[[JobSpec], JobSpec | DoorRefusal] | None = None
    # The door's read of a job's input objects (its image, its adapters' files) in S3.
    inputs_refusal: Callable[[JobSpec], Awaitable[DoorRefusal | None]] | None = None
    # The load balancer's signed sign-on header -> the person it names (None: not believed);
    # None: no single sign-on (orchestrator/api/alb_identity.py)
    identity: Callable[[str], Caller | None] | None = None
    # (since, until) -> the ledger's FinOps FOCUS 1.0 rows (None: no ledger here)
    focus_export: Callable[[datetime, datetime], FocusExport] | None = None
