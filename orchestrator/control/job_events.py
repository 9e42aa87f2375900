"""What a worker event does to its job (pure): fencing, idempotence, bounded retries.

Every job event names an attempt, and only the worker that attempt was given to may speak for
it (`authorise`). An event whose attempt is not the job's current one comes from
a worker the job has moved away from (a zombie) and is ignored, so it can never overwrite the
result of the attempt that replaced it. QoS 1 delivers some events twice; a repeated event finds
the job already moved and is ignored too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from kernel.job_record import JobChanges, JobRecord
from kernel.job_state import ACTIVE_STATES, JobState
from kernel.outside_text import printable
from kernel.worker_protocol import EventKind, FailureKind, WorkerEvent


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6  # all attempts, interruptions included
    max_job_faults: int = 2  # a job that fails on its own this often fails for good
    backoff_base: timedelta = timedelta(seconds=10)
    backoff_max: timedelta = timedelta(minutes=5)

    def backoff(self, failures: int) -> timedelta:
        return min(self.backoff_max, self.backoff_base * (1 << max(0, failures - 1)))


@dataclass(frozen=True)
class Ignore:
    reason: str


@dataclass(frozen=True)
class Move:
    """Walk the job through `path` (each step checked by the state machine)."""

    path: tuple[JobState, ...]
    reason: str
    changes: JobChanges = field(default_factory=JobChanges)


@dataclass(frozen=True)
class Record:
    """Remember something without a state change (a periodic checkpoint)."""

    changes: JobChanges
    reason: str


Decision = Ignore | Move | Record


def requeue(
    job: JobRecord,
    reason: str,
    checkpoint: str | None = None,
    step: int | None = None,
    family: str | None = None,
) -> Move:
    """Back to the queue from wherever the job is, resuming from its newest checkpoint (made
    on GPU `family`)."""
    path: tuple[JobState, ...]
    if job.state is JobState.ASSIGNED or job.state is JobState.PREEMPTED:
        path = (JobState.QUEUED,)
    else:
        path = (JobState.PREEMPTED, JobState.QUEUED)
    changes = JobChanges(
        last_checkpoint=checkpoint,
        checkpoint_step=step or 0,
        checkpoint_family=family if checkpoint else None,
    )
    return Move(path, reason, changes)


class Refusal(Ignore):
    """An event that is not its sender's to send: it names an attempt given to another worker,
    or reports an output or checkpoint outside what belongs to the job."""


def authorise(job: JobRecord, event: WorkerEvent) -> Refusal | None:
    """Only the worker the current attempt was given to may move the job, and only with an
    output under the job's own prefix and a checkpoint of that very attempt."""
    if job.worker_id is None or event.worker_id != job.worker_id:
        return Refusal(
            f"{event.kind.value} from {event.worker_id}; attempt {job.attempt} was given to "
            f"{job.worker_id or 'no worker'}"
        )
    if event.output is not None and not _under_prefix(event.output, job.spec.output):
        return Refusal(f"output {printable(event.output, 200)} is outside {job.spec.output}")
    if event.checkpoint is not None and not _checkpoint_of(event.checkpoint, job):
        return Refusal(
            f"checkpoint {printable(event.checkpoint, 200)} is not one of "
            f"{job.job_id} attempt {job.attempt}"
        )
    return None


def _under_prefix(uri: str, prefix: str) -> bool:
    rest = uri.removeprefix(prefix)
    return rest != uri and bool(rest) and ".." not in rest.split("/") and "//" not in rest


def _checkpoint_of(key: str, job: JobRecord) -> bool:
    """A manifest key of this job's current attempt (`.../{job_id}/{attempt}/{step}/...`)."""
    pattern = rf"(^|/){re.escape(job.job_id)}/{job.attempt}/\d{{1,9}}/manifest\.json$"
    return re.search(pattern, key) is not None and ".." not in key.split("/")


def apply_event(
    job: JobRecord, event: WorkerEvent, now: datetime, policy: RetryPolicy | None = None
) -> Decision:
    policy = policy or RetryPolicy()
    if event.attempt is None or event.job_id != job.job_id:
        return Ignore("event names no attempt of this job")
    if event.attempt != job.attempt:
        return Ignore(f"stale attempt {event.attempt}; the job is on attempt {job.attempt}")
    refusal = authorise(job, event)
    if refusal is not None:
        return refusal
    if job.state not in ACTIVE_STATES:
        if (
            job.state is JobState.QUEUED
            and event.checkpoint
            and event.kind in (EventKind.PREEMPTED, EventKind.CHECKPOINT_DURABLE)
            and (event.step or 0) >= job.checkpoint_step
        ):
            # The attempt the job just left (its worker was cut off but kept going) saved
            # work: the next attempt resumes from it. Not an older one: a stage that ended
            # queued the job at its final checkpoint, which an earlier one must not replace.
            return Record(_checkpoint(event), "late checkpoint")
        return Ignore(f"job is {job.state.value}; {event.kind.value} changes nothing")
    worker = event.worker_id

    if event.kind is EventKind.STARTED:
        if job.state is not JobState.ASSIGNED:
            return Ignore("already started")
        how = f" ({printable(event.render, 600)})" if event.render else ""
        return Move((JobState.RUNNING,), f"started on {worker}{how}")

    if event.kind is EventKind.CHECKPOINT_DURABLE:
        if not event.checkpoint:
            return Ignore("checkpoint event without a manifest key")
        return Record(_checkpoint(event), f"checkpoint at {event.step}")

    if event.kind is EventKind.PREEMPTED:
        move = requeue(
            job,
            f"stopped on {worker} after checkpoint {event.checkpoint}",
            event.checkpoint,
            event.step,
            event.gpu_family,
        )
        timed = replace(
            move.changes,
            checkpoint_write_seconds=event.write_seconds or 0.0,
            model_load_seconds=event.model_load_seconds,
        )
        return replace(move, changes=timed)

    if event.kind is EventKind.FINISHED:
        path = (
            (JobState.SUCCEEDED,)
            if job.state is not JobState.ASSIGNED
            else (JobState.RUNNING, JobState.SUCCEEDED)
        )
        timed = JobChanges(
            denoise_seconds=event.denoise_seconds, model_load_seconds=event.model_load_seconds
        )
        return Move(path, f"finished on {worker}: {event.output}", timed)

    if event.kind is EventKind.STAGE_DONE:
        return _stage_done(job, event)

    if event.kind is EventKind.FAILED:
        return _failed(job, event, now, policy)

    return Ignore(f"{event.kind.value} is not a job event")


def _stage_done(job: JobRecord, event: WorkerEvent) -> Decision:
    """The attempt ran its stage of a split render: the job queues for the next stage, which
    starts from the checkpoint the stage ended with (a new attempt, on whatever GPU fits it)."""
    following = job.stage.following if job.stage is not None else None
    if following is None:
        return Ignore(f"stage_done, but the job runs {job.stage or 'whole'}: nothing follows")
    if not event.checkpoint:
        return Ignore("stage_done without the checkpoint the next stage starts from")
    start = (JobState.RUNNING,) if job.state is JobState.ASSIGNED else ()
    return Move(
        (*start, JobState.QUEUED),
        f"{job.stage} done on {event.worker_id}; {following} next, from {event.checkpoint}",
        replace(_checkpoint(event), stage=following),
    )


def _checkpoint(event: WorkerEvent) -> JobChanges:
    """A durable checkpoint and its step, as the worker reports them."""
    return JobChanges(
        last_checkpoint=event.checkpoint,
        checkpoint_step=event.step or 0,
        checkpoint_family=event.gpu_family,
        checkpoint_write_seconds=event.write_seconds or 0.0,
        model_load_seconds=event.model_load_seconds,
    )


def _failed(job: JobRecord, event: WorkerEvent, now: datetime, policy: RetryPolicy) -> Decision:
    error = event.error or "no reason given"
    start = (JobState.RUNNING,) if job.state is JobState.ASSIGNED else ()
    if event.failure_kind is FailureKind.JOB:
        faults = job.job_faults + 1
        if faults >= policy.max_job_faults:
            return Move(
                (*start, JobState.FAILED),
                f"job fault {faults} of {policy.max_job_faults}: {error}",
                JobChanges(add_job_fault=True),
            )
        # Not on the same GPU again: a fault there may be the GPU's after all (a corrupting
        # one computes NaNs), and a retry elsewhere tells the two apart.
        return Move(
            (*start, JobState.PREEMPTED, JobState.QUEUED),
            f"job fault {faults} of {policy.max_job_faults}, retrying elsewhere: {error}",
            JobChanges(
                add_job_fault=True, not_before=now + policy.backoff(faults), worker_fault=True
            ),
        )
    if job.attempt >= policy.max_attempts:
        return Move(
            (*start, JobState.FAILED),
            f"worker fault on the last of {policy.max_attempts} attempts: {error}",
        )
    if event.failure_kind in (FailureKind.REFUSED, FailureKind.PREFLIGHT):
        # Declined before it started (draining after a notice, its GPU still busy with an
        # attempt the control plane lost track of, or this machine failed its preflight for
        # the job): back to the queue after the base backoff, so a stale view cannot burn the
        # attempts in a second. A failed preflight keeps the job off that worker.
        return Move(
            (JobState.QUEUED,)
            if job.state is JobState.ASSIGNED
            else (*start, JobState.PREEMPTED, JobState.QUEUED),
            f"refused by {event.worker_id}: {error}",
            JobChanges(
                not_before=now + policy.backoff_base,
                worker_fault=event.failure_kind is FailureKind.PREFLIGHT,
            ),
        )
    # A stall is the GPU's: the job resumes elsewhere at once, from its last checkpoint.
    stalled = event.failure_kind is FailureKind.STALLED
    return Move(
        (*start, JobState.PREEMPTED, JobState.QUEUED),
        f"{'stalled' if stalled else 'worker fault'} on {event.worker_id}, retrying elsewhere: "
        f"{error}",
        JobChanges(
            not_before=now if stalled else now + policy.backoff(job.attempt), worker_fault=True
        ),
    )
