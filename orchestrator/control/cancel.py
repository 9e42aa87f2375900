"""A user's cancel: the job ends as `cancelled` at once, from whatever state it is in.

A queued job simply never runs. A job on a worker is cancelled in the store first; the worker
keeps running it until the control plane hears of it (the first heartbeat after its next
round), sees an attempt the job has left and sends `cancel`, so the worker stops at its next
step boundary and its GPU is free. No event from that attempt can move the job again.
"""

from __future__ import annotations

from typing import Protocol

from kernel.errors import ConcurrentModification, FrameFleetError
from kernel.job_record import JobRecord
from kernel.job_state import JobState

TRIES = 5  # a job moving under our feet (a worker event) is read again


class JobAlreadyEnded(FrameFleetError):
    def __init__(self, job: JobRecord) -> None:
        super().__init__(f"job {job.job_id!r} already ended: {job.state.value}")
        self.job = job


class CancelStore(Protocol):
    def get(self, job_id: str) -> JobRecord: ...

    def transition(
        self, job_id: str, target: JobState, *, expected_version: int, actor: str, reason: str
    ) -> JobRecord: ...


def cancel_job(store: CancelStore, job_id: str, reason: str, actor: str) -> JobRecord:
    """Cancel the job; raises JobNotFound or JobAlreadyEnded."""
    for _ in range(TRIES):
        job = store.get(job_id)
        if job.state.terminal:
            raise JobAlreadyEnded(job)
        try:
            return store.transition(
                job_id,
                JobState.CANCELLED,
                expected_version=job.version,
                actor=actor,
                reason=f"cancelled: {reason}",
            )
        except ConcurrentModification:
            continue
    raise ConcurrentModification(job_id, job.version)
