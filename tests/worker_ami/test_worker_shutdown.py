"""A worker told to stop says it is offline before its link to the broker closes: the control
plane learns at once that it left (a clean disconnect discards the last will), and the shutdown
does not wait out a publish on a closing connection."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kernel.clock import FakeClock
from kernel.mqtt_link import NotConnected
from tests.support.workers import InstantRunner, instant_parts
from worker_ami.agent.service import WorkerService


class ClosingRunner(InstantRunner):
    async def close(self) -> None:
        # A runner's close ends its render processes: it waits on them, as a real one does.
        await asyncio.sleep(0)


class ClosingLink:
    """The MQTT link's contract: connected while it runs, and a publish fails fast once its
    run was told to stop (the connection is closing)."""

    def __init__(self) -> None:
        self.connected = asyncio.Event()
        self.closing = False
        self.sent: list[tuple[str, str]] = []

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        if self.closing or not self.connected.is_set():
            raise NotConnected(f"not connected to the broker; {topic} not sent")
        self.sent.append((topic, payload))

    async def run(self, stop: asyncio.Event) -> None:
        self.connected.set()
        await stop.wait()
        self.closing = True
        self.connected.clear()


async def test_a_stopped_worker_says_it_is_offline_before_its_link_closes(
    tmp_path: Path, clock: FakeClock
) -> None:
    link = ClosingLink()
    parts = instant_parts(tmp_path, clock, ClosingRunner)
    service = WorkerService("w-leaving", parts, clock, lambda _c, _o, _w: link)
    stop = asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    await link.connected.wait()

    stop.set()
    await running

    statuses = [json.loads(payload) for topic, payload in link.sent if topic.endswith("/status")]
    assert statuses, link.sent
    assert statuses[-1]["online"] is False
    assert link.closing  # and then the link closed
