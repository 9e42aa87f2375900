"""A worker turned hostile, over Mosquitto with the shipped ACL and an account per instance
(as the autoscaler issues them): it names another instance in its hello, claims hardware its
instance type lacks, reports a rebalance notice and floods its own topics with garbage. Each
attack is refused or clamped and counted; the healthy worker stays alive, its job untouched,
and finishes it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiomqtt
import pytest

from kernel.fleet_facts import InstanceSeen
from kernel.instance_types import A10G_GIB
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from kernel.mqtt_link import MqttLink
from kernel.worker_protocol import (
    Channel,
    EventKind,
    GpuInfo,
    Heartbeat,
    Hello,
    WorkerEvent,
    topic,
)
from orchestrator.control.budgets import MessageBudget
from orchestrator.control.settings import ControlSettings
from orchestrator.scheduling.worker_health import WorkerHealth
from orchestrator.store.engine import make_engine
from orchestrator.store.migrate import upgrade_to_head
from tests.support.acl_broker import CONTROL_PLANE, acl_broker, as_worker, plane_on_broker
from tests.support.control_plane import event
from tests.support.jobs import job_dict
from tests.support.waits import async_wait_until

HEALTHY, HOSTILE = "i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"
PASSWORDS = {CONTROL_PLANE: "cp-secret", HEALTHY: "healthy-secret", HOSTILE: "hostile-secret"}
FLOOD = 20_000
FLOOD_QUEUE = {"max_queued_outgoing_messages": FLOOD * 2}  # room for the whole flood


@pytest.fixture
def secured_broker(tmp_path: Path) -> Iterator[int]:
    with acl_broker(tmp_path, PASSWORDS) as port:
        yield port


def hello(worker_id: str, instance_id: str, gpus: int = 1, vram_gib: float = A10G_GIB) -> str:
    return Hello(
        worker_id=worker_id,
        sent_at=datetime.now(UTC),
        instance_id=instance_id,
        instance_type="g5.xlarge",
        availability_zone="us-east-1a",
        market=Market.SPOT,
        gpus=tuple(GpuInfo(index=i, family="a10g", vram_gib=vram_gib) for i in range(gpus)),
        agent_version="test",
    ).model_dump_json()


async def heartbeats(client: aiomqtt.Client, stop: asyncio.Event) -> None:
    """The healthy worker's heartbeat, twice a second, as its agent would send it."""
    sequence = 0
    while not stop.is_set():
        sequence += 1
        beat = Heartbeat(worker_id=HEALTHY, sent_at=datetime.now(UTC), sequence=sequence)
        await client.publish(topic(HEALTHY, Channel.HEARTBEAT), beat.model_dump_json(), qos=1)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)


async def test_a_hostile_worker_is_refused_and_counted_and_the_healthy_one_untouched(
    secured_broker: int, sqlite_url: str
) -> None:
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    settings = ControlSettings(
        tick_seconds=0.1,
        resend_after=timedelta(seconds=30),
        budget=MessageBudget(per_second=50, burst=100, flood_after=1000),
    )
    plane, store = plane_on_broker(engine, secured_broker, PASSWORDS[CONTROL_PLANE], settings)
    launched = datetime.now(UTC)
    store.cost_facts.record_instances_seen(
        [
            InstanceSeen(iid, "g5.xlarge", "us-east-1a", Market.SPOT, launched, 1, "a10g")
            for iid in (HEALTHY, HOSTILE)
        ]
    )
    stop, beats_stop = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(plane.run(stop))
    try:
        async with (
            as_worker(secured_broker, HEALTHY, PASSWORDS[HEALTHY], **FLOOD_QUEUE) as healthy,
            as_worker(secured_broker, HOSTILE, PASSWORDS[HOSTILE], **FLOOD_QUEUE) as hostile,
        ):
            assert isinstance(plane.link, MqttLink)
            await async_wait_until(plane.link.connected.is_set)
            await healthy.publish(topic(HEALTHY, Channel.HELLO), hello(HEALTHY, HEALTHY), qos=1)
            beating = asyncio.create_task(heartbeats(healthy, beats_stop))
            await async_wait_until(lambda: plane.registry.health(HEALTHY) is WorkerHealth.ALIVE)
            store.intake.accept_batch([Submission(parse_job(job_dict("steady"), now=None), "m-1")])
            await async_wait_until(lambda: store.get("steady").state is JobState.ASSIGNED)
            before = store.get("steady")
            assert before.worker_id == HEALTHY

            # 1. A hello naming the healthy worker's instance: refused, nobody registered.
            forged = hello(HOSTILE, HEALTHY)
            await hostile.publish(topic(HOSTILE, Channel.HELLO), forged, qos=1)
            await async_wait_until(lambda: plane.refusals.count("foreign_instance") == 1)
            assert plane.registry.health(HOSTILE) is None

            # 2. Its own instance, with 64 GPUs of 1024 GiB: believed as one A10G of 24 GiB.
            greedy = hello(HOSTILE, HOSTILE, gpus=64, vram_gib=1024)
            await hostile.publish(topic(HOSTILE, Channel.HELLO), greedy, qos=1)
            await async_wait_until(lambda: plane.refusals.count("hardware_clamped") == 1)
            believed = plane.registry.hello(HOSTILE)
            assert believed is not None
            assert believed.gpus == (GpuInfo(index=0, family="a10g", vram_gib=A10G_GIB),)

            # 3. A rebalance notice drains its own instance only.
            notice = WorkerEvent(
                worker_id=HOSTILE,
                sent_at=datetime.now(UTC),
                event_id="e-notice-1",
                kind=EventKind.NOTICE_SEEN,
                notice="rebalance",
            ).model_dump_json()
            await hostile.publish(topic(HOSTILE, Channel.EVENTS), notice, qos=1)
            await async_wait_until(lambda: HOSTILE in store.instance_records.drain_requests())
            assert HEALTHY not in store.instance_records.drain_requests()

            # 4. A flood of garbage on its own topics: dropped unread, and it is quarantined.
            for n in range(FLOOD):
                await hostile.publish(topic(HOSTILE, Channel.HEARTBEAT), b"\x00" * (n % 64), qos=0)
            await async_wait_until(lambda: plane.refusals.count("flooding") == 1, 30)
            assert HOSTILE in plane.reception.quarantined()
            assert plane.registry.health(HOSTILE) is WorkerHealth.DRAINING

            # A hello does not end a quarantine (sent until one is read within the budget).
            async def hello_again() -> bool:
                again = hello(HOSTILE, HOSTILE)
                await hostile.publish(topic(HOSTILE, Channel.HELLO), again, qos=1)
                return plane.refusals.count("quarantined") >= 1

            await async_wait_until(hello_again, 30)
            assert plane.registry.health(HOSTILE) is WorkerHealth.DRAINING
            # Far fewer messages parsed than sent: the rest were dropped by the budget.
            dropped = plane.refusals.count("over_budget") + plane.refusals.count("flooding")
            assert dropped >= FLOOD - 2 * 1000

            # The healthy worker was never doubted, and its job never moved.
            assert [c.after for c in plane.registry.history(HEALTHY)] == [WorkerHealth.ALIVE]
            assert store.get("steady").version == before.version
            output = "s3://framefleet-output/videos/steady.mp4"
            for kind, fields in ((EventKind.STARTED, {}), (EventKind.FINISHED, {"output": output})):
                done = event(HEALTHY, kind, "steady", before.attempt, **fields)
                await healthy.publish(topic(HEALTHY, Channel.EVENTS), done, qos=1)
            await async_wait_until(lambda: store.get("steady").state is JobState.SUCCEEDED)
            assert plane.memory_sizes()["inbox"] == 0
            beats_stop.set()
            await beating
    finally:
        beats_stop.set()
        stop.set()
        await asyncio.wait_for(task, 30)
        store.dispose()
