"""A deadline job behind a backlog is always seen: each tick's read of the queue holds every
job with a reservation and every job whose deadline is at risk, however many jobs of higher
priority wait before it, and the GPU bought for it goes to it first (on SQLite and PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from kernel.clock import FakeClock
from kernel.deadline_risk import planning_seconds_per_step
from kernel.job_record import Reservation, Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, EventKind, topic
from orchestrator.control.scheduling_view import QueueReads
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import OWNER, WORKERS, event, hello, plane_in_memory
from tests.support.jobs import job_dict

BACKLOG = 300  # more than the 200 jobs a tick reads when few GPUs are free
# A Wan 1.3B render at 480p: minutes on the slowest GPU that holds it.
RENDER = {"model": "wan/wan2.1-t2v-1.3b", "width": 832, "height": 480, "num_frames": 81}


def backlog_then(store: JobStore, clock: FakeClock, due_in: timedelta) -> None:
    """300 queued jobs of priority 6, then one of priority 5 due in `due_in`."""
    jobs = [job_dict(f"backlog-{n:03d}", priority=6) for n in range(BACKLOG)]
    deadline = (clock.now() + due_in).isoformat()
    jobs.append(job_dict("due", priority=5, deadline=deadline, steps=50, **RENDER))
    store.intake.accept_batch(
        [Submission(parse_job(job, now=None), f"m-{job['job_id']}") for job in jobs]
    )


def test_the_read_holds_reserved_and_at_risk_jobs_whatever_the_window(
    store: JobStore, clock: FakeClock
) -> None:
    reads = QueueReads()
    backlog_then(store, clock, timedelta(hours=1))
    window = reads.window(free_gpus=2)
    read = {j.job_id for j in store.schedulable(clock.now(), window, reads.startup)}
    assert len(read) == window
    assert "due" not in read

    spec = store.get("due").spec
    run = timedelta(seconds=spec.steps * planning_seconds_per_step(spec))
    assert timedelta(minutes=5) < run < timedelta(minutes=30)  # on a T4, the slowest
    clock.advance((timedelta(hours=1) - run - reads.startup).total_seconds())
    read = {j.job_id for j in store.schedulable(clock.now(), window, reads.startup)}
    assert "due" in read  # its slack is now less than its run and a start-up

    store.intake.accept_batch(
        [Submission(parse_job(job_dict("claimed", priority=0), now=None), "m-claimed")]
    )
    claim = Reservation("claimed", OWNER, True, clock.now() + timedelta(minutes=5))
    store.reservations.reserve([claim])
    assert "claimed" in {j.job_id for j in store.schedulable(clock.now(), window)}
    clock.advance(300)  # the claim expired: the job is one of the queue again
    assert "claimed" not in {j.job_id for j in store.schedulable(clock.now(), window)}


async def test_a_deadline_job_behind_300_gets_its_reserved_gpu_in_one_tick_and_finishes(
    store: JobStore, clock: FakeClock
) -> None:
    plane, _link = plane_in_memory(store, clock)
    backlog_then(store, clock, timedelta(hours=1))
    # The autoscaler bought an on-demand instance for it; its worker and one other say hello.
    on_demand = Reservation("due", OWNER, True, clock.now() + timedelta(minutes=10), 2.0, 600.0)
    store.reservations.reserve([on_demand])
    for worker_id in WORKERS:
        await plane.on_message(topic(worker_id, Channel.HELLO), hello(worker_id, clock))

    await plane.tick()

    due = store.get("due")
    assert (due.state, due.worker_id) == (JobState.ASSIGNED, OWNER)
    busy = [j for j in store.list_jobs(JobState.ASSIGNED) if j.job_id != "due"]
    assert len(busy) == 1
    assert busy[0].priority == 6

    clock.advance(100)  # 50 steps at the 2 s the autoscaler planned
    output = "s3://framefleet-output/videos/due.mp4"
    for kind, fields in ((EventKind.STARTED, {}), (EventKind.FINISHED, {"output": output})):
        message = event(OWNER, kind, "due", due.attempt, **fields)
        await plane.on_message(topic(OWNER, Channel.EVENTS), message)
    await plane.apply_pending()
    finished = store.get("due")
    assert finished.state is JobState.SUCCEEDED
    assert finished.deadline is not None
    assert finished.updated_at <= finished.deadline


def test_an_at_risk_job_goes_before_older_jobs_of_its_priority() -> None:
    """A budget-bound fleet frees a GPU now and then: the job whose deadline is at risk takes
    the next one, not the job of the same priority that merely waited longer."""
    now = datetime(2026, 6, 1, 12, tzinfo=UTC)
    older = PendingJob("backlog", 2, None, now - timedelta(hours=1), 16.0)
    due = PendingJob(
        "due", 2, now + timedelta(hours=1), now, 16.0, start_by=now + timedelta(minutes=2)
    )
    relaxed = replace(due, job_id="relaxed", start_by=now + timedelta(minutes=45))
    free = [WorkerSnapshot("w", (GpuSlot("w", 0, "l4", 24.0),))]
    assert [a.job_id for a in schedule([older, due], free, now).assignments] == ["due"]
    # Not at risk yet: an hour of waiting outranks it.
    assert [a.job_id for a in schedule([older, relaxed], free, now).assignments] == ["backlog"]
