"""A worker through an outage of S3 (issue 48): `framefleet-worker serve` renders with its
checkpoints and output behind a TCP proxy; S3 is cut off mid-render (each connection reset,
or held without an answer), then answers again. The worker process lives through it, and
the job ends done once (its writes wait the outage out, or its attempt fails and runs again)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from kernel.clock import SystemClock
from kernel.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.support.renders import video_job
from tests.support.tcp_proxy import Fault, TcpProxy, proxy_before
from tests.support.waits import async_wait_until
from tests.support.worker_process import FREQUENT_CHECKPOINTS
from tests.worker_ami.system import LocalSystem, fleet

WORKER = "i-00000000000000d51"
# A lost worker noticed in seconds, as the other end-to-end fault tests have it.
FAST_CONTROL = ControlConfig(
    tick_seconds=0.2, resend_after_seconds=1, suspect_after_seconds=2, lost_after_seconds=4
)


@pytest.fixture
async def s3_proxy(system: LocalSystem) -> AsyncIterator[TcpProxy]:
    async with proxy_before(system.moto_endpoint) as proxy:
        yield proxy


def checkpointed(store: JobStore, job_id: str) -> bool:
    job = store.find(job_id)
    return job is not None and job.last_checkpoint is not None


@pytest.mark.parametrize("fault", [Fault.RESET, Fault.BLACKHOLE])
async def test_a_worker_lives_through_an_s3_outage_and_the_job_is_done_once(
    fault: Fault, system: LocalSystem, s3_proxy: TcpProxy
) -> None:
    settings = system.plane_settings(FAST_CONTROL)
    spec = video_job(system.buckets, f"through-s3-{fault.value}", steps=200)
    system.submit(spec)
    stop = asyncio.Event()
    through_proxy = FREQUENT_CHECKPOINTS | {"FRAMEFLEET_WORKER_ENDPOINT_URL": s3_proxy.url}
    async with (
        control_plane(settings, SystemClock()) as plane,
        fleet(system, (WORKER,), through_proxy) as workers,
    ):
        store = plane.store
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(lambda: checkpointed(store, spec.job_id), 120, "checkpointed")
            s3_proxy.fail(fault)
            await async_wait_until(
                lambda: s3_proxy.failed >= 2 or not running(store, spec.job_id),
                120,
                "the worker's tries cut off",
            )
            s3_proxy.fail(Fault.NONE)
            await async_wait_until(
                lambda: store.get(spec.job_id).state is JobState.SUCCEEDED, 180, "done"
            )
            assert workers.processes[WORKER].returncode is None  # alive
        finally:
            stop.set()
            await task
        history = store.history(spec.job_id)
    assert [e.to_state for e in history].count(JobState.SUCCEEDED) == 1


def running(store: JobStore, job_id: str) -> bool:
    return store.get(job_id).state is JobState.RUNNING
