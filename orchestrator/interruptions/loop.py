"""The interruptions queue (EventBridge EC2 events delivered to SQS): parse, classify, act, and
delete the message only after the action is durable. Unknown events are deleted as no-ops;
unparseable ones go to the dead-letter queue with the reason."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Protocol

from orchestrator.domain.clock import Clock
from orchestrator.domain.dead_letter import ATTR_ERRORS, ATTR_ORIGINAL_MESSAGE_ID, ATTR_REASON
from orchestrator.domain.errors import FrameFleetError
from orchestrator.intake.ports import DeadLetterQueue, JobQueue, ReceivedMessage
from orchestrator.interruptions.events import (
    IgnoredEvent,
    Response,
    UnparseableEvent,
    classify,
    parse_event,
)

log = logging.getLogger(__name__)


class InstanceActions(Protocol):
    """What the control plane does about an instance (ControlPlaneService)."""

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]: ...

    async def stop_assigning(self, instance_id: str, reason: str) -> None: ...

    async def instance_gone(self, instance_id: str, reason: str) -> None: ...


class InterruptionsLoop:
    def __init__(
        self,
        queue: JobQueue,
        dead_letters: DeadLetterQueue,
        actions: InstanceActions,
        clock: Clock,
        wait_seconds: int = 20,
    ) -> None:
        self._queue = queue
        self._dead_letters = dead_letters
        self._actions = actions
        self._clock = clock
        self._wait = wait_seconds
        self.handled = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            receive = asyncio.ensure_future(self._queue.receive(10, self._wait, 60))
            stopper = asyncio.ensure_future(stop.wait())
            done, _ = await asyncio.wait({receive, stopper}, return_when=asyncio.FIRST_COMPLETED)
            stopper.cancel()
            if receive not in done:
                receive.cancel()
                return
            try:
                for message in receive.result():
                    await self.handle(message)
            except FrameFleetError as error:
                log.warning("interruption left for redelivery: %s", error)
                await self._clock.sleep(1.0)

    async def handle(self, message: ReceivedMessage) -> None:
        try:
            event = parse_event(message.body)
        except UnparseableEvent as error:
            await self._dead_letters.send(
                message.body,
                {
                    ATTR_REASON: "unparseable_event",
                    ATTR_ERRORS: json.dumps([str(error)]),
                    ATTR_ORIGINAL_MESSAGE_ID: message.message_id,
                },
            )
            log.warning("unparseable interruption event dead-lettered: %s", error)
        else:
            if isinstance(event, IgnoredEvent):
                log.debug("event %s ignored: %s", event.event_id, event.reason)
            else:
                response = classify(event)
                why = f"EventBridge {event.kind.value} for {event.instance_id} at {event.time}"
                if response is Response.CHECKPOINT_AND_MOVE:
                    await self._actions.interrupt_instance(event.instance_id, why)
                elif response is Response.STOP_ASSIGNING:
                    await self._actions.stop_assigning(event.instance_id, why)
                elif response is Response.INSTANCE_GONE:
                    await self._actions.instance_gone(event.instance_id, why)
        # Only now: the action above is in the database (or the event needed none).
        await self._queue.delete([message.receipt_handle])
        self.handled += 1
