"""The cost benchmark on the real spot traces (issue: trace-driven simulator).

    .venv/bin/python -m benchmarks.cost [--traces DIR] [--starts 100] [--jobs 220]

(a) the single-job setting of Wu et al., NSDI'24: 48 h of compute, changeover 0.2 h, job
    fraction 0.6 and 0.8, `--starts` random start times per zone, in one zone (Greedy, Uniform
    Progress, FrameFleet's deadline rule and its planner, the omniscient optimum) and free to
    move across all the trace's zones (the same, each baseline moving as SkyPilot does);
(b) the fleet setting: `--jobs` video jobs over 7 days across the zones, FrameFleet's
    purchase policy against on-demand only, Greedy relaunching in any zone (SkyPilot's managed
    jobs), Uniform Progress across zones, and the paper's home-zone variants.

(c) the single-job setting on synthetic markets with known structure (`simulator/synthetic.py`:
    periodic outages, long droughts, price spikes, flapping zones), job fraction 0.8,
    `--synthetic-starts` per zone, every policy with the parameters it has for the real traces.

Prints the tables (the fleet's with its lower bound, simulator/fleet_bound.py) and a line per
target (met, or short by how much), and writes benchmarks/results/cost.json and cost.png;
`--sections b` runs the fleet alone and writes cost-b.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from autoscaler.market.trace import load_trace
from benchmarks.common import RESULTS_DIR, write_result
from simulator.companions import companions_for
from simulator.fleet import compare_fleet
from simulator.fleet_bound import fleet_lower_bound
from simulator.report import chart, fleet_table, study_table, target_table
from simulator.results import FleetResult
from simulator.study import PolicySummary, StudyConfig, run_study
from simulator.synthetic import MARKETS, synthetic_trace
from simulator.targets import Target, fleet_targets, study_target
from simulator.workload import daily_poisson

DEFAULT_TRACES = (
    Path(__file__).parent.parent.parent / "shared" / "traces" / ("aws-v100-availability-2023-02-15")
)


def week_start(seed: int) -> float:
    return 24.0 * (seed - 1) * 3  # a different stretch of the trace per workload


def _fleet_week(job: tuple[Path, int, int]) -> tuple[list[FleetResult], float]:
    """Every policy's week, and the lower bound no policy can beat (`simulator/fleet_bound.py`)."""
    traces, count, seed = job
    logging.basicConfig(level=logging.ERROR)  # the loops' per-decision logs are for operators
    trace, jobs = load_trace(traces), daily_poisson(count, 7, seed)
    start = week_start(seed)
    bound = fleet_lower_bound(
        trace, jobs, round(start * 3600 / trace.gap.total_seconds()), companions_for(trace)
    )
    return compare_fleet(trace, jobs, 0.2, start), bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--starts", type=int, default=100, help="start times per zone in (a)")
    parser.add_argument("--jobs", type=int, default=220, help="jobs in the fleet setting (b)")
    parser.add_argument("--seeds", type=int, default=5, help="fleet workloads in (b)")
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes for (a) and (c)"
    )
    parser.add_argument(
        "--synthetic-starts", type=int, default=10, help="start times per zone in (c)"
    )
    parser.add_argument(
        "--sections", default="abc", help="which of (a), (b), (c) to run, e.g. 'b' (default: all)"
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
    # Each week is its own simulation (its own clock and database): one process per core.
    with ProcessPoolExecutor(max_workers=min(len(seeds), os.cpu_count() or 1)) as pool:
        runs = list(pool.map(_fleet_week, [(args.traces, args.jobs, s) for s in seeds]))
    weeks = [fleet for fleet, _ in runs]
    for seed, (fleet, bound) in zip(seeds, runs, strict=True):
        start_hours = week_start(seed)
        console.print(
            fleet_table(
                f"(b) fleet: {args.jobs} jobs over 7 days from day "
                f"{start_hours / 24:.0f}, seed {seed}; no policy can pay less "
                f"than ${bound:,.2f}",
                fleet,
            )
        )
        results[f"(b) seed {seed}"] = [asdict(r) for r in fleet]
        results[f"(b) seed {seed} lower bound"] = bound
        targets.extend(fleet_targets(f"(b) fleet, seed {seed}", fleet, bound))
    console.print(target_table(targets))
    results["targets"] = [asdict(t) for t in targets]
    RESULTS_DIR.mkdir(exist_ok=True)
    name = "cost" if args.sections == "abc" else f"cost-{args.sections}"
    console.print(f"wrote {write_result(name, results)}")
    if studies and weeks:
        console.print(f"wrote {chart(studies, weeks[0], RESULTS_DIR / 'cost.png')}")


if __name__ == "__main__":
    main()
