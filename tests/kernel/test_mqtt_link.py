"""The MQTT link against a real Mosquitto: delivery, reconnect after a broker restart, last will."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from kernel.clock import FakeClock, SystemClock
from kernel.mqtt_link import LinkSettings, MqttLink, NotConnected
from tests.support.mosquitto import LocalMosquitto
from tests.support.waits import async_wait_until


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []

    async def __call__(self, topic: str, payload: bytes) -> None:
        self.messages.append((topic, payload))


@asynccontextmanager
async def running(link: MqttLink) -> AsyncIterator[MqttLink]:
    stop = asyncio.Event()
    task = asyncio.create_task(link.run(stop))
    try:
        await async_wait_until(link.connected.is_set)
        yield link
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def link(
    port: int, name: str, inbox: Inbox, subscriptions: list[str], **kwargs: object
) -> MqttLink:
    return MqttLink(
        LinkSettings(port=port, client_id=name, max_backoff=0.5),
        subscriptions,
        inbox,
        SystemClock(),
        **kwargs,  # type: ignore[arg-type]
    )


async def test_messages_flow_and_survive_a_broker_restart(broker: LocalMosquitto) -> None:
    inbox = Inbox()
    async with (
        running(link(broker.port, "reader", inbox, ["t/#"])) as reader,
        running(link(broker.port, "writer", Inbox(), [])) as writer,
    ):
        await writer.publish("t/1", "before")
        await async_wait_until(lambda: inbox.messages == [("t/1", b"before")])

        await asyncio.to_thread(broker.restart)
        await async_wait_until(lambda: reader.connections == 2 and writer.connections == 2)
        await async_wait_until(lambda: reader.connected.is_set() and writer.connected.is_set())
        await writer.publish("t/2", "after")
        await async_wait_until(lambda: ("t/2", b"after") in inbox.messages)


async def test_publishing_while_disconnected_fails_fast(broker: LocalMosquitto) -> None:
    offline = link(broker.port, "offline", Inbox(), [])
    with pytest.raises(NotConnected):
        await offline.publish("t/x", "nobody is connected")


DOOMED_CLIENT = """
import asyncio, sys
from kernel.clock import FakeClock, SystemClock
from kernel.mqtt_link import LastWill, LinkSettings, MqttLink

async def main():
    async def ignore(topic, payload):
        return None
    link = MqttLink(
        LinkSettings(port=int(sys.argv[1]), client_id="doomed"), [], ignore, SystemClock(),
        on_connect=lambda: link.publish("status/doomed", "online"),
        will=LastWill("status/doomed", "offline", retain=False),
    )
    await link.run(asyncio.Event())

asyncio.run(main())
"""


async def test_the_last_will_is_published_when_a_client_process_dies(
    broker: LocalMosquitto,
) -> None:
    inbox = Inbox()
    async with running(link(broker.port, "watcher", inbox, ["status/#"])):
        doomed = await asyncio.create_subprocess_exec(
            sys.executable, "-c", DOOMED_CLIENT, str(broker.port)
        )
        await async_wait_until(lambda: ("status/doomed", b"online") in inbox.messages, within=30)
        doomed.send_signal(signal.SIGKILL)
        await doomed.wait()
        await async_wait_until(lambda: ("status/doomed", b"offline") in inbox.messages, within=30)


class CutOffClient:
    """A client whose connection closes under a publish: paho cancels the pending PUBACK."""

    async def publish(self, *args: object, **kwargs: object) -> None:
        raise asyncio.CancelledError


async def test_a_publish_cut_off_by_a_closing_connection_is_not_a_cancellation() -> None:
    link = MqttLink(LinkSettings(host="127.0.0.1", port=1), [], _ignore, FakeClock())
    link._client = CutOffClient()  # type: ignore[assignment]
    link.connected.set()
    with pytest.raises(NotConnected, match="cut off"):
        await link.publish("ff/v1/workers/w/cmd", "{}")


async def _ignore(topic: str, payload: bytes) -> None:
    return None
