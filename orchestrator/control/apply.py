"""Apply a job decision through the store (the thin mechanism behind the pure policy)."""

from __future__ import annotations

from orchestrator.control.job_events import Decision, Ignore, Record
from orchestrator.domain.job_record import JobChanges, JobRecord
from orchestrator.store.job_store import JobStore


def apply_decision(store: JobStore, job: JobRecord, decision: Decision, actor: str) -> JobRecord:
    """Walk the path from the version the decision was made on; the changes ride on the last
    step, so they are applied once. A concurrent writer makes this raise
    ConcurrentModification: reload and decide again."""
    if isinstance(decision, Ignore):
        return job
    if isinstance(decision, Record):
        if decision.changes.last_checkpoint is None:
            return job
        return store.note_checkpoint(job.job_id, job.version, decision.changes.last_checkpoint)
    record = job
    last = len(decision.path) - 1
    for index, target in enumerate(decision.path):
        record = store.transition(
            job.job_id,
            target,
            expected_version=record.version,
            actor=actor,
            reason=decision.reason,
            changes=decision.changes if index == last else JobChanges(),
        )
    return record
