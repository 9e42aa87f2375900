"""Apply job decisions through the store (the thin mechanism behind the pure policy)."""

from __future__ import annotations

from kernel.errors import FrameFleetError
from kernel.job_record import JobMove, JobRecord
from kernel.job_state import JobState
from orchestrator.control.job_events import Decision, Ignore, Record
from orchestrator.scheduling.snapshots import Assignment
from orchestrator.store.job_store import JobStore


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
    )


def apply_decision(store: JobStore, job: JobRecord, decision: Decision, actor: str) -> JobRecord:
    """One decision on its own. A concurrent writer makes this raise ConcurrentModification:
    reload and decide again."""
    move = as_move(job, decision)
    if move is None:
        return job
    (outcome,) = store.apply_moves([move], actor)
    if isinstance(outcome, FrameFleetError):
        raise outcome
    return outcome
