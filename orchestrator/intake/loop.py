"""The intake loop: long-poll batches, store jobs, dead-letter the rest, delete last.

Guarantee: a message is deleted only after its outcome is durable (the job committed, or the
rejection recorded and sent to the dead-letter queue). A crash anywhere before the delete brings
the message back after the visibility timeout, and the store makes the second pass a no-op.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from kernel.clock import Clock, sleep_unless_stopped, unless_stopped
from kernel.dead_letter import ATTR_BODY_TRUNCATED, dead_letter_attributes
from kernel.errors import FrameFleetError, MessageTooLarge, StoreUnavailable
from kernel.job_record import AcceptOutcome, Rejection, Submission
from kernel.job_spec import DEFAULT_MAX_MESSAGE_BYTES
from kernel.notify_spec import WebhookRule
from kernel.outage import Outage
from kernel.outside_text import printable
from orchestrator.intake.decode import (
    RejectionReason,
    conflicting_duplicate,
    decode_message,
    handler_error,
)
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.intake.model_door import DoorRefusal, ModelDoor
from orchestrator.intake.ports import DeadLetterQueue, JobSink, MessageQueue, ReceivedMessage
from orchestrator.intake.sender_teams import sender_team

log = logging.getLogger(__name__)

# Room left for attributes when a rejected body has to be shortened to fit the DLQ.
TRUNCATED_BODY_CHARS = 200 * 1024


@dataclass(frozen=True)
class IntakeSettings:
    concurrency: int = 4
    batch_size: int = 10
    wait_seconds: int = 20
    visibility_timeout: int = 60
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_backoff_seconds: float = 30.0
    # Where a job's output may go: under one of these prefixes (the workers' writable places).
    output_prefixes: tuple[str, ...] = ()
    # Where a job's `notify` webhook may point (notices.*): public https by default.
    webhooks: WebhookRule = field(default_factory=WebhookRule)
    # SQS SenderId (an IAM user's or role's id) -> the teams it submits for (`sender_teams`).
    sender_teams: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


class IntakeLoop:
    def __init__(
        self,
        queue: MessageQueue,
        dead_letters: DeadLetterQueue,
        sink: JobSink,
        clock: Clock,
        metrics: IntakeMetrics,
        settings: IntakeSettings,
        source_queue: str = "",
        door: ModelDoor | None = None,
    ) -> None:
        self._queue = queue
        self._dead_letters = dead_letters
        self._sink = sink
        self._clock = clock
        self._metrics = metrics
        self._settings = settings
        self._source_queue = source_queue
        self._door = door  # the model registry's check; None: any model is accepted

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until `stop` is set; batches in flight then finish before this returns."""
        pollers = [
            asyncio.create_task(self._poll(stop), name=f"intake-poller-{i}")
            for i in range(self._settings.concurrency)
        ]
        await asyncio.gather(*pollers)

    async def _poll(self, stop: asyncio.Event) -> None:
        outage = Outage(
            "the jobs queue or the store",
            log,
            self._clock,
            longest_wait=self._settings.max_backoff_seconds,
        )
        while not stop.is_set():
            try:
                batch = await self._receive_until(stop)
                if batch:
                    await self.process(batch)
                outage.answered()
            except Exception as error:
                # Ours (the database or SQS is down) or a bug: nothing was deleted, so the
                # batch comes back after its visibility timeout; the poller itself goes on.
                # Messages that fail on their own are dead-lettered inside `_handle`.
                self._metrics.errors.labels(kind=type(error).__name__).inc()
                if not isinstance(error, FrameFleetError):
                    log.exception("intake batch left for redelivery after an unexpected error")
                await sleep_unless_stopped(self._clock, stop, outage.failed(error))

    async def _receive_until(self, stop: asyncio.Event) -> list[ReceivedMessage]:
        receive = self._queue.receive(
            self._settings.batch_size,
            self._settings.wait_seconds,
            self._settings.visibility_timeout,
        )
        # Received even if stop came at the same moment: processed rather than left invisible
        # for a whole timeout.
        received = await unless_stopped(receive, stop)
        return received.value if received is not None else []

    async def process(self, batch: Sequence[ReceivedMessage]) -> None:
        """Handle one received batch to the end (store, dead-letter, delete)."""
        started = asyncio.get_running_loop().time()
        keeper = asyncio.create_task(self._keep_invisible([m.receipt_handle for m in batch]))
        try:
            await self._handle(batch)
        finally:
            keeper.cancel()
        self._metrics.batch_seconds.observe(asyncio.get_running_loop().time() - started)

    async def _handle(self, batch: Sequence[ReceivedMessage]) -> None:
        now = self._clock.now()
        bodies = {message.message_id: message.body for message in batch}
        submissions: list[Submission] = []
        rejections: list[Rejection] = []
        for message in batch:
            decoded = self._decode(message, now)
            if isinstance(decoded, Submission):
                decoded = await self._inputs_checked(decoded, message)
            if isinstance(decoded, Submission):
                submissions.append(decoded)
            else:
                rejections.append(decoded)

        for submission, outcome in await self._accept(submissions, bodies):
            if isinstance(outcome, Rejection):
                rejections.append(outcome)
            elif outcome is AcceptOutcome.CONFLICT:
                rejections.append(conflicting_duplicate(submission, bodies[submission.message_id]))
            else:
                self._metrics.messages.labels(outcome=outcome.value).inc()

        for rejection in rejections:
            await self._dead_letter(rejection)

        await self._queue.delete([message.receipt_handle for message in batch])

    async def _inputs_checked(
        self, submission: Submission, message: ReceivedMessage
    ) -> Submission | Rejection:
        """The job's input objects (image, adapter files) read at the door: a missing or
        unusable one is refused before the job costs a boot."""
        spec = submission.spec
        if self._door is None or (spec.image is None and not spec.adapters):
            return submission
        refused = await self._door.inputs_refusal(spec)
        if refused is None:
            return submission
        reason = RejectionReason(refused.reason.value)
        return Rejection(message.message_id, reason, (refused.error,), message.body)

    def _decode(self, message: ReceivedMessage, now: datetime) -> Submission | Rejection:
        try:
            decoded = decode_message(
                message,
                max_bytes=self._settings.max_message_bytes,
                now=now,
                outputs=self._settings.output_prefixes,
                webhooks=self._settings.webhooks,
            )
            if not isinstance(decoded, Submission):
                return decoded
            teamed = sender_team(decoded.spec, message.sender, self._settings.sender_teams)
            if isinstance(teamed, str):
                reason = RejectionReason.TEAM_NOT_ALLOWED
                return Rejection(message.message_id, reason, (teamed,), message.body)
            if self._door is None:
                return Submission(teamed, decoded.message_id)
            admitted = self._door.admit(teamed)
            if isinstance(admitted, DoorRefusal):
                reason = RejectionReason(admitted.reason.value)
                return Rejection(message.message_id, reason, (admitted.error,), message.body)
            return Submission(admitted, decoded.message_id)
        except Exception as error:  # the parser is total; this only guards against our bugs
            log.exception("message %s could not be decoded", message.message_id)
            return handler_error(message.message_id, message.body, error)

    async def _accept(
        self, submissions: list[Submission], bodies: dict[str, str]
    ) -> list[tuple[Submission, AcceptOutcome | Rejection]]:
        """Store the batch in one transaction. If the database refuses it for a reason other
        than being unavailable (a value it cannot store, a bug), each job is stored on its own
        and the one that still fails is dead-lettered: one message never holds back the rest."""
        try:
            outcomes = await asyncio.to_thread(self._sink.accept_batch, submissions)
            return list(zip(submissions, outcomes, strict=True))
        except StoreUnavailable:
            raise
        except Exception:
            log.warning("batch of %d refused by the store; storing one by one", len(submissions))
        alone: list[tuple[Submission, AcceptOutcome | Rejection]] = []
        for submission in submissions:
            try:
                (outcome,) = await asyncio.to_thread(self._sink.accept_batch, [submission])
                alone.append((submission, outcome))
            except StoreUnavailable:
                raise
            except Exception as error:
                log.warning(
                    "message %s refused by the store: %s",
                    submission.message_id,
                    printable(str(error)),
                )
                body = bodies[submission.message_id]
                alone.append((submission, handler_error(submission.message_id, body, error)))
        return alone

    async def _dead_letter(self, rejection: Rejection) -> None:
        needs_send = await asyncio.to_thread(self._sink.record_rejection, rejection)
        if not needs_send:
            # A redelivery of a message already dead-lettered.
            self._metrics.messages.labels(outcome="duplicate").inc()
            return
        await self._send_to_dead_letters(rejection)
        await asyncio.to_thread(self._sink.mark_dead_lettered, rejection.message_id)
        self._metrics.messages.labels(outcome="dead_lettered").inc()
        self._metrics.dead_lettered.labels(reason=rejection.reason).inc()
        log.info(
            "dead-lettered message %s: %s: %s",
            rejection.message_id,
            rejection.reason,
            printable("; ".join(rejection.errors)),
        )

    async def _send_to_dead_letters(self, rejection: Rejection) -> None:
        attributes = dead_letter_attributes(
            rejection.reason,
            rejection.errors,
            rejection.message_id,
            self._clock.now(),
            self._source_queue,
        )
        try:
            await self._dead_letters.send(rejection.body, attributes)
        except MessageTooLarge:
            # The body plus our attributes no longer fit; the store's ledger keeps the full body.
            attributes[ATTR_BODY_TRUNCATED] = "true"
            await self._dead_letters.send(rejection.body[:TRUNCATED_BODY_CHARS], attributes)

    async def _keep_invisible(self, receipt_handles: list[str]) -> None:
        """Extend the visibility of a slow batch so no other poller receives it meanwhile."""
        timeout = self._settings.visibility_timeout
        while True:
            await self._clock.sleep(timeout / 2)
            try:
                await self._queue.extend_visibility(receipt_handles, timeout)
                self._metrics.visibility_extensions.inc()
            except FrameFleetError as error:
                log.warning("could not extend visibility: %s", error)
