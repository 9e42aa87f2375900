"""What warm models save on a realistic mix: the product's scheduler (`schedule`, the pure
policy the control plane runs) places a day of jobs of three models on a fleet of GPUs, and each
job pays a model load unless its GPU already holds its model.

    .venv/bin/python -m benchmarks.warm_models [--gpus 16] [--jobs 600] [--hours 24] [--seed 1]

Three ways to run the same jobs:
- `reload every job`: a render process per job (FrameFleet before issue 28);
- `warm, placement blind`: the process keeps its model, but the scheduler does not know which
  GPU holds what (a job of the held model gets the load-free start only by chance);
- `warm + cache-aware`: heartbeats say which model each free GPU holds, and the scheduler
  gives a job, among GPUs equally good for it, one that holds its model.

The mix (an assumption, stated): 60% Wan 2.1 1.3B, 30% 14B, 10% a 1.3B fine-tune of another
name; 480x832 or 1280x720, 33 or 81 frames; 30 or 50 steps; priorities 0-9; Poisson arrivals.
Steps take the step-time model's pace (`kernel/step_time.py`) on an L40S in bf16. A load reads
the pipeline from the instance's disk at 1.5 GB/s (1.3B: 14 GB with the UMT5-XXL text encoder
in bf16, 14B: 40 GB) and moves it to the GPU; the real figure is benchmarks/gpu_step.py's.
Prints a table and writes benchmarks/results/warm-models.json.
"""

from __future__ import annotations

import argparse
import heapq
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks.common import write_result
from kernel.step_time import architecture_of, step_seconds
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.snapshots import GpuSlot, PendingJob, WorkerSnapshot

START = datetime(2026, 12, 1, tzinfo=UTC)
FAMILY = "l40s"
MODELS = (  # (name, share of jobs, pipeline GB read at a load)
    ("wan/wan2.1-t2v-1.3b", 0.6, 14.0),
    ("wan/wan2.1-t2v-14b", 0.3, 40.0),
    ("acme/anime-1.3b", 0.1, 14.0),
)
DISK_GB_PER_S = 1.5
GPU_SETUP_S = 5.0  # CUDA context, moving the weights, the smoke step


@dataclass(frozen=True)
class Job:
    job_id: str
    model: str
    arrival_s: float
    work_s: float  # its denoising at the step-time model's pace
    priority: int


def workload(jobs: int, hours: float, seed: int) -> list[Job]:
    rng = np.random.default_rng(seed)
    names = [m[0] for m in MODELS]
    shares = np.array([m[1] for m in MODELS])
    arrivals = np.sort(rng.uniform(0, hours * 3600, jobs))
    made = []
    for number, arrival in enumerate(arrivals):
        model = str(rng.choice(names, p=shares))
        height, width = [(480, 832), (720, 1280)][int(rng.integers(2))]
        frames = int(rng.choice([33, 81]))
        steps = int(rng.choice([30, 50]))
        pace = step_seconds(architecture_of(model), width, height, frames, FAMILY)
        made.append(
            Job(f"j{number:04d}", model, float(arrival), steps * pace, int(rng.integers(10)))
        )
    return made


def load_seconds(model: str) -> float:
    gigabytes = next(size for name, _, size in MODELS if name == model)
    return gigabytes / DISK_GB_PER_S + GPU_SETUP_S


def run(jobs: list[Job], gpus: int, reuse: bool, aware: bool) -> dict[str, Any]:
    """An event loop: at each arrival or finish, the scheduler places what it can."""
    free_at: dict[str, float] = {f"w{i:02d}": 0.0 for i in range(gpus)}
    holds: dict[str, str | None] = dict.fromkeys(free_at)
    busy: dict[str, float] = {}
    queue: list[Job] = []
    events = [(job.arrival_s, 0, job.job_id) for job in jobs]
    heapq.heapify(events)
    by_id = {job.job_id: job for job in jobs}
    loads, load_s, waited_s, busy_s = 0, 0.0, 0.0, 0.0
    while events:
        now, kind, name = heapq.heappop(events)
        if kind == 0:
            queue.append(by_id[name])
        else:
            busy.pop(name, None)
        while events and events[0][0] == now:  # everything at this moment, then one decision
            _, kind, name = heapq.heappop(events)
            if kind == 0:
                queue.append(by_id[name])
            else:
                busy.pop(name, None)
        moment = START + timedelta(seconds=now)
        workers = [
            WorkerSnapshot(
                worker,
                (GpuSlot(worker, 0, FAMILY, 48, warm_model=holds[worker] if aware else None),),
            )
            for worker in free_at
            if worker not in busy
        ]
        pending = [
            replace(
                PendingJob(j.job_id, j.priority, None, START + timedelta(seconds=j.arrival_s), 16),
                model=j.model,
            )
            for j in queue
        ]
        placed = schedule(pending, workers, moment).assignments
        for assignment in placed:
            job = by_id[assignment.job_id]
            queue.remove(job)
            worker = assignment.worker_id
            cold = not reuse or holds[worker] != job.model
            start_up = load_seconds(job.model) if cold else 0.0
            loads += cold
            load_s += start_up
            waited_s += now - job.arrival_s
            busy_s += start_up + job.work_s
            holds[worker] = job.model if reuse else None
            busy[worker] = now + start_up + job.work_s
            heapq.heappush(events, (busy[worker], 1, worker))
    return {
        "loads": loads,
        "load_gpu_hours": load_s / 3600,
        "busy_gpu_hours": busy_s / 3600,
        "load_share": load_s / busy_s if busy_s else 0.0,
        "mean_wait_minutes": waited_s / len(jobs) / 60,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gpus", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    jobs = workload(args.jobs, args.hours, args.seed)
    runs = {
        "reload every job": run(jobs, args.gpus, reuse=False, aware=False),
        "warm, placement blind": run(jobs, args.gpus, reuse=True, aware=False),
        "warm + cache-aware": run(jobs, args.gpus, reuse=True, aware=True),
    }
    table = Table(title=f"{args.jobs} jobs over {args.hours:g} h on {args.gpus} L40S GPUs")
    for column in ("run", "model loads", "load GPU-hours", "share of GPU time", "mean wait"):
        table.add_column(column)
    for name, row in runs.items():
        hours, share = f"{row['load_gpu_hours']:.2f}", f"{row['load_share']:.1%}"
        wait = f"{row['mean_wait_minutes']:.1f} min"
        table.add_row(name, str(row["loads"]), hours, share, wait)
    Console().print(table)
    result = {
        "gpus": args.gpus,
        "jobs": args.jobs,
        "hours": args.hours,
        "seed": args.seed,
        "runs": runs,
    }
    write_result("warm-models", result)
    return result


if __name__ == "__main__":
    main()
