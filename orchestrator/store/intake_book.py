"""The intake's side of the store: idempotent acceptance of jobs and the ledger of rejected
messages (the intake's JobSink)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from kernel.deadline_risk import start_by
from kernel.job_record import AcceptOutcome, Rejection, Submission
from kernel.job_state import JobState
from orchestrator.store.base import StoreBase
from orchestrator.store.tables import JobEventRow, JobRow, RejectedMessageRow

INTAKE_ACTOR = "intake"


class IntakeBook(StoreBase):
    def accept_batch(
        self, submissions: Sequence[Submission], actor: str = INTAKE_ACTOR, via: str = "message"
    ) -> list[AcceptOutcome]:
        """Record new jobs in one transaction. A job_id already stored is a duplicate (same
        spec) or a conflict (different spec); neither changes anything. `actor` and `via`
        (what carried them) go into each new job's history."""
        if not submissions:
            return []
        try:
            return self._accept_batch_once(submissions, actor, via)
        except IntegrityError:
            # Another writer inserted one of these ids between our check and our insert.
            return [self._accept_batch_once([item], actor, via)[0] for item in submissions]

    def _accept_batch_once(
        self, submissions: Sequence[Submission], actor: str, via: str
    ) -> list[AcceptOutcome]:
        now = self._clock.now()
        ids = [item.spec.job_id for item in submissions]
        with self._session() as session:
            stored = {
                job_id: submitted or current
                for job_id, current, submitted in session.exec(
                    select(JobRow.job_id, JobRow.spec_sha256, JobRow.submitted_sha256).where(
                        col(JobRow.job_id).in_(ids)
                    )
                ).all()
            }
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
                            actor=actor,
                            reason=f"accepted from {via} {item.message_id}",
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
            start_by=start_by(spec),
            model=spec.model,
            spec_json=spec.canonical_json(),
            spec_sha256=fingerprint,
            source_message_id=item.message_id,
            created_at=now,
            updated_at=now,
            team=spec.tags.team,
            customer=spec.tags.customer,
            project=spec.tags.project,
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
