"""The job store: idempotent acceptance, the checked state machine, history, dead-letter ledger.

Synchronous (SQLAlchemy sessions); async callers run it in a worker thread. Every write that
moves a job names the version it read: two control-plane replicas can never both move a job.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import Engine, delete, func, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, col, select

from orchestrator.domain.clock import Clock
from orchestrator.domain.errors import (
    ConcurrentModification,
    FrameFleetError,
    InvalidTransition,
    JobNotFound,
    StoreUnavailable,
)
from orchestrator.domain.job_record import (
    AcceptOutcome,
    JobChanges,
    JobEvent,
    JobMove,
    JobRecord,
    Placement,
    Rejection,
    Reservation,
    Submission,
)
from orchestrator.domain.job_spec import JobSpec, parse_job
from orchestrator.domain.job_state import ACTIVE_STATES, JobState, check_transition
from orchestrator.store.migrate import upgrade_to_head
from orchestrator.store.tables import (
    JobAttemptRow,
    JobEventRow,
    JobRow,
    RejectedMessageRow,
    ReservationRow,
)

INTAKE_ACTOR = "intake"
# A job's row joined to the row of its current attempt (who runs it, on which GPU).
_CURRENT_ATTEMPT = (col(JobAttemptRow.job_id) == col(JobRow.job_id)) & (
    col(JobAttemptRow.attempt) == col(JobRow.attempt)
)


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything we store is UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _record(row: JobRow, spec: JobSpec | None = None, worker_id: str | None = None) -> JobRecord:
    return JobRecord(
        job_id=row.job_id,
        state=JobState(row.state),
        version=row.version,
        attempt=row.attempt,
        priority=row.priority,
        deadline=_utc(row.deadline) if row.deadline else None,
        spec=spec if spec is not None else parse_job(row.spec_json, now=None),
        created_at=_utc(row.created_at),
        updated_at=_utc(row.updated_at),
        last_checkpoint=row.last_checkpoint,
        job_faults=row.job_faults,
        not_before=_utc(row.not_before) if row.not_before else None,
        worker_id=worker_id,
    )


_Keyed = TypeVar("_Keyed", JobRow, ReservationRow)


def _rows_of(session: Session, table: type[_Keyed], job_ids: Sequence[str]) -> list[_Keyed]:
    found: list[_Keyed] = []
    for start in range(0, len(job_ids), 500):  # bounded IN lists
        chunk = job_ids[start : start + 500]
        found.extend(session.exec(select(table).where(col(table.job_id).in_(chunk))).all())
    return found


class JobStore:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._specs: dict[str, JobSpec] = {}

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self._engine, expire_on_commit=False) as session:
                yield session
        except OperationalError as error:
            raise StoreUnavailable(f"database error: {error.orig}") from error

    # -- intake -----------------------------------------------------------------------------

    def accept_batch(self, submissions: Sequence[Submission]) -> list[AcceptOutcome]:
        """Record new jobs in one transaction. A job_id already stored is a duplicate (same
        spec) or a conflict (different spec); neither changes anything."""
        if not submissions:
            return []
        try:
            return self._accept_batch_once(submissions)
        except IntegrityError:
            # Another writer inserted one of these ids between our check and our insert.
            return [self._accept_batch_once([item])[0] for item in submissions]

    def _accept_batch_once(self, submissions: Sequence[Submission]) -> list[AcceptOutcome]:
        now = self._clock.now()
        ids = [item.spec.job_id for item in submissions]
        with self._session() as session:
            stored = dict(
                session.exec(
                    select(JobRow.job_id, JobRow.spec_sha256).where(col(JobRow.job_id).in_(ids))
                ).all()
            )
            outcomes: list[AcceptOutcome] = []
            for item in submissions:
                fingerprint = item.spec.fingerprint()
                known = stored.get(item.spec.job_id)
                if known is not None:
                    same = known == fingerprint
                    outcomes.append(AcceptOutcome.DUPLICATE if same else AcceptOutcome.CONFLICT)
                    continue
                stored[item.spec.job_id] = fingerprint
                session.add(self._new_job_row(item, fingerprint, now))
                outcomes.append(AcceptOutcome.ACCEPTED)
            session.flush()  # jobs before their history rows (foreign key)
            for item, outcome in zip(submissions, outcomes, strict=True):
                if outcome is AcceptOutcome.ACCEPTED:
                    session.add(
                        JobEventRow(
                            job_id=item.spec.job_id,
                            at=now,
                            from_state=None,
                            to_state=JobState.QUEUED.value,
                            version=1,
                            attempt=0,
                            actor=INTAKE_ACTOR,
                            reason=f"accepted from message {item.message_id}",
                        )
                    )
            session.commit()
        return outcomes

    @staticmethod
    def _new_job_row(item: Submission, fingerprint: str, now: datetime) -> JobRow:
        spec = item.spec
        return JobRow(
            job_id=spec.job_id,
            state=JobState.QUEUED.value,
            version=1,
            attempt=0,
            priority=spec.priority,
            deadline=spec.deadline,
            model=spec.model,
            spec_json=spec.canonical_json(),
            spec_sha256=fingerprint,
            source_message_id=item.message_id,
            created_at=now,
            updated_at=now,
        )

    def record_rejection(self, rejection: Rejection) -> bool:
        """Remember a bad message once per SQS message id. True if it still needs dead-lettering
        (new, or a previous run died before the dead-letter send was confirmed)."""
        with self._session() as session:
            row = session.get(RejectedMessageRow, rejection.message_id)
            if row is not None:
                return row.dead_lettered_at is None
            session.add(
                RejectedMessageRow(
                    message_id=rejection.message_id,
                    received_at=self._clock.now(),
                    reason=rejection.reason,
                    errors_json=json.dumps(list(rejection.errors)),
                    body=rejection.body,
                )
            )
            try:
                session.commit()
            except IntegrityError:
                return False  # a concurrent poller got the same redelivery; it sends it
        return True

    def mark_dead_lettered(self, message_id: str) -> None:
        with self._session() as session:
            session.exec(
                update(RejectedMessageRow)
                .where(col(RejectedMessageRow.message_id) == message_id)
                .values(dead_lettered_at=self._clock.now())
            )
            session.commit()

    def rejections(self) -> list[Rejection]:
        with self._session() as session:
            rows = session.exec(
                select(RejectedMessageRow).order_by(col(RejectedMessageRow.received_at))
            ).all()
        return [
            Rejection(row.message_id, row.reason, tuple(json.loads(row.errors_json)), row.body)
            for row in rows
        ]

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

    @staticmethod
    def _rows(session: Session, job_ids: Sequence[str]) -> Sequence[JobRow]:
        return _rows_of(session, JobRow, job_ids)

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
            self._track_attempt(
                session, move.job_id, attempt, current, target, (move.worker_id, move.gpu_index),
                now,
            )  # fmt: skip
            current = target

    @staticmethod
    def _changed_fields(row: JobRow, changes: JobChanges | None) -> dict[str, object]:
        if changes is None:
            return {}
        fields: dict[str, object] = {}
        if changes.last_checkpoint is not None:
            fields["last_checkpoint"] = changes.last_checkpoint
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
                attempt_row.outcome = target.value
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

    def _records(self, session: Session, job_ids: Sequence[str]) -> dict[str, JobRecord]:
        found: dict[str, JobRecord] = {}
        for start in range(0, len(job_ids), 500):  # bounded IN lists
            query = (
                select(JobRow, JobAttemptRow.worker_id)
                .outerjoin(JobAttemptRow, _CURRENT_ATTEMPT)
                .where(col(JobRow.job_id).in_(job_ids[start : start + 500]))
            )
            for row, worker_id in session.exec(query):
                found[row.job_id] = self._cached_record(row, worker_id)
        return found

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

    def _cached_record(self, row: JobRow, worker_id: str | None = None) -> JobRecord:
        # Parsing a spec costs more than reading its row; specs never change once stored.
        spec = self._specs.get(row.spec_sha256)
        if spec is None:
            spec = parse_job(row.spec_json, now=None)
            if len(self._specs) > 50_000:
                self._specs.clear()
            self._specs[row.spec_sha256] = spec
        return _record(row, spec, worker_id)

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
                at=_utc(row.at),
                from_state=JobState(row.from_state) if row.from_state else None,
                to_state=JobState(row.to_state),
                version=row.version,
                attempt=row.attempt,
                actor=row.actor,
                reason=row.reason,
            )
            for row in rows
        ]

    def placements(self) -> list[Placement]:
        """Jobs assigned, running or checkpointing, with the worker and GPU of their attempt."""
        active = [state.value for state in ACTIVE_STATES]
        with self._session() as session:
            rows = session.exec(
                select(JobRow, JobAttemptRow)
                .join(JobAttemptRow, _CURRENT_ATTEMPT)
                .where(col(JobRow.state).in_(active))
                .order_by(col(JobRow.job_id))
            ).all()
        return [
            Placement(
                self._cached_record(job, attempt.worker_id),
                attempt.worker_id or "",
                attempt.gpu_index or 0,
                _utc(attempt.started_at),
            )
            for job, attempt in rows
        ]

    def reserve(self, reservations: Sequence[Reservation]) -> None:
        """Record (or replace) each job's reservation (kept until the job ends)."""
        with self._session() as session:
            for r in reservations:
                row = ReservationRow(
                    job_id=r.job_id, instance_id=r.instance_id, on_demand=r.on_demand,
                    expires_at=r.expires_at, seconds_per_step=r.seconds_per_step,
                    margin_seconds=r.margin_seconds,
                )  # fmt: skip
                session.merge(row)
            session.commit()

    def reservations(self, job_ids: Sequence[str]) -> dict[str, Reservation]:
        """The reservations of these jobs (expired claims included: see Reservation)."""
        with self._session() as session:
            rows = _rows_of(session, ReservationRow, job_ids)
        return {
            r.job_id: Reservation(r.job_id, r.instance_id, r.on_demand, _utc(r.expires_at),
                                  r.seconds_per_step, r.margin_seconds)
            for r in rows
        }  # fmt: skip

    def count_jobs(self) -> int:
        with self._session() as session:
            return session.exec(select(func.count()).select_from(JobRow)).one()

    def count_by_state(self) -> dict[JobState, int]:
        with self._session() as session:
            rows = session.exec(
                select(JobRow.state, func.count()).group_by(col(JobRow.state))
            ).all()
        return {JobState(state): count for state, count in rows}

    @property
    def engine(self) -> Engine:
        return self._engine

    def upgrade(self) -> None:
        upgrade_to_head(self._engine)

    def dispose(self) -> None:
        self._engine.dispose()
