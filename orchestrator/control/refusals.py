"""Worker messages the control plane refuses: logged (escaped), counted, and dead-lettered.

MQTT has no dead-letter queue of its own, so refused messages go to the SQS one the intake
uses, tagged with their topic as the source, where `framefleet dead-letters` shows them. The
sends run in the background through a bounded backlog, so a worker that floods the broker with
garbage can slow nothing down: past the backlog messages are only counted. A message refused
again (heartbeats repeat their events) is dead-lettered once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry, Counter

from kernel.bounded import BoundedSet
from kernel.clock import Clock
from kernel.dead_letter import dead_letter_attributes
from kernel.errors import FrameFleetError
from kernel.log_throttle import LogThrottle, held_back
from kernel.outside_text import printable, printable_bytes
from kernel.worker_protocol import Channel, WorkerEvent, topic
from orchestrator.intake.ports import DeadLetterQueue

log = logging.getLogger(__name__)
BACKLOG = 1000
REMEMBERED = 10_000
MAX_BODY_CHARS = 64 * 1024


class RefusedMessages:
    def __init__(
        self,
        clock: Clock,
        dead_letters: DeadLetterQueue | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._clock = clock
        self._dead_letters = dead_letters
        self._registry = registry if registry is not None else CollectorRegistry()
        self._counter = Counter(
            "framefleet_worker_messages_refused",
            "Worker messages refused, by reason",
            ["reason"],
            registry=self._registry,
        )
        self.total = 0
        self._backlog: asyncio.Queue[tuple[str, dict[str, str]]] = asyncio.Queue(BACKLOG)
        self._seen: BoundedSet[str] = BoundedSet(REMEMBERED)
        self._lines = LogThrottle(clock)

    def refuse(self, reason: str, source: str, error: str, payload: bytes, key: str = "") -> None:
        """Count and log at once; dead-letter in the background. `key` names a message that
        may come again (an event id), so it is dead-lettered once."""
        held = self._count(reason, source)
        if held is not None:
            where, why = printable(source, 200), printable(error)
            log.warning("refused %s on %s: %s%s", reason, where, why, held_back(held))
        if self._dead_letters is None or self._remembered(key):
            return
        message_id = key or f"mqtt-{self.total}"
        attributes = dead_letter_attributes(
            reason, [error], message_id, self._clock.now(), f"mqtt:{source}"
        )
        with contextlib.suppress(asyncio.QueueFull):
            self._backlog.put_nowait((printable_bytes(payload, MAX_BODY_CHARS), attributes))

    def drop(self, reason: str, sender: str) -> None:
        """A message not even read (a sender past its budget, a full inbox): counted, and a
        line per sender and reason a minute; its body is not kept, a flood is not evidence."""
        held = self._count(reason, sender)
        if held is not None:
            log.warning("dropped %s from %s%s", reason, printable(sender, 80), held_back(held))

    def _count(self, reason: str, source: str) -> int | None:
        """Counted, always; logged once per source and reason a minute (a flood of garbage is
        a count, not 60 MB of log): the lines held back since, or None for no line now."""
        self.total += 1
        self._counter.labels(reason=reason).inc()
        return self._lines.allow(f"{source}|{reason}")

    def refuse_event(self, event: WorkerEvent, why: str) -> None:
        """An event its sender may not send (see `authorise`). Heartbeats repeat events (and
        progress reports become `started` events anew): one dead letter per worker, job,
        attempt and kind."""
        key = f"{event.worker_id}:{event.job_id}:{event.attempt}:{event.kind.value}"
        source = topic(event.worker_id, Channel.EVENTS)
        self.refuse("not_owner", source, why, event.model_dump_json().encode(), key)

    def remembered(self) -> int:
        return len(self._seen) + self._backlog.qsize()

    def count(self, reason: str) -> int:
        sample = "framefleet_worker_messages_refused_total"
        return int(self._registry.get_sample_value(sample, {"reason": reason}) or 0)

    def _remembered(self, key: str) -> bool:
        return bool(key) and not self._seen.add(key)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            body, attributes = await self._backlog.get()
            try:
                await self._send(body, attributes)
            except FrameFleetError as error:
                log.warning("refused message not dead-lettered: %s", error)

    async def drain(self) -> None:
        """Send what is waiting now (a test's step instead of the background sender)."""
        while not self._backlog.empty():
            await self._send(*self._backlog.get_nowait())

    async def _send(self, body: str, attributes: dict[str, str]) -> None:
        # Only refuse() fills the backlog, and only when there is a dead-letter queue.
        assert self._dead_letters is not None
        await self._dead_letters.send(body, attributes)
