"""A render split into stages, end to end: submitted through SQS, split by the autoscaler's
rule (`split_renders: always`) through its port into the control plane's store, then run by a
worker process as three attempts (encoding, denoising, decoding), each placed by the scheduler
and started from the checkpoint the one before left in S3. Its video is byte for byte the one
the same job rendered whole makes, and its attempts are charged as done work."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from autoscaler.demand import StoreDemand, job_demand
from autoscaler.snapshot import PurchaseSettings, SplitMode
from autoscaler.stage_split import splits
from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from kernel.clock import SystemClock
from kernel.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.support.renders import read_object, video_job
from tests.support.waits import async_wait_until
from tests.worker_ami.system import LocalSystem, fleet

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

WORKER = "i-0000000000000c3a1"
ALWAYS = PurchaseSettings(split_renders=SplitMode.ALWAYS)


def succeeded(store: JobStore, *job_ids: str) -> bool:
    return all(
        (job := store.find(j)) is not None and job.state is JobState.SUCCEEDED for j in job_ids
    )


async def test_a_render_in_three_stages_makes_the_whole_renders_video(
    system: LocalSystem, s3: S3Client
) -> None:
    staged = video_job(system.buckets, "staged", steps=4)
    whole = video_job(system.buckets, "whole", steps=4)
    settings = system.plane_settings(ControlConfig(tick_seconds=0.2))
    system.submit(staged, whole)
    stop = asyncio.Event()
    clock = SystemClock()
    async with control_plane(settings, clock) as plane:
        task = asyncio.create_task(plane.run(stop))
        try:
            store = plane.store
            await async_wait_until(lambda: store.find("staged") is not None, 60)
            # No worker yet: the autoscaler's round splits it before anything can place it.
            queued = store.get("staged")
            assert queued.state is JobState.QUEUED
            chosen = splits([job_demand(queued)], [], clock.now(), ALWAYS)
            split = StoreDemand(store).split_into_stages({s.job_id: s.why for s in chosen})
            assert split == ["staged"]
            async with fleet(system, (WORKER,)):
                await async_wait_until(lambda: succeeded(store, "staged", "whole"), 240)
        finally:
            stop.set()
            await task
        history = [event.reason for event in store.history("staged")]
        attempts = store.cost_facts.attempts_on([WORKER])
    outcomes = sorted((a.attempt, a.outcome) for a in attempts if a.job_id == "staged")
    assert outcomes == [(1, "stage_done"), (2, "stage_done"), (3, "succeeded")]
    assert any(reason.startswith("encode done") for reason in history)
    assert any(reason.startswith("denoise done") for reason in history)
    outputs = system.buckets.outputs
    staged_mp4 = read_object(s3, outputs, "staged/staged.mp4")
    assert staged_mp4 == read_object(s3, outputs, "whole/whole.mp4")
