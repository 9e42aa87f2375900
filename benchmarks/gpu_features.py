"""Cost per video with GPU sharing, spanning and stages, each on and off (issue 35): one mixed
workload (480p renders of the 1.3B model, short previews, 720p renders of the 14B model due
one to three hours after they arrive) run by the GPU fleet simulation (`simulator/gpu_fleet.py`)
in all eight configurations, beside the lower bound no configuration can beat. Then the
throughput of two and four jobs sharing one GPU against one at a time, at the sharing pace the
scheduler plans with (`orchestrator/scheduling/gpu_sharing.py`).

    .venv/bin/python -m benchmarks.gpu_features [--jobs 600] [--hours 24] [--seed 1]

Prints the tables and writes benchmarks/results/gpu-features.json. Every number comes from the
step-time and stage-cost models (`kernel/step_time.py`, `kernel/stage_cost.py`) at on-demand
list prices; a GPU run (`benchmarks/gpu_lease.sh`) checks the sharing pace and the spanned step.
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from autoscaler.render_plan import plan_render
from benchmarks.common import write_result
from kernel.instance_types import L40S_GIB
from kernel.model_memory import resolution_class
from kernel.stage_cost import denoise_need_gib
from kernel.step_time import compute_dtype
from orchestrator.scheduling.gpu_sharing import MEMORY_MARGIN_GIB, SharingPace, Tenant
from simulator.gpu_fleet import Features, GpuFleet, lower_bound
from simulator.gpu_workload import KINDS, list_price_offers, mixed_workload

SHARING_FAMILY, SHARING_VRAM_GIB = "l40s", L40S_GIB  # as an L40S reports it


def fleet_rows(jobs: int, hours: float, seed: int) -> list[dict[str, Any]]:
    offers = list_price_offers()
    workload = mixed_workload(jobs, hours, seed)
    rows = []
    for sharing, spanning, stages in itertools.product((False, True), repeat=3):
        outcome = GpuFleet(offers, Features(sharing, spanning, stages)).run(workload)
        rows.append({**asdict(outcome), "cost_per_video": outcome.cost_per_video})
    bound = lower_bound(workload, offers)
    rows.append(
        {
            "features": "lower bound",
            "videos": len(workload),
            "cost": bound,
            "cost_per_video": bound / len(workload),
        }
    )
    return rows


def sharing_rows() -> list[dict[str, Any]]:
    """Videos per hour of one kind on one GPU: one at a time, and 2 or 4 at once where their
    memory fits (each job's own process and text encoder, or without it as a denoising stage)."""
    offers = list_price_offers()
    pace = SharingPace()
    rows = []
    for kind, video in KINDS.items():
        plan = plan_render(video, offers, may_span=False, may_split=False)
        if plan is None or plan.stages[0].family != SHARING_FAMILY:
            continue
        seconds = plan.stages[0].seconds
        tenant = Tenant(kind, 0.0, seconds / video.steps, video.steps, None, video.tokens)
        alone = 3600 / seconds
        for jobs in (1, 2, 4):
            shared = pace.shared_step(tenant, [tenant] * jobs)
            per_hour = 3600 / (shared * video.steps) * jobs
            dtype = compute_dtype(SHARING_FAMILY)
            fits = {
                whole: jobs * denoise_need_gib(video, dtype, with_text_encoder=whole)
                <= SHARING_VRAM_GIB - MEMORY_MARGIN_GIB
                for whole in (True, False)
            }
            rows.append(
                {
                    "kind": kind,
                    "resolution": resolution_class(video.width, video.height),
                    "tokens": video.tokens,
                    "jobs": jobs,
                    "videos_per_hour": per_hour,
                    "speedup": per_hour / alone,
                    "fits_whole": fits[True],
                    "fits_as_denoise_stage": fits[False],
                }
            )
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rows = fleet_rows(args.jobs, args.hours, args.seed)
    table = Table(title=f"{args.jobs} videos over {args.hours:g} h, seed {args.seed}, on demand")
    columns = (
        "features",
        "videos",
        "cost",
        "$/video",
        "GPU-h bought",
        "GPU-h busy",
        "misses",
        "split",
        "spanned",
    )
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["features"],
            str(row["videos"]),
            f"${row['cost']:.2f}",
            f"${row['cost_per_video']:.3f}",
            f"{row.get('gpu_hours', 0):.1f}",
            f"{row.get('busy_gpu_hours', 0):.1f}",
            str(row.get("misses", "")),
            str(row.get("split_jobs", "")),
            str(row.get("spanned_jobs", "")),
        )
    console = Console(width=120)
    console.print(table)
    shared = sharing_rows()
    sharing = Table(title=f"Jobs sharing one {SHARING_FAMILY} ({SHARING_VRAM_GIB:.4g} GiB)")
    for column in ("kind", "tokens", "jobs", "videos/h", "x one at a time", "fits", "fits staged"):
        sharing.add_column(column)
    for row in shared:
        sharing.add_row(
            row["kind"],
            str(row["tokens"]),
            str(row["jobs"]),
            f"{row['videos_per_hour']:.1f}",
            f"{row['speedup']:.2f}",
            str(row["fits_whole"]),
            str(row["fits_as_denoise_stage"]),
        )
    console.print(sharing)
    result = {
        "jobs": args.jobs,
        "hours": args.hours,
        "seed": args.seed,
        "fleet": rows,
        "sharing": shared,
    }
    write_result("gpu-features", result)
    return result


if __name__ == "__main__":
    main()
