"""What one policy's run of a fleet workload cost."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FleetResult:
    policy: str
    cost: float
    spot_hours: float
    on_demand_hours: float
    misses: int  # jobs with a deadline that finished late or not at all
    unfinished: int  # jobs without a deadline not finished by the end of the trace
    interruptions: int = 0  # spot instances reclaimed while the simulation ran
    launches: int = 0
    finished_twice: int = 0  # must stay 0: no job completes twice
    # From a job's arrival to its first start on a GPU, over the jobs that started (hours).
    start_delay_mean_hours: float = 0.0
    start_delay_p50_hours: float = 0.0
    start_delay_p95_hours: float = 0.0
    finished: int = 0  # jobs (videos) finished by the end of the trace, late ones too
    # Misses of jobs that on-demand from arrival would have finished in time: must stay 0.
    avoidable_misses: int = 0
    # Jobs the market rule sent to on-demand that started later than a start-up and a round
    # after (simulator/on_demand_answers.py): must stay 0; and the latest by how much.
    late_on_demand: int = 0
    late_on_demand_hours: float = 0.0

    @property
    def cost_per_video(self) -> float:
        return self.cost / self.finished if self.finished else float("inf")


def start_delays(delays: list[float]) -> dict[str, float]:
    """Mean, p50 and p95 of the jobs' arrival-to-first-start delays (hours); none: nothing."""
    if not delays:
        return {}
    p50, p95 = np.percentile(delays, [50, 95])
    return {
        "start_delay_mean_hours": float(np.mean(delays)),
        "start_delay_p50_hours": float(p50),
        "start_delay_p95_hours": float(p95),
    }
