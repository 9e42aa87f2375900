"""Pure policies of the worker: the Young/Daly checkpoint interval and preflight."""

from __future__ import annotations

import math

import pytest

from kernel.job_spec import parse_job
from kernel.render_stage import RenderStage
from tests.support.jobs import job_dict
from worker_ami.agent.checkpoint_policy import (
    ON_DEMAND_MTBI_HOURS,
    CheckpointClock,
    checkpoint_interval,
    periodic_checkpoint_due,
    young_daly_interval,
)
from worker_ami.agent.preflight import GIB, PreflightFacts, preflight_problems
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import GpuTelemetry, NvmlUnavailable, read_gpus


@pytest.mark.parametrize(
    ("write_s", "mtbi_s", "expected"),
    [(2.0, 3600.0, math.sqrt(2 * 2 * 3600)), (8.0, 900.0, 120.0), (8.0, 100.0, 40.0)],
)
def test_young_daly_interval(write_s: float, mtbi_s: float, expected: float) -> None:
    assert young_daly_interval(write_s, mtbi_s) == pytest.approx(expected)


def test_spot_intervals_stop_at_the_ceiling_the_autoscaler_counts_on() -> None:
    # A quiet pool: Young/Daly alone would wait 31 minutes between checkpoints.
    assert young_daly_interval(20.0, 86400.0) > 1800
    assert checkpoint_interval(20.0, 86400.0, ceiling=600.0) == 600.0
    assert checkpoint_interval(2.0, 3600.0, ceiling=600.0) == pytest.approx(120.0)


def test_young_daly_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="positive"):
        young_daly_interval(0, 3600)


@pytest.mark.parametrize(
    ("since_last", "remaining", "due"),
    [
        (119.0, 600.0, False),  # interval not reached
        (120.0, 600.0, True),
        (500.0, 1.0, False),  # finishing before a checkpoint would pay for itself
    ],
)
def test_periodic_checkpoint_due(since_last: float, remaining: float, due: bool) -> None:
    view = CheckpointClock(
        interval=120.0, seconds_since_last=since_last, remaining_seconds=remaining, write_seconds=2
    )
    assert periodic_checkpoint_due(view) is due


def test_a_job_shorter_than_the_interval_only_checkpoints_on_notice() -> None:
    interval = young_daly_interval(2.0, 6 * 3600.0)  # about 294 s
    job_seconds = 200.0
    elapsed = [float(t) for t in range(0, int(job_seconds) + 1, 5)]
    assert not any(
        periodic_checkpoint_due(CheckpointClock(interval, t, job_seconds - t, 2.0)) for t in elapsed
    )


def test_on_demand_and_reserved_checkpoint_at_the_young_daly_interval_of_their_host() -> None:
    settings = WorkerSettings()
    assert settings.mtbi_seconds("on-demand") == ON_DEMAND_MTBI_HOURS * 3600
    assert settings.mtbi_seconds("scheduled") == ON_DEMAND_MTBI_HOURS * 3600  # reserved
    interval = checkpoint_interval(2.0, settings.mtbi_seconds("on-demand"))
    assert interval == pytest.approx(math.sqrt(2 * 2.0 * 6000 * 3600))  # about 2.6 hours
    # A 4-hour on-demand render checkpoints once on its way, not only on a notice.
    elapsed = [float(t) for t in range(0, 4 * 3600, 60)]
    due = [t for t in elapsed if periodic_checkpoint_due(CheckpointClock(interval, t, 1e9, 2.0))]
    assert due
    assert due[0] == pytest.approx(interval, abs=60)


def gpu(free_gib: float, ecc: int | None = 0) -> GpuTelemetry:
    return GpuTelemetry(0, "NVIDIA L40S", 0, int((48 - free_gib) * GIB), 48 * GIB, 40, ecc)


def facts(**overrides: object) -> PreflightFacts:
    values: dict[str, object] = {
        "gpus": [gpu(40)],
        "allow_cpu": False,
        "free_disk_bytes": 100 * GIB,
        "min_free_disk_bytes": 20 * GIB,
        "model_error": None,
        "smoke_error": None,
    }
    values.update(overrides)
    return PreflightFacts(**values)  # type: ignore[arg-type]


SPEC = parse_job(job_dict("pf", gpu={"min_vram_gib": 24}), now=None)


@pytest.mark.parametrize(
    ("overrides", "complaint"),
    [
        ({}, None),
        (
            {"gpus": NvmlUnavailable("no NVIDIA driver: x")},
            "no GPU (no NVIDIA driver: x) and CPU mode is not allowed",
        ),
        ({"gpus": NvmlUnavailable("none"), "allow_cpu": True}, None),
        ({"gpus": [gpu(10)]}, "free VRAM 10.0 GiB < job needs 24.0 GiB"),
        ({"gpus": [gpu(40, ecc=3)]}, "uncorrected ECC errors on GPU [0]"),
        ({"free_disk_bytes": 5 * GIB}, "free disk 5.0 GiB < 20.0 GiB required"),
        ({"model_error": "boom"}, "model does not load: boom"),
        ({"smoke_error": "nan"}, "one-step smoke run failed: nan"),
    ],
)
def test_preflight(overrides: dict[str, object], complaint: str | None) -> None:
    expected = () if complaint is None else (complaint,)
    assert preflight_problems(SPEC, facts(**overrides)) == expected


def test_nvml_on_a_machine_without_a_driver_says_so() -> None:
    gpus = read_gpus()
    # CI machines have no NVIDIA driver; a GPU machine answers with real telemetry.
    if isinstance(gpus, NvmlUnavailable):
        assert gpus.reason.startswith(("no NVIDIA driver", "NVML query failed"))
    else:
        assert all(g.memory_total_bytes > 0 for g in gpus)


def test_a_stage_of_a_split_render_is_checked_against_that_stages_need() -> None:
    big = parse_job(
        job_dict("big", model="wan/wan2.1-t2v-14b", width=1280, height=720, num_frames=81),
        now=None,
    )
    on_an_l4 = facts(gpus=[gpu(22)])
    [whole] = preflight_problems(big, on_an_l4)
    assert whole.startswith("free VRAM 22.0 GiB < job needs")
    for stage in (RenderStage.ENCODE, RenderStage.DECODE):
        assert preflight_problems(big, on_an_l4, stage) == ()
    [denoising] = preflight_problems(big, on_an_l4, RenderStage.DENOISE)
    assert denoising.startswith("free VRAM 22.0 GiB < job needs")
