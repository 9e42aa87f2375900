"""Demand forecast measured on replayed arrivals, and the throughput model learning online."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from autoscaler.forecast import bucket_arrivals, forecast_arrivals, mean_absolute_error
from autoscaler.throughput import ThroughputModel, WorkShape
from framefleet.autoscaler_cli import throughput_model
from framefleet.settings import AutoscalerConfig

START = datetime(2026, 6, 1, tzinfo=UTC)
INTERVAL = timedelta(minutes=30)


def daily_arrivals(days: int, seed: int = 7) -> list[datetime]:
    """Poisson arrivals with a daily pattern: ~2 an hour at night, ~40 at the afternoon peak."""
    rng = np.random.default_rng(seed)
    arrivals = []
    for minute in range(days * 24 * 60):
        hour = (minute / 60) % 24
        rate_per_hour = 21 - 19 * math.cos(2 * math.pi * (hour - 3) / 24)
        for _ in range(rng.poisson(rate_per_hour / 60)):
            arrivals.append(START + timedelta(minutes=minute, seconds=float(rng.uniform(0, 60))))
    return arrivals


def test_the_daily_pattern_is_learned_and_beats_a_flat_forecast() -> None:
    arrivals = daily_arrivals(5)
    counts = bucket_arrivals(arrivals, START, START + timedelta(days=5), INTERVAL)
    history, actual = counts[: 4 * 48], counts[4 * 48 :]  # replay: learn 4 days, predict day 5
    forecast = forecast_arrivals(history, INTERVAL, timedelta(days=1))
    flat = [sum(history) / len(history)] * len(actual)
    seasonal_error = mean_absolute_error(forecast.arrivals, actual)
    flat_error = mean_absolute_error(flat, actual)
    assert forecast.seasonal
    assert len(forecast.arrivals) == 48
    assert all(value >= 0 for value in forecast.arrivals)
    assert seasonal_error < 0.5 * flat_error  # measured: see the closing note of issue 5
    # The next hour's total follows the pattern: night is quieter than the peak.
    assert forecast.arrivals[6] < forecast.arrivals[30]


def test_short_or_empty_histories_give_a_flat_forecast() -> None:
    assert forecast_arrivals([], INTERVAL, timedelta(hours=1)).arrivals == (0.0, 0.0)
    short = forecast_arrivals([3.0, 5.0, 4.0, 4.0, 4.0, 5.0], INTERVAL, timedelta(hours=2))
    assert not short.seasonal
    assert short.total(timedelta(hours=1)) == pytest.approx(8.5, abs=1.5)


def test_throughput_starts_from_priors_and_learns_from_finished_jobs() -> None:
    model = ThroughputModel()
    shape = WorkShape("wan/t2v-1.3b", 832, 480, 81)
    bigger = WorkShape("wan/t2v-1.3b", 1280, 720, 81)
    prior = model.seconds_per_step(shape, "l40s")
    assert model.seconds_per_step(shape, "t4") > prior > model.seconds_per_step(shape, "h100")
    model.observe(shape, "l40s", steps=50, seconds=50 * prior * 2)  # twice as slow as thought
    assert model.seconds_per_step(shape, "l40s") == pytest.approx(2 * prior)
    # The correction carries over to other shapes of the same model on that family.
    assert model.seconds_per_step(bigger, "l40s") == pytest.approx(2 * model.prior(bigger, "l40s"))
    model.observe(shape, "l40s", steps=50, seconds=50 * prior)  # then one at the prior
    assert prior < model.seconds_per_step(shape, "l40s") < 2 * prior
    assert model.seconds(shape, "l40s", 10) == pytest.approx(
        10 * model.seconds_per_step(shape, "l40s")
    )
    model.observe(shape, "l40s", steps=0, seconds=5)  # nothing to learn from


def test_the_prior_grows_with_the_square_of_the_tokens_and_with_the_model() -> None:
    model = ThroughputModel()
    short = WorkShape("wan/wan2.1-t2v-1.3b", 832, 480, 33)
    long = WorkShape("wan/wan2.1-t2v-1.3b", 832, 480, 81)
    # Per megapixel-frame, 81 frames cost more than 33 (attention is quadratic in tokens): an
    # H200 measured 0.029 s at 33 frames and 0.040 at 81 (issue 28); the model is within 10%.
    per_mpf_short = model.prior(short, "h200") / short.megapixel_frames
    per_mpf_long = model.prior(long, "h200") / long.megapixel_frames
    assert per_mpf_short == pytest.approx(0.029, rel=0.1)
    assert per_mpf_long == pytest.approx(0.040, rel=0.1)
    big = WorkShape("wan/wan2.1-t2v-14b", 832, 480, 81)
    assert model.prior(big, "h200") > 5 * model.prior(long, "h200")
    # A model it was not told about: the size in its name.
    assert model.prior(WorkShape("acme/video-14b", 832, 480, 81), "h200") == pytest.approx(
        model.prior(big, "h200")
    )
    # Without guidance, one pass a step.
    unguided = WorkShape("wan/wan2.1-t2v-1.3b", 832, 480, 81, guided=False)
    assert model.prior(unguided, "h200") == pytest.approx(model.prior(long, "h200") / 2)


def test_a_configured_model_size_sets_its_prior() -> None:
    config = AutoscalerConfig(
        models={"acme/house-style": {"parameters": 14.3e9, "layers": 40, "width": 5120}}
    )
    model = throughput_model(config)
    house = WorkShape("acme/house-style", 832, 480, 81)
    wan_14b = WorkShape("wan/wan2.1-t2v-14b", 832, 480, 81)
    assert model.prior(house, "h100") == pytest.approx(model.prior(wan_14b, "h100"))
    # Unconfigured, it would be taken for the small Wan: five times too fast.
    assert ThroughputModel().prior(house, "h100") < model.prior(house, "h100") / 5
