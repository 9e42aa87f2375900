"""A job that spans GPUs as the worker runs it: the runner the worker builds for a span
(`SpannedRenders`, a render process per device meeting through torch.distributed) takes the
job from the model cache to the video in S3 like any runner; and the worker's slots say why
they refuse a span they cannot run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from framefleet.local_ports import free_port
from kernel.clock import SystemClock
from kernel.worker_protocol import Command, CommandKind, GpuInfo
from tests.support.renders import Buckets, published, video_job
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.model_cache import ModelCache, ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.render_limits import RenderLimits
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.slots import Slot, why_not
from worker_ami.agent.spanned_render import SpannedRenders


@pytest.fixture
async def four_head_registry(
    object_store: S3ObjectStore, four_head_model: Path, buckets: Buckets
) -> ModelRegistry:
    return await published(object_store, four_head_model, buckets, "wan-tiny-4")


async def test_a_job_across_two_render_processes_runs_to_its_video(
    object_store: S3ObjectStore,
    four_head_registry: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    tmp_path: Path,
) -> None:
    clock = SystemClock()
    renders = SpannedRenders(
        ["cpu", "cpu"],
        RenderLimits(threads=1),
        tmp_path / "scratch",
        None,
        lambda: f"127.0.0.1:{free_port()}",
    )
    runner = JobRunner(
        object_store,
        CheckpointStore(object_store, worker_settings.require_checkpoint_bucket()),
        ModelCache(object_store, worker_settings.cache_dir, 10**10, clock),
        four_head_registry,
        clock,
        RunnerSettings(device="cpu", mean_time_between_interruptions_s=float("inf")),
        renders,
    )
    try:
        report = await runner.run(video_job(buckets, "spanned-job", steps=3), attempt=1)
    finally:
        await runner.close()
    assert report.status is RunStatus.SUCCEEDED, report.error
    assert report.output_video is not None
    assert report.video_sha256


def _slot(index: int, job_id: str | None = None) -> Slot:
    gpu = GpuInfo(index=index, family="l40s", vram_gib=48)
    return Slot(gpu, f"cuda:{index}", runner=None, job_id=job_id)  # type: ignore[arg-type]


def _assign(gpu_index: int, span: tuple[int, ...]) -> Command:
    return Command(
        worker_id="w",
        sent_at=datetime(2026, 12, 5, tzinfo=UTC),
        command_id="assign-0001",
        kind=CommandKind.ASSIGN,
        job_id="j",
        attempt=1,
        gpu_index=gpu_index,
        span=span,
    )


def test_a_worker_refuses_a_span_it_cannot_run_and_says_why() -> None:
    free = [_slot(0), _slot(1), _slot(2)]
    assert why_not(True, free[0], free[1:], _assign(0, (1, 2)), can_span=True) is None
    busy = [_slot(0), _slot(1, job_id="other")]
    assert "not all free" in (why_not(True, busy[0], busy[1:], _assign(0, (1,)), True) or "")
    missing = why_not(True, free[0], [], _assign(0, (5,)), can_span=True)
    assert missing == "GPUs [5] are not all free here"
    in_thread = why_not(True, free[0], free[1:2], _assign(0, (1,)), can_span=False)
    assert in_thread == "this worker renders in-thread and cannot span GPUs"
    assert why_not(False, free[0], [], _assign(0, ()), True) == "worker is draining"
