"""What one policy's run of a fleet workload cost."""

from __future__ import annotations

from dataclasses import dataclass


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
