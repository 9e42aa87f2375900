"""The policies the fleet setting compares, all run by the same product in the same simulator:
FrameFleet's purchase policy as it ships, and the published single-job policies adapted to a
fleet by swapping only the market rule and what the pool choice may see (prices and capacity,
not interruption rates). The fair baselines move across zones as FrameFleet does: on every
(re)launch, spot in the cheapest zone with capacity, as SkyPilot's managed jobs relaunch a
preempted job. The paper's home-zone variants (spot only in the zone that was cheapest with
capacity when the job arrived) are kept as extra rows.

- on-demand only: every job on on-demand capacity;
- Greedy: spot whenever its home zone has capacity, with the safety net (on-demand once one
  more interruption would miss the deadline);
- Uniform Progress (Wu et al., NSDI'24): spot while the job's share of work done keeps up with
  its share of time used, on-demand while it lags, with the same safety net and pool choice as
  Greedy. A job placed on on-demand stays there until it finishes (the fleet does not migrate
  running jobs), which is what the paper's hysteresis holds it to as well.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from autoscaler.deadline import MarketChoice, MarketRule, choose_market
from autoscaler.snapshot import JobDemand, PurchaseSettings
from kernel.market import Market


@dataclass(frozen=True)
class FleetPolicy:
    name: str
    rule: MarketRule = choose_market
    # The product spreads spot over pools and prices in each pool's interruption rate; a
    # baseline that knows neither sees prices only and buys the cheapest.
    risk_aware: bool = True
    # The single-job policies run each job in one zone: its home zone is the cheapest with
    # spot capacity when the job arrives, and it uses spot only there.
    home_zone: bool = False
    # A job on on-demand moves back to spot when that pays (the product); SkyPilot's managed
    # jobs and the paper's policies keep it there to its end.
    back_to_spot: bool = False


FRAMEFLEET = FleetPolicy("framefleet", back_to_spot=True)


def on_demand_only(
    job: JobDemand,
    now: datetime,
    on_demand_seconds_left: float,
    settings: PurchaseSettings,
    startup_seconds: float | None = None,
) -> MarketChoice:
    return MarketChoice(Market.ON_DEMAND, "on-demand only", float("inf"))


def greedy(
    job: JobDemand,
    now: datetime,
    on_demand_seconds_left: float,
    settings: PurchaseSettings,
    startup_seconds: float | None = None,
) -> MarketChoice:
    """FrameFleet's safety net without its pace rule."""
    no_pace_rule = replace(settings, behind_slack_factor=0)
    return choose_market(job, now, on_demand_seconds_left, no_pace_rule, startup_seconds)


def uniform_progress(
    job: JobDemand,
    now: datetime,
    on_demand_seconds_left: float,
    settings: PurchaseSettings,
    startup_seconds: float | None = None,
) -> MarketChoice:
    net = greedy(job, now, on_demand_seconds_left, settings, startup_seconds)
    if job.deadline is None or net.market is Market.ON_DEMAND:
        return net
    window = (job.deadline - job.submitted_at).total_seconds()
    time_used = (now - job.submitted_at).total_seconds() / window if window > 0 else 1.0
    work_done = job.steps_done / job.steps_total if job.steps_total else 1.0
    if work_done < time_used:
        return MarketChoice(Market.ON_DEMAND, "behind uniform progress", net.slack_seconds)
    return net


BASELINES = (
    FleetPolicy("on-demand only", on_demand_only, risk_aware=False, home_zone=True),
    FleetPolicy("greedy (any zone, as SkyPilot)", greedy, risk_aware=False),
    FleetPolicy("uniform progress (any zone)", uniform_progress, risk_aware=False),
    FleetPolicy("greedy (home zone)", greedy, risk_aware=False, home_zone=True),
    FleetPolicy("uniform progress (home zone)", uniform_progress, risk_aware=False, home_zone=True),
)
# The baselines a user would otherwise run, the ones FrameFleet is held to.
FAIR_BASELINES = ("greedy (any zone, as SkyPilot)", "uniform progress (any zone)")
