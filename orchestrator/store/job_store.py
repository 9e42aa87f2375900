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

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from kernel.errors import (
    ConcurrentModification,
    FrameFleetError,
    InvalidTransition,
    JobNotFound,
)
from kernel.job_record import (
    JobChanges,
    JobMove,
    JobRecord,
)
from kernel.job_state import JobState, check_transition
from orchestrator.store.cost_facts import CostFactBook
from orchestrator.store.drains import DrainBook
from orchestrator.store.fleet_view import FleetViewBook
from orchestrator.store.intake_ledger import IntakeLedger
from orchestrator.store.job_pages import JobPageBook
from orchestrator.store.job_queries import WORKER_FAULT, JobQueries
from orchestrator.store.leases import Fence, LeaseBook, check_fence
from orchestrator.store.pool_marks import PoolMarkBook
from orchestrator.store.pool_rates import PoolRateBook
from orchestrator.store.report_sends import ReportSendBook
from orchestrator.store.reservations import ReservationBook
from orchestrator.store.tables import JobAttemptRow, JobEventRow, JobRow, ReservationRow
from orchestrator.store.tokens import TokenBook


class JobStore(
    JobQueries,
    LeaseBook,
    IntakeLedger,
    ReservationBook,
    DrainBook,
    PoolRateBook,
    PoolMarkBook,
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
        except IntegrityError:
            # The (job_id, version) history key doubles as a fence on backends where an UPDATE
            # did not see a concurrent commit, and a GPU takes one open attempt only: the batch
            # is retried one by one, and the move at fault comes back as ConcurrentModification.
            if len(moves) == 1:
                return [ConcurrentModification(moves[0].job_id, moves[0].expected_version)]
            return [o for move in moves for o in self.apply_moves([move], actor, fence)]

    def _apply_once(
        self, moves: Sequence[JobMove], actor: str, fence: Fence | None
    ) -> list[JobRecord | FrameFleetError]:
        now = self._clock.now()
        ids = [move.job_id for move in moves]
        errors: list[FrameFleetError | None] = []  # None: applied
        with self._session() as session:
            if fence is not None:
                check_fence(session, fence)  # first: on PostgreSQL it locks out a takeover
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
            session.commit()
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
