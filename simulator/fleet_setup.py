"""What a fleet simulation assumes: the start-up, the workers, notices, the idle timeout, and the
purchase settings the product runs with."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import timedelta

from autoscaler.snapshot import PurchaseSettings
from autoscaler.throughput import WorkShape, step_time_prior
from kernel.precision import Dtype
from kernel.step_time import architecture_of, step_seconds
from simulator.fleet_faults import FleetFaults
from simulator.worker_model import WorkerModel

# Wan 2.1 1.3B at 480x832, 81 frames: the shape most of today's text-to-video jobs have.
SIMULATED_VIDEO = WorkShape("wan/wan2.1-t2v-1.3b", 832, 480, 81)


@dataclass(frozen=True)
class FleetSetup:
    boot_seconds: float = 600.0  # launch to agent ready
    worker: WorkerModel = field(default_factory=WorkerModel)
    silent_share: float = 0.1  # interruptions without a usable notice
    # About one autoscaler round: an idle GPU costs more kept warm than a changeover saves
    # at this workload's arrival rate (measured: 10 minutes cost 12% more, and a miss).
    idle_timeout: timedelta = timedelta(minutes=3)
    purchase: PurchaseSettings | None = None  # default: `purchase_settings(self)`
    # Also buy the trace's family's multi-GPU types (simulator/companions.py).
    multi_gpu: bool = True
    prewarm_wait_value_per_job_hour: float = 0.0  # the product's setting (0: off)
    faults: FleetFaults | None = None  # injected into the workers (none: healthy ones)
    # Every job is a video of this shape; its steps keep the step-time model's pace.
    video: WorkShape = field(default_factory=lambda: SIMULATED_VIDEO)
    # The dtype the workers render in; None: the family's own (bf16, fp16 on T4 and V100).
    precision: Dtype | None = None


def fleet_pace(setup: FleetSetup, family: str, least_step_seconds: float) -> tuple[float, float]:
    """(The step a job's size is counted in, the step the workers take.) A job is a video of
    `setup.video`'s shape whose denoising takes its `compute_hours` in the family's own dtype
    (bf16, fp16 where there is none), at the step-time model's pace (a step lengthened only
    where a job would pass the spec's step limit: `least_step_seconds`). Rendered in another
    precision (fp32: how FrameFleet rendered before issue 28), each step of the same video
    takes the step-time model's ratio longer."""
    video = setup.video
    modern = step_time_prior()(video, family)
    counted = max(setup.worker.step_seconds, modern, math.ceil(least_step_seconds))
    if setup.precision is None:
        return counted, counted
    arch = architecture_of(video.model)
    paced = step_seconds(arch, video.width, video.height, video.frames, family, setup.precision)
    return counted, counted * paced / modern


def setup_for_changeover(changeover_hours: float) -> FleetSetup:
    """A start-up of `changeover_hours`: two minutes of model load, the rest boot."""
    worker = WorkerModel()
    return FleetSetup(
        boot_seconds=max(0.0, changeover_hours * 3600 - worker.model_load_seconds), worker=worker
    )


def purchase_settings(
    setup: FleetSetup, instance_types: tuple[str, ...] = ("p3.2xlarge",)
) -> PurchaseSettings:
    if setup.purchase is not None:
        return setup.purchase
    return PurchaseSettings(
        candidate_types=instance_types,
        budget_per_hour=1e9,
        budget_per_day=1e9,
        boot_seconds=setup.boot_seconds,
        model_load_seconds=setup.worker.model_load_seconds,
        # What an interruption may lose at most: a notice leaves time to checkpoint, but one
        # without a usable notice loses what the worker did since its last periodic one.
        checkpoint_interval_seconds=setup.worker.max_checkpoint_interval_seconds,
        idle_timeout=setup.idle_timeout,
        max_launches=10_000,
        prewarm_wait_value_per_job_hour=setup.prewarm_wait_value_per_job_hour,
    )
