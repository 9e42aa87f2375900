"""The interruptions queue (EventBridge EC2 events delivered to SQS): parse, screen, classify,
act, and delete the message only after the action is durable.

Each message is handled on its own: unknown, foreign (another region) and stale events are
deleted as no-ops; unparseable ones, and ones whose handling fails for a reason of their own,
go to the dead-letter queue with the reason. An action that fails for a reason that may pass
(the database is down) leaves the message for redelivery, `max_tries` times at most.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from kernel.clock import Clock, sleep_unless_stopped, unless_stopped
from kernel.dead_letter import dead_letter_attributes
from kernel.errors import FrameFleetError
from kernel.outage import Outage
from kernel.outside_text import printable
from orchestrator.intake.ports import DeadLetterQueue, MessageQueue, ReceivedMessage
from orchestrator.interruptions.events import (
    IgnoredEvent,
    InstanceEvent,
    Response,
    UnparseableEvent,
    classify,
    parse_events,
    screen,
)

log = logging.getLogger(__name__)


class InstanceActions(Protocol):
    """What the control plane does about an instance (ControlPlaneService)."""

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]: ...

    async def stop_assigning(self, instance_id: str, reason: str) -> None: ...

    async def instance_gone(self, instance_id: str, reason: str) -> None: ...


@dataclass(frozen=True)
class InterruptionSettings:
    region: str = "us-east-1"
    # Older events describe a past that heartbeat timeouts have already settled.
    max_event_age: timedelta = timedelta(minutes=15)
    wait_seconds: int = 20
    # Receives of one message whose action keeps failing before it is dead-lettered.
    max_tries: int = 5


class InterruptionMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.messages = Counter(
            "framefleet_interruption_events",
            "EventBridge messages handled, by outcome (acted, ignored, dead_lettered, retried)",
            ["outcome"],
            registry=registry,
        )

    def count(self, outcome: str) -> None:
        self.messages.labels(outcome=outcome).inc()


class InterruptionsLoop:
    def __init__(
        self,
        queue: MessageQueue,
        dead_letters: DeadLetterQueue,
        actions: InstanceActions,
        clock: Clock,
        settings: InterruptionSettings | None = None,
        metrics: InterruptionMetrics | None = None,
    ) -> None:
        self._queue = queue
        self._dead_letters = dead_letters
        self._actions = actions
        self._clock = clock
        self._settings = settings or InterruptionSettings()
        self._metrics = metrics or InterruptionMetrics(CollectorRegistry())
        self.handled = 0

    async def run(self, stop: asyncio.Event) -> None:
        outage = Outage("the interruptions queue", log, self._clock)
        while not stop.is_set():
            wait = self._settings.wait_seconds
            try:
                # The receive too: SQS out of reach for a moment stopped every replica when
                # only the handling was guarded (issue 48).
                received = await unless_stopped(self._queue.receive(10, wait, 60), stop)
                if received is None:
                    return
                for message in received.value:
                    await self.handle(message)
                outage.answered()
            except FrameFleetError as error:
                # SQS itself failed (receive, delete or dead-letter): the process's trouble,
                # not a message's. What was not deleted comes back.
                await sleep_unless_stopped(self._clock, stop, outage.failed(error))

    async def handle(self, message: ReceivedMessage) -> None:
        """One message, start to end. Only SQS failures escape (the message then stays)."""
        try:
            outcome = await self._act(message)
        except UnparseableEvent as error:
            await self._dead_letter(message, "unparseable_event", str(error))
            outcome = "dead_lettered"
        except FrameFleetError as error:
            if message.receive_count < self._settings.max_tries:
                log.warning(
                    "interruption %s left for redelivery (try %d of %d): %s",
                    message.message_id,
                    message.receive_count,
                    self._settings.max_tries,
                    error,
                )
                self._metrics.count("retried")
                return
            await self._dead_letter(message, "gave_up", f"{type(error).__name__}: {error}")
            outcome = "dead_lettered"
        except Exception as error:
            log.exception("interruption %s could not be handled", message.message_id)
            await self._dead_letter(message, "handler_error", f"{type(error).__name__}: {error}")
            outcome = "dead_lettered"
        # Only now: the action is in the database, or the event needed none, or it is
        # dead-lettered.
        await self._queue.delete([message.receipt_handle])
        self._metrics.count(outcome)
        self.handled += 1

    async def _act(self, message: ReceivedMessage) -> str:
        events = parse_events(message.body)
        if isinstance(events, IgnoredEvent):
            log.debug("event %s ignored: %s", printable(events.event_id, 64), events.reason)
            return "ignored"
        outcome = "ignored"
        for event in events:
            now, region = self._clock.now(), self._settings.region
            why_not = screen(event, now, region, self._settings.max_event_age)
            if why_not is not None:
                event_id = printable(event.event_id, 64)
                log.info("event %s for %s ignored: %s", event_id, event.instance_id, why_not)
                continue
            await self._respond(event)
            outcome = "acted"
        return outcome

    async def _respond(self, event: InstanceEvent) -> None:
        response = classify(event)
        why = f"EventBridge {event.kind.value} for {event.instance_id} at {event.time}"
        if response is Response.CHECKPOINT_AND_MOVE:
            await self._actions.interrupt_instance(event.instance_id, why)
        elif response is Response.STOP_ASSIGNING:
            await self._actions.stop_assigning(event.instance_id, why)
        elif response is Response.INSTANCE_GONE:
            await self._actions.instance_gone(event.instance_id, why)

    async def _dead_letter(self, message: ReceivedMessage, reason: str, error: str) -> None:
        log.warning(
            "interruption %s dead-lettered: %s: %s", message.message_id, reason, printable(error)
        )
        await self._dead_letters.send(
            message.body,
            dead_letter_attributes(reason, [error], message.message_id, self._clock.now()),
        )
