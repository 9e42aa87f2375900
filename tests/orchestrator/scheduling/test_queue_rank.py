"""Deadlines beat age: a job whose deadline is at risk is never passed by a job not at risk
of its own priority or lower for age alone, however long that one waited."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.queue_rank import queue_keys
from orchestrator.scheduling.snapshots import (
    GpuSlot,
    PendingJob,
    SchedulerSettings,
    WorkerSnapshot,
)

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def at_risk(job: PendingJob, rules: SchedulerSettings) -> bool:
    latest = job.latest_start
    return latest is not None and (latest - NOW).total_seconds() <= rules.at_risk_startup_seconds


def test_a_job_at_risk_takes_the_gpu_from_an_older_job_of_its_priority() -> None:
    # Aging (1 point an hour) overtook the boost (2 points) after two hours: the job that had
    # merely waited three took the one GPU, and the deadline was missed.
    due = PendingJob("due", 5, NOW + timedelta(minutes=40), NOW, 16, start_by=NOW)
    old = PendingJob("old", 5, None, NOW - timedelta(hours=3), 16)
    gpu = WorkerSnapshot("w", (GpuSlot("w", 0, "l4", 24),))
    decisions = schedule([old, due], [gpu], NOW, SchedulerSettings())
    assert [a.job_id for a in decisions.assignments] == ["due"]


def test_a_higher_priority_still_goes_first_and_low_priority_still_ages() -> None:
    due = PendingJob("due", 5, NOW + timedelta(minutes=40), NOW, 16, start_by=NOW)
    urgent = PendingJob("urgent", 9, None, NOW, 16)
    keys = queue_keys([due, urgent], NOW, SchedulerSettings())
    assert sorted([due, urgent], key=keys)[0] is urgent
    # Without deadlines, aging still lifts a low priority over a high one: nothing starves.
    low = PendingJob("low", 1, None, NOW - timedelta(hours=10), 16)
    high = PendingJob("high", 5, None, NOW, 16)
    keys = queue_keys([low, high], NOW, SchedulerSettings())
    assert sorted([low, high], key=keys)[0] is low


minutes = st.integers(min_value=0, max_value=48 * 60)


@st.composite
def queues(draw: st.DrawFn) -> tuple[list[PendingJob], SchedulerSettings]:
    rules = SchedulerSettings(
        aging_per_hour=draw(st.sampled_from([0.0, 0.5, 1.0, 3.0])),
        at_risk_boost=draw(st.sampled_from([0.0, 1.0, 2.0, 5.0])),
        at_risk_startup_seconds=draw(st.sampled_from([0.0, 600.0, 1800.0])),
    )
    jobs = []
    for j in range(draw(st.integers(1, 30))):
        slack = draw(st.one_of(st.none(), st.integers(-120, 600)))
        latest = None if slack is None else NOW + timedelta(minutes=slack)
        jobs.append(
            PendingJob(
                f"j{j}",
                draw(st.integers(0, 9)),
                latest,
                NOW - timedelta(minutes=draw(minutes)),
                16,
                start_by=latest,
            )
        )
    return jobs, rules


@settings(max_examples=300, deadline=None)
@given(queues())
def test_no_job_at_risk_is_passed_by_a_job_of_its_priority_or_lower_for_age(
    queue: tuple[list[PendingJob], SchedulerSettings],
) -> None:
    jobs, rules = queue
    order = sorted(jobs, key=queue_keys(jobs, NOW, rules))
    place = {job.job_id: position for position, job in enumerate(order)}
    for risky in (job for job in jobs if at_risk(job, rules)):
        for calm in (job for job in jobs if not at_risk(job, rules)):
            if calm.priority <= risky.priority:
                assert place[risky.job_id] < place[calm.job_id], (risky, calm)


@settings(max_examples=200, deadline=None)
@given(queues())
def test_the_scheduler_gives_the_only_gpu_to_the_first_job_in_that_order(
    queue: tuple[list[PendingJob], SchedulerSettings],
) -> None:
    jobs, rules = queue
    gpu = WorkerSnapshot("w", (GpuSlot("w", 0, "l4", 24),))
    decisions = schedule(jobs, [gpu], NOW, rules)
    first = min(jobs, key=queue_keys(jobs, NOW, rules))
    assert [a.job_id for a in decisions.assignments] == [first.job_id]
