"""Pre-warming: the rule that decides how many idle GPUs are worth keeping warm, the forecast
it reads, and the plan that buys and keeps them."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.policy import plan
from autoscaler.prewarm import MAX_WARM_GPUS, ArrivalForecaster, poisson_tail, warm_gpus
from autoscaler.snapshot import InstanceView, PlanInput
from kernel.market import Market
from tests.support.market_snapshots import MARKET, NOW, SETTINGS, SPOT_A, SPOT_B, job
from tests.support.paces import linear_pace

WINDOW, BOOT = 0.2, 10 / 60  # hours: a new instance's start-up, and its boot


def test_poisson_tail() -> None:
    assert poisson_tail(1.0, 0) == 1.0
    assert poisson_tail(1.0, 1) == pytest.approx(1 - 0.36787944, rel=1e-6)
    assert poisson_tail(2.0, 3) == pytest.approx(1 - 5 * 0.13533528, rel=1e-6)
    assert poisson_tail(0.0, 1) == 0.0


def test_warm_gpus_weighs_the_waiting_saved_against_idle_time() -> None:
    assert warm_gpus(2.0, WINDOW, BOOT, 0.9, wait_value_per_job_hour=0.0) == 0  # off
    assert warm_gpus(0.0, WINDOW, BOOT, 0.9, wait_value_per_job_hour=50.0) == 0  # no one comes
    counts = [warm_gpus(2.0, WINDOW, BOOT, 0.9, value) for value in (0.5, 5, 20, 100)]
    assert counts == sorted(counts)  # waiting worth more: more kept warm
    assert counts[0] == 0
    assert counts[-1] > 2  # past the mean, for the tail of the arrivals
    assert warm_gpus(2.0, WINDOW, BOOT, 9.0, 20) < warm_gpus(2.0, WINDOW, BOOT, 0.9, 20)
    assert warm_gpus(1e6, WINDOW, BOOT, 0.01, 1e6) == MAX_WARM_GPUS  # never a whole fleet


def test_the_forecast_follows_a_daily_pattern() -> None:
    """Two weeks of arrivals, ten an hour from noon to 18:00 and one an hour otherwise: the
    rate forecast for 14:00 is far above the one for 03:00, and the fit is reused within the
    hour."""
    day0 = NOW.replace(hour=0) - timedelta(days=14)
    arrivals = []
    for hour in range(16 * 24):
        count = 10 if 12 <= hour % 24 < 18 else 1
        at = day0 + timedelta(hours=hour)
        arrivals += [at + timedelta(minutes=60 * n / count) for n in range(count)]
    forecaster = ArrivalForecaster()
    afternoon = NOW.replace(hour=14, minute=20)
    start = forecaster.due(afternoon)
    assert start == NOW.replace(hour=14, minute=0)
    busy = forecaster.fit(start, [a for a in arrivals if a < start])
    assert forecaster.due(afternoon + timedelta(minutes=30)) is None
    night = NOW.replace(hour=3) + timedelta(days=1)
    quiet = forecaster.fit(night, [a for a in arrivals if a < night])
    assert busy == pytest.approx(10, abs=1.5)
    assert quiet == pytest.approx(1, abs=1.0)


PREWARM = replace(
    SETTINGS, prewarm_wait_value_per_job_hour=20.0, boot_seconds=600, model_load_seconds=120
)


def test_the_plan_buys_warm_spot_gpus_for_the_jobs_the_forecast_expects() -> None:
    latest = job("latest")
    state = PlanInput(NOW, (), (), MARKET, expected_arrivals=2.0, typical_job=latest)
    decided = plan(state, PREWARM, linear_pace())
    wanted = warm_gpus(2.0, WINDOW, BOOT, SPOT_A.price_per_hour, 20.0)
    assert wanted > 0
    assert len(decided.launches) == wanted
    for launch in decided.launches:
        assert launch.job_ids == ()
        assert launch.pool.market is Market.SPOT
        assert "pre-warm GPU" in launch.reason
        assert "2.00 jobs expected within 12 min" in launch.reason
    # Off, or no job seen yet to size them by: none.
    assert plan(state, SETTINGS, linear_pace()).launches == ()
    unknown = replace(state, typical_job=None)
    assert plan(unknown, PREWARM, linear_pace()).launches == ()


def test_free_gpus_count_as_warm_and_are_kept_past_the_idle_timeout() -> None:
    long_ago = NOW - timedelta(hours=1)
    idle = [
        InstanceView(f"i-{n}", SPOT_B.pool, 0.75, long_ago, 1, idle_since=long_ago)
        for n in range(6)
    ]
    wanted = warm_gpus(2.0, WINDOW, BOOT, SPOT_A.price_per_hour, 20.0)
    state = PlanInput(NOW, (), tuple(idle), MARKET, expected_arrivals=2.0, typical_job=job())
    decided = plan(state, PREWARM, linear_pace())
    assert decided.launches == ()
    assert len(decided.terminations) == len(idle) - wanted
    # Without the forecast's reason to keep them, all go.
    assert len(plan(state, SETTINGS, linear_pace()).terminations) == len(idle)
