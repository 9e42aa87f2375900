"""What a fleet simulation assumes: the start-up, the workers, notices, the idle timeout, and the
purchase settings the product runs with."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from autoscaler.snapshot import PurchaseSettings
from autoscaler.throughput import WorkShape
from kernel.precision import Dtype
from simulator.fleet_faults import FleetFaults
from simulator.workers import WorkerModel

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


def setup_for_changeover(changeover_hours: float) -> FleetSetup:
    """A start-up of `changeover_hours`: two minutes of model load, the rest boot."""
    worker = WorkerModel()
    return FleetSetup(boot_seconds=max(0.0, changeover_hours * 3600 - worker.model_load_seconds),
                      worker=worker)  # fmt: skip


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
