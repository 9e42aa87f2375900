"""The job store: the checked state machine's writes over the job queries, and the parts of the
store each over tables of their own (intake, reservations, wait notes, instance records, ...).

Synchronous (SQLAlchemy sessions); async callers run it in a worker thread. Every write that
moves a job names the version it read: two control-plane replicas can never both move a job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Row, bindparam, delete, insert, update
from sqlalchemy import select as select_columns
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from kernel.clock import Clock
from kernel.errors import (
    ConcurrentModification,
    FrameFleetError,
    InvalidTransition,
    JobNotFound,
)
from kernel.job_record import JobChanges, JobMove, JobRecord
from kernel.job_state import JobState
from kernel.render_stage import RenderStage
from orchestrator.store.base import (
    ATTEMPT_GPUS,
    ATTEMPTS,
    CURRENT_ATTEMPT,
    JOB_COLUMNS,
    JOBS,
    RESERVATIONS,
    in_chunks,
    table_of,
)
from orchestrator.store.cost_facts import CostFactBook
from orchestrator.store.gpu_faults import GpuFaultBook
from orchestrator.store.instance_kinds import InstanceKindBook
from orchestrator.store.instance_records import InstanceRecordBook
from orchestrator.store.intake_book import IntakeBook
from orchestrator.store.job_changes import JobChangeBook
from orchestrator.store.job_moves import (
    ATTEMPT_FIELDS_CHANGED,
    JOB_FIELDS_MOVED,
    AttemptNow,
    MoveWrites,
)
from orchestrator.store.job_pages import JobPageBook
from orchestrator.store.job_queries import JobQueries
from orchestrator.store.leases import Fence, LeaseBook, check_fence
from orchestrator.store.notice_book import NoticeBook
from orchestrator.store.pool_marks import PoolMarkBook
from orchestrator.store.pool_rates import PoolRateBook
from orchestrator.store.preemption_holds import PreemptionHoldBook
from orchestrator.store.report_sends import ReportSendBook
from orchestrator.store.reservations import ReservationBook
from orchestrator.store.tables import JobEventRow
from orchestrator.store.tokens import TokenBook
from orchestrator.store.wait_notes import WaitNoteBook

_EVENTS = table_of(JobEventRow)
# The current attempt's columns a batch reads, labelled apart from the job's.
_ATTEMPT_READ = tuple(
    ATTEMPTS.c[name].label(f"a_{name}")
    for name in ("worker_id", "attempt", *ATTEMPT_FIELDS_CHANGED)
)
# A batch's statements, each executed once for all its rows (executemany). A job's UPDATE
# names the version it read; an attempt's names the attempt.
_UPDATE_JOB = (
    update(JOBS)
    .where(JOBS.c.job_id == bindparam("b_job_id"), JOBS.c.version == bindparam("b_version"))
    .values({name: bindparam(f"v_{name}") for name in JOB_FIELDS_MOVED})
)
_UPDATE_ATTEMPT = (
    update(ATTEMPTS)
    .where(
        ATTEMPTS.c.job_id == bindparam("b_job_id"),
        ATTEMPTS.c.attempt == bindparam("b_attempt"),
    )
    .values({name: bindparam(f"v_{name}") for name in ATTEMPT_FIELDS_CHANGED})
)

_END_ATTEMPT_GPUS = (
    update(ATTEMPT_GPUS)
    .where(
        ATTEMPT_GPUS.c.job_id == bindparam("b_job_id"),
        ATTEMPT_GPUS.c.attempt == bindparam("b_attempt"),
    )
    .values(ended_at=bindparam("v_ended_at"))
)


class _StaleBatch(Exception):
    """A job of the batch moved since the batch read it."""


class JobStore(JobQueries):
    """The jobs' queue and their moves; every other table through the part of the store that
    owns it, each an object of its own over the same engine (`store.intake`,
    `store.reservations`, `store.instance_records`, ...)."""

    def __init__(self, engine: Engine, clock: Clock) -> None:
        super().__init__(engine, clock)
        parts = (engine, clock, self._specs)
        self.intake = IntakeBook(*parts)
        self.pages = JobPageBook(*parts)
        self.changes = JobChangeBook(*parts)
        self.notices = NoticeBook(*parts)
        self.instance_records = InstanceRecordBook(*parts)
        self.cost_facts = CostFactBook(*parts)
        self.leases = LeaseBook(*parts)
        self.api_tokens = TokenBook(*parts)
        self.faults = GpuFaultBook(*parts)
        self.holds = PreemptionHoldBook(*parts)
        self.rates = PoolRateBook(*parts)
        self.instance_kinds = InstanceKindBook(*parts)
        self.pool_marks = PoolMarkBook(*parts)
        self.report_sends = ReportSendBook(*parts)
        self.reservations = ReservationBook(*parts)
        self.wait_notes = WaitNoteBook(*parts)

    # -- the state machine ------------------------------------------------------------------

    def transition(
        self,
        job_id: str,
        target: JobState,
        *,
        expected_version: int,
        actor: str,
        reason: str,
        worker_id: str | None = None,
        gpu_index: int | None = None,
        changes: JobChanges | None = None,
    ) -> JobRecord:
        """Move a job to `target` if the table allows it and nobody moved it since
        `expected_version`; appends the history line in the same transaction."""
        move = JobMove(
            job_id,
            expected_version,
            (target,),
            reason,
            changes or JobChanges(),
            worker_id,
            gpu_index,
        )
        return self._one(move, actor)

    def _one(self, move: JobMove, actor: str) -> JobRecord:
        (outcome,) = self.apply_moves([move], actor)
        if isinstance(outcome, FrameFleetError):
            raise outcome
        return outcome

    def apply_moves(
        self, moves: Sequence[JobMove], actor: str, fence: Fence | None = None
    ) -> list[JobRecord | FrameFleetError]:
        """Apply many jobs' moves in one transaction (one commit, one fsync): what keeps a
        control plane with a thousand workers ahead of their events. Each move is fenced on
        its own: a move whose job changed since `expected_version`, is unknown, or is not
        allowed comes back as that error and leaves its job untouched; the others commit.
        With `fence`, the whole batch is the lease holder's: NotLeader once it is not."""
        if len({move.job_id for move in moves}) != len(moves):
            raise ValueError("a batch moves each job at most once")
        try:
            return self._apply_once(moves, actor, fence)
        except (IntegrityError, _StaleBatch):
            # A job moved since the batch read it (its UPDATE missed the version, or the
            # (job_id, version) history key caught a concurrent commit), or a GPU would hold two
            # open attempts: the batch is retried one by one, and the move at fault comes back
            # as ConcurrentModification.
            if len(moves) == 1:
                return [ConcurrentModification(moves[0].job_id, moves[0].expected_version)]
            return [o for move in moves for o in self.apply_moves([move], actor, fence)]

    def split_into_stages(self, reasons: Mapping[str, str], actor: str) -> list[str]:
        """Split these jobs' renders into stages (encoding first, `reasons` saying why), each
        only while it is still queued and has never run (no attempt, no checkpoint): a job the
        scheduler placed meanwhile renders whole. Returns the jobs split."""
        jobs = self.find_many(list(reasons))
        moves = [
            JobMove(
                job.job_id,
                job.version,
                (),
                f"split into stages: {reasons[job.job_id]}",
                JobChanges(stage=RenderStage.ENCODE),
            )
            for job in jobs.values()
            if job.state is JobState.QUEUED
            and job.attempt == 0
            and job.stage is None
            and job.last_checkpoint is None
        ]
        outcomes = self.apply_moves(moves, actor) if moves else []
        return [o.job_id for o in outcomes if isinstance(o, JobRecord)]

    def _apply_once(
        self, moves: Sequence[JobMove], actor: str, fence: Fence | None
    ) -> list[JobRecord | FrameFleetError]:
        errors: list[FrameFleetError | None] = []  # None: applied
        with self._session() as session:
            if fence is not None:
                check_fence(session, fence)  # first: on PostgreSQL it locks out a takeover
            jobs, attempts = self._as_read(session, [move.job_id for move in moves])
            writes = MoveWrites(self._clock.now(), actor)
            for move in moves:
                try:
                    writes.add(jobs.get(move.job_id), attempts.get(move.job_id), move)
                    errors.append(None)
                except (ConcurrentModification, InvalidTransition, JobNotFound) as error:
                    errors.append(error)
            self._write(session, writes)
            session.commit()
        records = writes.records
        return [error or records[move.job_id] for move, error in zip(moves, errors, strict=True)]

    def _as_read(
        self, session: Session, job_ids: Sequence[str]
    ) -> tuple[dict[str, JobRecord], dict[str, AttemptNow]]:
        rows: list[Row[Any]] = []
        for chunk in in_chunks(job_ids):
            query = (
                select_columns(*JOB_COLUMNS, *_ATTEMPT_READ)
                .outerjoin(ATTEMPTS, CURRENT_ATTEMPT)
                .where(JOBS.c.job_id.in_(chunk))
            )
            rows.extend(session.execute(query))
        jobs = {job.job_id: job for job in self._light_records(session, rows, "a_worker_id")}
        read = ("attempt", *ATTEMPT_FIELDS_CHANGED)
        attempts = {
            row.job_id: AttemptNow(row.job_id, **{name: getattr(row, f"a_{name}") for name in read})
            for row in rows
            if row.a_attempt is not None
        }
        return jobs, attempts

    @staticmethod
    def _write(session: Session, writes: MoveWrites) -> None:
        """One statement per table, each executed for all its rows at once."""
        connection = session.connection()
        if writes.jobs and connection.execute(_UPDATE_JOB, writes.jobs).rowcount != len(
            writes.jobs
        ):
            raise _StaleBatch  # a job moved since it was read: the store retries one by one
        if writes.events:
            connection.execute(insert(_EVENTS), writes.events)
        if writes.attempts_changed:
            connection.execute(_UPDATE_ATTEMPT, writes.attempts_changed)
        if writes.attempt_gpus_ended:
            connection.execute(_END_ATTEMPT_GPUS, writes.attempt_gpus_ended)
        if writes.attempts_started:  # after the ends: the GPU's last attempt closes first
            connection.execute(insert(ATTEMPTS), writes.attempts_started)
        if writes.attempt_gpus_started:
            connection.execute(insert(ATTEMPT_GPUS), writes.attempt_gpus_started)
        if writes.assigned:
            # The instance reserved for a job is used up once the job is placed: if it comes
            # back to the queue it has no claim on that GPU (the market choice stays).
            connection.execute(
                update(RESERVATIONS)
                .where(RESERVATIONS.c.job_id.in_(writes.assigned))
                .values(instance_id="")
            )
        if writes.ended:
            connection.execute(delete(RESERVATIONS).where(RESERVATIONS.c.job_id.in_(writes.ended)))
