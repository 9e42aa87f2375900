"""What a simulated worker is assumed to be (`WorkerModel`) and one job attempt on it, as the
simulated workers (simulator/workers.py) track it."""

from __future__ import annotations

from dataclasses import dataclass

from kernel.instance_types import V100_GIB
from kernel.job_spec import JobSpec


@dataclass(frozen=True)
class WorkerModel:
    """What the simulation assumes of a worker (what the agent measures in production)."""

    # At least this long a step (0: the step-time model's pace for the fleet's video).
    step_seconds: float = 0.0
    model_load_seconds: float = 120.0
    # A checkpoint is the denoising state (latents and scheduler state), megabytes: the
    # agent's first guess of its write time is 2 s.
    checkpoint_write_seconds: float = 2.0
    notice_seconds: float = 120.0
    # The agent's `max_checkpoint_interval_s`, set to two minutes here (about 2% of GPU time
    # at 2 s a write): what an interruption without a usable notice may lose.
    max_checkpoint_interval_seconds: float = 120.0
    family: str = "v100"
    vram_gib: float = V100_GIB  # as a V100 reports it
    gpus: int = 1  # per instance; each GPU runs its own job


@dataclass
class Attempt:
    spec: JobSpec
    attempt: int
    gpu: int
    done_seconds: float  # GPU time of denoising done (resumed from the checkpoint's step)
    stall_seconds: float  # model load or a checkpoint write still in progress
    writing_step: int | None = None  # the step a periodic checkpoint in progress saves
    since_checkpoint: float = 0.0
    last_checkpoint: str | None = None
    last_step: int = 0  # of last_checkpoint
    model_load_seconds: float = 0.0  # what this attempt spent loading the model
    # Injected faults (simulator/fleet_faults.py): the denoising second its step hangs at,
    # how long it has hung, the second a corrupting GPU gives it non-finite latents.
    hang_at: float | None = None
    hung_for: float = 0.0
    doom_at: float | None = None
    started_done: float = 0.0
    expected_step: float | None = None

    @property
    def hung(self) -> bool:
        return self.hang_at is not None and self.done_seconds >= self.hang_at - 1e-9
