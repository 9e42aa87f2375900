"""Section (d) of the cost benchmark (issue 47): FrameFleet against Greedy any zone with back to
spot, week by week, on markets of every kind, each run by the product in the fleet simulator:

- the shipped V100 availability trace, as probed (195 s) and resampled to 60 s and 600 s;
- the shipped V100 preemption trace (32 s probes, the three zones that carry prices, jobs over
  its six days; its 0/1 read as the availability traces' are);
- every synthetic family of `simulator/market_families.py`, two weeks each.

Each week also gets the offline optimum (`simulator/fleet_bound.fleet_offline_optimum`: what
an omniscient policy pays with every start-up and every wait for capacity paid), so "gap
closed" says what share of Greedy's distance to it FrameFleet closes.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.table import Table

from autoscaler.market.trace import Trace, load_trace
from simulator.companions import companions_for
from simulator.fleet import run_fleet
from simulator.fleet_bound import fleet_offline_optimum
from simulator.fleet_policies import BASELINES, FRAMEFLEET
from simulator.fleet_setup import setup_for_changeover
from simulator.market_families import FAMILIES, resampled
from simulator.results import FleetResult
from simulator.targets import Target
from simulator.workload import daily_poisson

SHARED = Path(__file__).parent.parent.parent / "shared" / "traces"
AVAILABILITY = SHARED / "aws-v100-availability-2023-02-15"
PREEMPTION = SHARED / "aws-v100-preemption-2023-04-22"
GREEDY = BASELINES[1]
assert GREEDY.name == "greedy (any zone, as SkyPilot)"
CHANGEOVER_HOURS = 0.2
NOISE = 0.005  # FrameFleet may cost this much more than Greedy: the simulation's own noise


@dataclass(frozen=True)
class Market:
    label: str
    trace: Callable[[], Trace]
    start_days: tuple[float, ...]  # one week from each
    job_days: float = 7.0


def _preemption() -> Trace:
    with tempfile.TemporaryDirectory() as folder:
        for path in PREEMPTION.glob("*.json"):
            if '"prices"' in path.read_text():
                shutil.copy(path, folder)
        return load_trace(Path(folder))


def markets(shipped_weeks: int, family_weeks: int = 2) -> list[Market]:
    starts = tuple(4.0 * week for week in range(shipped_weeks))  # section (b)'s weeks
    family_starts = (4.0, 10.0)[:family_weeks]
    return [
        Market("V100, 195 s probes", lambda: load_trace(AVAILABILITY), starts),
        Market("V100, resampled to 60 s", lambda: resampled(load_trace(AVAILABILITY), 60), starts),
        Market(
            "V100, resampled to 600 s", lambda: resampled(load_trace(AVAILABILITY), 600), starts
        ),
        Market("V100 preemption trace, 32 s", _preemption, (0.0,), job_days=6.0),
        *(Market(f"synthetic: {f.name}", f.trace, family_starts) for f in FAMILIES),
    ]


@dataclass(frozen=True)
class MarketWeek:
    market: str
    start_day: float
    framefleet: FleetResult
    greedy: FleetResult
    optimum: float

    @property
    def over_greedy(self) -> float:
        return self.framefleet.cost / self.greedy.cost - 1

    @property
    def gap_closed(self) -> float:
        """Of Greedy's distance to the offline optimum, the share FrameFleet closes."""
        gap = self.greedy.cost - self.optimum
        return (self.greedy.cost - self.framefleet.cost) / gap if gap > 0 else 0.0


# Market, start day, policy (None: the optimum).
Task = tuple[str, float, str | None]


def _task(weeks: tuple[int, int], jobs: int, task: Task) -> FleetResult | float:
    logging.basicConfig(level=logging.ERROR)
    label, start_day, policy = task
    market = next(m for m in markets(*weeks) if m.label == label)
    trace = market.trace()
    workload = daily_poisson(round(jobs * market.job_days / 7), market.job_days, _seed(start_day))
    start = round(start_day * 86_400 / trace.gap.total_seconds())
    setup = setup_for_changeover(CHANGEOVER_HOURS)
    if policy is None:
        startup = setup.boot_seconds + setup.worker.model_load_seconds
        return fleet_offline_optimum(trace, workload, start, companions_for(trace), startup)
    chosen = FRAMEFLEET if policy == FRAMEFLEET.name else GREEDY
    return asyncio.run(run_fleet(trace, workload, setup, start, chosen))


def _seed(start_day: float) -> int:
    return 1 + round(start_day / 4)  # section (b)'s seed for a week from that day


def market_weeks(
    weeks: tuple[int, int], jobs: int, workers: int, only: Sequence[str] = ()
) -> list[MarketWeek]:
    """`weeks`: per shipped trace and per synthetic family."""
    chosen = [m for m in markets(*weeks) if not only or any(o in m.label for o in only)]
    tasks: list[Task] = [
        (m.label, day, policy)
        for m in chosen
        for day in m.start_days
        for policy in (None, FRAMEFLEET.name, GREEDY.name)
    ]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        runs = pool.map(_task, [weeks] * len(tasks), [jobs] * len(tasks), tasks)
        done = dict(zip(tasks, runs, strict=True))
    found = []
    for m in chosen:
        for day in m.start_days:
            ours, greedy = done[(m.label, day, FRAMEFLEET.name)], done[(m.label, day, GREEDY.name)]
            optimum = done[(m.label, day, None)]
            assert isinstance(ours, FleetResult)
            assert isinstance(greedy, FleetResult)
            assert isinstance(optimum, float)
            found.append(MarketWeek(m.label, day, ours, greedy, optimum))
    return found


def markets_table(title: str, weeks: Sequence[MarketWeek]) -> Table:
    table = Table(title=title)
    columns = (
        "market",
        "week from day",
        "FrameFleet",
        "Greedy",
        "FF vs Greedy",
        "misses FF / Greedy",
        "avoidable",
        "late on-demand",
        "offline optimum",
        "gap closed",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "market" else "right")
    for w in weeks:
        ff, greedy = w.framefleet, w.greedy
        table.add_row(
            w.market,
            f"{w.start_day:.0f}",
            f"${ff.cost:,.2f}",
            f"${greedy.cost:,.2f}",
            f"{w.over_greedy:+.1%}",
            f"{ff.misses} / {greedy.misses}",
            f"{ff.avoidable_misses} / {greedy.avoidable_misses}",
            f"{ff.late_on_demand}",
            f"${w.optimum:,.2f}",
            f"{w.gap_closed:.0%}",
        )
    return table


def markets_target(weeks: Sequence[MarketWeek]) -> Target:
    worst = max(weeks, key=lambda w: w.over_greedy)
    avoidable = sum(w.framefleet.avoidable_misses for w in weeks)
    late = sum(w.framefleet.late_on_demand for w in weeks)
    met = worst.over_greedy <= NOISE and avoidable == 0 and late == 0
    short = "" if met else f"{(worst.over_greedy - NOISE) * 100:+.1f} points on {worst.market}"
    if avoidable or late:
        short = f"{avoidable} avoidable misses, {late} late on-demand starts"
    return Target(
        f"(d) {len(weeks)} weeks on every kind of market",
        f"FrameFleet <= Greedy any zone + back to spot ({NOISE:+.1%}), 0 avoidable misses",
        f"worst {worst.over_greedy:+.1%} ({worst.market}, day {worst.start_day:.0f}), "
        f"{avoidable} avoidable misses, {late} late on-demand starts",
        met,
        short,
    )


def as_json(weeks: Sequence[MarketWeek]) -> list[dict[str, object]]:
    return [
        {
            "market": w.market,
            "start_day": w.start_day,
            "framefleet": asdict(w.framefleet),
            "greedy": asdict(w.greedy),
            "optimum": w.optimum,
            "over_greedy": w.over_greedy,
            "gap_closed": w.gap_closed,
        }
        for w in weeks
    ]
