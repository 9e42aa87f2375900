"""End to end over Mosquitto with the shipped ACL and per-worker passwords: a worker that
forges every kind of event for another worker's job, on its own topic, inside its heartbeat,
or on the other worker's topic, changes nothing; the owner still finishes the job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import aiomqtt
import pytest

from kernel.clock import FakeClock, SystemClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.mosquitto import LocalMosquitto
from kernel.mqtt_link import LinkSettings, MqttLink
from kernel.worker_protocol import Channel, EventKind, Heartbeat, WorkerEvent, topic
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import WORKER_TOPICS, ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.store.engine import make_engine
from orchestrator.store.instances import InstanceLedger
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.conftest import free_port
from tests.support import async_wait_until, job_dict
from tests.test_authorised_events import FORGERIES, NOW, event, hello
from tests.test_worker_protocol import ACL

PASSWORDS = {
    "framefleet-control-plane": "cp-secret",
    "w-owner": "owner-secret",
    "w-other": "other-secret",
}


@pytest.fixture
def secured_broker(tmp_path: Path) -> Iterator[int]:
    broker = LocalMosquitto(tmp_path, free_port(), acl_file=ACL, passwords=PASSWORDS)
    broker.start()
    yield broker.port
    broker.stop()


@asynccontextmanager
async def as_worker(port: int, worker_id: str) -> AsyncIterator[aiomqtt.Client]:
    async with aiomqtt.Client(
        "127.0.0.1",
        port,
        identifier=worker_id,
        username=worker_id,
        password=PASSWORDS[worker_id],
        protocol=aiomqtt.ProtocolVersion.V311,
    ) as client:
        yield client


async def test_forged_events_change_nothing_under_the_acl(
    secured_broker: int, sqlite_url: str
) -> None:
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    clock = SystemClock()
    store = JobStore(engine, clock)
    user = "framefleet-control-plane"
    link = LinkSettings(
        host="127.0.0.1",
        port=secured_broker,
        client_id="cp",
        username=user,
        password=PASSWORDS[user],
    )
    settings = ControlSettings(tick_seconds=0.1, resend_after=timedelta(seconds=30))
    plane = ControlPlaneService(
        store,
        clock,
        settings,
        connect=lambda deliver: MqttLink(link, WORKER_TOPICS, deliver, clock),
        refusals=RefusedMessages(clock),
        instances=InstanceLedger(engine, clock),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(plane.run(stop))
    try:
        with pytest.raises(aiomqtt.MqttError):  # a wrong password does not even connect
            async with aiomqtt.Client(
                "127.0.0.1", secured_broker, username="w-other", password="guess"
            ):
                pass
        async with (
            as_worker(secured_broker, "w-owner") as owner_client,
            as_worker(secured_broker, "w-other") as other_client,
        ):
            assert isinstance(plane.link, MqttLink)
            connected = plane.link.connected
            await async_wait_until(connected.is_set)
            clients = {"w-owner": owner_client, "w-other": other_client}
            # Only the owner says hello first, so the job surely goes to it.
            greeting = hello("w-owner", FakeClock(NOW))
            await owner_client.publish(topic("w-owner", Channel.HELLO), greeting, qos=1)
            await async_wait_until(lambda: plane.registry.health("w-owner") is not None)
            store.accept_batch([Submission(parse_job(job_dict("victim"), now=None), "m-1")])
            await async_wait_until(lambda: store.get("victim").state is JobState.ASSIGNED)
            assert store.get("victim").worker_id == "w-owner"
            greeting = hello("w-other", FakeClock(NOW))
            await other_client.publish(topic("w-other", Channel.HELLO), greeting, qos=1)
            await async_wait_until(lambda: plane.registry.health("w-other") is not None)
            before = store.get("victim")

            forged = [
                event("w-other", kind, "victim", before.attempt, **fields)
                for kind, fields in FORGERIES
            ]
            for payload in forged:
                await other_client.publish(topic("w-other", Channel.EVENTS), payload, qos=1)
                # The owner's topic: the broker drops it (the ACL), so nothing arrives.
                as_owner = payload.replace(b'"w-other"', b'"w-owner"')
                await other_client.publish(topic("w-owner", Channel.EVENTS), as_owner, qos=1)
            recent = tuple(WorkerEvent.model_validate_json(p) for p in forged)
            beat = Heartbeat(worker_id="w-other", sent_at=NOW, sequence=1, recent=recent)
            beat_topic = topic("w-other", Channel.HEARTBEAT)
            await other_client.publish(beat_topic, beat.model_dump_json(), qos=1)
            await async_wait_until(lambda: plane.refusals.count("not_owner") >= 2 * len(forged), 30)
            after = store.get("victim")
            assert (after.state, after.version, after.last_checkpoint) == (
                before.state,
                before.version,
                before.last_checkpoint,
            )
            assert [e.actor for e in store.history("victim")] == ["intake", "control-plane"]

            finished = event(
                "w-owner",
                EventKind.FINISHED,
                "victim",
                before.attempt,
                output="s3://framefleet-output/videos/victim.mp4",
            )
            await clients["w-owner"].publish(topic("w-owner", Channel.EVENTS), finished, qos=1)
            await async_wait_until(lambda: store.get("victim").state is JobState.SUCCEEDED)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        store.dispose()
