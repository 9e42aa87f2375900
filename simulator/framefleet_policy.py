"""FrameFleet's own deadline policy in the single-job setting: the product's
`deadline.choose_market` (the same function the live purchase policy calls) decides spot or
on-demand; the pool is the cheapest zone with capacity now, and a running spot instance is kept
while its zone lasts (moving costs a changeover)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from autoscaler.deadline import choose_market
from autoscaler.snapshot import JobDemand, PurchaseSettings
from autoscaler.throughput import WorkShape
from kernel.market import Market as Purchase
from simulator.single_job import Action, MarketWindow, Mode, Setup, SingleJobState

EPOCH = datetime(2023, 1, 1, tzinfo=UTC)
SHAPE = WorkShape("single-job", 16, 16, 1)


class FrameFleetPolicy:
    def __init__(self, zones: Sequence[int], name: str = "framefleet") -> None:
        self.zones = list(zones)
        self.name = name

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        tick_seconds = setup.tick_hours * 3600
        settings = _settings(setup)
        now = EPOCH + timedelta(seconds=state.tick * tick_seconds)
        job = JobDemand(
            "job",
            5,
            EPOCH,
            EPOCH + timedelta(seconds=setup.deadline * tick_seconds),
            SHAPE,
            setup.work,
            int(state.done),
        )
        left = (setup.work - state.done) * tick_seconds
        choice = choose_market(job, now, left, settings)
        if choice.market is Purchase.ON_DEMAND:
            return Action(Mode.ON_DEMAND)
        t = state.tick
        if state.mode is Mode.SPOT and market.available[state.zone, t]:
            return Action(Mode.SPOT, state.zone)
        open_zones = [z for z in self.zones if market.available[z, t]]
        if not open_zones:
            if state.mode is Mode.ON_DEMAND:
                return Action(Mode.ON_DEMAND)  # no spot to go back to: keep the progress
            return Action(Mode.IDLE)
        return Action(Mode.SPOT, min(open_zones, key=lambda z: (market.price[z, t], z)))


@functools.cache
def _settings(setup: Setup) -> PurchaseSettings:
    tick_seconds = setup.tick_hours * 3600
    return PurchaseSettings(
        boot_seconds=setup.changeover * tick_seconds,
        model_load_seconds=0.0,
        # Progress survives an interruption here; one tick is what a notice can cost.
        checkpoint_interval_seconds=tick_seconds,
        reaction_seconds=0.0,  # it decides every tick, and a launch starts at once
    )
