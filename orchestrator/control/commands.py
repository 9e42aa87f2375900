"""Commands to workers, derived from the database and re-sent with backoff.

The same command id goes out on every re-send, so a worker acts once per (job, attempt, kind).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from kernel.clock import Clock
from kernel.job_record import JobRecord, Placement
from kernel.job_state import ACTIVE_STATES
from kernel.mqtt_link import NotConnected
from kernel.worker_protocol import Channel, Command, CommandKind, WorkerEvent, topic
from orchestrator.control.checkpoint_pace import CheckpointPace
from orchestrator.control.settings import ControlSettings, ControlStats, WorkerLink

log = logging.getLogger(__name__)


def command_id(kind: CommandKind, job: JobRecord) -> str:
    attempt_id = uuid.uuid5(uuid.NAMESPACE_URL, f"framefleet:{job.job_id}/{job.attempt}")
    return f"{kind.value.replace('_', '-')}-{attempt_id}"


class CommandSender:
    def __init__(
        self,
        link: WorkerLink,
        clock: Clock,
        settings: ControlSettings,
        stats: ControlStats,
        pace: CheckpointPace | None = None,
        expected_step: Callable[[Placement], float | None] | None = None,
    ) -> None:
        self._pace = pace  # each assignment's checkpoint interval (None: the worker's own)
        # Each assignment's expected seconds per step: the worker's stall watchdog's bound.
        self._expected_step = expected_step
        self._link = link
        self._clock = clock
        self._settings = settings
        self._stats = stats
        # (job, attempt, kind) -> when it last went out and how often it has.
        self._last_sent: dict[tuple[str, int, CommandKind], tuple[datetime, int]] = {}

    def forget_all_but(self, active: set[tuple[str, int]]) -> None:
        """Drop what was sent for attempts no longer active (job, attempt): the map stays the
        size of the work in flight."""
        for key in [k for k in self._last_sent if (k[0], k[1]) not in active]:
            del self._last_sent[key]

    def remembered(self) -> int:
        return len(self._last_sent)

    async def send_all(
        self, commands: list[tuple[Placement, CommandKind]], force: bool = False
    ) -> None:
        """Publish side by side: each QoS 1 publish waits for its PUBACK, and a thousand of
        them one after another would take seconds."""
        if self._pace is not None and any(kind is CommandKind.ASSIGN for _, kind in commands):
            await self._pace.refresh()
        await asyncio.gather(*(self.send(p, kind, force) for p, kind in commands))

    async def send(self, placement: Placement, kind: CommandKind, force: bool = False) -> bool:
        """Publish unless the same command went out too recently (or `force`); True when it was
        published now. Re-sends back off (resend_after, then twice that, up to resend_max): a
        control plane behind on its events must not bury the broker in repeats of commands
        whose answers are merely queued."""
        job = placement.job
        key = (job.job_id, job.attempt, kind)
        now = self._clock.now()
        last, sends = self._last_sent.get(key, (None, 0))
        wait = min(
            self._settings.resend_after * (1 << max(0, sends - 1)), self._settings.resend_max
        )
        if not force and last is not None and now - last < wait:
            return False
        command = Command(
            worker_id=placement.worker_id,
            sent_at=now,
            # The same id on every re-send: the worker acts once per (job, attempt, kind).
            command_id=command_id(kind, job),
            kind=kind,
            job_id=job.job_id,
            attempt=job.attempt,
            # What an assignment needs; other commands name the job and attempt only.
            gpu_index=placement.gpu_index if kind is CommandKind.ASSIGN else None,
            span=placement.span if kind is CommandKind.ASSIGN else (),
            spec=job.spec if kind is CommandKind.ASSIGN else None,
            resume_from=job.last_checkpoint if kind is CommandKind.ASSIGN else None,
            resume_step=job.checkpoint_step if kind is CommandKind.ASSIGN else None,
            stage=job.stage if kind is CommandKind.ASSIGN else None,
            mtbi_seconds=self._pace.mtbi_seconds(placement.worker_id)
            if self._pace is not None and kind is CommandKind.ASSIGN
            else None,
            expected_step_seconds=self._expected_step(placement)
            if self._expected_step is not None and kind is CommandKind.ASSIGN
            else None,
        )
        try:
            await self._link.publish(
                topic(placement.worker_id, Channel.CMD), command.model_dump_json()
            )
        except NotConnected as error:
            log.info("command not sent yet: %s", error)
            return False
        self._last_sent[key] = (now, sends + 1)
        self._stats.commands_sent += 1
        return True

    async def cancel_zombie(self, job: JobRecord, event: WorkerEvent) -> None:
        """A worker runs an attempt the job has left (it was cut off, the job moved on): stop
        it, so its GPU is free for the work the scheduler believes it can give it."""
        if job.state in ACTIVE_STATES and event.attempt == job.attempt:
            return
        attempt = event.attempt or 0
        zombie = Placement(replace(job, attempt=attempt), event.worker_id, 0, self._clock.now())
        if not await self.send(zombie, CommandKind.CANCEL):
            return
        log.info(
            "cancelled %s attempt %d on %s: the job is %s at attempt %d",
            job.job_id,
            attempt,
            event.worker_id,
            job.state.value,
            job.attempt,
        )
