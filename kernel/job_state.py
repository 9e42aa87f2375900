"""The job state machine: one table, one check. The store applies it under a version column."""

from __future__ import annotations

from enum import StrEnum

from kernel.state_machine import StateMachine


class JobState(StrEnum):
    QUEUED = "queued"
    ASSIGNED = "assigned"
    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    PREEMPTED = "preempted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return JOB_MACHINE.terminal(self)


_S = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # A queued job is handed to a worker (a new attempt), or ends without running.
    _S.QUEUED: frozenset({_S.ASSIGNED, _S.CANCELLED, _S.FAILED}),
    # The worker refused it or vanished before starting: back to the queue.
    _S.ASSIGNED: frozenset({_S.RUNNING, _S.QUEUED, _S.FAILED, _S.CANCELLED}),
    # PREEMPTED straight from RUNNING: the worker was lost without a notice. QUEUED straight
    # from RUNNING: the attempt finished its stage of a split render; the next stage waits.
    _S.RUNNING: frozenset(
        {_S.CHECKPOINTING, _S.PREEMPTED, _S.QUEUED, _S.SUCCEEDED, _S.FAILED, _S.CANCELLED}
    ),
    # The job may finish (its render, or its stage) before the checkpoint it was asked for.
    _S.CHECKPOINTING: frozenset(
        {_S.PREEMPTED, _S.RUNNING, _S.QUEUED, _S.SUCCEEDED, _S.FAILED, _S.CANCELLED}
    ),
    _S.PREEMPTED: frozenset({_S.QUEUED, _S.FAILED, _S.CANCELLED}),
    _S.SUCCEEDED: frozenset(),
    _S.FAILED: frozenset(),
    _S.CANCELLED: frozenset(),
}


JOB_MACHINE = StateMachine("job", JOB_TRANSITIONS)

# On a worker: placed there, running, or checkpointing (what a worker's events can move).
ACTIVE_STATES = frozenset({_S.ASSIGNED, _S.RUNNING, _S.CHECKPOINTING})


def check_transition(job_id: str, current: JobState, target: JobState) -> None:
    JOB_MACHINE.check(job_id, current, target)
