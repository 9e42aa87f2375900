"""One MQTT connection kept alive: reconnect with backoff, re-subscribe, last will.

MQTT 3.1.1 (what amqtt, AWS IoT Core, Mosquitto and EMQX all speak). Messages go to `on_message`
one at a time, in arrival order. `publish` fails fast while disconnected: callers re-send by
design (the control plane re-derives commands from the database; workers repeat their outcomes
in every heartbeat), so nothing waits on a dead connection.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import aiomqtt

from kernel.clock import Clock, sleep_unless_stopped, unless_stopped
from kernel.errors import FrameFleetError
from kernel.outside_text import printable

log = logging.getLogger(__name__)

MessageHandler = Callable[[str, bytes], Awaitable[None]]
# Whether a message on this topic is read at all, asked as it arrives, before it is queued:
# what it refuses never waits in the queue in front of anyone else's messages.
Admit = Callable[[str], bool]
ConnectHandler = Callable[[], Awaitable[None]]


class NotConnected(FrameFleetError):
    pass


@dataclass(frozen=True)
class LinkSettings:
    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str = "framefleet"
    username: str | None = None
    password: str | None = None
    keepalive: int = 15
    max_backoff: float = 10.0
    # TLS to the broker, its certificate verified against `ca_file` (None: the system's CAs).
    tls: bool = False
    ca_file: str | None = None


@dataclass(frozen=True)
class LastWill:
    topic: str
    payload: str
    retain: bool = True


class MqttLink:
    def __init__(
        self,
        settings: LinkSettings,
        subscriptions: Sequence[str],
        on_message: MessageHandler,
        clock: Clock,
        on_connect: ConnectHandler | None = None,
        will: LastWill | None = None,
        admit: Admit | None = None,
    ) -> None:
        self._settings = settings
        self._admit = admit
        self._subscriptions = list(subscriptions)
        self._on_message = on_message
        self._on_connect = on_connect
        self._will = will
        self._clock = clock
        self._client: aiomqtt.Client | None = None
        self.connected = asyncio.Event()
        self.connections = 0

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        client = self._client
        if client is None or not self.connected.is_set():
            raise NotConnected(f"not connected to the broker; {topic} not sent")
        try:
            await client.publish(topic, payload, qos=1, retain=retain)
        except aiomqtt.MqttError as error:
            raise NotConnected(f"publish to {topic} failed: {error}") from None
        except asyncio.CancelledError:
            # The connection closed under the publish (a broker restart): paho cancels what it
            # had in flight. That is a lost connection for the caller, not a cancellation of
            # its task, which would end the loop that published (the control plane's tick).
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            raise NotConnected(f"publish to {topic} cut off: the connection closed") from None

    async def run(self, stop: asyncio.Event) -> None:
        backoff = 0.2
        while not stop.is_set():
            try:
                await self._session(stop)
                backoff = 0.2
            except aiomqtt.MqttError as error:
                log.warning(
                    "MQTT connection to %s:%d lost: %s; retrying in %.1fs",
                    self._settings.host,
                    self._settings.port,
                    error,
                    backoff,
                )
            finally:
                self.connected.clear()
                self._client = None
            if stop.is_set():
                return
            await sleep_unless_stopped(self._clock, stop, backoff)
            backoff = min(backoff * 2, self._settings.max_backoff)

    async def _session(self, stop: asyncio.Event) -> None:
        settings = self._settings
        will = (
            aiomqtt.Will(self._will.topic, self._will.payload, qos=1, retain=self._will.retain)
            if self._will
            else None
        )
        async with aiomqtt.Client(
            settings.host,
            settings.port,
            identifier=settings.client_id,
            username=settings.username,
            password=settings.password,
            keepalive=settings.keepalive,
            will=will,
            tls_context=tls_context(settings),
            protocol=aiomqtt.ProtocolVersion.V311,
            # paho allows 20 unacknowledged QoS 1 messages by default; a control plane talking
            # to a thousand workers needs far more in flight.
            max_inflight_messages=1000,
            max_concurrent_outgoing_calls=1000,
            queue_type=gated_queue(self._admit) if self._admit else None,
        ) as client:
            for subscription in self._subscriptions:
                await client.subscribe(subscription, qos=1)
            self._client = client
            self.connected.set()
            self.connections += 1
            log.info(
                "MQTT connected to %s:%d as %s", settings.host, settings.port, settings.client_id
            )
            if self._on_connect is not None:
                await self._on_connect()
            # The MqttError that ends the session propagates from here.
            await unless_stopped(self._receive(client), stop)

    async def _receive(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            payload = message.payload
            if not isinstance(payload, bytes | bytearray):
                payload = str(payload).encode()
            where = printable(message.topic.value, 200)
            try:
                await self._on_message(message.topic.value, bytes(payload))
            except FrameFleetError as error:
                log.warning("message on %s ignored: %s", where, error)
            except Exception:
                # No message may end the session: log the bug with the topic and go on.
                log.exception("message on %s could not be handled", where)


def gated_queue(admit: Admit) -> type[asyncio.Queue[aiomqtt.Message]]:
    """aiomqtt's incoming queue, asking `admit` before it takes a message in (paho's callback
    puts each message as it is read off the socket)."""

    class GatedQueue(asyncio.Queue[aiomqtt.Message]):
        def put_nowait(self, item: aiomqtt.Message) -> None:
            if admit(item.topic.value):
                super().put_nowait(item)

    return GatedQueue


def tls_context(settings: LinkSettings) -> ssl.SSLContext | None:
    """Certificate and host name verified, TLS 1.2 at least; None for a plain connection."""
    if not settings.tls:
        return None
    context = ssl.create_default_context(cafile=settings.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
