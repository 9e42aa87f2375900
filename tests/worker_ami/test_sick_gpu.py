"""A GPU whose NVML (a fake port here) reports uncorrected ECC errors is quarantined: no more
work goes there, the job it runs checkpoints and moves to another worker, its instance is
drained for replacement, and the quarantine is durable. The workers run in this process (so
the test can hand them their NVML), over the real broker, rendering in child processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from framefleet.control_plane import control_plane
from framefleet.settings import ControlConfig
from framefleet.worker_process import worker_parts
from kernel.clock import SystemClock
from kernel.job_record import DrainKind
from kernel.job_state import JobState
from kernel.market import Market
from tests.support.control_plane import listed_in
from tests.support.renders import video_job
from tests.support.waits import async_wait_until
from tests.worker_ami.system import LocalSystem, where_running
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.service import WorkerService, mqtt_agent_link
from worker_ami.agent.telemetry import GpuTelemetry

GIB = 1024**3
SICK, WELL = "i-0000000000000000a", "i-0000000000000000b"


class FakeNvml:
    """One A10G whose uncorrected ECC count the test sets."""

    def __init__(self) -> None:
        self.ecc_uncorrected = 0

    def read(self) -> list[GpuTelemetry]:
        return [
            GpuTelemetry(
                index=0,
                name="NVIDIA A10G",
                utilization_percent=97,
                memory_used_bytes=3 * GIB,
                memory_total_bytes=24 * GIB,
                temperature_celsius=61,
                ecc_uncorrected_errors=self.ecc_uncorrected,
            )
        ]


@asynccontextmanager
async def worker(
    system: LocalSystem, worker_id: str, nvml: FakeNvml
) -> AsyncIterator[WorkerService]:
    """A worker on the instance of that id (on EC2 a worker is its instance): a g5.xlarge, as
    its one A10G says."""
    clock = SystemClock()
    listed_in(system.database_url, worker_id, instance_type="g5.xlarge", market=Market.SPOT)
    identity = InstanceIdentity(instance_id=worker_id, instance_type="g5.xlarge", lifecycle="spot")
    emulator = ImdsEmulator(clock, identity)
    url = await emulator.start()
    settings = system.worker_settings.model_copy(
        update={
            "worker_id": worker_id,
            "mqtt_port": system.broker.port,
            "heartbeat_seconds": 0.3,
            "cache_dir": system.tmp_path / f"cache-{worker_id}",
            "imds_enabled": True,
            "imds_url": url,
            "imds_poll_seconds": 0.2,
            # A checkpoint after every few steps (the Young/Daly interval of a tiny MTBI).
            "spot_mtbi_hours": 0.00002,
            "initial_checkpoint_write_s": 0.01,
        }
    )
    stop = asyncio.Event()
    try:
        async with worker_parts(settings, clock) as parts:
            parts.gpu_readings = nvml
            service = WorkerService(
                worker_id, parts, clock, mqtt_agent_link(settings, worker_id, clock)
            )
            task = asyncio.create_task(service.run(stop))
            try:
                yield service
            finally:
                stop.set()
                await task
    finally:
        await emulator.stop()


async def test_a_gpu_with_uncorrected_ecc_errors_is_quarantined_and_its_job_moves(
    system: LocalSystem,
) -> None:
    spec = video_job(system.buckets, "on-sick", steps=150)
    settings = system.plane_settings(ControlConfig(tick_seconds=0.2))
    system.submit(spec)
    sick, well = FakeNvml(), FakeNvml()
    stop = asyncio.Event()
    async with (
        control_plane(settings, SystemClock()) as plane,
        worker(system, SICK, sick),
    ):
        store = plane.store
        task = asyncio.create_task(plane.run(stop))
        try:
            await async_wait_until(lambda: where_running(store, spec.job_id) == SICK, 120)
            await async_wait_until(lambda: store.get(spec.job_id).last_checkpoint is not None, 60)
            async with worker(system, WELL, well):
                sick.ecc_uncorrected = 2
                await async_wait_until(lambda: store.faults.quarantined_gpus() == {(SICK, 0)}, 30)
                await async_wait_until(
                    lambda: store.get(spec.job_id).state is JobState.SUCCEEDED, 120
                )
        finally:
            stop.set()
            await task
        history = store.history(spec.job_id)
        drains = store.instance_records.drain_requests()
        faults = store.faults.gpu_faults(SICK)
    said = " | ".join(e.reason for e in history)
    assert f"GPU 0 of {SICK} quarantined: 2 uncorrected ECC errors" in said
    assert f"finished on {WELL}" in history[-1].reason
    assert [e.to_state for e in history].count(JobState.SUCCEEDED) == 1
    assert drains[SICK].kind is DrainKind.REBALANCE
    assert "quarantined" in drains[SICK].reason
    assert "i-0000000000000000b" not in drains
    assert [f.kind.value for f in faults] == ["errors", "quarantine"]
