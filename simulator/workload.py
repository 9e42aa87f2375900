"""Workloads for the fleet setting: Poisson arrivals with a daily pattern, bursts, or a JSON
list of jobs. Deadlines are given as a job fraction (compute / time to deadline)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from autoscaler.throughput import WorkShape
from kernel.errors import ConfigurationError
from kernel.job_spec import JobSpec
from simulator.worker_model import WorkerModel


@dataclass(frozen=True)
class SimJob:
    job_id: str
    arrival_hours: float  # from the start of the simulation
    compute_hours: float  # on the trace's GPU
    deadline_hours: float | None  # after arrival; None: none
    priority: int = 5


def daily_poisson(count: int, days: float, seed: int, burst_share: float = 0.2) -> list[SimJob]:
    """`count` jobs over `days`: most follow a daily pattern (busy afternoons, quiet nights),
    `burst_share` of them arrive in a few bursts. Compute 0.5-8 h (log-uniform); 30% have no
    deadline, the rest a job fraction between 0.3 and 0.9 (and at least half an hour of slack);
    priorities 0-9."""
    rng = np.random.default_rng(seed)
    hours = days * 24
    arrivals: list[float] = []
    bursts = rng.uniform(0, hours - 2, 3)
    while len(arrivals) < count * (1 - burst_share):
        at = float(rng.uniform(0, hours))
        if rng.random() < 0.5 + 0.45 * math.sin(2 * math.pi * ((at % 24) - 9) / 24):
            arrivals.append(at)
    while len(arrivals) < count:
        arrivals.append(float(rng.choice(bursts) + rng.uniform(0, 1)))
    jobs = []
    for index, at in enumerate(sorted(arrivals)):
        compute = float(math.exp(rng.uniform(math.log(0.5), math.log(8.0))))
        fraction = float(rng.uniform(0.3, 0.9))
        # At least half an hour beyond the compute: a start-up must fit.
        deadline = None if rng.random() < 0.3 else max(compute / fraction, compute + 0.5)
        jobs.append(SimJob(f"job-{index:04d}", at, compute, deadline, int(rng.integers(0, 10))))
    return jobs


def load_jobs(path: Path) -> list[SimJob]:
    try:
        entries = json.loads(path.read_text())
        jobs = [
            SimJob(
                str(e["job_id"]),
                float(e["arrival_hours"]),
                float(e["compute_hours"]),
                None if e.get("deadline_hours") is None else float(e["deadline_hours"]),
                int(e.get("priority", 5)),
            )
            for e in entries
        ]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigurationError(f"cannot read jobs from {path}: {error}") from None
    for job in jobs:
        if job.compute_hours <= 0 or job.arrival_hours < 0:
            raise ConfigurationError(f"{path}: job {job.job_id}: compute and arrival must be >= 0")
        if job.deadline_hours is not None and job.deadline_hours < job.compute_hours:
            raise ConfigurationError(f"{path}: job {job.job_id}: deadline shorter than its compute")
    return jobs


def dump_jobs(jobs: list[SimJob], path: Path) -> None:
    path.write_text(json.dumps([asdict(job) for job in jobs], indent=1) + "\n")


MAX_STEPS = 1000  # a job spec's limit
TEAMS = ("research", "marketing", "studio")  # cost tags, so the ledger has teams to report


def job_spec(
    job: SimJob,
    step_seconds: float,
    video: WorkShape,
    worker: WorkerModel,
    deadline: datetime | None,
) -> JobSpec:
    """The job message a simulated producer sends: a video of the fleet's shape whose steps
    take the job's compute hours at `step_seconds` a step."""
    steps = max(1, round(job.compute_hours * 3600 / step_seconds))
    return JobSpec.model_validate(
        {
            "schema": "framefleet.job/v1",
            "job_id": job.job_id,
            "model": video.model,
            "prompt": "simulated",
            "width": video.width,
            "height": video.height,
            "num_frames": video.frames,
            "steps": min(MAX_STEPS, steps),
            "seed": 0,
            "priority": job.priority,
            "deadline": deadline,
            "gpu": {"min_vram_gib": worker.vram_gib, "families": [worker.family]},
            "output": "s3://simulated-outputs/videos/",
            "tags": {"team": TEAMS[job.priority % len(TEAMS)], "project": "simulated"},
        }
    )
