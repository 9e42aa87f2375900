"""The cost benchmark on the real spot traces (issue: trace-driven simulator).

    .venv/bin/python -m benchmarks.cost [--traces DIR] [--starts 100] [--jobs 220]

(a) the single-job setting of Wu et al., NSDI'24: 48 h of compute, changeover 0.2 h, job
    fraction 0.6 and 0.8, `--starts` random start times per zone, in one zone (Greedy, Uniform
    Progress, FrameFleet's deadline rule and its planner, the omniscient optimum) and free to
    move across all the trace's zones (the same, each baseline moving as SkyPilot does);
(b) the fleet setting: `--jobs` video jobs over 7 days across the zones, `--seeds` weeks (a
    different start day and workload each, 4 days apart), FrameFleet's purchase policy against
    on-demand only, Greedy relaunching in any zone (SkyPilot's managed jobs) and Uniform
    Progress across zones, both with back to spot, and FrameFleet with the spread and per-zone
    risk it shipped with before (`--home-zone` adds the paper's home-zone variants). Each
    week's table, then the mean and spread over the weeks of each policy's cost above the
    lower bound (simulator/weeks.py).

(c) the single-job setting on synthetic markets with known structure (`simulator/synthetic.py`:
    periodic outages, long droughts, price spikes, flapping zones), job fraction 0.8,
    `--synthetic-starts` per zone, every policy with the parameters it has for the real traces.
(d) the fleet setting on markets of every kind (benchmarks/cost_markets.py): FrameFleet against
    Greedy any zone with back to spot, week by week, on the shipped traces as probed and
    resampled, and on every synthetic market family, with each week's reachable optimum.
    Not in the default sections (it takes hours on two cores): `--sections d`, and
    `--markets 'V100,plentiful'` for some of them.

Prints the tables (the fleet's with its lower bound, simulator/fleet_bound.py) and a line per
target (met, or short by how much), and writes benchmarks/results/cost.json and cost.png;
`--sections b` runs the fleet alone and writes cost-b.json.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from autoscaler.market.trace import load_trace
from benchmarks.common import RESULTS_DIR, write_result
from benchmarks.cost_markets import as_json as markets_json
from benchmarks.cost_markets import market_weeks, markets_table, markets_target
from simulator.companions import companions_for
from simulator.fleet import run_fleet
from simulator.fleet_bound import fleet_lower_bound
from simulator.fleet_policies import (
    BASELINES,
    FRAMEFLEET,
    FRAMEFLEET_PRICE_ZONES,
    FRAMEFLEET_SPREAD,
    FRAMEFLEET_SPREAD_ONLY,
)
from simulator.fleet_setup import setup_for_changeover
from simulator.report import chart, fleet_table, study_table, target_table
from simulator.results import FleetResult
from simulator.study import PolicySummary, StudyConfig, run_study
from simulator.synthetic import MARKETS, synthetic_trace
from simulator.targets import Target, fleet_targets, study_target
from simulator.weeks import Week, summarize_weeks, weeks_table, weeks_target
from simulator.workload import daily_poisson

DEFAULT_TRACES = (
    Path(__file__).parent.parent.parent / "shared" / "traces" / ("aws-v100-availability-2023-02-15")
)


def week_start(seed: int) -> float:
    return 24.0 * 4 * (seed - 1)  # a different stretch of the trace per workload


FleetTask = tuple[Path, int, int, str | None]  # traces, jobs, seed, policy (None: the bound)


def _fleet_task(task: FleetTask) -> FleetResult | float:
    """One policy's week, or the week's lower bound (`simulator/fleet_bound.py`)."""
    traces, count, seed, policy = task
    logging.basicConfig(level=logging.ERROR)  # the loops' per-decision logs are for operators
    trace, jobs = load_trace(traces), daily_poisson(count, 7, seed)
    start = round(week_start(seed) * 3600 / trace.gap.total_seconds())
    if policy is None:
        return fleet_lower_bound(trace, jobs, start, companions_for(trace))
    chosen = next(p for p in FLEET_POLICIES if p.name == policy)
    return asyncio.run(run_fleet(trace, jobs, setup_for_changeover(0.2), start, chosen))


ABLATION = (FRAMEFLEET_PRICE_ZONES, FRAMEFLEET_SPREAD_ONLY)
FLEET_POLICIES = (FRAMEFLEET, FRAMEFLEET_SPREAD, *ABLATION, *BASELINES)
HOME_ZONE = {p.name for p in BASELINES if p.home_zone and p.name != "on-demand only"}


def fleet_policy_names(home_zone: bool, ablation: bool) -> list[str]:
    left_out = (set() if home_zone else HOME_ZONE) | (
        set() if ablation else {p.name for p in ABLATION}
    )
    return [p.name for p in FLEET_POLICIES if p.name not in left_out]


def fleet_weeks(
    traces: Path, jobs: int, seeds: range, names: Sequence[str], workers: int
) -> list[Week]:
    tasks: list[FleetTask] = [(traces, jobs, s, n) for s in seeds for n in (None, *names)]
    # Each run is its own simulation (its own clock and database): one process per core.
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(tasks, pool.map(_fleet_task, tasks), strict=True))
    weeks = []
    for seed in seeds:
        bound = done[(traces, jobs, seed, None)]
        results = [done[(traces, jobs, seed, n)] for n in names]
        assert isinstance(bound, float)
        runs = sorted((r for r in results if isinstance(r, FleetResult)), key=lambda r: r.cost)
        weeks.append(Week(f"seed {seed}", tuple(runs), bound))
    return weeks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--starts", type=int, default=100, help="start times per zone in (a)")
    parser.add_argument("--jobs", type=int, default=200, help="jobs in the fleet setting (b)")
    parser.add_argument("--seeds", type=int, default=8, help="fleet weeks in (b)")
    parser.add_argument(
        "--home-zone", action="store_true", help="also the paper's home-zone baselines in (b)"
    )
    parser.add_argument(
        "--ablation",
        action="store_true",
        help="also FrameFleet with zones by price alone and with spreading alone in (b)",
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes for (a) and (c)"
    )
    parser.add_argument(
        "--synthetic-starts", type=int, default=10, help="start times per zone in (c)"
    )
    parser.add_argument(
        "--sections", default="abc", help="which of (a), (b), (c) to run, e.g. 'b' (default: all)"
    )
    parser.add_argument(
        "--markets", default="", help="in (d), only markets whose label holds one of these (a,b)"
    )
    parser.add_argument(
        "--market-weeks", type=int, default=2, help="weeks per shipped trace in (d)"
    )
    parser.add_argument(
        "--family-weeks", type=int, default=2, help="weeks per synthetic family in (d), 1 or 2"
    )
    args = parser.parse_args()
    console = Console(width=150)
    trace = load_trace(args.traces)
    results: dict[str, object] = {}
    targets: list[Target] = []
    workers = args.workers
    studies: dict[str, list[PolicySummary]] = {}
    for fraction in (0.6, 0.8) if "a" in args.sections else ():
        for multi_zone in (False, True):
            started = time.perf_counter()
            config = StudyConfig(
                job_fraction=fraction, starts_per_zone=args.starts, multi_zone_starts=args.starts
            )
            summaries, _ = run_study(trace, config, multi_zone, workers)
            zones = len(trace.zones)
            where = f"all {zones} zones" if multi_zone else "one zone"
            title = f"(a) 48 h job, job fraction {fraction}, {where}"
            console.print(
                study_table(f"{title} ({time.perf_counter() - started:.0f} s)", summaries)
            )
            label = f"({zones} zones)" if multi_zone else ""
            baselines = (
                [f"greedy {label}", f"uniform progress {label}"]
                if multi_zone
                else ["greedy", "uniform progress"]
            )
            ours = f"framefleet planner {label or '(1 zone)'}"
            targets.append(study_target(title, summaries, ours, baselines))
            studies[title] = summaries
            results[title] = [asdict(s) for s in summaries]
    for kind in MARKETS if "c" in args.sections else ():
        for multi_zone in (False, True):
            config = StudyConfig(
                job_fraction=0.8,
                starts_per_zone=args.synthetic_starts,
                multi_zone_starts=3 * args.synthetic_starts,
            )
            summaries, _ = run_study(synthetic_trace(kind), config, multi_zone, workers)
            title = f"(c) synthetic: {kind}, job fraction 0.8, " + (
                "all 3 zones" if multi_zone else "one zone"
            )
            console.print(study_table(title, summaries))
            results[title] = [asdict(s) for s in summaries]
    seeds = range(1, args.seeds + 1 if "b" in args.sections else 1)
    names = fleet_policy_names(args.home_zone, args.ablation)
    weeks = fleet_weeks(args.traces, args.jobs, seeds, names, workers) if seeds else []
    for seed, week in zip(seeds, weeks, strict=True):
        console.print(
            fleet_table(
                f"(b) fleet: {args.jobs} jobs over 7 days from day "
                f"{week_start(seed) / 24:.0f}, seed {seed}; no policy can pay less "
                f"than ${week.bound:,.2f}",
                list(week.results),
            )
        )
        results[f"(b) seed {seed}"] = [asdict(r) for r in week.results]
        results[f"(b) seed {seed} lower bound"] = week.bound
        targets.extend(fleet_targets(f"(b) fleet, seed {seed}", week.results, week.bound))
    if weeks:
        summary = summarize_weeks(weeks)
        console.print(weeks_table(f"(b) {len(weeks)} weeks, {args.jobs} jobs each", summary))
        results["(b) weeks"] = [asdict(r) for r in summary]
        results["(b) gap closed per week"] = {w.label: w.closed("framefleet") for w in weeks}
        targets.append(weeks_target(f"(b) fleet, {len(weeks)} weeks", weeks))
    if "d" in args.sections:
        only = [m for m in args.markets.split(",") if m]
        weeks_each = (args.market_weeks, args.family_weeks)
        kinds = market_weeks(weeks_each, args.jobs, workers, only)
        title = f"(d) fleet: {args.jobs} jobs a week, FrameFleet against Greedy on every market"
        console.print(markets_table(title, kinds))
        results["(d) markets"] = markets_json(kinds)
        targets.append(markets_target(kinds))
    console.print(target_table(targets))
    results["targets"] = [asdict(t) for t in targets]
    RESULTS_DIR.mkdir(exist_ok=True)
    name = "cost" if args.sections == "abc" else f"cost-{args.sections}"
    console.print(f"wrote {write_result(name, results)}")
    if studies and weeks:
        first = list(weeks[0].results)
        console.print(f"wrote {chart(studies, first, RESULTS_DIR / 'cost.png')}")


if __name__ == "__main__":
    main()
