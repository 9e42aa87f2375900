"""The policies the fleet setting compares, all run by the same product in the same simulator:
FrameFleet's purchase policy as it ships, and the published single-job policies adapted to a
fleet by swapping only the market rule. The fair baselines are at full strength: they move
across zones as FrameFleet does (on every (re)launch, spot in the cheapest zone with capacity,
as SkyPilot's managed jobs relaunch a preempted job), and they move a job back from on-demand
to spot with the same back-to-spot step FrameFleet has (`autoscaler/spot_return.py`), which
any user could script. The paper's home-zone variants (spot only in the zone that was cheapest
with capacity when the job arrived, no move back) are kept as extra rows.

- on-demand only: every job on on-demand capacity;
- Greedy: spot whenever there is capacity, with the safety net (on-demand once one more
  interruption would miss the deadline);
- Uniform Progress (Wu et al., NSDI'24, section 5.2): a waiting job takes spot wherever there
  is capacity (taking risks), else on-demand while its share of work done lags its share of
  time used; a job on on-demand goes back to spot only once ahead of the pace 2d later
  (hysteresis, d one start-up); the same safety net.
- FrameFleet: the spot planner over the capacity it has seen (`autoscaler/planned_market.py`),
  the simple rule below it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np

from autoscaler.deadline import MarketChoice, MarketRule, choose_market, new_instance_startup
from autoscaler.market.trace import Trace
from autoscaler.planned_market import PlannedMarketRule, SpotHistory
from autoscaler.pool_choice import fits, spot_zone_allowed
from autoscaler.snapshot import JobDemand, PurchaseSettings
from kernel.instance_types import kind_of
from kernel.market import Market
from simulator.market_families import held_index

RuleMaker = Callable[[SpotHistory], MarketRule]
# The live autoscaler's round (`AutoscalerSettings.interval_seconds`' default).
ROUND_SECONDS = 30.0


@dataclass(frozen=True)
class FleetPolicy:
    name: str
    # The market rule, made for each simulation from what its autoscaler sees of the market.
    make_rule: RuleMaker = PlannedMarketRule
    # The product prices each pool's interruption rate into its choice and spreads spot over
    # pools; a baseline that knows neither sees prices and capacity only.
    risk_aware: bool = False
    # The single-job policies run each job in one zone: its home zone is the cheapest with
    # spot capacity when the job arrives, and it uses spot only there.
    home_zone: bool = False
    # A job on on-demand moves back to spot when that pays (`autoscaler/spot_return.py`).
    back_to_spot: bool = True
    # Spot spread over pools (at most a third of the spot fleet in one), and zones ranked by
    # their own interruption rates (the product ranks zones so, and does not spread).
    spread: bool = False
    zone_risk: bool = False

    def purchase(self, settings: PurchaseSettings) -> PurchaseSettings:
        """The product's purchase settings as this policy runs them."""
        return replace(
            settings,
            return_to_spot=self.back_to_spot,
            max_pool_share=0.34 if self.risk_aware and self.spread else 1.0,
            zone_risk=self.risk_aware and self.zone_risk,
        )


# As the product ships: zones ranked by their own interruption rates, no spreading.
FRAMEFLEET = FleetPolicy("framefleet", risk_aware=True, zone_risk=True)
# The spread and per-zone risk FrameFleet shipped with before issue 32, measured beside it.
FRAMEFLEET_SPREAD = FleetPolicy(
    "framefleet, spread by zone risk", risk_aware=True, spread=True, zone_risk=True
)
# The benchmark's --ablation: zones by price alone, and spreading alone.
FRAMEFLEET_PRICE_ZONES = FleetPolicy("framefleet, zones by price alone", risk_aware=True)
FRAMEFLEET_SPREAD_ONLY = FleetPolicy("framefleet, spread alone", risk_aware=True, spread=True)


def seen_before(trace: Trace, start_tick: int, instance_types: Iterable[str]) -> SpotHistory:
    """What a live autoscaler (its rounds every `ROUND_SECONDS`) would have recorded of the
    trace's capacity before the week starts (its past only: some zone up), in its own steps
    whatever the trace's probe interval (each probe's value held until the next), for every
    instance type the simulation may buy."""
    history = SpotHistory.for_interval(ROUND_SECONDS, origin=trace.start)
    gap, step = trace.gap.total_seconds(), history.tick_seconds
    first = max(0, start_tick - math.ceil(history.keep * step / gap))
    if start_tick > first:
        zones = np.array([z.available[first:start_tick] for z in trace.zones.values()])
        up = zones.max(axis=0)
        index = held_index(start_tick - first, gap, step)
        held = up[index]
        last = trace.start + timedelta(seconds=first * gap + (index.size - 1) * step)
        for instance_type in instance_types:  # the companions have the trace's capacity
            history.preload(instance_type, held, last)
    return history


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


@dataclass
class UniformProgressRule:
    """The paper's Uniform Progress as a market rule; it reads whether some spot pool the job
    fits has capacity now from the round's snapshot (`history.latest`)."""

    history: SpotHistory

    def __call__(
        self,
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
        work_done = job.steps_done / job.steps_total if job.steps_total else 1.0

        def expected(seconds_later: float) -> float:
            used = (now - job.submitted_at).total_seconds() + seconds_later
            return used / window if window > 0 else 1.0

        if job.running_on is Market.ON_DEMAND:
            # Hysteresis: on on-demand until ahead of the pace two start-ups from now.
            if work_done < expected(2 * new_instance_startup(settings)):
                return MarketChoice(Market.ON_DEMAND, "hysteresis", net.slack_seconds)
            return net
        if self._spot_somewhere(job, settings) or work_done >= expected(0):
            return net  # taking risks, or on pace: spot (a wait where there is none)
        return MarketChoice(Market.ON_DEMAND, "behind uniform progress", net.slack_seconds)

    def _spot_somewhere(self, job: JobDemand, settings: PurchaseSettings) -> bool:
        snapshot = self.history.latest
        if snapshot is None:
            return False
        return any(
            q.available
            and q.pool.market is Market.SPOT
            and q.pool.instance_type in settings.candidate_types
            and fits(job, kind_of(q.pool.instance_type))
            and spot_zone_allowed(job, q.pool)
            for q in snapshot.quotes.values()
        )


def _always(rule: MarketRule) -> RuleMaker:
    return lambda _history: rule


BASELINES = (
    FleetPolicy("on-demand only", _always(on_demand_only), home_zone=True, back_to_spot=False),
    FleetPolicy("greedy (any zone, as SkyPilot)", _always(greedy)),
    FleetPolicy("uniform progress (any zone)", UniformProgressRule),
    FleetPolicy("greedy (home zone)", _always(greedy), home_zone=True, back_to_spot=False),
    FleetPolicy(
        "uniform progress (home zone)", UniformProgressRule, home_zone=True, back_to_spot=False
    ),
)
# The baselines a user would otherwise run, the ones FrameFleet is held to.
FAIR_BASELINES = ("greedy (any zone, as SkyPilot)", "uniform progress (any zone)")
