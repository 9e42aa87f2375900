"""The worker agent's endpoints: /readyz says whether it reaches its broker and its checkpoint
bucket, and /metrics (parsed with prometheus-client's parser) counts its jobs as they end and
shows its GPUs as NVML reads them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import CollectorRegistry

from framefleet.health_server import HealthServer
from framefleet.worker_cli import worker_checks
from kernel.clock import FakeClock
from kernel.job_spec import parse_job
from tests.support.jobs import assignment, job_dict
from tests.support.metrics import get, samples
from tests.support.waits import async_wait_until
from tests.support.workers import instant_parts, without_broker
from worker_ami.agent.metrics import WorkerMetrics
from worker_ami.agent.service import WorkerService
from worker_ami.agent.telemetry import GpuTelemetry

GIB = 1024**3


def one_busy_gpu() -> list[GpuTelemetry]:
    return [GpuTelemetry(0, "NVIDIA L4", 87, 20 * GIB, 24 * GIB, 71, 0)]


async def test_the_workers_metrics_count_its_jobs_and_show_its_gpus(
    tmp_path: Path, clock: FakeClock
) -> None:
    link, handlers, connect = without_broker()

    parts = instant_parts(tmp_path, clock)
    registry = CollectorRegistry()
    service = WorkerService(
        "w-metered", parts, clock, connect, WorkerMetrics(registry, gpus=one_busy_gpu)
    )
    health = HealthServer(registry, worker_checks(service, parts))
    await health.start()
    base = f"http://127.0.0.1:{health.bound_port}"
    try:
        status, body = await get(f"{base}/readyz")
        assert status == 503
        assert "not connected to MQTT" in body
        link.connected.set()
        assert (await get(f"{base}/readyz"))[0] == 200

        spec = parse_job(job_dict("metered"), now=None)
        before = await samples(f"{base}/metrics")
        assert ("framefleet_worker_jobs_total", (("outcome", "succeeded"),)) not in before
        await handlers[0](*assignment("w-metered", spec, clock.now()))
        await async_wait_until(lambda: any('"finished"' in p for p in link.payloads))

        after = await samples(f"{base}/metrics")
        assert after[("framefleet_worker_jobs_total", (("outcome", "succeeded"),))] == 1
        assert after[("framefleet_worker_jobs_running", ())] == 0
        assert after[("framefleet_worker_nvml_up", ())] == 1
        assert after[("framefleet_worker_gpu_utilization_ratio", (("gpu", "0"),))] == 0.87
        assert after[("framefleet_worker_gpu_memory_used_bytes", (("gpu", "0"),))] == 20 * GIB
        assert ("framefleet_worker_notice_to_durable_seconds_count", ()) in after
    finally:
        await health.stop()
        await asyncio.sleep(0)
