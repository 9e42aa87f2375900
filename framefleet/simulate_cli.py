"""`framefleet simulate --traces DIR [--jobs FILE]`: replay your own market data and workload
and see what each policy would have paid (FrameFleet's policy against the baselines)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rich.console import Console

from autoscaler.market.trace import Trace, load_trace
from kernel.errors import ConfigurationError
from kernel.step_time import KNOWN_MODELS
from simulator.fleet import run_fleet
from simulator.fleet_policies import BASELINES, FRAMEFLEET
from simulator.fleet_setup import SIMULATED_VIDEO, setup_for_changeover
from simulator.report import chart, fleet_table
from simulator.results import FleetResult
from simulator.workload import SimJob, daily_poisson, load_jobs

TABLE_WIDTH = 130


def add_commands(commands: Any) -> None:
    simulate = commands.add_parser("simulate", help="replay a spot trace and a workload")
    simulate.add_argument("--traces", type=Path, required=True, help="trace folder")
    simulate.add_argument("--jobs", type=Path, help="JSON list of jobs (else a generated week)")
    simulate.add_argument("--count", type=int, default=200, help="generated jobs")
    simulate.add_argument("--days", type=float, default=7.0, help="generated arrival span")
    simulate.add_argument("--seed", type=int, default=1)
    simulate.add_argument("--changeover-hours", type=float, default=0.2)
    simulate.add_argument("--start-hours", type=float, default=0.0, help="offset into the trace")
    simulate.add_argument(
        "--model",
        default=SIMULATED_VIDEO.model,
        choices=sorted(KNOWN_MODELS),
        help="the model every job renders (832x480, 81 frames): its family sets the step time",
    )
    simulate.add_argument("--json", type=Path, help="write the results here")
    simulate.add_argument("--chart", type=Path, help="write a PNG chart here")


def simulate_fleet(
    traces: Path,
    jobs_file: Path | None,
    count: int,
    days: float,
    seed: int,
    changeover_hours: float,
    start_hours: float,
    model: str = SIMULATED_VIDEO.model,
) -> list[FleetResult]:
    trace = load_trace(traces)
    jobs = load_jobs(jobs_file) if jobs_file else daily_poisson(count, days, seed)
    tick_hours = trace.gap.total_seconds() / 3600
    span = max(j.arrival_hours + (j.deadline_hours or j.compute_hours * 4) for j in jobs)
    if (start_hours + span) / tick_hours >= trace.ticks:
        raise ConfigurationError(
            f"the workload needs {span:.0f} h from hour {start_hours:g}; the trace has "
            f"{trace.ticks * tick_hours:.0f} h"
        )
    return compare_fleet(trace, jobs, changeover_hours, start_hours, model)


def compare_fleet(
    trace: Trace,
    jobs: list[SimJob],
    changeover_hours: float,
    start_hours: float = 0.0,
    model: str = SIMULATED_VIDEO.model,
) -> list[FleetResult]:
    """FrameFleet and every baseline on the same jobs and stretch of the trace, each run by the
    product in the same simulator; cheapest first. `model`: what every job renders, its
    family's step time setting the pace."""
    start = round(start_hours * 3600 / trace.gap.total_seconds())
    video = replace(SIMULATED_VIDEO, model=model)
    setup = replace(setup_for_changeover(changeover_hours), video=video)
    results = [
        asyncio.run(run_fleet(trace, jobs, setup, start, policy))
        for policy in (FRAMEFLEET, *BASELINES)
    ]
    return sorted(results, key=lambda r: r.cost)


def run_command(args: argparse.Namespace, console: Console) -> None:
    # The simulated fleet runs the real loops, whose every decision is logged for operators;
    # here the table is the answer.
    for loop in ("orchestrator", "autoscaler"):
        logging.getLogger(loop).setLevel(logging.ERROR)
    console.width = max(console.width, TABLE_WIDTH)
    results = simulate_fleet(
        args.traces,
        args.jobs,
        args.count,
        args.days,
        args.seed,
        args.changeover_hours,
        args.start_hours,
        args.model,
    )
    console.print(fleet_table(f"what the workload would have cost on {args.traces.name}", results))
    if args.json:
        rows = [asdict(r) for r in results]
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
        console.print(f"wrote {args.json}")
    if args.chart:
        console.print(f"wrote {chart({}, results, args.chart)}")
