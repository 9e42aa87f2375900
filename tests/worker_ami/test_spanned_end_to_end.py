"""A job that spans two GPUs, end to end: submitted through SQS with `gpu.count: 2`, placed by
the control plane on both GPUs of one worker as a gang, rendered by two render processes
meeting through torch.distributed (gloo on a CPU), its video in S3, and every GPU it held on
its attempt's record (the cost ledger charges it for both). A one-GPU job submitted with it
waits for a GPU of its own and succeeds too."""

from __future__ import annotations

import asyncio

from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from kernel.clock import SystemClock
from kernel.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.support.renders import video_job
from tests.support.waits import async_wait_until
from tests.worker_ami.system import LocalSystem, fleet

WORKER = "i-0000000000000c2a1"
FOUR_GPUS = "g6e.12xlarge"  # the worker offers two of them: a CPU slot each


def succeeded(store: JobStore, *job_ids: str) -> bool:
    return all(
        (job := store.find(j)) is not None and job.state is JobState.SUCCEEDED for j in job_ids
    )


async def test_a_job_across_two_gpus_of_one_worker_renders_and_is_charged_for_both(
    system: LocalSystem,
) -> None:
    spanning = video_job(system.buckets, "spanning", steps=4, gpu={"min_vram_gib": 16, "count": 2})
    single = video_job(system.buckets, "single", steps=4)
    settings = system.plane_settings(ControlConfig(tick_seconds=0.2))
    system.submit(spanning, single)
    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(system, (WORKER,), {"FRAMEFLEET_WORKER_CPU_SLOTS": "2"}, instance_type=FOUR_GPUS),
    ):
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(lambda: succeeded(plane.store, "spanning", "single"), 240)
        finally:
            stop.set()
            await task
        attempts = {a.job_id: a for a in plane.store.cost_facts.attempts_on([WORKER])}
    assert sorted((attempts["spanning"].gpu_index, *attempts["spanning"].span)) == [0, 1]
    assert attempts["single"].span == ()
