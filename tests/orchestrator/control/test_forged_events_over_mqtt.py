"""End to end over Mosquitto with the shipped ACL and per-worker passwords: a worker that
forges every kind of event for another worker's job, on its own topic, inside its heartbeat,
or on the other worker's topic, changes nothing; the owner still finishes the job."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import aiomqtt
import pytest

from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.mqtt_link import MqttLink
from kernel.worker_protocol import Channel, EventKind, Heartbeat, WorkerEvent, topic
from orchestrator.control.settings import ControlSettings
from orchestrator.store.engine import make_engine
from orchestrator.store.migrate import upgrade_to_head
from tests.support.acl_broker import CONTROL_PLANE, acl_broker, as_worker, plane_on_broker
from tests.support.control_plane import FORGERIES, NOW, OTHER, OWNER, event, hello, listed
from tests.support.jobs import job_dict
from tests.support.waits import async_wait_until

PASSWORDS = {CONTROL_PLANE: "cp-secret", OWNER: "owner-secret", OTHER: "other-secret"}


@pytest.fixture
def secured_broker(tmp_path: Path) -> Iterator[int]:
    with acl_broker(tmp_path, PASSWORDS) as port:
        yield port


async def test_forged_events_change_nothing_under_the_acl(
    secured_broker: int, sqlite_url: str
) -> None:
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    settings = ControlSettings(tick_seconds=0.1, resend_after=timedelta(seconds=30))
    plane, store = plane_on_broker(engine, secured_broker, PASSWORDS[CONTROL_PLANE], settings)
    listed(store, OWNER, OTHER)
    stop = asyncio.Event()
    task = asyncio.create_task(plane.run(stop))
    try:
        with pytest.raises(aiomqtt.MqttError):  # a wrong password does not even connect
            async with aiomqtt.Client(
                "127.0.0.1", secured_broker, username=OTHER, password="guess"
            ):
                pass
        async with (
            as_worker(secured_broker, OWNER, PASSWORDS[OWNER]) as owner_client,
            as_worker(secured_broker, OTHER, PASSWORDS[OTHER]) as other_client,
        ):
            assert isinstance(plane.link, MqttLink)
            connected = plane.link.connected
            await async_wait_until(connected.is_set)
            clients = {OWNER: owner_client, OTHER: other_client}
            # Only the owner says hello first, so the job surely goes to it.
            greeting = hello(OWNER, FakeClock(NOW))
            await owner_client.publish(topic(OWNER, Channel.HELLO), greeting, qos=1)
            await async_wait_until(lambda: plane.registry.health(OWNER) is not None)
            store.intake.accept_batch([Submission(parse_job(job_dict("victim"), now=None), "m-1")])
            await async_wait_until(lambda: store.get("victim").state is JobState.ASSIGNED)
            assert store.get("victim").worker_id == OWNER
            greeting = hello(OTHER, FakeClock(NOW))
            await other_client.publish(topic(OTHER, Channel.HELLO), greeting, qos=1)
            await async_wait_until(lambda: plane.registry.health(OTHER) is not None)
            before = store.get("victim")

            forged = [
                event(OTHER, kind, "victim", before.attempt, **fields) for kind, fields in FORGERIES
            ]
            for payload in forged:
                await other_client.publish(topic(OTHER, Channel.EVENTS), payload, qos=1)
                # The owner's topic: the broker drops it (the ACL), so nothing arrives.
                as_owner = payload.replace(b"OTHER", b"OWNER")
                await other_client.publish(topic(OWNER, Channel.EVENTS), as_owner, qos=1)
            recent = tuple(WorkerEvent.model_validate_json(p) for p in forged)
            beat = Heartbeat(worker_id=OTHER, sent_at=NOW, sequence=1, recent=recent)
            beat_topic = topic(OTHER, Channel.HEARTBEAT)
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
                OWNER,
                EventKind.FINISHED,
                "victim",
                before.attempt,
                output="s3://framefleet-output/videos/victim.mp4",
            )
            await clients[OWNER].publish(topic(OWNER, Channel.EVENTS), finished, qos=1)
            await async_wait_until(lambda: store.get("victim").state is JobState.SUCCEEDED)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        store.dispose()
