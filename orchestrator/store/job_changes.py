"""An operator's change to a queued job's spec (its priority or its deadline), under the
job's version like every move: a job the scheduler placed meanwhile is not changed. The spec
as submitted keeps its fingerprint (`submitted_sha256`), so a producer's resend of it is still
a duplicate."""

from __future__ import annotations

from sqlalchemy import update

from kernel.deadline_risk import start_by
from kernel.errors import ConcurrentModification, InvalidTransition, JobNotFound
from kernel.job_record import JobRecord
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from orchestrator.store.base import JOBS, StoreBase
from orchestrator.store.tables import JobEventRow, JobRow


class JobChangeBook(StoreBase):
    def replace_queued_spec(
        self, spec: JobSpec, *, expected_version: int, actor: str, reason: str
    ) -> JobRecord:
        """Store `spec` as the queued job's own (same job id), with the history line that says
        why; ConcurrentModification when it moved since `expected_version`, InvalidTransition
        when it is no longer queued."""
        now = self._clock.now()
        with self._session() as session:
            row = session.get(JobRow, spec.job_id)
            if row is None:
                raise JobNotFound(spec.job_id)
            if row.version != expected_version:
                raise ConcurrentModification(spec.job_id, expected_version)
            if row.state != JobState.QUEUED.value:
                raise InvalidTransition(f"job {spec.job_id}", row.state, "a changed spec")
            fingerprint = spec.fingerprint()
            changed = session.connection().execute(
                update(JOBS)
                .where(JOBS.c.job_id == spec.job_id, JOBS.c.version == expected_version)
                .values(
                    version=expected_version + 1,
                    priority=spec.priority,
                    deadline=spec.deadline,
                    start_by=start_by(spec),
                    spec_json=spec.canonical_json(),
                    spec_sha256=fingerprint,
                    submitted_sha256=row.submitted_sha256 or row.spec_sha256,
                    updated_at=now,
                )
            )
            if changed.rowcount != 1:
                raise ConcurrentModification(spec.job_id, expected_version)
            session.add(
                JobEventRow(
                    job_id=spec.job_id,
                    at=now,
                    from_state=JobState.QUEUED.value,
                    to_state=JobState.QUEUED.value,
                    version=expected_version + 1,
                    attempt=row.attempt,
                    actor=actor[:128],
                    reason=reason,
                )
            )
            session.commit()
        with self._session() as session:
            return self._records(session, [spec.job_id])[spec.job_id]
