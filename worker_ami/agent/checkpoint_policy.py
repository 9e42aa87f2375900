"""When to checkpoint (pure): the Young/Daly interval tau = sqrt(2 * delta * M)."""

from __future__ import annotations

import math
from dataclasses import dataclass


def young_daly_interval(write_seconds: float, mean_time_between_interruptions: float) -> float:
    """delta: time to write one checkpoint; M: mean time between interruptions of the pool.
    An infinite M (on-demand) gives an infinite interval: checkpoint on notice only."""
    if write_seconds <= 0 or mean_time_between_interruptions <= 0:
        raise ValueError("write time and mean time between interruptions must be positive")
    return math.sqrt(2.0 * write_seconds * mean_time_between_interruptions)


def checkpoint_interval(
    write_seconds: float, mean_time_between_interruptions: float, ceiling: float = math.inf
) -> float:
    """The periodic interval: Young/Daly, but never longer than `ceiling` on spot, because
    the autoscaler's deadline rule counts on no interruption losing more work than that (a
    notice usually leaves time for a checkpoint; one without a usable notice does not)."""
    if math.isinf(mean_time_between_interruptions):
        return math.inf
    return min(young_daly_interval(write_seconds, mean_time_between_interruptions), ceiling)


@dataclass(frozen=True)
class CheckpointClock:
    """Measured inputs of the decision, updated as the job runs."""

    interval: float
    seconds_since_last: float
    remaining_seconds: float
    write_seconds: float


def periodic_checkpoint_due(view: CheckpointClock) -> bool:
    """Due once an interval has passed since the last one, unless the job will finish before a
    checkpoint could pay for itself (a job shorter than tau never checkpoints periodically)."""
    if math.isinf(view.interval):
        return False
    return view.seconds_since_last >= view.interval and view.remaining_seconds > view.write_seconds


def smoothed(previous: float, measured: float, weight: float = 0.3) -> float:
    return (1 - weight) * previous + weight * measured
