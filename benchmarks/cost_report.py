"""A finance report of a simulated week on the real V100 traces, made by the product's own
ledger and report code from what the simulated fleet wrote to its store.

    .venv/bin/python -m benchmarks.cost_report [--traces DIR] [--jobs 40] [--days 7]

Writes benchmarks/results/cost-report/ (report.html, costs.csv, the charts, focus.csv) and
benchmarks/results/cost_report.json, and prints the week's table.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoscaler.market.trace import load_trace
from benchmarks.common import RESULTS_DIR, write_result
from orchestrator.costs.focus import focus_rows, write_csv
from orchestrator.costs.money import cents, usd
from orchestrator.costs.periods import Period
from orchestrator.costs.reporting import Reporter, ReportSettings
from simulator.fleet import FleetSimulation
from simulator.fleet_setup import FleetSetup, setup_for_changeover
from simulator.workload import daily_poisson

# The first 8.1 days of ../shared/traces/aws-v100-availability-2023-02-15, all nine zones.
TRACES = Path(__file__).parents[1] / "tests" / "data" / "traces" / "v100-week"
OUT = RESULTS_DIR / "cost-report"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--traces", type=Path, default=TRACES)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=OUT, help="the report's folder")
    parser.add_argument(
        "--silent-share",
        type=float,
        default=FleetSetup().silent_share,
        help="interruptions without a usable notice",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    trace = load_trace(args.traces)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        jobs = daily_poisson(args.jobs, args.days, seed=args.seed)
        setup = replace(setup_for_changeover(0.2), silent_share=args.silent_share)
        simulation = FleetSimulation(trace, jobs, setup, 0, Path(folder) / "jobs.db")
        try:
            result = asyncio.run(simulation.run())
            week = Period("custom", trace.start, simulation.clock.now())
            reporter = Reporter(
                simulation.ledger,
                simulation.store.report_sends,
                None,
                ReportSettings(out_dir=args.out),
                simulation.clock,
            )
            report = reporter.build(week)
            html = reporter.write(report)
            priced = simulation.ledger.period(week.since, week.until)
            rows = list(focus_rows(priced, simulation.ledger.s3_usd(priced.attempts), "simulated"))
            write_csv(rows, args.out / "focus.csv")
        finally:
            simulation.store.dispose()
    seconds = time.perf_counter() - started
    summary = report.summary
    table = Table(title=f"{args.jobs} jobs over {args.days} days, real V100 traces (UTC)")
    table.add_column("")
    table.add_column("USD", justify="right")
    for name, amount in report.category_cents().items():
        table.add_row(name, usd(amount))
    table.add_row("total", usd(summary.total), style="bold")
    table.add_row("on-demand equivalent", usd(summary.on_demand_equivalent_usd))
    table.add_row("saved", usd(summary.savings))
    console = Console()
    console.print(table)
    own = f"${result.cost:,.2f}"
    console.print(f"the simulated EC2's own bill: {own} (compute only; the ledger adds EBS, S3)")
    console.print(
        f"{result.interruptions} spot interruptions, {result.launches} launches, "
        f"{len(rows)} FOCUS rows; report at {html}; {seconds:.0f} s"
    )
    if args.out != OUT:
        return  # a check's run (make focus-validate), not the benchmark's
    path = write_result(
        "cost_report",
        {
            "jobs": args.jobs,
            "days": args.days,
            "seed": args.seed,
            "silent_share": args.silent_share,
            "total_usd": str(cents(summary.total)),
            "categories_usd": {k: str(v) for k, v in report.category_cents().items()},
            "on_demand_equivalent_usd": str(cents(summary.on_demand_equivalent_usd)),
            "saved_usd": str(cents(summary.savings)),
            "simulator_compute_usd": round(result.cost, 2),
            "interruptions": result.interruptions,
            "focus_rows": len(rows),
            "instances": summary.instances,
            "seconds": round(seconds, 1),
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
