"""The job store: idempotent acceptance, the checked state machine, history, dead-letter ledger,
reservations.

Synchronous (SQLAlchemy sessions); async callers run it in a worker thread. Every write that
moves a job names the version it read: two control-plane replicas can never both move a job.
The intake's ledger and the reservations live in modules of their own; this one holds the
state machine's writes and the queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from kernel.errors import (
    ConcurrentModification,
    FrameFleetError,
    InvalidTransition,
    JobNotFound,
)
from kernel.job_record import (
    FinishedRun,
    JobChanges,
    JobEvent,
    JobMove,
    JobRecord,
    Placement,
)
from kernel.job_state import ACTIVE_STATES, JobState, check_transition
from orchestrator.store.base import CURRENT_ATTEMPT, utc
from orchestrator.store.cost_facts import CostFactBook
from orchestrator.store.drains import DrainBook
from orchestrator.store.fleet_view import FleetViewBook
from orchestrator.store.intake_ledger import IntakeLedger
from orchestrator.store.job_pages import JobPageBook
from orchestrator.store.pool_rates import PoolRateBook
from orchestrator.store.report_sends import ReportSendBook
from orchestrator.store.reservations import ReservationBook
from orchestrator.store.tables import JobAttemptRow, JobEventRow, JobRow, ReservationRow
from orchestrator.store.tokens import TokenBook

# An attempt's outcome when it ended through its worker's fault (the others are job states).
WORKER_FAULT = "worker_fault"


class JobStore(
    IntakeLedger,
    ReservationBook,
    DrainBook,
    PoolRateBook,
    CostFactBook,
    ReportSendBook,
    FleetViewBook,
    JobPageBook,
    TokenBook,
):
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
            job_id, expected_version, (target,), reason, changes or JobChanges(), worker_id,
            gpu_index,
        )  # fmt: skip
        return self._one(move, actor)

    def note_checkpoint(self, job_id: str, expected_version: int, checkpoint: str) -> JobRecord:
        """Remember the newest durable checkpoint without a state change (still versioned)."""
        move = JobMove(job_id, expected_version, (), "checkpoint", JobChanges(checkpoint))
        return self._one(move, "worker")

    def _one(self, move: JobMove, actor: str) -> JobRecord:
        (outcome,) = self.apply_moves([move], actor)
        if isinstance(outcome, FrameFleetError):
            raise outcome
        return outcome

    def apply_moves(
        self, moves: Sequence[JobMove], actor: str
    ) -> list[JobRecord | FrameFleetError]:
        """Apply many jobs' moves in one transaction (one commit, one fsync): what keeps a
        control plane with a thousand workers ahead of their events. Each move is fenced on
        its own: a move whose job changed since `expected_version`, is unknown, or is not
        allowed comes back as that error and leaves its job untouched; the others commit."""
        if len({move.job_id for move in moves}) != len(moves):
            raise ValueError("a batch moves each job at most once")
        now = self._clock.now()
        ids = [move.job_id for move in moves]
        errors: list[FrameFleetError | None] = []  # None: applied
        with self._session() as session:
            rows = {row.job_id: row for row in self._rows(session, ids)}
            assigned, ended = [], []
            for move in moves:
                try:
                    self._move(session, rows.get(move.job_id), move, actor, now)
                    errors.append(None)
                    if move.path and move.path[-1] is JobState.ASSIGNED:
                        assigned.append(move.job_id)
                    elif move.path and move.path[-1].terminal:
                        ended.append(move.job_id)
                except (ConcurrentModification, InvalidTransition, JobNotFound) as error:
                    errors.append(error)
            if assigned:
                # The instance reserved for a job is used up once the job is placed: if it comes
                # back to the queue it has no claim on that GPU (the market choice stays).
                session.exec(
                    update(ReservationRow)
                    .where(col(ReservationRow.job_id).in_(assigned))
                    .values(instance_id="")
                )
            if ended:
                session.exec(delete(ReservationRow).where(col(ReservationRow.job_id).in_(ended)))
            try:
                session.commit()
            except IntegrityError:
                # The (job_id, version) history key doubles as a fence on backends where an
                # UPDATE did not see a concurrent commit; the whole batch is retried one by one.
                session.rollback()
                if len(moves) == 1:
                    return [ConcurrentModification(moves[0].job_id, moves[0].expected_version)]
                return [outcome for move in moves for outcome in self.apply_moves([move], actor)]
            session.expire_all()
            fresh = self._records(session, ids)
        return [error or fresh[move.job_id] for move, error in zip(moves, errors, strict=True)]

    def _move(
        self, session: Session, row: JobRow | None, move: JobMove, actor: str, now: datetime
    ) -> None:
        if row is None:
            raise JobNotFound(move.job_id)
        if row.version != move.expected_version:
            raise ConcurrentModification(move.job_id, move.expected_version)
        current = JobState(row.state)
        for before, after in zip((current, *move.path), move.path, strict=False):
            check_transition(move.job_id, before, after)  # all steps before any write
        version, attempt = move.expected_version, row.attempt
        changed = self._changed_fields(row, move.changes)
        for index, target in enumerate(move.path or (None,)):
            last = index == max(0, len(move.path) - 1)
            if target is JobState.ASSIGNED:
                attempt += 1
            values: dict[str, object] = {"version": version + 1, "updated_at": now}
            if target is not None:
                values |= {"state": target.value, "attempt": attempt}
            if last:
                values |= changed
            result = session.exec(
                update(JobRow)
                .where(col(JobRow.job_id) == move.job_id, col(JobRow.version) == version)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:
                # Only the first UPDATE can miss: after it this transaction holds the row.
                raise ConcurrentModification(move.job_id, move.expected_version)
            version += 1
            if target is None:
                if move.changes is not None and move.changes.last_checkpoint is not None:
                    self._attempt_checkpointed(session, move.job_id, attempt, move.changes, now)
                continue
            session.add(
                JobEventRow(
                    job_id=move.job_id,
                    at=now,
                    from_state=current.value,
                    to_state=target.value,
                    version=version,
                    attempt=attempt,
                    actor=actor,
                    reason=move.reason,
                )
            )
            changes = move.changes if last and move.changes is not None else JobChanges()
            self._track_attempt(
                session, move.job_id, attempt, current, target, (move.worker_id, move.gpu_index),
                now, WORKER_FAULT if changes.worker_fault else target.value, changes,
            )  # fmt: skip
            current = target

    @staticmethod
    def _changed_fields(row: JobRow, changes: JobChanges | None) -> dict[str, object]:
        if changes is None:
            return {}
        fields: dict[str, object] = {}
        if changes.last_checkpoint is not None:
            fields["last_checkpoint"] = changes.last_checkpoint
            fields["checkpoint_step"] = changes.checkpoint_step
        if changes.not_before is not None:
            fields["not_before"] = changes.not_before
        if changes.add_job_fault:
            fields["job_faults"] = row.job_faults + 1
        return fields

    @staticmethod
    def _track_attempt(
        session: Session,
        job_id: str,
        attempt: int,
        current: JobState,
        target: JobState,
        placement: tuple[str | None, int | None],
        now: datetime,
        outcome: str,
        changes: JobChanges,
    ) -> None:
        if target is JobState.ASSIGNED:
            worker_id, gpu_index = placement
            session.add(
                JobAttemptRow(
                    job_id=job_id,
                    attempt=attempt,
                    worker_id=worker_id,
                    gpu_index=gpu_index,
                    started_at=now,
                )
            )
        elif current is not JobState.QUEUED and (target.terminal or target is JobState.QUEUED):
            attempt_row = session.get(JobAttemptRow, (job_id, attempt))
            if attempt_row is not None and attempt_row.ended_at is None:
                attempt_row.ended_at = now
                attempt_row.outcome = outcome
                attempt_row.denoise_seconds = changes.denoise_seconds
                if changes.model_load_seconds is not None:
                    attempt_row.model_load_seconds = changes.model_load_seconds
                if changes.last_checkpoint is not None:  # stopped after a checkpoint
                    attempt_row.checkpointed_at = now
                    attempt_row.checkpoint_seconds += changes.checkpoint_write_seconds
                    attempt_row.checkpoints += changes.checkpoint_write_seconds > 0
                session.add(attempt_row)

    @staticmethod
    def _attempt_checkpointed(
        session: Session, job_id: str, attempt: int, changes: JobChanges, now: datetime
    ) -> None:
        """A durable checkpoint of a running attempt: the work before it is safe, and its
        write is checkpoint overhead in the cost ledger."""
        attempt_row = session.get(JobAttemptRow, (job_id, attempt))
        if attempt_row is not None:
            if attempt_row.ended_at is None:  # else: a late report of the attempt that ended
                attempt_row.checkpointed_at = now
            attempt_row.checkpoint_seconds += changes.checkpoint_write_seconds
            attempt_row.checkpoints += 1
            session.add(attempt_row)

    # -- queries ----------------------------------------------------------------------------

    def find(self, job_id: str) -> JobRecord | None:
        return self.find_many([job_id]).get(job_id)

    def get(self, job_id: str) -> JobRecord:
        record = self.find(job_id)
        if record is None:
            raise JobNotFound(job_id)
        return record

    def find_many(self, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        """These jobs, each with the worker its current attempt was given to."""
        with self._session() as session:
            return self._records(session, job_ids)

    def schedulable(self, now: datetime, limit: int = 2000) -> list[JobRecord]:
        """Queued jobs past their backoff for the scheduler: the most urgent `limit` by base
        priority and the oldest `limit` (which aging may have made urgent), without repeats."""
        base = select(JobRow).where(
            col(JobRow.state) == JobState.QUEUED.value,
            (col(JobRow.not_before).is_(None)) | (col(JobRow.not_before) <= now),
        )
        with self._session() as session:
            urgent = session.exec(
                base.order_by(col(JobRow.priority).desc(), col(JobRow.created_at)).limit(limit)
            ).all()
            oldest = session.exec(base.order_by(col(JobRow.created_at)).limit(limit)).all()
        rows = {row.job_id: row for row in [*urgent, *oldest]}
        return [self._cached_record(row) for row in rows.values()]

    def list_jobs(self, state: JobState | None = None, limit: int = 1000) -> list[JobRecord]:
        with self._session() as session:
            query = select(JobRow).order_by(col(JobRow.created_at), col(JobRow.job_id))
            if state is not None:
                query = query.where(col(JobRow.state) == state.value)
            return [self._cached_record(row) for row in session.exec(query.limit(limit)).all()]

    def history(self, job_id: str) -> list[JobEvent]:
        with self._session() as session:
            rows = session.exec(
                select(JobEventRow)
                .where(col(JobEventRow.job_id) == job_id)
                .order_by(col(JobEventRow.version))
            ).all()
        return [
            JobEvent(
                job_id=row.job_id,
                at=utc(row.at),
                from_state=JobState(row.from_state) if row.from_state else None,
                to_state=JobState(row.to_state),
                version=row.version,
                attempt=row.attempt,
                actor=row.actor,
                reason=row.reason,
            )
            for row in rows
        ]

    def finished_since(self, since: datetime, limit: int = 500) -> list[FinishedRun]:
        """Jobs that succeeded after `since` in their first attempt, with the denoising time
        their worker reported, oldest first."""
        with self._session() as session:
            rows = session.exec(
                select(JobRow, JobAttemptRow)
                .join(JobAttemptRow, CURRENT_ATTEMPT)
                .where(
                    col(JobRow.state) == JobState.SUCCEEDED.value,
                    col(JobRow.attempt) == 1,
                    col(JobRow.updated_at) > since,
                    col(JobAttemptRow.denoise_seconds).is_not(None),
                )
                .order_by(col(JobRow.updated_at))
                .limit(limit)
            ).all()
            return [
                FinishedRun(
                    job.job_id,
                    self._cached_record(job).spec,
                    attempt.worker_id,
                    attempt.denoise_seconds,
                    utc(job.updated_at),
                )
                for job, attempt in rows
                if attempt.worker_id is not None and attempt.denoise_seconds is not None
            ]

    def faulted_on(self, job_ids: Sequence[str]) -> dict[str, set[str]]:
        """job -> the workers an earlier attempt of it ended on through the worker's fault.
        Such attempts are rare and indexed: one small query, whatever the queue's length."""
        if not job_ids:
            return {}
        wanted = set(job_ids)
        found: dict[str, set[str]] = {}
        with self._session() as session:
            rows = session.exec(
                select(JobAttemptRow.job_id, JobAttemptRow.worker_id)
                .join(JobRow, col(JobRow.job_id) == col(JobAttemptRow.job_id))
                .where(
                    col(JobAttemptRow.outcome) == WORKER_FAULT,
                    col(JobRow.state) == JobState.QUEUED.value,
                )
            ).all()
        for job_id, worker_id in rows:
            if worker_id is not None and job_id in wanted:
                found.setdefault(job_id, set()).add(worker_id)
        return found

    def placements(self) -> list[Placement]:
        """Jobs assigned, running or checkpointing, with the worker and GPU of their attempt."""
        active = [state.value for state in ACTIVE_STATES]
        with self._session() as session:
            rows = session.exec(
                select(JobRow, JobAttemptRow)
                .join(JobAttemptRow, CURRENT_ATTEMPT)
                .where(col(JobRow.state).in_(active))
                .order_by(col(JobRow.job_id))
            ).all()
        return [
            Placement(
                self._cached_record(job, attempt.worker_id),
                attempt.worker_id or "",
                attempt.gpu_index or 0,
                utc(attempt.started_at),
            )
            for job, attempt in rows
        ]

    def count_jobs(self) -> int:
        with self._session() as session:
            return session.exec(select(func.count()).select_from(JobRow)).one()

    def count_by_state(self) -> dict[JobState, int]:
        with self._session() as session:
            rows = session.exec(
                select(JobRow.state, func.count()).group_by(col(JobRow.state))
            ).all()
        return {JobState(state): count for state, count in rows}
