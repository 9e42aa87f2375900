"""Pre-warming measured (issue 16, part 3): FrameFleet's fleet on a workload with a daily
pattern, with the forecast's pre-warming off and at several values of a job's waiting.

    .venv/bin/python -m benchmarks.prewarm [--traces DIR] [--jobs 220] [--seeds 3]
        [--values 0,2,5,10,20]

Each run is the fleet setting of benchmarks/cost.py (b): the product's own object graph on the
trace, `--jobs` jobs over 7 days (`simulator.workload.daily_poisson`: busy afternoons, quiet
nights, bursts), 10-minute boots. Prints, per value, the mean cost, the time from arrival to
start (p50, p95), deadline misses, and what the waiting saved cost per job-hour; writes
benchmarks/results/prewarm.json.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoscaler.market.trace import load_trace
from benchmarks.common import write_result
from benchmarks.cost import DEFAULT_TRACES, week_start
from simulator.fleet import run_fleet
from simulator.fleet_setup import setup_for_changeover
from simulator.results import FleetResult
from simulator.workload import daily_poisson


def _week(job: tuple[Path, int, int, float]) -> FleetResult:
    traces, count, seed, value = job
    logging.basicConfig(level=logging.ERROR)
    setup = replace(setup_for_changeover(0.2), prewarm_wait_value_per_job_hour=value)
    start = round(week_start(seed) * 3600 / load_trace(traces).gap.total_seconds())
    return asyncio.run(run_fleet(load_trace(traces), daily_poisson(count, 7, seed), setup, start))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--jobs", type=int, default=220)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--values", default="0,2,5,10,20", help="USD per job-hour of waiting")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    values = [float(v) for v in args.values.split(",")]
    seeds = range(1, args.seeds + 1)
    runs = [(args.traces, args.jobs, seed, value) for value in values for seed in seeds]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(_week, runs))
    by_value = {
        v: [r for (_, _, _, rv), r in zip(runs, results, strict=True) if rv == v] for v in values
    }
    table = Table(title=f"pre-warming: {args.jobs} jobs over 7 days, mean of {args.seeds} weeks")
    for column in (
        "USD per job-hour waited",
        "cost",
        "vs off",
        "to start p50 (min)",
        "to start p95 (min)",
        "misses",
        "launches",
        "extra $ per job-hour saved",
    ):
        table.add_column(column, justify="right")
    off = by_value.get(0.0)

    def mean(rows: list[FleetResult], name: str) -> float:
        return sum(float(getattr(r, name)) for r in rows) / len(rows)

    summary = []
    for value, rows in by_value.items():
        cost, p50, p95 = (
            mean(rows, n) for n in ("cost", "start_delay_p50_hours", "start_delay_p95_hours")
        )
        row = {
            "value": value,
            "cost": cost,
            "p50_hours": p50,
            "p95_hours": p95,
            "misses": sum(r.misses for r in rows),
            "launches": mean(rows, "launches"),
        }
        vs_off = per_hour = "-"
        if off is not None and value != 0.0:
            base = mean(off, "cost")
            vs_off = f"{cost / base - 1:+.1%}"
            # The waiting saved: the mean delay saved per job, times the jobs.
            saved = mean(off, "start_delay_mean_hours") - mean(rows, "start_delay_mean_hours")
            saved *= args.jobs
            per_hour = f"${(cost - base) / saved:,.2f}" if saved > 0 else "no saving"
        table.add_row(
            f"{value:g}" + (" (off)" if value == 0 else ""),
            f"${cost:,.2f}",
            vs_off,
            f"{p50 * 60:.1f}",
            f"{p95 * 60:.1f}",
            str(row["misses"]),
            f"{row['launches']:.0f}",
            per_hour,
        )
        summary.append(row)
    console = Console(width=150)
    console.print(table)
    runs_json = [
        {"seed": s, "value": v, **asdict(r)} for (_, _, s, v), r in zip(runs, results, strict=True)
    ]
    console.print(f"wrote {write_result('prewarm', {'summary': summary, 'runs': runs_json})}")


if __name__ == "__main__":
    main()
