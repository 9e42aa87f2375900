"""A batch of job moves planned in memory, then written with one statement per table.

The state machine checks every step first; what the batch writes is gathered as rows of
parameters, so that a thousand moves cost a handful of round trips to the database (each
UPDATE of a job still names the version it read: a job moved meanwhile makes the batch
come back stale, and the store retries it one move at a time).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from kernel.errors import ConcurrentModification, JobNotFound
from kernel.job_record import JobChanges, JobMove, JobRecord
from kernel.job_state import JobState, check_transition

# An attempt's outcome when it ended through its worker's fault (the others are job states),
# and when it finished its stage of a split render (the job queued for the next one).
WORKER_FAULT = "worker_fault"
STAGE_DONE = "stage_done"
# The columns a move writes: of its job, and of the attempt it ends or checkpoints.
JOB_FIELDS_MOVED = (
    "state",
    "version",
    "attempt",
    "updated_at",
    "last_checkpoint",
    "checkpoint_step",
    "checkpoint_family",
    "not_before",
    "job_faults",
    "stage",
)
ATTEMPT_FIELDS_CHANGED = (
    "ended_at",
    "outcome",
    "denoise_seconds",
    "model_load_seconds",
    "checkpoint_seconds",
    "checkpointed_at",
    "checkpoints",
)


@dataclass(frozen=True)
class AttemptNow:
    """What a batch reads of a job's current attempt before it ends or checkpoints it."""

    job_id: str
    attempt: int
    ended_at: datetime | None
    outcome: str | None
    denoise_seconds: float | None
    model_load_seconds: float
    checkpoint_seconds: float
    checkpointed_at: datetime | None
    checkpoints: int


@dataclass
class MoveWrites:
    """The rows a batch writes: `jobs` keyed by (job_id, read version), `attempts_ended`
    keyed by (job_id, attempt); `records` are the jobs as they are once it commits."""

    now: datetime
    actor: str
    jobs: list[dict[str, object]] = field(default_factory=list)
    events: list[dict[str, object]] = field(default_factory=list)
    attempts_started: list[dict[str, object]] = field(default_factory=list)
    attempts_changed: list[dict[str, object]] = field(default_factory=list)
    # Each GPU of each attempt started (`AttemptGpuRow`), and the attempts whose GPUs it frees.
    attempt_gpus_started: list[dict[str, object]] = field(default_factory=list)
    attempt_gpus_ended: list[dict[str, object]] = field(default_factory=list)
    assigned: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    records: dict[str, JobRecord] = field(default_factory=dict)

    def add(self, job: JobRecord | None, attempt: AttemptNow | None, move: JobMove) -> None:
        """Plan one move on `job` as read (with its current attempt, if it has one); raises
        JobNotFound, ConcurrentModification or InvalidTransition and plans nothing then."""
        if job is None:
            raise JobNotFound(move.job_id)
        if job.version != move.expected_version:
            raise ConcurrentModification(move.job_id, move.expected_version)
        for before, after in zip((job.state, *move.path), move.path, strict=False):
            check_transition(move.job_id, before, after)  # all steps before any write
        state, version, number, worker_id = job.state, job.version, job.attempt, job.worker_id
        read, started = attempt, False  # started: `attempt` is one this move opens
        for index, target in enumerate(move.path):
            last = index == len(move.path) - 1
            version += 1
            if target is JobState.ASSIGNED:
                self._keep(attempt, read, started, move)
                number, worker_id, started = number + 1, move.worker_id, True
                attempt = AttemptNow(move.job_id, number, None, None, None, 0.0, 0.0, None, 0)
            elif state is not JobState.QUEUED and (target.terminal or target is JobState.QUEUED):
                changes = move.changes if last else JobChanges()
                attempt = self._end(attempt, target, changes)
            self.events.append(self._event(move, state, target, version, number))
            state = target
        if not move.path:  # a checkpoint noted, or a render split, without a state change
            version += 1
            if move.changes.last_checkpoint is not None:
                attempt = self._checkpointed(attempt, move.changes)
            if move.changes.stage is not None:  # the split goes into the job's history
                self.events.append(self._event(move, state, state, version, number))
        self._keep(attempt, read, started, move)
        moved = self._moved(job, move.changes, state, version, number, worker_id)
        self.jobs.append(
            {
                "b_job_id": move.job_id,
                "b_version": move.expected_version,
                "v_state": moved.state.value,
                "v_version": moved.version,
                "v_attempt": moved.attempt,
                "v_updated_at": self.now,
                "v_last_checkpoint": moved.last_checkpoint,
                "v_checkpoint_step": moved.checkpoint_step,
                "v_checkpoint_family": moved.checkpoint_family,
                "v_not_before": moved.not_before,
                "v_job_faults": moved.job_faults,
                "v_stage": moved.stage.value if moved.stage else None,
            }
        )
        self.records[move.job_id] = moved
        if move.path and move.path[-1] is JobState.ASSIGNED:
            self.assigned.append(move.job_id)
        elif move.path and move.path[-1].terminal:
            self.ended.append(move.job_id)

    def _event(
        self, move: JobMove, before: JobState, after: JobState, version: int, attempt: int
    ) -> dict[str, object]:
        return {
            "job_id": move.job_id,
            "at": self.now,
            "from_state": before.value,
            "to_state": after.value,
            "version": version,
            "attempt": attempt,
            "actor": self.actor,
            "reason": move.reason,
        }

    def _moved(
        self,
        job: JobRecord,
        changes: JobChanges,
        state: JobState,
        version: int,
        attempt: int,
        worker_id: str | None,
    ) -> JobRecord:
        moved = replace(
            job,
            state=state,
            version=version,
            attempt=attempt,
            updated_at=self.now,
            worker_id=worker_id,
        )
        if changes.last_checkpoint is not None:
            moved = replace(
                moved,
                last_checkpoint=changes.last_checkpoint,
                checkpoint_step=changes.checkpoint_step,
                checkpoint_family=changes.checkpoint_family,
            )
        if changes.not_before is not None:
            moved = replace(moved, not_before=changes.not_before)
        if changes.add_job_fault:
            moved = replace(moved, job_faults=job.job_faults + 1)
        if changes.stage is not None:
            moved = replace(moved, stage=changes.stage)
        return moved

    def _end(
        self, attempt: AttemptNow | None, target: JobState, changes: JobChanges
    ) -> AttemptNow | None:
        if attempt is None or attempt.ended_at is not None:
            return attempt
        ended = replace(
            attempt,
            ended_at=self.now,
            outcome=WORKER_FAULT
            if changes.worker_fault
            else STAGE_DONE
            if changes.stage is not None and target is JobState.QUEUED
            else target.value,
            denoise_seconds=changes.denoise_seconds,
        )
        if changes.model_load_seconds is not None:
            ended = replace(ended, model_load_seconds=changes.model_load_seconds)
        if changes.last_checkpoint is not None:  # stopped after a checkpoint
            ended = replace(
                ended,
                checkpointed_at=self.now,
                checkpoint_seconds=ended.checkpoint_seconds + changes.checkpoint_write_seconds,
                checkpoints=ended.checkpoints + (changes.checkpoint_write_seconds > 0),
            )
        return ended

    def _checkpointed(self, attempt: AttemptNow | None, changes: JobChanges) -> AttemptNow | None:
        """A durable checkpoint of a running attempt: the work before it is safe, and its
        write is checkpoint overhead in the cost ledger."""
        if attempt is None:
            return None
        return replace(
            attempt,
            # a late report of an attempt that ended keeps its end
            checkpointed_at=self.now if attempt.ended_at is None else attempt.checkpointed_at,
            checkpoint_seconds=attempt.checkpoint_seconds + changes.checkpoint_write_seconds,
            checkpoints=attempt.checkpoints + 1,
        )

    def _keep(
        self, attempt: AttemptNow | None, read: AttemptNow | None, started: bool, move: JobMove
    ) -> None:
        """Write the attempt as the move leaves it: a new one whole, a read one if changed."""
        if attempt is None:
            return
        if started:
            self.attempts_started.append(
                {
                    "job_id": attempt.job_id,
                    "attempt": attempt.attempt,
                    "worker_id": move.worker_id,
                    "gpu_index": move.gpu_index,
                    "started_at": self.now,
                    **{name: getattr(attempt, name) for name in ATTEMPT_FIELDS_CHANGED},
                }
            )
            for gpu_index in (move.gpu_index, *move.span) if move.gpu_index is not None else ():
                self.attempt_gpus_started.append(
                    {
                        "job_id": attempt.job_id,
                        "attempt": attempt.attempt,
                        "gpu_index": gpu_index,
                        "worker_id": move.worker_id,
                        "ended_at": attempt.ended_at,
                    }
                )
        elif attempt != read:
            self._changed(attempt)
            if attempt.ended_at is not None and (read is None or read.ended_at is None):
                self.attempt_gpus_ended.append(
                    {
                        "b_job_id": attempt.job_id,
                        "b_attempt": attempt.attempt,
                        "v_ended_at": attempt.ended_at,
                    }
                )

    def _changed(self, attempt: AttemptNow) -> None:
        self.attempts_changed.append(
            {
                "b_job_id": attempt.job_id,
                "b_attempt": attempt.attempt,
                "v_ended_at": attempt.ended_at,
                "v_outcome": attempt.outcome,
                "v_denoise_seconds": attempt.denoise_seconds,
                "v_model_load_seconds": attempt.model_load_seconds,
                "v_checkpoint_seconds": attempt.checkpoint_seconds,
                "v_checkpointed_at": attempt.checkpointed_at,
                "v_checkpoints": attempt.checkpoints,
            }
        )
