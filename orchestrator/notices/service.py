"""The notices' loop, on the leading replica only: relay the job history's new lines into the
outbox, then send what is due, each notice to its target, retried with backoff (5 s doubling
to an hour, spread) and given up as `dead` after its last try (README, "Completion notices").
Sending never blocks the control plane: it is a loop of its own, each send bounded by its
timeout; a notice the leader sent but had not marked when it died is sent again by the next
leader under the same `notice_id` (at least once)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter

from kernel.clock import Clock, sleep_unless_stopped
from kernel.job_record import JobEvent
from kernel.job_spec import JobSpec
from orchestrator.notices.payload import notice_of
from orchestrator.store.notice_book import Drafter, NoticeDraft, StoredNotice

log = logging.getLogger(__name__)
WEBHOOK, EVENTBRIDGE = "webhook", "eventbridge"


class NoticeStore(Protocol):
    def relay(self, draft: Drafter, settled_before: datetime, limit: int = ...) -> int: ...

    def due(self, now: datetime, limit: int = ...) -> list[StoredNotice]: ...

    def delivered(self, row_id: int) -> None: ...

    def failed(self, row_id: int, attempts: int, error: str, next_at: datetime | None) -> None: ...


class NoticeSender(Protocol):
    async def send(self, notice: StoredNotice) -> str | None: ...


@dataclass(frozen=True)
class NoticeSettings:
    max_attempts: int = 12  # about 3 hours of tries
    first_retry_seconds: float = 5.0
    max_retry_seconds: float = 3600.0
    poll_seconds: float = 1.0
    # A history line younger than this is left for the next look: a transaction that took an
    # id before another but commits after it is not skipped.
    settle_seconds: float = 5.0
    batch: int = 50


def drafter(targets: Sequence[str]) -> Drafter:
    """Every notice to the bus (when there is one), and to the job's webhook when it asked."""

    def draft(event_id: int, event: JobEvent, spec: JobSpec) -> list[NoticeDraft]:
        notice = notice_of(event_id, event, spec)
        if notice is None:
            return []
        made = [
            NoticeDraft(notice.notice_id, target, notice.job_id, notice.kind, notice.body)
            for target in targets
            if target != WEBHOOK
        ]
        if notice.webhook is not None and WEBHOOK in targets:
            made.append(
                NoticeDraft(
                    notice.notice_id,
                    WEBHOOK,
                    notice.job_id,
                    notice.kind,
                    notice.body,
                    notice.webhook,
                )
            )
        return made

    return draft


def retry_delay(notice_id: str, attempts: int, settings: NoticeSettings) -> float:
    """Doubling from the first retry's delay up to the most, each spread over its upper half
    by the notice's own hash, so a receiver back from an outage is not met by all at once."""
    doubled = settings.first_retry_seconds * 2.0 ** (attempts - 1)
    full = min(settings.max_retry_seconds, doubled)
    spread = hashlib.sha256(f"{notice_id}:{attempts}".encode()).digest()[0] / 255
    return full * (0.5 + 0.5 * spread)


class NoticeService:
    def __init__(
        self,
        store: NoticeStore,
        senders: Mapping[str, NoticeSender],
        clock: Clock,
        leads: Callable[[], bool],
        registry: CollectorRegistry,
        settings: NoticeSettings = NoticeSettings(),
    ) -> None:
        self._store, self._senders, self._clock = store, senders, clock
        self._leads, self.settings = leads, settings
        self._draft = drafter(tuple(senders))
        self._sent = Counter(
            "framefleet_notices_total",
            "Notice deliveries by target and outcome (delivered, retry, dead)",
            ["target", "outcome"],
            registry=registry,
        )

    async def step(self) -> int:
        """One look: relay, then send what is due. Returns how many it tried to send."""
        if not self._leads():
            return 0
        now = self._clock.now()
        settled = now - timedelta(seconds=self.settings.settle_seconds)
        await asyncio.to_thread(self._store.relay, self._draft, settled)
        due = await asyncio.to_thread(self._store.due, now, self.settings.batch)
        await asyncio.gather(*(self._send(notice) for notice in due))
        return len(due)

    async def _send(self, notice: StoredNotice) -> None:
        sender = self._senders.get(notice.target)
        error = await sender.send(notice) if sender else f"no {notice.target} configured"
        if error is None:
            await asyncio.to_thread(self._store.delivered, notice.id)
            self._sent.labels(notice.target, "delivered").inc()
            return
        attempts = notice.attempts + 1
        next_at = None
        if attempts < self.settings.max_attempts:
            delay = retry_delay(notice.notice_id, attempts, self.settings)
            next_at = self._clock.now() + timedelta(seconds=delay)
        outcome = "retry" if next_at else "dead"
        log.warning(
            "notice %s of job %s to %s: try %d failed (%s)%s",
            notice.notice_id,
            notice.job_id,
            notice.target,
            attempts,
            error,
            "" if next_at else "; given up (dead)",
        )
        await asyncio.to_thread(self._store.failed, notice.id, attempts, error, next_at)
        self._sent.labels(notice.target, outcome).inc()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.step()
            await sleep_unless_stopped(self._clock, stop, self.settings.poll_seconds)
