"""The order of the queue.

A job's rank is its priority, aged by its wait (`aging_per_hour`), so low priority never
starves. A job whose deadline is at risk (its latest start within `at_risk_startup_seconds`)
gains `at_risk_boost` over its own aged rank, and more: it ranks at least as high as every job
not at risk of its own priority or lower, however long that one waited, and wins the tie. So
age alone never passes a job at risk; only a higher priority does. Then least slack, then
arrival.

Ranks are in priority-seconds (no division: two jobs whose aged priorities are equal compare
equal, and the least slack decides), on timestamps taken once: a tick ranks thousands.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
from datetime import datetime

from orchestrator.scheduling.snapshots import PendingJob, SchedulerSettings

QueueKey = tuple[float, float, float, str]


def queue_keys(
    jobs: Iterable[PendingJob], now: datetime, settings: SchedulerSettings
) -> Callable[[PendingJob], QueueKey]:
    """The sort key of each of `jobs` (and of any job ranked against them)."""
    now_s, aging = now.timestamp(), settings.aging_per_hour
    risk_from = now_s + settings.at_risk_startup_seconds
    boost = settings.at_risk_boost * 3600

    def aged(job: PendingJob) -> float:
        return job.priority * 3600 + aging * max(0.0, now_s - job.queued_since.timestamp())

    def latest(job: PendingJob) -> float:
        return math.inf if job.latest_start is None else job.latest_start.timestamp()

    # The highest aged rank among the jobs not at risk of each priority or lower: the floor of
    # a job at risk of that priority.
    calm = sorted((job.priority, aged(job)) for job in jobs if latest(job) > risk_from)
    priorities = [priority for priority, _ in calm]
    floors: list[float] = []
    for _, rank in calm:
        floors.append(max(rank, floors[-1]) if floors else rank)

    def key(job: PendingJob) -> QueueKey:
        rank, due = aged(job), latest(job)
        if due <= risk_from:  # at risk: on a tie its earlier latest start wins
            rank += boost
            below = bisect.bisect_right(priorities, job.priority)
            if below:
                rank = max(rank, floors[below - 1])
        return (-rank, due, job.queued_since.timestamp(), job.job_id)

    return key


def effective_priority(job: PendingJob, now: datetime, settings: SchedulerSettings) -> float:
    """The job's own aged priority, with the boost once at risk (for the reason a decision
    gives; the queue's order is `queue_keys`)."""
    waited_hours = max(0.0, (now - job.queued_since).total_seconds() / 3600)
    aged = job.priority + settings.aging_per_hour * waited_hours
    latest = job.latest_start
    at_risk = (
        latest is not None and (latest - now).total_seconds() <= settings.at_risk_startup_seconds
    )
    return aged + (settings.at_risk_boost if at_risk else 0.0)
