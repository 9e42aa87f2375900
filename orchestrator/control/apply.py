"""Job decisions as the store's writes (the thin mechanism behind the pure policy)."""

from __future__ import annotations

from kernel.job_record import JobMove, JobRecord
from kernel.job_state import JobState
from orchestrator.control.job_events import Decision, Ignore, Record
from orchestrator.scheduling.snapshots import Assignment


def as_move(job: JobRecord, decision: Decision) -> JobMove | None:
    """The write a decision asks for, fenced on the version it was decided on; None for none."""
    if isinstance(decision, Ignore):
        return None
    if isinstance(decision, Record):
        if decision.changes.last_checkpoint is None:
            return None
        return JobMove(job.job_id, job.version, (), decision.reason, decision.changes)
    return JobMove(job.job_id, job.version, decision.path, decision.reason, decision.changes)


def assignment_move(assignment: Assignment, job: JobRecord) -> JobMove:
    """The write that gives `job` (as the scheduler read it) the GPU it was assigned."""
    return JobMove(
        job.job_id,
        job.version,
        (JobState.ASSIGNED,),
        assignment.reason,
        worker_id=assignment.worker_id,
        gpu_index=assignment.gpu_index,
        span=assignment.span,
    )
