"""The demo's live view (rich): jobs by state, instances by market and zone with their price
now, the fleet's $/hour, interruptions, checkpoints and recoveries, and deadline risk."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.market.trace import Trace
from framefleet.demo_report import interruptions
from kernel.job_record import JobRecord
from kernel.job_state import JobState
from kernel.market import Market
from kernel.replay_clock import ReplayClock

# An unfinished job this close to its deadline (or past it) is at risk.
AT_RISK = timedelta(seconds=60)


@dataclass(frozen=True)
class Progress:
    now: datetime
    started: datetime
    jobs: Sequence[JobRecord]
    expected: int
    instances: Sequence[ObservedInstance]
    timeline: Sequence[dict[str, Any]]
    held: str = ""  # why the replayed market stands still ("": it runs)


def price_now(instance: ObservedInstance, trace: Trace, replay: ReplayClock) -> float:
    on_demand = trace.on_demand_price(instance.pool.instance_type) or 0.0
    zone = trace.zones.get(instance.pool.availability_zone)
    if instance.pool.market is Market.ON_DEMAND or zone is None:
        return on_demand
    tick = trace.tick_at(replay.now())
    return on_demand if tick is None else zone.prices[tick]


def view(progress: Progress, trace: Trace, replay: ReplayClock) -> Group:
    elapsed = (progress.now - progress.started).total_seconds()
    header = Text(
        f"FrameFleet demo  +{elapsed:.0f}s   market time {replay.now():%Y-%m-%d %H:%M} "
        f"(trace x{replay.speed:g}" + (f", held: {progress.held})" if progress.held else ")"),
        style="bold",
    )
    return Group(
        header,
        _jobs_table(progress),
        _instances_table(progress, trace, replay),
        _events_line(progress),
    )


def _jobs_table(progress: Progress) -> Table:
    states = Counter(job.state for job in progress.jobs)
    table = Table(title=f"jobs ({len(progress.jobs)} of {progress.expected} stored)")
    for state in JobState:
        table.add_column(state.value, justify="right")
    table.add_row(*(str(states.get(state, 0)) for state in JobState))
    return table


def _instances_table(progress: Progress, trace: Trace, replay: ReplayClock) -> Table:
    table = Table(title="instances")
    for column in ("market", "zone", "count", "$/hour each"):
        table.add_column(column)
    groups: dict[tuple[str, str], list[ObservedInstance]] = {}
    for instance in progress.instances:
        key = (instance.pool.market.value, instance.pool.availability_zone)
        groups.setdefault(key, []).append(instance)
    hourly = 0.0
    for (market, zone), members in sorted(groups.items()):
        price = price_now(members[0], trace, replay)
        hourly += price * len(members)
        table.add_row(market, zone, str(len(members)), f"{price:.3f}")
    table.caption = f"fleet ${hourly:.2f}/hour"
    return table


def _events_line(progress: Progress) -> Text:
    lost = interruptions(progress.timeline)
    checkpoints = sum(1 for job in progress.jobs if job.last_checkpoint)
    recovered = sum(1 for job in progress.jobs if job.attempt > 1)
    at_risk = [
        job.job_id
        for job in progress.jobs
        if job.deadline is not None
        and not job.state.terminal
        and job.deadline - progress.now < AT_RISK
    ]
    return Text(
        f"interruptions {lost.total} ({lost.noticed} with notice, {lost.silent} without)   "
        f"jobs checkpointed {checkpoints}   resumed elsewhere {recovered}   "
        f"deadline risk: {', '.join(at_risk) if at_risk else 'none'}"
    )
