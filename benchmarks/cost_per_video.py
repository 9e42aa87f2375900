"""What a video costs the fleet, before and after issue 28: the same week of video jobs on the
real V100 trace, run by the product in the fleet simulation (`simulator/fleet.py`), once with
every render in fp32 (how FrameFleet rendered before) and once in the family's own dtype (fp16
on a V100, bf16 where a GPU has it), each step at the step-time model's pace
(`kernel/step_time.py`) for a Wan 2.1 1.3B video at 480x832, 81 frames.

    .venv/bin/python -m benchmarks.cost_per_video [--jobs 60] [--days 3] [--seed 1]

Prints the table and writes benchmarks/results/cost-per-video.json. FrameFleet's purchase
policy runs both; on-demand only is the reference a user would otherwise pay.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from autoscaler.market.trace import load_trace
from benchmarks.common import write_result
from kernel.precision import Dtype
from simulator.fleet import run_fleet
from simulator.fleet_policies import BASELINES, FRAMEFLEET
from simulator.fleet_setup import setup_for_changeover
from simulator.workload import daily_poisson

DEFAULT_TRACE = (
    Path(__file__).parent.parent.parent / "shared" / "traces" / ("aws-v100-availability-2023-02-15")
)


def measure(trace_dir: Path, jobs: int, days: float, seed: int) -> list[dict[str, Any]]:
    logging.basicConfig(level=logging.ERROR)
    trace = load_trace(trace_dir)
    workload = daily_poisson(jobs, days, seed)
    base = setup_for_changeover(0.2)
    on_demand = next(p for p in BASELINES if p.name == "on-demand only")
    rows = []
    for label, precision in (("before: fp32", Dtype.FP32), ("after: fp16 on V100", None)):
        for policy in (FRAMEFLEET, on_demand):
            setup = replace(base, precision=precision)
            result = asyncio.run(run_fleet(trace, workload, setup, 0, policy))
            rows.append(
                {
                    "run": label,
                    **asdict(result),
                    "cost_per_video": result.cost_per_video,
                    "gpu_hours": result.spot_hours + result.on_demand_hours,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trace", type=Path, default=DEFAULT_TRACE)
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--days", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rows = measure(args.trace, args.jobs, args.days, args.seed)
    table = Table(title=f"{args.jobs} videos over {args.days:g} days, seed {args.seed}")
    for column in ("run", "policy", "videos", "GPU-hours", "cost", "$/video", "misses"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["run"],
            row["policy"],
            str(row["finished"]),
            f"{row['gpu_hours']:.1f}",
            f"${row['cost']:.2f}",
            f"${row['cost_per_video']:.2f}",
            str(row["misses"]),
        )
    Console().print(table)
    write_result(
        "cost-per-video", {"jobs": args.jobs, "days": args.days, "seed": args.seed, "rows": rows}
    )
    return rows


if __name__ == "__main__":
    main()
