"""Faults the trace-driven fleet simulation injects into its simulated workers, and the GPU
time they waste, so the real control plane's stall watch and quarantine are measured on the
whole product: hung steps (per job-hour) and sick GPUs (per GPU-week from the instance's
launch: half of them `slow_factor` times slower, half corrupting with uncorrected ECC errors in
their heartbeats and non-finite latents in every job).

With detection on, a simulated worker runs the agent's watchdog (`kernel.stall`) and the
control plane's watch is on; off, neither is. Each worker draws its faults from a generator
seeded by the run's seed and its instance id, so a run repeats exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kernel.stall import StallRule

WEEK = timedelta(days=7)


@dataclass(frozen=True)
class FleetFaults:
    hangs_per_job_hour: float = 1 / 1000
    sick_gpus_per_gpu_week: float = 0.01
    slow_factor: float = 4.0
    detection: bool = True
    seed: int = 0
    watchdog: StallRule = field(default_factory=StallRule)


@dataclass
class FaultWaste:
    """GPU seconds that produced nothing that survives, by why (this fleet simulation's and
    the fault study's)."""

    stalled: float = 0.0  # held by a hung step
    lost_work: float = 0.0  # done since the last checkpoint of an attempt a fault ended
    slow: float = 0.0  # the extra time of steps on a slow GPU
    doomed: float = 0.0  # attempts that end in a job fault (corrupting GPU, out of memory)
    retry_loads: float = 0.0  # model loads of attempts that follow a fault
    stall_kills: int = 0  # by the worker's watchdog (a count, not waste)

    def categories(self) -> dict[str, float]:
        return {
            "stalled": self.stalled,
            "lost_work": self.lost_work,
            "slow": self.slow,
            "doomed": self.doomed,
            "retry_loads": self.retry_loads,
        }

    def total(self) -> float:
        return sum(self.categories().values())


@dataclass
class WorkerFaults:
    """One simulated worker's faults (its GPU 0 is the one that may be sick)."""

    rng: random.Random
    hang_chance_per_second: float  # of denoising
    slow_from: datetime | None
    corrupt_from: datetime | None
    slow_factor: float
    watchdog: StallRule | None
    waste: FaultWaste

    def speed(self, gpu: int, at: datetime) -> float:
        """Denoising seconds done per second on this GPU now."""
        slow = gpu == 0 and self.slow_from is not None and at >= self.slow_from
        return 1.0 / self.slow_factor if slow else 1.0

    def corrupt(self, gpu: int, at: datetime) -> bool:
        return gpu == 0 and self.corrupt_from is not None and at >= self.corrupt_from

    def hang_after(self, denoise_seconds: float) -> float | None:
        """Seconds of denoising into an attempt at which its step hangs, or None."""
        if self.hang_chance_per_second <= 0:
            return None
        at = self.rng.expovariate(self.hang_chance_per_second)
        return at if at < denoise_seconds else None


def faults_for(
    instance_id: str, launched_at: datetime, faults: FleetFaults, waste: FaultWaste
) -> WorkerFaults:
    rng = random.Random(f"{faults.seed}:{instance_id}")
    slow_from = corrupt_from = None
    if faults.sick_gpus_per_gpu_week > 0:
        onset = launched_at + WEEK * rng.expovariate(faults.sick_gpus_per_gpu_week)
        if rng.random() < 0.5:
            slow_from = onset
        else:
            corrupt_from = onset
    return WorkerFaults(
        rng=rng,
        hang_chance_per_second=faults.hangs_per_job_hour / 3600.0,
        slow_from=slow_from,
        corrupt_from=corrupt_from,
        slow_factor=faults.slow_factor,
        watchdog=faults.watchdog if faults.detection else None,
        waste=waste,
    )
