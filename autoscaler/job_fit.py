"""Which market and which free GPU a queued job may take, and in which order the plan serves
the queue: the rules `autoscaler/policy.py`'s rounds apply to each job."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from autoscaler.deadline import MarketRule
from autoscaler.pool_choice import candidates, work_seconds_on
from autoscaler.snapshot import (
    InstanceView,
    JobDemand,
    PlanInput,
    PurchaseSettings,
)
from autoscaler.throughput import ThroughputModel
from kernel.market import Market


def urgency(job: JobDemand) -> tuple[int, float, float, str]:
    deadline = job.deadline.timestamp() if job.deadline else math.inf
    return (-job.priority, deadline, job.submitted_at.timestamp(), job.job_id)


def market_allows(
    job: JobDemand,
    instance: InstanceView,
    market: Market,
    now: datetime,
    on_demand_seconds_left: float,
    settings: PurchaseSettings,
    rule: MarketRule,
) -> bool:
    """May the job take a free GPU on `instance`? A spot GPU for a job whose deadline wants
    on-demand only if the deadline still takes an interruption counting the start-up that GPU
    has left, not a whole new one: the instance bought for the job and now almost booted must
    not look worse each round than a new on-demand one."""
    if instance.pool.market is Market.ON_DEMAND:
        return True
    if job.spot_zones and instance.pool.availability_zone not in job.spot_zones:
        return False
    if market is Market.SPOT:
        return True
    booted_at = instance.launched_at + timedelta(seconds=settings.boot_seconds)
    boot_left = max(0.0, (booted_at - now).total_seconds())
    # Starting there costs only the boot it has left (an interruption there still costs a
    # whole new start-up elsewhere).
    startup = boot_left + settings.model_load_seconds
    return rule(job, now, on_demand_seconds_left, settings, startup).market is Market.SPOT


def fastest_on_demand(
    state: PlanInput, settings: PurchaseSettings, model: ThroughputModel, job: JobDemand
) -> float:
    """The job's remaining work in seconds on the fastest on-demand pool that fits it."""
    return min(
        (
            work_seconds_on(job, model, q.pool.instance_type)
            for q in candidates(state, settings, job, Market.ON_DEMAND)
        ),
        default=math.inf,
    )
