"""Worker events applied to jobs: fencing by attempt, idempotence, bounded retries; the decisions
are then applied through the real store and its state machine."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from autoscaler.demand import job_demand
from kernel.clock import FakeClock
from kernel.job_record import JobRecord, Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import EventKind, WorkerEvent
from orchestrator.control.job_events import (
    Decision,
    Ignore,
    Move,
    Record,
    RetryPolicy,
    apply_event,
    requeue,
)
from orchestrator.control.scheduling_view import pending_jobs
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.store.job_store import JobStore
from tests.support.jobs import apply_decision, job_dict

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CHECKPOINT = "checkpoints/j/1/000005/manifest.json"


def event(kind: EventKind, attempt: int = 1, **fields: object) -> WorkerEvent:
    return WorkerEvent(
        worker_id="w1",
        sent_at=NOW,
        event_id=f"evt-{kind.value}-{attempt}".replace("_", "-"),
        kind=kind,
        job_id="j",
        attempt=attempt,
        **fields,
    )


def apply(store: JobStore, decision: Decision) -> JobRecord:
    return apply_decision(store, store.get("j"), decision, actor="control-plane")


@pytest.fixture
def running_job(store: JobStore) -> JobRecord:
    store.intake.accept_batch([Submission(parse_job(job_dict("j"), now=None), "m")])
    record = store.transition(
        "j", JobState.ASSIGNED, expected_version=1, actor="t", reason="r", worker_id="w1"
    )
    return store.transition(
        "j", JobState.RUNNING, expected_version=record.version, actor="t", reason="r"
    )


def test_stale_attempts_and_finished_jobs_are_ignored(
    store: JobStore, running_job: JobRecord
) -> None:
    # Attempt 1 was replaced by attempt 2: the old worker's events change nothing.
    moved = apply(store, requeue(running_job, "worker lost", CHECKPOINT))
    moved = store.transition(
        "j",
        JobState.ASSIGNED,
        expected_version=moved.version,
        actor="t",
        reason="r",
        worker_id="w1",
    )
    assert moved.attempt == 2
    zombie = apply_event(moved, event(EventKind.FINISHED, attempt=1, output="s3://x/y.mp4"), NOW)
    assert isinstance(zombie, Ignore)
    assert "stale attempt 1" in zombie.reason
    done = apply(store, apply_event(moved, event(EventKind.FINISHED, attempt=2), NOW))
    assert done.state is JobState.SUCCEEDED
    again = apply_event(done, event(EventKind.FINISHED, attempt=2), NOW)
    assert isinstance(again, Ignore)


def test_started_then_duplicate_started(store: JobStore) -> None:
    store.intake.accept_batch([Submission(parse_job(job_dict("j"), now=None), "m")])
    assigned = store.transition(
        "j", JobState.ASSIGNED, expected_version=1, actor="t", reason="r", worker_id="w1"
    )
    running = apply(store, apply_event(assigned, event(EventKind.STARTED), NOW))
    assert running.state is JobState.RUNNING
    assert isinstance(apply_event(running, event(EventKind.STARTED), NOW), Ignore)


def test_a_preempted_job_goes_back_to_the_queue_with_its_checkpoint(
    store: JobStore, running_job: JobRecord
) -> None:
    stopped = event(EventKind.PREEMPTED, checkpoint=CHECKPOINT, step=5)
    queued = apply(store, apply_event(running_job, stopped, NOW))
    assert queued.state is JobState.QUEUED
    assert (queued.last_checkpoint, queued.checkpoint_step) == (CHECKPOINT, 5)
    assert [e.to_state for e in store.history("j")][-2:] == [JobState.PREEMPTED, JobState.QUEUED]


def test_a_periodic_checkpoint_is_recorded_without_a_state_change(
    store: JobStore, running_job: JobRecord
) -> None:
    decision = apply_event(
        running_job, event(EventKind.CHECKPOINT_DURABLE, checkpoint=CHECKPOINT, step=5), NOW
    )
    assert isinstance(decision, Record)
    noted = apply(store, decision)
    # Progress is the number the worker reported, stored beside the key (never parsed from it).
    assert (noted.state, noted.last_checkpoint, noted.checkpoint_step) == (
        JobState.RUNNING,
        CHECKPOINT,
        5,
    )
    assert noted.version == running_job.version + 1


def test_job_faults_retry_with_backoff_then_fail_for_good(
    store: JobStore, running_job: JobRecord
) -> None:
    policy = RetryPolicy(max_job_faults=2, backoff_base=timedelta(seconds=10))
    oom = event(EventKind.FAILED, failure_kind="job", error="out of GPU memory")
    first = apply_event(running_job, oom, NOW, policy)
    assert isinstance(first, Move)
    assert first.path[-1] is JobState.QUEUED
    assert first.changes.not_before == NOW + timedelta(seconds=10)
    queued = apply(store, first)
    assert (queued.job_faults, queued.not_before) == (1, NOW + timedelta(seconds=10))
    record = store.transition(
        "j",
        JobState.ASSIGNED,
        expected_version=queued.version,
        actor="t",
        reason="r",
        worker_id="w1",
    )
    second = apply_event(
        record,
        event(EventKind.FAILED, attempt=2, failure_kind="job", error="out of GPU memory"),
        NOW,
        policy,
    )
    failed = apply(store, second)
    assert failed.state is JobState.FAILED
    assert "job fault 2 of 2" in store.history("j")[-1].reason


def test_worker_faults_retry_elsewhere_until_attempts_run_out(running_job: JobRecord) -> None:
    policy = RetryPolicy(max_attempts=2)
    crash = event(EventKind.FAILED, failure_kind="worker", error="S3 unreachable")
    retry = apply_event(running_job, crash, NOW, policy)
    assert isinstance(retry, Move)
    assert retry.path[-1] is JobState.QUEUED
    assert "retrying elsewhere" in retry.reason
    last = replace(running_job, attempt=2)
    final = apply_event(
        last, event(EventKind.FAILED, attempt=2, failure_kind="worker"), NOW, policy
    )
    assert isinstance(final, Move)
    assert final.path[-1] is JobState.FAILED


def test_a_refused_assignment_goes_straight_back_to_the_queue(store: JobStore) -> None:
    store.intake.accept_batch([Submission(parse_job(job_dict("j"), now=None), "m")])
    assigned = store.transition(
        "j", JobState.ASSIGNED, expected_version=1, actor="t", reason="r", worker_id="w1"
    )
    refusal = event(EventKind.FAILED, failure_kind="refused", error="worker is draining")
    decision = apply_event(assigned, refusal, NOW)
    assert isinstance(decision, Move)
    assert decision.path == (JobState.QUEUED,)
    assert decision.changes.not_before == NOW + RetryPolicy().backoff_base  # not a tight loop
    assert not decision.changes.add_job_fault
    queued = apply(store, decision)
    assert queued.state is JobState.QUEUED
    assert "refused by w1: worker is draining" in store.history("j")[-1].reason
    last = replace(assigned, attempt=RetryPolicy().max_attempts)
    final = apply_event(last, refusal.model_copy(update={"attempt": last.attempt}), NOW)
    assert isinstance(final, Move)
    assert final.path[-1] is JobState.FAILED


def test_a_late_checkpoint_of_the_attempt_just_left_is_kept(running_job: JobRecord) -> None:
    queued = replace(running_job, state=JobState.QUEUED)
    late = event(EventKind.PREEMPTED, checkpoint=CHECKPOINT, step=5)
    decision = apply_event(queued, late, NOW)
    assert isinstance(decision, Record)
    assert decision.changes.last_checkpoint == CHECKPOINT
    stale = apply_event(replace(queued, attempt=2), late, NOW)
    assert isinstance(stale, Ignore)  # an older attempt's checkpoint is not


def test_backoff_doubles_up_to_a_cap() -> None:
    policy = RetryPolicy(backoff_base=timedelta(seconds=10), backoff_max=timedelta(seconds=60))
    assert [policy.backoff(n).total_seconds() for n in range(1, 6)] == [10, 20, 40, 60, 60]


def test_an_exact_job_resumes_only_on_the_family_of_its_checkpoint(store: JobStore) -> None:
    """The checkpoint's GPU family is stored with it; an exact job is then offered only GPUs
    of that family (and the autoscaler buys only those for it), another job any."""
    exact = parse_job(job_dict("j", exact=True, gpu={"families": ["h100", "a100"]}), now=None)
    store.intake.accept_batch([Submission(exact, "m")])
    record = store.transition(
        "j", JobState.ASSIGNED, expected_version=1, actor="t", reason="r", worker_id="w1"
    )
    store.transition("j", JobState.RUNNING, expected_version=record.version, actor="t", reason="r")
    before = store.get("j")
    assert before.families() == {"h100", "a100"}
    durable = event(EventKind.CHECKPOINT_DURABLE, step=5, checkpoint=CHECKPOINT, gpu_family="h100")
    apply(store, apply_event(before, durable, NOW))
    stopped = event(EventKind.PREEMPTED, step=5, checkpoint=CHECKPOINT, gpu_family="h100")
    queued = apply(store, apply_event(store.get("j"), stopped, NOW))
    assert queued.state is JobState.QUEUED
    assert store.get("j").checkpoint_family == "h100"  # read back from the database
    (pending,) = pending_jobs([store.get("j")], {}, WorkerRegistry(FakeClock(NOW)), NOW)
    assert pending.families == {"h100"}
    assert job_demand(store.get("j")).families == {"h100"}
    # Not exact: the spec's families, whatever computed the checkpoint.
    relaxed = replace(store.get("j"), spec=exact.model_copy(update={"exact": False}))
    assert relaxed.families() == {"h100", "a100"}
