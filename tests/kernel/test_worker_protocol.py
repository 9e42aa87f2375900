"""The MQTT worker protocol: topics, validation at the boundary, and the broker ACL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from framefleet.local_ports import free_port
from kernel.job_spec import parse_job
from kernel.worker_protocol import (
    Channel,
    Command,
    CommandKind,
    EventKind,
    Heartbeat,
    ProtocolError,
    WorkerEvent,
    decode_command,
    decode_worker_message,
    parse_topic,
    topic,
)
from tests.support.jobs import job_dict
from tests.support.mosquitto import LocalMosquitto
from tests.support.paths import ACL
from tests.support.worker_messages import NOW, hello


def test_topics_round_trip_and_refuse_wildcards() -> None:
    assert topic("w-1.a", Channel.EVENTS) == "ff/v1/workers/w-1.a/events"
    assert parse_topic("ff/v1/workers/w-1.a/events") == ("w-1.a", Channel.EVENTS)
    for bad in ("w/1", "w+", "#", ""):
        with pytest.raises(ProtocolError):
            topic(bad, Channel.CMD)
    for bad_topic in ("ff/v2/workers/w1/events", "ff/v1/workers/w1/other", "ff/v1/workers/w1"):
        with pytest.raises(ProtocolError):
            parse_topic(bad_topic)


def test_every_message_kind_round_trips() -> None:
    event = WorkerEvent(
        worker_id="w1",
        sent_at=NOW,
        event_id="evt-00000001",
        kind=EventKind.CHECKPOINT_DURABLE,
        job_id="j1",
        attempt=2,
        step=5,
        checkpoint="checkpoints/j1/2/000005/manifest.json",
    )
    heartbeat = Heartbeat(worker_id="w1", sent_at=NOW, sequence=7)
    for message, channel in (
        (hello(), Channel.HELLO),
        (event, Channel.EVENTS),
        (heartbeat, Channel.HEARTBEAT),
    ):
        payload = message.model_dump_json().encode()
        assert decode_worker_message(topic("w1", channel), payload) == message
    command = Command(
        worker_id="w1",
        sent_at=NOW,
        command_id="cmd-00000001",
        kind=CommandKind.ASSIGN,
        job_id="j1",
        attempt=2,
        gpu_index=0,
        spec=parse_job(job_dict("j1"), now=None),
    )
    assert decode_command(topic("w1", Channel.CMD), command.model_dump_json().encode()) == command


@pytest.mark.parametrize(
    ("topic_name", "payload", "complaint"),
    [
        ("ff/v1/workers/w2/hello", hello("w1").model_dump_json().encode(), "payload says 'w1'"),
        ("ff/v1/workers/w1/events", hello("w1").model_dump_json().encode(), "hello message on"),
        ("ff/v1/workers/w1/hello", b"{not json", "malformed hello message"),
        ("ff/v1/workers/w1/hello", b'{"type": "hello", "worker_id": "w1"}', "malformed"),
        ("ff/v1/workers/w1/cmd", b"{}", "workers do not publish commands"),
        ("ff/v1/workers/w1/events", b" " * (600 * 1024), "over"),
    ],
)
def test_bad_messages_are_refused_with_a_reason(
    topic_name: str, payload: bytes, complaint: str
) -> None:
    with pytest.raises(ProtocolError, match=complaint):
        decode_worker_message(topic_name, payload)


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[int]:
    """A Mosquitto of our own on a free port, with the shipped ACL file."""
    broker = LocalMosquitto(tmp_path, free_port(), acl_file=ACL)
    broker.start()
    yield broker.port
    broker.stop()


async def test_the_acl_lets_a_worker_publish_only_as_itself(acl_broker: int) -> None:
    port = acl_broker
    async with (
        aiomqtt.Client(
            "127.0.0.1", port, username="framefleet-control-plane", identifier="cp"
        ) as control,
        aiomqtt.Client("127.0.0.1", port, username="w1", identifier="w1") as worker,
    ):
        await control.subscribe("ff/v1/workers/+/hello", qos=1)
        # w1 pretends to be w2 first, then speaks as itself: QoS 1 from one connection arrives
        # in order, so if the forged message got through it would arrive first.
        await worker.publish(topic("w2", Channel.HELLO), hello("w2").model_dump_json(), qos=1)
        await worker.publish(topic("w1", Channel.HELLO), hello("w1").model_dump_json(), qos=1)
        async with asyncio.timeout(10):
            message = await anext(aiter(control.messages))
        assert str(message.topic) == "ff/v1/workers/w1/hello"
        decoded = decode_worker_message(str(message.topic), bytes(message.payload))
        assert decoded.worker_id == "w1"
