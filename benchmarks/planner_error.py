"""The spot planner's own error, which its guard must exceed before it overrules the simple
rule (issue 47; `autoscaler/planned_market.py: MIN_SAVING`).

    .venv/bin/python -m benchmarks.planner_error [--jobs 60] [--weeks 8] [--workers 2]

On the shipped V100 trace as probed (195 s) and resampled to 60 s and 600 s, shifted over
`--weeks` weeks (4 days apart, after a week of history): for each fleet job (section (b)'s
workload) whose simple rule takes spot at arrival, the saving the planner claims against the
simple rule's moves and the saving its moves realize on what the trace did next
(`simulator/planner_error.py`). Prints, per variant and in all, how the claims and the
realized savings compare, and for each threshold the jobs claimed above it and what they
realized; writes benchmarks/results/planner_error.json.
"""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict

import numpy as np
from rich.console import Console
from rich.table import Table

from autoscaler.market.trace import Trace, load_trace
from autoscaler.planned_market import MIN_SAVING
from benchmarks.common import write_result
from benchmarks.cost_markets import AVAILABILITY
from simulator.fleet_setup import purchase_settings, setup_for_changeover
from simulator.market_families import resampled
from simulator.planner_error import Claim, claims
from simulator.workload import daily_poisson

VARIANTS = {"195 s (as probed)": None, "resampled to 60 s": 60.0, "resampled to 600 s": 600.0}
THRESHOLDS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2)


def _trace(probe: float | None) -> Trace:
    trace = load_trace(AVAILABILITY)
    return trace if probe is None else resampled(trace, probe)


def _week(task: tuple[str, int, int]) -> list[Claim]:
    variant, week, jobs = task
    trace = _trace(VARIANTS[variant])
    start = round((7 + 4 * (week - 1)) * 86_400 / trace.gap.total_seconds())
    settings = purchase_settings(setup_for_changeover(0.2), ("p3.2xlarge",))
    return claims(trace, daily_poisson(jobs, 7, week), start, settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=60, help="jobs a week")
    parser.add_argument("--weeks", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    tasks = [(v, w, args.jobs) for v in VARIANTS for w in range(1, args.weeks + 1)]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        found = dict(zip(tasks, pool.map(_week, tasks), strict=True))
    by_variant = {
        v: [c for (name, _, _), cs in found.items() if name == v for c in cs] for v in VARIANTS
    }
    by_variant["all"] = [c for cs in found.values() for c in cs]
    console = Console(width=140)
    summary = Table(title="The planner's claimed saving against what its moves realized")
    for column in ("trace", "jobs", "claimed mean", "realized mean", "over-claim p50 / p90 / p95"):
        summary.add_column(column, justify="left" if column == "trace" else "right")
    rows: dict[str, object] = {}
    for name, cs in by_variant.items():
        claimed, realized = _arrays(cs)
        errors = claimed - realized
        p50, p90, p95 = np.percentile(errors, [50, 90, 95]) if cs else (0.0, 0.0, 0.0)
        summary.add_row(
            name,
            str(len(cs)),
            f"{claimed.mean() if cs else 0:.2%}",
            f"{realized.mean() if cs else 0:.2%}",
            f"{p50:+.2%} / {p90:+.2%} / {p95:+.2%}",
        )
        rows[name] = {"claims": [asdict(c) for c in cs], "over_claim_p90": float(p90)}
    console.print(summary)
    claimed, realized = _arrays(by_variant["all"])
    above = Table(
        title=f"Jobs the planner claims to save more than a threshold on (guard: {MIN_SAVING:.0%})"
    )
    for column in ("threshold", "jobs", "realized mean", "realized < 0"):
        above.add_column(column, justify="right")
    for threshold in THRESHOLDS:
        chosen = claimed > threshold
        mean = f"{realized[chosen].mean():+.2%}" if chosen.any() else "-"
        above.add_row(
            f"{threshold:.0%}", str(int(chosen.sum())), mean, str(int((realized[chosen] < 0).sum()))
        )
    console.print(above)
    console.print(f"wrote {write_result('planner_error', rows)}")


def _arrays(cs: list[Claim]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([c.claimed for c in cs]), np.array([c.realized for c in cs])


if __name__ == "__main__":
    main()
