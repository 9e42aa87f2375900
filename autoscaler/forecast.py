"""Demand forecast: job arrivals per interval over the next horizon, by exponential smoothing
(statsmodels' Holt-Winters), with a daily season once there are two days of history."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from statsmodels.tsa.holtwinters import ExponentialSmoothing

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Forecast:
    interval: timedelta
    arrivals: tuple[float, ...]  # expected arrivals per interval, from now on
    seasonal: bool

    def total(self, horizon: timedelta) -> float:
        return sum(self.arrivals[: max(1, int(horizon / self.interval))])


def bucket_arrivals(
    arrivals: Sequence[datetime], start: datetime, end: datetime, interval: timedelta
) -> list[float]:
    counts = [0.0] * max(1, int((end - start) / interval))
    for at in arrivals:
        index = int((at - start) / interval)
        if 0 <= index < len(counts):
            counts[index] += 1
    return counts


def forecast_arrivals(counts: Sequence[float], interval: timedelta, horizon: timedelta) -> Forecast:
    """Arrivals per interval for the `horizon` after the last of `counts`."""
    steps = max(1, int(horizon / interval))
    period = int(DAY / interval)
    history = np.asarray(counts, dtype=float)
    if len(history) < 4 or not history.any():
        level = float(history.mean()) if len(history) else 0.0
        return Forecast(interval, (level,) * steps, seasonal=False)
    seasonal = len(history) >= 2 * period and period >= 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter on short or flat series
        model = ExponentialSmoothing(
            history,
            trend=None,
            seasonal="add" if seasonal else None,
            seasonal_periods=period if seasonal else None,
            initialization_method="estimated",
        ).fit()
        predicted = model.forecast(steps)
    return Forecast(interval, tuple(max(0.0, float(v)) for v in predicted), seasonal)


def mean_absolute_error(predicted: Sequence[float], actual: Sequence[float]) -> float:
    pairs = list(zip(predicted, actual, strict=False))
    return sum(abs(p - a) for p, a in pairs) / max(1, len(pairs))
