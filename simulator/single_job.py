"""The single-job setting of Wu et al., "Can't Be Late" (NSDI'24), replayed on real traces.

One job needs `work` ticks of compute and must finish within `deadline` ticks. Each tick it is
idle, on a spot instance in some zone, or on on-demand. Starting an instance (and moving to
another zone) costs `changeover` ticks of paid time without progress. A spot instance is lost
when its zone's availability is 0 (a two-minute notice is far shorter than a tick, so progress
made so far is kept, as in the paper). Prices are the trace's spot price per tick and the fixed
on-demand price. Policies are handed only the past and the present tick (`MarketWindow.until`); the
omniscient optimum (`omniscient.py`) sees everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np
import numpy.typing as npt


class Mode(StrEnum):
    IDLE = "idle"
    SPOT = "spot"
    ON_DEMAND = "on-demand"


@dataclass(frozen=True)
class Setup:
    work: int  # ticks of compute the job needs
    deadline: int  # ticks from its start
    changeover: int  # ticks of start-up without progress
    tick_hours: float
    on_demand_price: float  # USD/hour


@dataclass(frozen=True)
class MarketWindow:
    """Availability (1/0) and spot price (USD/hour) per zone, from the job's start on."""

    zones: tuple[str, ...]
    available: npt.NDArray[np.int8]  # [zone, tick]
    price: npt.NDArray[np.float64]  # [zone, tick]
    # The capacity before the job's start (what a live system has recorded), [zone, tick].
    history: npt.NDArray[np.int8] | None = None

    def until(self, tick: int) -> MarketWindow:
        """What a live system has seen by `tick`: the policies get this, never the future."""
        return MarketWindow(
            self.zones, self.available[:, : tick + 1], self.price[:, : tick + 1], self.history
        )

    def seen(self, zone: int) -> npt.NDArray[np.int8]:
        """The zone's capacity series so far, its history first."""
        if self.history is None:
            return np.asarray(self.available[zone], dtype=np.int8)
        return np.concatenate((self.history[zone], self.available[zone])).astype(np.int8)


@dataclass(frozen=True)
class Action:
    mode: Mode
    zone: int = 0  # for spot


@dataclass
class SingleJobState:
    tick: int = 0
    done: float = 0.0  # ticks of work done
    mode: Mode = Mode.IDLE
    zone: int = 0
    warming: int = 0  # changeover ticks left on the current instance


class Policy(Protocol):
    name: str

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        """Decide for tick `state.tick`; may read `market` up to and including that tick."""
        ...


@dataclass(frozen=True)
class Outcome:
    policy: str
    cost: float
    spot_hours: float  # billed, start-ups included
    on_demand_hours: float
    finished_tick: int | None
    # Compute time that made progress, start-ups left out (the paper's Table 3 counts these).
    spot_work_hours: float = 0.0
    on_demand_work_hours: float = 0.0

    @property
    def met_deadline(self) -> bool:
        return self.finished_tick is not None


def must_go_on_demand(state: SingleJobState, setup: Setup) -> bool:
    """The safety net: one more tick without progress would leave no time to finish on
    on-demand (including its start-up)."""
    left = setup.work - state.done
    start = 0 if state.mode is Mode.ON_DEMAND else setup.changeover
    return setup.deadline - state.tick - 1 < left + start


def paper_safety_net(state: SingleJobState, setup: Setup) -> bool:
    """The paper's Safety Net Rule, R(t) < C(t) + 2d: on-demand once the time left could not
    take two more changeovers (one lost spot start-up, then on-demand's own), or once one more
    tick without progress would leave no time at all (`must_go_on_demand`, for d = 0)."""
    time_left = setup.deadline - state.tick
    return time_left < setup.work - state.done + 2 * setup.changeover or must_go_on_demand(
        state, setup
    )


def simulate(policy: Policy, setup: Setup, market: MarketWindow) -> Outcome:
    state = SingleJobState()
    cost = spot_hours = on_demand_hours = 0.0
    work_hours = {Mode.SPOT: 0.0, Mode.ON_DEMAND: 0.0}
    while state.tick < setup.deadline and state.done < setup.work:
        t = state.tick
        if state.mode is Mode.SPOT and market.available[state.zone, t] == 0:
            state.mode = Mode.IDLE  # preempted: the instance is gone
        action = policy.act(state, setup, market.until(t))
        if action.mode is Mode.SPOT and market.available[action.zone, t] == 0:
            action = Action(Mode.IDLE)  # no capacity: the launch fails
        if action.mode is not state.mode or (
            action.mode is Mode.SPOT and action.zone != state.zone
        ):
            state.warming = setup.changeover if action.mode is not Mode.IDLE else 0
        state.mode, state.zone = action.mode, action.zone
        if state.mode is Mode.SPOT:
            cost += market.price[state.zone, t] * setup.tick_hours
            spot_hours += setup.tick_hours
        elif state.mode is Mode.ON_DEMAND:
            cost += setup.on_demand_price * setup.tick_hours
            on_demand_hours += setup.tick_hours
        if state.mode is not Mode.IDLE:
            if state.warming > 0:
                state.warming -= 1
            else:
                state.done += 1
                work_hours[state.mode] += setup.tick_hours
        state.tick += 1
    finished = state.tick if state.done >= setup.work else None
    return Outcome(
        policy.name,
        cost,
        spot_hours,
        on_demand_hours,
        finished,
        work_hours[Mode.SPOT],
        work_hours[Mode.ON_DEMAND],
    )


class OnDemandOnly:
    name = "on-demand only"

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        return Action(Mode.ON_DEMAND)


class Greedy:
    """Spot in its zone whenever there is capacity; idle otherwise; on-demand for good once
    the safety net says so (the paper's R(t) < C(t) + 2d)."""

    name = "greedy"

    def __init__(self, zone: int = 0) -> None:
        self.zone = zone

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        if state.mode is Mode.ON_DEMAND or paper_safety_net(state, setup):
            return Action(Mode.ON_DEMAND)
        if market.available[self.zone, state.tick]:
            return Action(Mode.SPOT, self.zone)
        return Action(Mode.IDLE)


def cheapest_open_zone(zones: list[int], market: MarketWindow, tick: int) -> int | None:
    open_zones = [z for z in zones if market.available[z, tick]]
    return min(open_zones, key=lambda z: (market.price[z, tick], z)) if open_zones else None


def spot_anywhere(state: SingleJobState, zones: list[int], market: MarketWindow) -> Action | None:
    """A job free to move: keep a running spot instance while its zone lasts, else (re)launch
    in the cheapest zone with capacity (SkyPilot's managed jobs); None when no zone has any."""
    if state.mode is Mode.SPOT and market.available[state.zone, state.tick]:
        return Action(Mode.SPOT, state.zone)
    zone = cheapest_open_zone(zones, market, state.tick)
    return None if zone is None else Action(Mode.SPOT, zone)


class GreedyAnyZone:
    """Greedy free to move across `zones`: spot in the cheapest zone with capacity on every
    (re)launch, each move one changeover; idle when no zone has any; the same safety net."""

    def __init__(self, zones: list[int]) -> None:
        self.zones = zones
        self.name = f"greedy ({len(zones)} zones)"

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        if state.mode is Mode.ON_DEMAND or paper_safety_net(state, setup):
            return Action(Mode.ON_DEMAND)
        return spot_anywhere(state, self.zones, market) or Action(Mode.IDLE)


class UniformProgress:
    """Wu et al.'s Uniform Progress as the paper states it (section 5.2), with expected progress
    ep(t) = C(0) t / R(0) and current progress cp(t):
    1. idle and cp(t) < ep(t): on-demand, kept to catch up;
    2. taking risks: spot whenever it is available, kept until it is preempted;
    3. hysteresis: on on-demand, stay until cp(t) >= ep(t + 2d), then back to spot where
       there is capacity (else idle: the job is ahead);
    4. safety net: R(t) < C(t) + 2d sends it to on-demand until the end.
    Across zones "spot available" means some zone of `zones` has capacity, taken where Greedy
    across zones would take it (SkyPilot's managed jobs)."""

    def __init__(self, zones: int | Sequence[int] = 0, name: str | None = None) -> None:
        self.zones = [zones] if isinstance(zones, int) else list(zones)
        where = "" if len(self.zones) == 1 else f" ({len(self.zones)} zones)"
        self.name = name or f"uniform progress{where}"
        self.committed = False  # the safety net fired: on-demand to the end

    def act(self, state: SingleJobState, setup: Setup, market: MarketWindow) -> Action:
        if state.tick == 0:
            self.committed = False  # a new job
        if self.committed or paper_safety_net(state, setup):
            self.committed = True
            return Action(Mode.ON_DEMAND)
        pace = setup.work / setup.deadline

        def expected(tick: float) -> float:
            return pace * tick

        if state.mode is Mode.ON_DEMAND and state.done < expected(
            state.tick + 2 * setup.changeover
        ):
            return Action(Mode.ON_DEMAND)  # hysteresis
        spot = spot_anywhere(state, self.zones, market)
        if spot is not None:
            return spot
        if state.done < expected(state.tick):
            return Action(Mode.ON_DEMAND)
        return Action(Mode.IDLE)
