"""Wasted GPU-hours from injected faults over a simulated week, with detection (the stall
watchdog and the GPU quarantine) off, with a per-attempt timeout (the baseline a user would
otherwise set), and on; then the same week without faults, for the false positives. Each on an
on-demand fleet and on a spot fleet, each checkpointing at the product's interval for its market.

    python -m benchmarks.fault_waste [--gpus 256] [--seeds 3] [--fleet]

Prints a table and writes benchmarks/results/fault_waste.json. `--fleet` also runs the
trace-driven fleet simulation (the real control plane, the autoscaler, a week of the real V100
traces) with faults injected into its workers, detection on and off.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoscaler.market.trace import load_trace
from benchmarks.common import write_result
from kernel.market import Market
from simulator.fault_study import WEEK_S, Detection, FaultRates, FleetShape, StudyResult, study
from simulator.fleet import FleetSimulation
from simulator.fleet_faults import FleetFaults
from simulator.fleet_setup import setup_for_changeover
from simulator.workload import daily_poisson

HOUR = 3600.0


def _row(results: list[StudyResult], shape: FleetShape) -> dict[str, Any]:
    seeds = len(results)
    categories = [f.name for f in dataclasses.fields(results[0].waste_s)]
    by_category = {
        c: sum(getattr(r.waste_s, c) for r in results) / seeds / HOUR for c in categories
    }
    total = sum(by_category.values())
    return {
        "wasted_gpu_hours": round(total, 1),
        "wasted_usd": round(total * shape.usd_per_gpu_hour, 2),
        "by_category_gpu_hours": {c: round(v, 1) for c, v in by_category.items()},
        "jobs_done": sum(r.jobs_done for r in results) / seeds,
        "jobs_failed": sum(r.jobs_failed for r in results) / seeds,
        "stall_kills": sum(r.stall_kills for r in results) / seeds,
        "quarantines": sum(r.quarantines for r in results) / seeds,
        "healthy_jobs_killed": sum(r.healthy_jobs_killed for r in results),
        "healthy_gpus_quarantined": sum(r.healthy_gpus_quarantined for r in results),
        "hangs": sum(r.hangs for r in results) / seeds,
        "sick_gpus": sum(r.sick_gpus for r in results) / seeds,
    }


FLEET_FAULTS = FleetFaults(hangs_per_job_hour=0.05, sick_gpus_per_gpu_week=1.0)
TRACES = Path(__file__).parents[1] / "tests" / "data" / "traces" / "v100-week"


async def _fleet_run(faults: FleetFaults, jobs_per_day: int) -> dict[str, Any]:
    trace = load_trace(TRACES)
    setup = replace(setup_for_changeover(0.2), faults=faults)
    with tempfile.TemporaryDirectory() as folder:
        simulation = FleetSimulation(
            trace, daily_poisson(jobs_per_day, 7, seed=7), setup, 0, Path(folder) / "db"
        )
        try:
            result = await simulation.run()
            kinds = [f.kind.value for f in simulation.store.faults.gpu_faults()]
        finally:
            simulation.store.dispose()
    waste = simulation.waste
    hours = {k: round(v / HOUR, 2) for k, v in waste.categories().items()}
    return {
        "wasted_gpu_hours": round(waste.total() / HOUR, 2),
        "by_category_gpu_hours": hours,
        "stall_kills": waste.stall_kills,
        "quarantines": kinds.count("quarantine"),
        "cost_usd": round(result.cost, 2),
        "deadline_misses": result.misses,
        "unfinished": result.unfinished,
        "finished_twice": result.finished_twice,
    }


def fleet_table(jobs_per_day: int) -> dict[str, dict[str, Any]]:
    runs = {
        "fleet, faults, detection on": FLEET_FAULTS,
        "fleet, faults, detection off": replace(FLEET_FAULTS, detection=False),
    }
    table = {name: asyncio.run(_fleet_run(faults, jobs_per_day)) for name, faults in runs.items()}
    print(
        f"fleet simulation: a week of the V100 traces, {jobs_per_day} jobs a day, "
        f"rates {dataclasses.asdict(FLEET_FAULTS)}"
    )
    for name, row in table.items():
        print(
            f"{name:<30} {row['wasted_gpu_hours']:>10.2f} GPU-h  kills {row['stall_kills']:>3}"
            f"  quarantines {row['quarantines']:>2}  ${row['cost_usd']:.2f}  "
            f"misses {row['deadline_misses']}"
        )
    return table


def _market_table(shape: FleetShape, rates: FaultRates, seeds: int) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for name, injected in (("faults", rates), ("no faults", FaultRates.none())):
        for detection in Detection:
            runs = [study(injected, shape, detection, seed) for seed in range(seeds)]
            table[f"{name}, detection {detection.value}"] = _row(runs, shape)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=256)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--fleet", action="store_true")
    parser.add_argument("--fleet-jobs-per-day", type=int, default=100)
    args = parser.parse_args()
    rates = FaultRates()
    started = time.perf_counter()
    table: dict[str, dict[str, Any]] = {}
    cuts: dict[str, dict[str, float]] = {}
    for market in (Market.ON_DEMAND, Market.SPOT):
        shape = FleetShape(gpus=args.gpus, market=market)
        rows = _market_table(shape, rates, args.seeds)
        table |= {f"{market.value}, {name}": row for name, row in rows.items()}
        off = rows["faults, detection off"]["wasted_gpu_hours"]
        timeout = rows["faults, detection timeout"]["wasted_gpu_hours"]
        on = rows["faults, detection on"]["wasted_gpu_hours"]
        cuts[market.value] = {
            "checkpoint_every_s": round(shape.checkpoint_every_s, 1),
            "cut_vs_off": round(1 - on / off, 4),
            "cut_vs_timeout": round(1 - on / timeout, 4),
        }
    print(f"{args.gpus} GPUs, {WEEK_S / 86400:.0f} days, {args.seeds} seeds (means per week)")
    print(f"rates: {dataclasses.asdict(rates)}")
    print(
        f"{'run':<40} {'wasted GPU-h':>12} {'USD':>10} {'kills':>6} {'quar.':>6} "
        f"{'healthy killed':>14} {'healthy quar.':>13}"
    )
    for key, row in table.items():
        print(
            f"{key:<40} {row['wasted_gpu_hours']:>12.1f} {row['wasted_usd']:>10.2f} "
            f"{row['stall_kills']:>6.1f} {row['quarantines']:>6.1f} "
            f"{row['healthy_jobs_killed']:>14d} "
            f"{row['healthy_gpus_quarantined']:>13d}"
        )
    for market_name, cut in cuts.items():
        print(
            f"{market_name}: checkpoints every {cut['checkpoint_every_s']:.0f} s; waste cut "
            f"{cut['cut_vs_off']:.1%} against detection off, {cut['cut_vs_timeout']:.1%} "
            f"against a {FleetShape().timeout_factor:.0f}x timeout"
        )
    fleet = fleet_table(args.fleet_jobs_per_day) if args.fleet else {}
    write_result(
        "fault_waste",
        {
            "command": "python -m benchmarks.fault_waste",
            "gpus": args.gpus,
            "seeds": args.seeds,
            "machine": platform.node(),
            "seconds": round(time.perf_counter() - started, 1),
            "rates": dataclasses.asdict(rates),
            "shape": dataclasses.asdict(FleetShape(gpus=args.gpus)),
            "runs": table,
            "by_market": cuts,
            "fleet": fleet,
            "fleet_faults": dataclasses.asdict(FLEET_FAULTS) if fleet else None,
        },
    )


if __name__ == "__main__":
    main()
