"""The scheduler against the plain statement of its rules: the whole queue sorted by aged
priority (exact arithmetic; raised for a job whose deadline is at risk), then least slack, then
arrival; every job tried in turn; each
preemption the least urgent of all the running jobs that may give way.

The scheduler takes the queue from a heap, stops once no GPU is free and nothing may be
preempted, and scans the victims in order: it must decide exactly what the plain one does.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.scheduling.fit import fits
from orchestrator.scheduling.fit import moment_seconds as _seconds
from orchestrator.scheduling.policy import _assignment, _FreeGpus, schedule
from orchestrator.scheduling.snapshots import (
    Decisions,
    GpuSlot,
    PendingJob,
    Preemption,
    RunningJob,
    SchedulerSettings,
    WorkerSnapshot,
)
from orchestrator.scheduling.victims import victim_order as _victim_order

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RULES = SchedulerSettings(aging_per_hour=1.0, preemption_margin=2)


def plain_schedule(
    pending: list[PendingJob], workers: list[WorkerSnapshot], now: datetime
) -> Decisions:
    usable = [gpu for worker in workers if worker.accepting for gpu in worker.gpus]
    free = _FreeGpus(gpu for gpu in usable if gpu.running is None and gpu.reserved_for is None)
    waiting_for_gpu = {gpu.reserved_for for gpu in usable if gpu.reserved_for}
    busy = [g for g in usable if g.running is not None and g.reserved_for is None]
    preemptible = [g for g in busy if g.running is not None and g.running.preemptible]
    weakest = min((g.running.priority for g in preemptible if g.running), default=math.inf)
    assignments, preemptions = [], []
    ordered = sorted(pending, key=lambda job: plain_rank(job, now, pending))
    placed: set[str] = set()
    for job in ordered:
        if job.reserved_on and job.job_id not in waiting_for_gpu:
            gpu = free.take_reserved(job)
            if gpu is not None:
                placed.add(job.job_id)
                assignments.append(_assignment(job, gpu, now, RULES, "reserved for it, "))
    for job in ordered:
        if job.job_id in waiting_for_gpu or job.job_id in placed:
            continue
        gpu = free.take_best_fit(job, now)
        if gpu is not None:
            assignments.append(_assignment(job, gpu, now, RULES))
            continue
        if job.capacity_coming or job.priority < weakest + RULES.preemption_margin:
            continue
        victims = [
            g
            for g in preemptible
            if g.running is not None
            and fits(job, g)
            and g.running.priority + RULES.preemption_margin <= job.priority
            and (
                g.running.deadline is None or _seconds(job.deadline) <= _seconds(g.running.deadline)
            )
        ]
        if victims:
            target = min(victims, key=lambda g: _victim_order(g.running) if g.running else ())
            assert target.running is not None
            preemptible.remove(target)
            preemptions.append(
                Preemption(
                    target.running.job_id,
                    target.worker_id,
                    target.index,
                    job.job_id,
                    f"priority {job.priority} job {job.job_id} needs a GPU; "
                    f"{target.running.job_id} has priority {target.running.priority}",
                )
            )
    return Decisions(tuple(assignments), tuple(preemptions))


def plain_rank(
    job: PendingJob, now: datetime, queue: list[PendingJob]
) -> tuple[Fraction, float, datetime, str]:
    aged = plain_aged(job, now)
    slack = plain_slack(job, now)
    if slack <= RULES.at_risk_startup_seconds:  # at risk: no job of its priority passes by age
        aged += Fraction(RULES.at_risk_boost)
        calm = [
            plain_aged(other, now)
            for other in queue
            if other.priority <= job.priority
            and plain_slack(other, now) > RULES.at_risk_startup_seconds
        ]
        aged = max([aged, *calm])
    return (-aged, slack, job.queued_since, job.job_id)


def plain_aged(job: PendingJob, now: datetime) -> Fraction:
    waited = Fraction(max(0, int((now - job.queued_since).total_seconds())), 3600)
    return job.priority + Fraction(RULES.aging_per_hour) * waited


def plain_slack(job: PendingJob, now: datetime) -> float:
    latest = job.start_by or job.deadline
    return math.inf if latest is None else (latest - now).total_seconds()


# Whole minutes: equal aged priorities (5 after an hour is 6 at once) and equal slacks happen,
# and the order between them is what the property holds the scheduler to.
hours = st.integers(min_value=0, max_value=360).map(lambda minutes: minutes / 60)
maybe_hours = st.one_of(st.none(), hours)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[PendingJob], list[WorkerSnapshot]]:
    workers = []
    for w in range(draw(st.integers(0, 8))):
        worker_id = f"w{w}"
        slots = []
        for index in range(draw(st.integers(1, 3))):
            running = None
            if draw(st.booleans()):
                deadline = draw(maybe_hours)
                running = RunningJob(
                    f"r{w}-{index}",
                    draw(st.integers(0, 9)),
                    None if deadline is None else NOW + timedelta(hours=deadline),
                    NOW - timedelta(hours=draw(hours)),
                    preemptible=draw(st.booleans()),
                )
            slots.append(
                GpuSlot(
                    worker_id,
                    index,
                    draw(st.sampled_from(["l4", "l40s"])),
                    draw(st.sampled_from([24.0, 48.0])),
                    running,
                    reserved_for=draw(st.sampled_from([None, None, None, "j0", "j1"])),
                    spot=draw(st.booleans()),
                )
            )
        workers.append(WorkerSnapshot(worker_id, tuple(slots), draw(st.booleans())))
    worker_ids = [w.worker_id for w in workers]
    pending = []
    for j in range(draw(st.integers(0, 25))):
        deadline = draw(maybe_hours)
        pending.append(
            PendingJob(
                f"j{j}",
                draw(st.integers(0, 9)),
                None if deadline is None else NOW + timedelta(hours=deadline),
                NOW - timedelta(hours=draw(hours)),
                draw(st.sampled_from([16.0, 24.0, 40.0])),
                frozenset(draw(st.sets(st.sampled_from(["l4", "l40s"]), max_size=1))),
                reserved_on=frozenset(
                    draw(st.sets(st.sampled_from(worker_ids or ["-"]), max_size=1))
                ),
                on_demand_only=draw(st.booleans()),
                avoid=frozenset(draw(st.sets(st.sampled_from(worker_ids or ["-"]), max_size=1))),
                capacity_coming=draw(st.booleans()),
                spot_until=draw(st.sampled_from([None, NOW - timedelta(hours=1)])),
                start_by=None
                if deadline is None
                else NOW + timedelta(hours=deadline) - timedelta(hours=draw(hours)),
            )
        )
    return pending, workers


@settings(max_examples=400, deadline=None)
@given(fleets())
def test_the_scheduler_decides_what_the_plain_rules_decide(
    fleet: tuple[list[PendingJob], list[WorkerSnapshot]],
) -> None:
    pending, workers = fleet
    assert schedule(pending, workers, NOW, RULES) == plain_schedule(pending, workers, NOW)
