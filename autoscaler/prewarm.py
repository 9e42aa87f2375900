"""Pre-warming: spot capacity bought before the jobs the forecast expects, so they start
without waiting for a boot, when the waiting it saves is worth more than the idle time it costs.

The rule (pure, `warm_gpus`): arrivals in the next start-up window are Poisson with the mean the
Holt-Winters forecast gives for this hour. The k-th idle GPU is used only if at least k jobs
arrive in that window, with probability p_k = P(N >= k). Kept warm for one window it saves
p_k x boot hours of waiting, worth `wait_value_per_job_hour` each, and costs its price for the
window less the part a job uses it (half the window on average when it does). The fleet keeps
warm every GPU whose saving beats its cost; p_k falls with k, so that is a count. A value of 0
turns pre-warming off.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.snapshot import JobDemand

MAX_WARM_GPUS = 64  # per round, whatever the forecast says: a bad fit must not buy a fleet


def poisson_tail(mean: float, k: int) -> float:
    """P(N >= k) for N ~ Poisson(mean)."""
    if k <= 0:
        return 1.0
    term = math.exp(-mean)
    below = term
    for n in range(1, k):
        term *= mean / n
        below += term
    return max(0.0, 1.0 - below)


def warm_gpus(
    expected_arrivals: float,
    window_hours: float,
    boot_hours: float,
    price_per_gpu_hour: float,
    wait_value_per_job_hour: float,
) -> int:
    """How many idle GPUs are worth keeping warm for the next `window_hours`."""
    if wait_value_per_job_hour <= 0 or expected_arrivals <= 0:
        return 0
    warm = 0
    while warm < MAX_WARM_GPUS:
        used = poisson_tail(expected_arrivals, warm + 1)
        saving = used * boot_hours * wait_value_per_job_hour
        cost = price_per_gpu_hour * window_hours * (1 - used / 2)
        if saving <= cost:
            break
        warm += 1
    return warm


@dataclass
class ArrivalForecaster:
    """Expected arrivals per hour now, from the last `history` of arrivals, refitted once an
    hour (a fit takes tens of milliseconds; arrivals move slower than that)."""

    history: timedelta = timedelta(days=7)
    interval: timedelta = timedelta(hours=1)
    fitted_for: datetime | None = None
    rate_per_hour: float = 0.0

    def due(self, now: datetime) -> datetime | None:
        """The start of the current interval when a new fit is due (None: the last holds)."""
        start = _floor(now, self.interval)
        return None if self.fitted_for == start else start

    def fit(self, start: datetime, arrivals: list[datetime]) -> float:
        """The rate for the interval that began at `start`, from arrivals before it."""
        # Imported here: statsmodels takes seconds to import, which every plan would pay.
        from autoscaler.forecast import bucket_arrivals, forecast_arrivals

        counts = bucket_arrivals(arrivals, start - self.history, start, self.interval)
        forecast = forecast_arrivals(counts, self.interval, self.interval)
        self.fitted_for = start
        self.rate_per_hour = forecast.arrivals[0] / (self.interval / timedelta(hours=1))
        return self.rate_per_hour


def _floor(moment: datetime, interval: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1, tzinfo=moment.tzinfo)
    return epoch + (moment - epoch) // interval * interval


@dataclass
class Prewarming:
    """What pre-warming needs each round: the jobs the forecast expects within a new
    instance's start-up, and the latest job seen (what a pre-warmed GPU must fit)."""

    forecaster: ArrivalForecaster = field(default_factory=ArrivalForecaster)
    latest_job: JobDemand | None = None

    def saw(self, queued: Sequence[JobDemand]) -> None:
        if queued:
            self.latest_job = max(queued, key=lambda j: (j.submitted_at, j.job_id))

    async def expected(
        self,
        now: datetime,
        arrivals_since: Callable[[datetime], list[datetime]],
        startup_seconds: float,
    ) -> float:
        """The forecast is refitted when due, from the arrivals of its history."""
        start = self.forecaster.due(now)
        if start is not None:
            since = start - self.forecaster.history
            arrivals = await asyncio.to_thread(arrivals_since, since)
            await asyncio.to_thread(self.forecaster.fit, start, arrivals)
        return self.forecaster.rate_per_hour * startup_seconds / 3600
