"""Every knob a platform team turns is a setting that reaches the part it turns, and the
defaults leave capacity on: multi-GPU sizes to pack onto, large GPUs for large models, and a
budget that can buy them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from framefleet.autoscaler_cli import purchase_settings
from framefleet.settings import AutoscalerConfig, Settings
from kernel.instance_types import kind_of
from orchestrator.control.settings import ControlSettings


def test_scheduling_knobs_reach_the_control_plane(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRAMEFLEET_CONTROL__SCHEDULING__AGING_PER_HOUR", "3")
    monkeypatch.setenv("FRAMEFLEET_CONTROL__SCHEDULING__PREEMPTION_MARGIN", "4")
    monkeypatch.setenv("FRAMEFLEET_CONTROL__SCHEDULING__QUEUE_READ_LEAST", "50")
    monkeypatch.setenv("FRAMEFLEET_CONTROL__SCHEDULING__DEADLINE_STARTUP_SECONDS", "600")
    monkeypatch.setenv("FRAMEFLEET_CONTROL__SCHEDULING__STALL_FACTOR", "8")
    monkeypatch.setenv("FRAMEFLEET_CONTROL__SCHEDULING__QUARANTINE_AFTER_STALLS", "3")
    knobs = Settings().control.scheduling
    settings = knobs.apply(ControlSettings())
    assert (settings.scheduler.aging_per_hour, settings.scheduler.preemption_margin) == (3.0, 4)
    assert settings.queue_reads.window(0) == 50
    assert settings.queue_reads.startup == timedelta(minutes=10)
    assert settings.watch.stall.factor == 8.0
    assert settings.watch.sick.stalls_to_quarantine == 3
    assert settings.watch.enabled  # the rest of the watch is left as it was


def test_the_defaults_are_the_products_own() -> None:
    assert Settings().control.scheduling.apply(ControlSettings()) == ControlSettings()


def test_autoscaler_knobs_reach_the_purchase_policy() -> None:
    config = AutoscalerConfig(
        prewarm_wait_value_per_job_hour=5.0,
        return_to_spot=False,
        return_to_spot_margin_hours=1.5,
        checkpoint_interval_seconds=300.0,
    )
    settings = purchase_settings(config)
    assert settings.prewarm_wait_value_per_job_hour == 5.0  # the forecast's pre-warming is on
    assert (settings.return_to_spot, settings.return_to_spot_margin_hours) == (False, 1.5)
    assert settings.checkpoint_interval_seconds == 300.0


def test_default_capacity_includes_packing_and_large_gpus_within_the_budget() -> None:
    settings = purchase_settings(AutoscalerConfig())
    kinds = [kind_of(t) for t in settings.candidate_types]
    assert any(kind.gpus > 1 and kind.vram_gib <= 48 for kind in kinds)  # packing
    assert max(kind.vram_gib for kind in kinds) >= 56.6  # a 14B model at 720p fits somewhere
    p5_on_demand = 98.32  # USD per hour, us-east-1
    assert settings.budget_per_hour > p5_on_demand
    assert settings.budget_per_day > 24 * p5_on_demand
