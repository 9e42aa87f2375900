"""Every process's operator endpoints, here the control plane's: /healthz, /readyz naming
each dependency's state, and /metrics in the Prometheus text format (parsed with
prometheus-client's own parser) whose numbers move when jobs move."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from framefleet.health_server import HealthServer
from framefleet.local_ports import free_port
from orchestrator.control.cancel import cancel_job
from tests.support.intake import running, send, settings_for
from tests.support.jobs import job_dict
from tests.support.local_services import Queues
from tests.support.metrics import get, samples
from tests.support.mosquitto import LocalMosquitto
from tests.support.waits import async_wait_until

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


async def test_the_control_planes_endpoints_answer_and_its_metrics_move_with_the_jobs(
    moto_endpoint: str, queues: Queues, sqlite_url: str, sqs: SQSClient, broker: LocalMosquitto
) -> None:
    port = free_port()
    settings = settings_for(
        moto_endpoint,
        queues,
        sqlite_url,
        metrics_port=port,
        mqtt={"host": "127.0.0.1", "port": broker.port},
    )
    base = f"http://127.0.0.1:{port}"
    async with running(settings) as plane:
        assert plane.gauges is not None
        plane.gauges.every = 0.1
        health = plane.health
        assert health is not None
        await async_wait_until(lambda: health.bound_port == port, what="endpoints up")
        assert await get(f"{base}/healthz") == (200, '{"alive": true}')

        async def ready() -> bool:
            return (await get(f"{base}/readyz"))[0] == 200

        await async_wait_until(ready, what="store, queues and broker ready")
        _, body = await get(f"{base}/readyz")
        assert json.loads(body) == {
            "ready": True,
            "checks": {"broker": "ok", "dependencies": "ok", "queues": "ok", "store": "ok"},
        }
        send(
            sqs,
            queues.jobs_url,
            [json.dumps(job_dict("metered-1")), json.dumps(job_dict("metered-2"))],
        )
        queued = ("framefleet_jobs", (("state", "queued"),))

        async def counted(state: str, count: float) -> bool:
            return (await samples(f"{base}/metrics")).get(
                ("framefleet_jobs", (("state", state),))
            ) == count

        await async_wait_until(lambda: counted("queued", 2), what="two queued jobs counted")
        found = await samples(f"{base}/metrics")
        assert found[("framefleet_intake_messages_total", (("outcome", "accepted"),))] == 2
        assert found[("framefleet_queue_oldest_job_age_seconds", ())] >= 0
        assert found[("framefleet_budget_per_day_usd", ())] == settings.autoscaler.budget_per_day
        assert ("framefleet_assignment_latency_seconds_count", ()) in found
        cancel_job(plane.store, "metered-1", "test", "no longer wanted")
        await async_wait_until(lambda: counted("cancelled", 1), what="a cancelled job counted")
        assert (await samples(f"{base}/metrics"))[queued] == 1


async def test_readiness_names_the_dependency_that_does_not_answer() -> None:
    async def fine() -> None:
        return None

    async def down() -> None:
        raise ConnectionError("connection refused by 127.0.0.1:5432\nsecond line")

    async def hung() -> None:
        await asyncio.Event().wait()

    server = HealthServer(CollectorRegistry(), {"store": down, "queues": fine, "broker": hung})
    await server.start()
    try:
        status, body = await get(f"http://127.0.0.1:{server.bound_port}/readyz")
    finally:
        await server.stop()
    assert status == 503
    assert json.loads(body) == {
        "ready": False,
        "checks": {
            "broker": "no answer within 3 s",
            "queues": "ok",
            "store": "ConnectionError: connection refused by 127.0.0.1:5432",
        },
    }
