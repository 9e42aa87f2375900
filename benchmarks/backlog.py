"""Deadline jobs behind a backlog, in the trace-driven fleet simulation (the real control plane
and autoscaler on a store): a burst of low-priority jobs that a budget of $40 an hour cannot
serve at once, then deadline jobs of the same priority, the newest in the queue. Reports the
deadline misses, the backlog's progress and the cost.

    python -m benchmarks.backlog [--backlog 2000] [--deadline-jobs 20]

Prints a table and writes benchmarks/results/backlog.json. To compare with another version of
the product, run the same file against that version's checkout (the simulator's API is the
same): `PYTHONPATH=<checkout> python benchmarks/backlog.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoscaler.market.trace import load_trace
from benchmarks.common import write_result
from simulator.fleet import FleetSimulation
from simulator.fleet_setup import purchase_settings, setup_for_changeover
from simulator.workload import SimJob

TRACES = Path(__file__).parents[1] / "tests" / "data" / "traces" / "v100-week"
LOW = 2
BUDGET_PER_HOUR = 40.0  # about 40 spot p3.2xlarge: the backlog takes hours to drain


def workload(backlog: int, deadline_jobs: int) -> list[SimJob]:
    """The backlog (priority 2, 15 minutes each, no deadline) arrives within ten minutes; an
    hour later the deadline jobs (priority 2 too, 30 minutes each, due two hours after
    arrival)."""
    jobs = [
        SimJob(f"backlog-{n:05d}", n * (1 / 6) / backlog, 0.25, None, priority=LOW)
        for n in range(backlog)
    ]
    jobs += [
        SimJob(f"due-{n:03d}", 1.0 + n * 0.5 / deadline_jobs, 0.5, 2.0, priority=LOW)
        for n in range(deadline_jobs)
    ]
    return jobs


async def simulate(backlog: int, deadline_jobs: int) -> dict[str, Any]:
    trace = load_trace(TRACES)
    setup = setup_for_changeover(0.2)
    budget = replace(purchase_settings(setup), budget_per_hour=BUDGET_PER_HOUR)
    setup = replace(setup, purchase=budget)
    with tempfile.TemporaryDirectory() as folder:
        jobs = workload(backlog, deadline_jobs)
        simulation = FleetSimulation(trace, jobs, setup, 0, Path(folder) / "db")
        try:
            result = await simulation.run()
        finally:
            simulation.store.dispose()
    due = [j for j in simulation.jobs if j.deadline_hours is not None]
    return {
        "deadline_misses": result.misses,
        "deadline_jobs": len(due),
        "finished": result.finished,
        "unfinished_without_deadline": result.unfinished,
        "cost_usd": round(result.cost, 2),
        "cost_per_video_usd": round(result.cost_per_video, 4),
        "spot_hours": round(result.spot_hours, 1),
        "on_demand_hours": round(result.on_demand_hours, 1),
        "start_delay_p95_hours": round(result.start_delay_p95_hours, 3),
        "launches": result.launches,
        "finished_twice": result.finished_twice,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backlog", type=int, default=2000)
    parser.add_argument("--deadline-jobs", type=int, default=20)
    args = parser.parse_args()
    started = time.perf_counter()
    row = asyncio.run(simulate(args.backlog, args.deadline_jobs))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"{args.backlog} backlog jobs, then {args.deadline_jobs} deadline jobs (commit {commit})")
    for key, value in row.items():
        print(f"  {key:<28} {value}")
    write_result(
        "backlog",
        {
            "command": "python -m benchmarks.backlog",
            "commit": commit,
            "machine": platform.node(),
            "seconds": round(time.perf_counter() - started, 1),
            "backlog": args.backlog,
            "deadline_jobs": args.deadline_jobs,
            **row,
        },
    )


if __name__ == "__main__":
    main()
