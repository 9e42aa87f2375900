"""The omniscient optimum of the single-job setting: the exact minimum cost to finish by the
deadline with full knowledge of the trace, by dynamic programming over (tick, instance, ticks
of start-up left, work done). With several zones the job may also move between them (each move
pays the changeover). No policy can do better: a test checks it against all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kernel.errors import ConfigurationError
from simulator.single_job import MarketWindow, Outcome, Setup

INF = float("inf")
MAX_CHOICE_BYTES = 4 * 2**30
Vector = npt.NDArray[np.float64]


def omniscient(setup: Setup, market: MarketWindow, zones: Sequence[int] | None = None) -> Outcome:
    """Kinds: 0 idle, 1 on-demand, 2.. spot in each allowed zone."""
    allowed = list(range(len(market.zones))) if zones is None else list(zones)
    kinds = 2 + len(allowed)
    warm = max(1, setup.changeover)  # start-up ticks left: 0..warm-1
    work, horizon = setup.work, setup.deadline
    # One byte per (tick, instance, start-up left, work done): say so before trying to take
    # more than the machine should give (a 48 h job on 32 s ticks across 9 zones needs 18 GB).
    needed = horizon * kinds * warm * (work + 1)
    if needed > MAX_CHOICE_BYTES:
        raise ConfigurationError(
            f"the omniscient optimum of this job needs {needed / 2**30:.1f} GiB of decisions "
            f"(over the {MAX_CHOICE_BYTES / 2**30:.0f} GiB limit): use coarser ticks, fewer "
            f"zones or a shorter job"
        )
    # value[kind, r, p]: cheapest cost from the start of tick t, given the instance kept from
    # the tick before (kind, r start-up ticks still to go) and p ticks of work done.
    value = np.full((kinds, warm, work + 1), INF)
    value[:, :, work] = 0.0
    choices = np.zeros((horizon, kinds, warm, work + 1), dtype=np.int8)
    for t in range(horizon - 1, -1, -1):
        costs = [0.0, setup.on_demand_price * setup.tick_hours] + [
            float(market.price[z, t]) * setup.tick_hours for z in allowed
        ]
        usable = [True, True] + [bool(market.available[z, t]) for z in allowed]
        # A fresh instance of each kind, started at this tick (index kind * warm for choices).
        best = value[0, 0].copy()  # idle
        best_choice = np.zeros(work + 1, dtype=np.int8)
        for kind in range(1, kinds):
            if not usable[kind]:
                continue
            fresh = costs[kind] + _after(value, kind, setup.changeover)
            better = fresh < best
            best = np.where(better, fresh, best)
            best_choice = np.where(better, np.int8(kind), best_choice)
        new_value = np.empty_like(value)
        for kind in range(kinds):
            for r in range(warm):
                if kind == 0 or not usable[kind]:
                    new_value[kind, r] = best
                    choices[t, kind, r] = best_choice
                    continue
                keep = costs[kind] + _after(value, kind, r)
                better = keep < best
                new_value[kind, r] = np.where(better, keep, best)
                choices[t, kind, r] = np.where(better, np.int8(-kind), best_choice)
        new_value[:, :, work] = 0.0
        value = new_value
    return _replay(setup, market, allowed, choices, float(value[0, 0, 0]))


def _after(value: npt.NDArray[np.float64], kind: int, startup_left: int) -> Vector:
    """Value of the next tick after running `kind` this tick with `startup_left` start-up
    ticks to go before it (0: this tick makes progress)."""
    if startup_left > 0:
        kept: Vector = value[kind, startup_left - 1]
        return kept
    shifted = np.empty(value.shape[2])
    shifted[:-1] = value[kind, 0, 1:]
    shifted[-1] = 0.0
    return shifted


def _replay(
    setup: Setup,
    market: MarketWindow,
    allowed: list[int],
    choices: npt.NDArray[np.int8],
    cost: float,
) -> Outcome:
    if cost == INF:
        return Outcome("omniscient", INF, 0.0, 0.0, None)
    kind, r, done = 0, 0, 0
    spot_hours = on_demand_hours = 0.0
    worked = [0.0, 0.0]  # spot, on-demand: the ticks that made progress
    for t in range(setup.deadline):
        if done >= setup.work:
            return Outcome("omniscient", cost, spot_hours, on_demand_hours, t, *worked)
        choice = int(choices[t, kind, r, done])
        if choice == 0:
            kind, r = 0, 0
            continue
        if choice > 0:  # a fresh instance
            kind, left = choice, setup.changeover
        else:
            kind, left = -choice, r
        if kind == 1:
            on_demand_hours += setup.tick_hours
        else:
            spot_hours += setup.tick_hours
        if left > 0:
            r = left - 1
        else:
            r, done = 0, done + 1
            worked[kind == 1] += setup.tick_hours
    finished = setup.deadline if done >= setup.work else None
    return Outcome("omniscient", cost, spot_hours, on_demand_hours, finished, *worked)
