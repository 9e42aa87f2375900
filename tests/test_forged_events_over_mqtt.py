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
from orchestrator.control.reception import WORKER_TOPICS
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
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
    "i-0000000000000aaaa": "owner-secret",
    "i-0000000000000bbbb": "other-secret",
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
        connect=lambda deliver, admit: MqttLink(link, WORKER_TOPICS, deliver, clock, admit=admit),
        refusals=RefusedMessages(clock),
        instances=InstanceLedger(engine, clock),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(plane.run(stop))
    try:
        with pytest.raises(aiomqtt.MqttError):  # a wrong password does not even connect
            async with aiomqtt.Client(
                "127.0.0.1", secured_broker, username="i-0000000000000bbbb", password="guess"
            ):
                pass
        async with (
            as_worker(secured_broker, "i-0000000000000aaaa") as owner_client,
            as_worker(secured_broker, "i-0000000000000bbbb") as other_client,
        ):
            assert isinstance(plane.link, MqttLink)
            connected = plane.link.connected
            await async_wait_until(connected.is_set)
            clients = {"i-0000000000000aaaa": owner_client, "i-0000000000000bbbb": other_client}
            # Only the owner says hello first, so the job surely goes to it.
            greeting = hello("i-0000000000000aaaa", FakeClock(NOW))
            await owner_client.publish(topic("i-0000000000000aaaa", Channel.HELLO), greeting, qos=1)
            await async_wait_until(lambda: plane.registry.health("i-0000000000000aaaa") is not None)
            store.accept_batch([Submission(parse_job(job_dict("victim"), now=None), "m-1")])
            await async_wait_until(lambda: store.get("victim").state is JobState.ASSIGNED)
            assert store.get("victim").worker_id == "i-0000000000000aaaa"
            greeting = hello("i-0000000000000bbbb", FakeClock(NOW))
            await other_client.publish(topic("i-0000000000000bbbb", Channel.HELLO), greeting, qos=1)
            await async_wait_until(lambda: plane.registry.health("i-0000000000000bbbb") is not None)
            before = store.get("victim")

            forged = [
                event("i-0000000000000bbbb", kind, "victim", before.attempt, **fields)
                for kind, fields in FORGERIES
            ]
            for payload in forged:
                await other_client.publish(
                    topic("i-0000000000000bbbb", Channel.EVENTS), payload, qos=1
                )
                # The owner's topic: the broker drops it (the ACL), so nothing arrives.
                as_owner = payload.replace(b'"i-0000000000000bbbb"', b'"i-0000000000000aaaa"')
                await other_client.publish(
                    topic("i-0000000000000aaaa", Channel.EVENTS), as_owner, qos=1
                )
            recent = tuple(WorkerEvent.model_validate_json(p) for p in forged)
            beat = Heartbeat(
                worker_id="i-0000000000000bbbb", sent_at=NOW, sequence=1, recent=recent
            )
            beat_topic = topic("i-0000000000000bbbb", Channel.HEARTBEAT)
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
                "i-0000000000000aaaa",
                EventKind.FINISHED,
                "victim",
                before.attempt,
                output="s3://framefleet-output/videos/victim.mp4",
            )
            await clients["i-0000000000000aaaa"].publish(
                topic("i-0000000000000aaaa", Channel.EVENTS), finished, qos=1
            )
            await async_wait_until(lambda: store.get("victim").state is JobState.SUCCEEDED)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        store.dispose()
