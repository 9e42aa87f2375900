"""Which market a job with a deadline may use now (pure), after Uniform Progress (Wu et al.,
"Can't Be Late", NSDI'24), with times measured per pool instead of one fixed job length.

- slack: how much time the job can still waste and finish on on-demand capacity started now;
- one interruption costs a changeover (boot, model load) plus the work since the last
  checkpoint: spot is allowed only while the slack can absorb one (the safety net);
- behind uniform progress (a smaller share of the work done than of the time used, by more
  than one interruption's worth), spot needs `behind_slack_factor` times that slack, so a
  lagging job moves to on-demand early instead of at the last moment.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from autoscaler.snapshot import JobDemand, PurchaseSettings
from kernel.market import Market


@dataclass(frozen=True)
class MarketChoice:
    market: Market
    reason: str
    slack_seconds: float
    # Not now: the spot there is now is not worth its start-up (the planner's call); the job
    # waits for the next round, with `reason`.
    wait: bool = False


class MarketRule(Protocol):
    """`choose_market`, or another rule to compare it with in the simulator."""

    def __call__(
        self,
        job: JobDemand,
        now: datetime,
        on_demand_seconds_left: float,
        settings: PurchaseSettings,
        startup_seconds: float | None = None,
    ) -> MarketChoice: ...


def new_instance_startup(settings: PurchaseSettings) -> float:
    """A new instance: boot, then model load."""
    return settings.boot_seconds + settings.model_load_seconds


def interruption_seconds(settings: PurchaseSettings) -> float:
    """What one interruption costs a job: a new start-up elsewhere, the most work it may
    lose, and the autoscaler's time to react."""
    return (
        new_instance_startup(settings)
        + settings.checkpoint_interval_seconds
        + settings.reaction_seconds
    )


def choose_market(
    job: JobDemand,
    now: datetime,
    on_demand_seconds_left: float,
    settings: PurchaseSettings,
    startup_seconds: float | None = None,
) -> MarketChoice:
    """`on_demand_seconds_left`: the job's remaining work on the fastest on-demand pool;
    `startup_seconds`: before it can start where it would run (default: a new instance's)."""
    if job.deadline is None:
        return MarketChoice(Market.SPOT, "no deadline: spot", float("inf"))
    to_deadline = (job.deadline - now).total_seconds()
    startup = new_instance_startup(settings) if startup_seconds is None else startup_seconds
    slack = to_deadline - startup - on_demand_seconds_left
    interruption = interruption_seconds(settings)
    hours = slack / 3600
    if slack < interruption:
        what = "unreachable" if slack < 0 else "one interruption from unreachable"
        return MarketChoice(
            Market.ON_DEMAND, f"deadline {what} on spot (slack {hours:.2f} h): on-demand now", slack
        )
    window = (job.deadline - job.submitted_at).total_seconds()
    time_used = (now - job.submitted_at).total_seconds() / window if window > 0 else 1.0
    work_done = job.steps_done / job.steps_total if job.steps_total else 1.0
    # Lagging by less than one interruption's worth of the window is noise (a start-up, a
    # notice), not a trend: only a real lag moves the job to on-demand early.
    tolerance = interruption / window if window > 0 else 0.0
    if work_done < time_used - tolerance and slack < settings.behind_slack_factor * interruption:
        return MarketChoice(
            Market.ON_DEMAND,
            f"behind uniform progress ({work_done:.0%} done, {time_used:.0%} of the time used) "
            f"with {hours:.2f} h slack: on-demand",
            slack,
        )
    state = "on pace" if work_done >= time_used else "behind pace but"
    return MarketChoice(
        Market.SPOT, f"{state} with {hours:.2f} h slack (absorbs an interruption): spot", slack
    )
