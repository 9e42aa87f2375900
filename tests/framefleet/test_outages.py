"""The control plane through an outage of SQS (issue 48): with SQS cut off (each connection
reset, then each held without an answer), every loop keeps trying with backoff and the
process stays up; when SQS answers again, a job sent meanwhile is stored and an interruption
notice is acted on, each once. At 072fb48 the interruptions loop's receive raised out of the
process and stopped it (every replica at once)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import aiomqtt
import pytest
from prometheus_client import CollectorRegistry

from framefleet.health_server import HealthServer
from framefleet.local_ports import free_port
from framefleet.settings import IntakeConfig
from kernel.clock import FakeClock
from kernel.worker_protocol import Channel, topic
from tests.support.control_plane import hello, listed
from tests.support.intake import running, send, settings_for
from tests.support.jobs import job_dict
from tests.support.local_services import REGION, Queues
from tests.support.mosquitto import LocalMosquitto
from tests.support.tcp_proxy import Fault, TcpProxy, database_behind_proxy, proxy_before
from tests.support.waits import async_wait_until

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@pytest.fixture
async def proxy(moto_endpoint: str) -> AsyncIterator[TcpProxy]:
    async with proxy_before(moto_endpoint) as found:
        yield found


def spot_warning(instance_id: str) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps(
        {
            "version": "0",
            "id": f"evt-{uuid.uuid4().hex[:8]}",
            "detail-type": "EC2 Spot Instance Interruption Warning",
            "source": "aws.ec2",
            "time": now,
            "region": REGION,
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


@pytest.mark.parametrize("fault", [Fault.CUT, Fault.RESET, Fault.BLACKHOLE, Fault.ERRORS])
async def test_the_control_plane_lives_through_an_sqs_outage_and_resumes(
    fault: Fault,
    proxy: TcpProxy,
    queues: Queues,
    sqs: SQSClient,
    sqlite_url: str,
    broker: LocalMosquitto,
    caplog: pytest.LogCaptureFixture,
) -> None:
    notices = sqs.create_queue(QueueName=f"notices-{uuid.uuid4().hex[:10]}")["QueueUrl"]
    settings = settings_for(
        proxy.url,
        queues,
        sqlite_url,
        interruptions_queue_url=notices,
        mqtt={"host": "127.0.0.1", "port": broker.port},
        metrics_port=free_port(),
    )
    caplog.set_level(logging.WARNING)
    async with running(settings) as plane:
        interruptions = plane.interruptions
        assert interruptions is not None
        proxy.fail(fault)
        # Past the SQS client's own retries: each loop has seen the outage (a held try
        # hangs until the outage ends: the client's read timeout is longer than a test).
        if fault is not Fault.BLACKHOLE:

            def both_cut_off() -> bool:
                lines = outage_lines(caplog)
                return any("interruptions" in line for line in lines) and any(
                    "jobs queue" in line for line in lines
                )

            await async_wait_until(both_cut_off, within=90, what="both loops cut off")
            # Not ready while it lasts, and which dependency is out says so in a metric.
            assert out_now(plane.registry, "the interruptions queue") == 1
            assert plane.health is not None
            checks = await plane.health.readiness()
            assert "the interruptions queue out since" in checks["dependencies"]
        else:
            await async_wait_until(lambda: proxy.failed >= 2, within=90, what="tries held")
        send(sqs, queues.jobs_url, [json.dumps(job_dict("sent-in-the-outage"))])
        send(sqs, notices, [spot_warning("i-0123456789abcdef0")])
        proxy.fail(Fault.NONE)
        await async_wait_until(
            lambda: plane.store.find("sent-in-the-outage") is not None,
            within=90,
            what="the job sent during the outage stored",
        )
        await async_wait_until(
            lambda: interruptions.handled == 1, within=90, what="the notice handled"
        )
        await async_wait_until(
            lambda: out_now(plane.registry, "the interruptions queue") in (None, 0),
            within=90,
            what="the outage over in the metric",
        )
    lines = outage_lines(caplog)
    ended = [r.getMessage() for r in caplog.records if "answers again" in r.getMessage()]
    # One line when each loop's outage began and one when it ended, not one per try (a try
    # in flight when the cut came may end well, so a loop can see two outages).
    assert len(ended) <= len(lines) <= 6  # a poller may still be waiting out its backoff
    if fault is not Fault.BLACKHOLE:
        assert any("interruptions queue" in line for line in lines)
    if fault is Fault.RESET:
        assert len(lines) < proxy.failed


async def test_a_slow_sqs_still_takes_each_job_once(
    proxy: TcpProxy, queues: Queues, sqs: SQSClient, sqlite_url: str, broker: LocalMosquitto
) -> None:
    """SQS answering each chunk a second late: jobs are stored, each once, none redelivered
    (the visibility timeout outlasts a slow receive)."""
    settings = settings_for(
        proxy.url, queues, sqlite_url, mqtt={"host": "127.0.0.1", "port": broker.port}
    )
    async with running(settings) as plane:
        proxy.fail(Fault.SLOW)
        send(sqs, queues.jobs_url, [json.dumps(job_dict(f"slow-{i}")) for i in range(3)])
        await async_wait_until(
            lambda: plane.intake_metrics.outcome("accepted") == 3,
            within=120,
            what="the jobs stored through a slow SQS",
        )
        proxy.fail(Fault.NONE)
    assert plane.intake_metrics.outcome("accepted") == 3
    assert plane.intake_metrics.outcome("duplicate") == 0


@pytest.mark.parametrize("fault", [Fault.CUT, Fault.RESET, Fault.BLACKHOLE])
async def test_the_control_plane_lives_through_a_database_outage_and_resumes(
    fault: Fault,
    postgres_url: str,
    moto_endpoint: str,
    queues: Queues,
    sqs: SQSClient,
    broker: LocalMosquitto,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PostgreSQL cut off under a running control plane: the job sent meanwhile is stored
    once when the database answers again (after the batch's visibility timeout)."""
    with database_behind_proxy(postgres_url) as (database, proxied):
        settings = settings_for(
            moto_endpoint,
            queues,
            proxied,
            intake=IntakeConfig(concurrency=1, wait_seconds=1, visibility_timeout=2),
            mqtt={"host": "127.0.0.1", "port": broker.port},
        )
        caplog.set_level(logging.WARNING)
        async with running(settings) as plane:
            database.fail(fault)
            send(sqs, queues.jobs_url, [json.dumps(job_dict("stored-after-the-outage"))])
            if fault is not Fault.BLACKHOLE:
                await async_wait_until(
                    lambda: any("store" in line for line in outage_lines(caplog)),
                    within=90,
                    what="the intake cut off from the store",
                )
            else:
                await async_wait_until(lambda: database.failed >= 1, within=90, what="held")
            database.fail(Fault.NONE)
            await async_wait_until(
                lambda: plane.intake_metrics.outcome("accepted") == 1,
                within=90,
                what="the job stored once the database answers",
            )
            assert plane.store.find("stored-after-the-outage") is not None
    assert plane.intake_metrics.outcome("accepted") == 1


@pytest.mark.parametrize("fault", [Fault.CUT, Fault.RESET, Fault.BLACKHOLE])
async def test_the_control_plane_lives_through_a_broker_outage_and_resumes(
    fault: Fault,
    moto_endpoint: str,
    queues: Queues,
    sqs: SQSClient,
    sqlite_url: str,
    broker: LocalMosquitto,
) -> None:
    """The broker cut off from a running control plane: it is not ready while it lasts (the
    broker check), it takes jobs meanwhile, and after the outage a worker that says hello
    gets the job sent during it."""
    proxy = TcpProxy("127.0.0.1", broker.port)
    await proxy.start()
    settings = settings_for(
        moto_endpoint,
        queues,
        sqlite_url,
        mqtt={"host": "127.0.0.1", "port": proxy.port},
        metrics_port=free_port(),
    )
    try:
        async with running(settings) as plane:
            health = plane.health
            assert health is not None
            await async_wait_until(
                lambda: broker_ready(health), within=60, what="connected to the broker"
            )
            proxy.fail(fault)
            await async_wait_until(lambda: broker_out(health), within=90, what="the outage seen")
            send(sqs, queues.jobs_url, [json.dumps(job_dict("sent-while-the-broker-was-out"))])
            await async_wait_until(
                lambda: plane.store.find("sent-while-the-broker-was-out") is not None,
                within=90,
                what="the job stored without the broker",
            )
            proxy.fail(Fault.NONE)
            await async_wait_until(
                lambda: broker_ready(health), within=90, what="connected to the broker again"
            )
            worker = "i-0fa0170a9e0000001"
            listed(plane.store, worker)
            async with aiomqtt.Client("127.0.0.1", broker.port, identifier=worker) as client:
                greeting = hello(worker, FakeClock(datetime.now(UTC)))
                await client.publish(topic(worker, Channel.HELLO), greeting, qos=1)
                await async_wait_until(
                    lambda: plane.store.get("sent-while-the-broker-was-out").worker_id == worker,
                    within=90,
                    what="the job given to the worker after the outage",
                )
    finally:
        await proxy.stop()


async def broker_ready(health: HealthServer) -> bool:
    return (await health.readiness())["broker"] == "ok"


async def broker_out(health: HealthServer) -> bool:
    return not await broker_ready(health)


def out_now(registry: CollectorRegistry, dependency: str) -> float | None:
    return registry.get_sample_value("framefleet_outage_ongoing", {"dependency": dependency})


def outage_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "does not answer" in r.getMessage()]
