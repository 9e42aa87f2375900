"""The control plane's worker side: MQTT messages in, scheduling, commands out.

Every command is derived from the database: an `assign` is re-sent while its job stays
`assigned`, a `checkpoint_now` while it stays `checkpointing`. So a lost command, a broker
restart or a control-plane restart loses nothing; workers ignore repeats. Worker outcomes arrive
as events and again in every heartbeat; the attempt fence makes repeats and zombies harmless.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from orchestrator.control.apply import apply_decision
from orchestrator.control.job_events import Decision, Ignore, RetryPolicy, apply_event, requeue
from orchestrator.domain.clock import Clock, sleep_unless_stopped
from orchestrator.domain.errors import ConcurrentModification, FrameFleetError, JobNotFound
from orchestrator.domain.job_record import JobRecord, Placement
from orchestrator.domain.job_state import JobState
from orchestrator.domain.worker_protocol import (
    Channel,
    Command,
    CommandKind,
    EventKind,
    Heartbeat,
    Hello,
    ProtocolError,
    Status,
    WorkerEvent,
    decode_worker_message,
    topic,
)
from orchestrator.mqtt.link import LinkSettings, MqttLink, NotConnected
from orchestrator.scheduling.policy import schedule
from orchestrator.scheduling.registry import WorkerHealth, WorkerRegistry
from orchestrator.scheduling.snapshots import PendingJob, RunningJob, SchedulerSettings
from orchestrator.store.job_store import JobStore

log = logging.getLogger(__name__)
ACTOR = "control-plane"
WORKER_TOPICS = [
    f"ff/v1/workers/+/{channel.value}"
    for channel in (Channel.HELLO, Channel.HEARTBEAT, Channel.EVENTS, Channel.STATUS)
]


@dataclass(frozen=True)
class ControlSettings:
    tick_seconds: float = 0.5
    resend_after: timedelta = timedelta(seconds=3)
    suspect_after: timedelta = timedelta(seconds=10)
    lost_after: timedelta = timedelta(seconds=30)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass
class ControlStats:
    ignored_messages: int = 0
    stale_events: int = 0
    commands_sent: int = 0
    assignments: int = 0
    # Seconds per scheduling decision (the pure scheduler call), the most recent ones.
    schedule_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=10_000))


def command_id(kind: CommandKind, job: JobRecord) -> str:
    attempt_id = uuid.uuid5(uuid.NAMESPACE_URL, f"framefleet:{job.job_id}/{job.attempt}")
    return f"{kind.value.replace('_', '-')}-{attempt_id}"


class ControlPlaneService:
    def __init__(
        self, store: JobStore, link_settings: LinkSettings, clock: Clock, settings: ControlSettings
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self.registry = WorkerRegistry(clock, settings.suspect_after, settings.lost_after)
        self.stats = ControlStats()
        self._last_sent: dict[tuple[str, int, CommandKind], datetime] = {}
        # (instance type, AZ, market) -> when it last lost an instance; read by the autoscaler.
        self.interrupted_pools: dict[tuple[str, str, str], datetime] = {}
        self._lock = asyncio.Lock()  # one writer at a time inside this replica
        self.link = MqttLink(link_settings, WORKER_TOPICS, self._on_message, clock)

    async def run(self, stop: asyncio.Event) -> None:
        link = asyncio.create_task(self.link.run(stop))
        while not stop.is_set():
            try:
                await self.tick()
            except FrameFleetError as error:
                log.warning("tick failed, retrying: %s", error)
            await sleep_unless_stopped(self._clock, stop, self._settings.tick_seconds)
        await link

    # -- messages from workers ---------------------------------------------------------------

    async def _on_message(self, topic_name: str, payload: bytes) -> None:
        try:
            message = decode_worker_message(topic_name, payload)
        except ProtocolError as error:
            self.stats.ignored_messages += 1
            log.warning("ignored message on %s: %s", topic_name, error)
            return
        if isinstance(message, Hello):
            self.registry.on_hello(message)
            return
        if isinstance(message, Heartbeat) and not message.recent and not message.jobs:
            # Liveness only: no job to reconcile, so no need to wait for the tick.
            self._note_liveness(message)
            return
        async with self._lock:
            if isinstance(message, Heartbeat):
                await self._on_heartbeat(message)
            elif isinstance(message, Status):
                self.registry.on_status(message)
                if not message.online:
                    await self._worker_gone(message.worker_id, "worker went offline")
            elif message.kind is EventKind.NOTICE_SEEN:
                await self._interrupt(message.worker_id, f"notice: {message.notice}")
            else:
                await self._apply(message)

    def _note_liveness(self, beat: Heartbeat) -> bool:
        """False for a heartbeat the registry refuses (unknown worker, out of order)."""
        if not self.registry.on_heartbeat(beat):
            return False
        if not beat.accepting:
            self.registry.mark(beat.worker_id, WorkerHealth.DRAINING)
        return True

    async def _on_heartbeat(self, beat: Heartbeat) -> None:
        if not self._note_liveness(beat):
            return
        for outcome in beat.recent:
            await self._apply(outcome)
        for progress in beat.jobs:
            # A job the worker is running counts as started even if `started` was lost.
            started = WorkerEvent(
                worker_id=beat.worker_id,
                sent_at=beat.sent_at,
                event_id=f"hb-{uuid.uuid4()}",
                kind=EventKind.STARTED,
                job_id=progress.job_id,
                attempt=progress.attempt,
            )
            await self._apply(started, quiet=True)

    async def _apply(self, event: WorkerEvent, quiet: bool = False) -> None:
        if event.job_id is None:
            return
        try:
            job = await asyncio.to_thread(self._store.get, event.job_id)
        except JobNotFound:
            log.warning("event for unknown job %s ignored", event.job_id)
            return
        decision = apply_event(job, event, self._clock.now(), self._settings.retry)
        await self._commit(job, decision, quiet)

    async def _commit(self, job: JobRecord, decision: Decision, quiet: bool = False) -> None:
        if isinstance(decision, Ignore):
            if "stale attempt" in decision.reason:
                self.stats.stale_events += 1
            if not quiet:
                log.info("job %s: ignored: %s", job.job_id, decision.reason)
            return
        try:
            await asyncio.to_thread(apply_decision, self._store, job, decision, ACTOR)
        except ConcurrentModification:
            log.info("job %s changed meanwhile; the next message or tick decides again", job.job_id)

    # -- what EventBridge says about instances -------------------------------------------------

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]:
        """A spot warning for an instance: checkpoint-and-move its workers' jobs. Returns the
        workers affected; the pool is remembered as recently interrupted."""
        async with self._lock:
            workers = self.registry.by_instance(instance_id)
            for worker_id in workers:
                self.interrupted_pools[self.registry.pool(worker_id)] = self._clock.now()
                await self._interrupt(worker_id, reason)
            return workers

    async def stop_assigning(self, instance_id: str, reason: str) -> None:
        async with self._lock:
            for worker_id in self.registry.by_instance(instance_id):
                log.info("no new work for %s: %s", worker_id, reason)
                self.registry.mark(worker_id, WorkerHealth.DRAINING)

    async def instance_gone(self, instance_id: str, reason: str) -> None:
        async with self._lock:
            for worker_id in self.registry.by_instance(instance_id):
                self.registry.mark(worker_id, WorkerHealth.LOST)
                await self._worker_gone(worker_id, reason)

    # -- workers going away --------------------------------------------------------------------

    async def _interrupt(self, worker_id: str, reason: str) -> None:
        """A spot notice: no new work there; its jobs checkpoint now and move when durable."""
        self.registry.mark(worker_id, WorkerHealth.INTERRUPTED)
        for placement in await asyncio.to_thread(self._store.placements):
            if placement.worker_id == worker_id and placement.job.state is JobState.RUNNING:
                await self._checkpoint_now(placement, reason)

    async def _checkpoint_now(self, placement: Placement, reason: str) -> None:
        """Record that the job must checkpoint (durable first), then tell its worker."""
        try:
            await asyncio.to_thread(
                self._store.transition,
                placement.job.job_id,
                JobState.CHECKPOINTING,
                expected_version=placement.job.version,
                actor=ACTOR,
                reason=reason,
            )
        except ConcurrentModification:
            return
        await self._send(placement, CommandKind.CHECKPOINT_NOW, force=True)

    async def _worker_gone(self, worker_id: str, reason: str) -> None:
        """Lost without (further) notice: its jobs resume elsewhere from their checkpoint."""
        for placement in await asyncio.to_thread(self._store.placements):
            if placement.worker_id == worker_id:
                job = placement.job
                await self._commit(job, requeue(job, f"{reason} ({worker_id})"))

    # -- the tick: timeouts, re-sends, scheduling ---------------------------------------------

    async def tick(self) -> None:
        async with self._lock:
            for change in self.registry.sweep():
                if change.after is WorkerHealth.LOST:
                    await self._worker_gone(change.worker_id, "heartbeats stopped")
            placements = await asyncio.to_thread(self._store.placements)
            for placement in placements:
                if placement.job.state is JobState.ASSIGNED:
                    await self._send(placement, CommandKind.ASSIGN)
                elif placement.job.state is JobState.CHECKPOINTING:
                    await self._send(placement, CommandKind.CHECKPOINT_NOW)
            await self._schedule(placements)

    async def _schedule(self, placements: list[Placement]) -> None:
        now = self._clock.now()
        queued = await asyncio.to_thread(self._store.schedulable, now)
        pending = [
            PendingJob(
                job.job_id,
                job.priority,
                job.deadline,
                job.created_at,
                job.spec.gpu.min_vram_gib,
                frozenset(job.spec.gpu.families),
            )
            for job in queued
        ]
        if not pending:
            return
        running = {
            (p.worker_id, p.gpu_index): RunningJob(
                p.job.job_id,
                p.job.priority,
                p.job.deadline,
                p.since,
                preemptible=p.job.state is JobState.RUNNING,
            )
            for p in placements
        }
        started = time.perf_counter()
        decisions = schedule(
            pending, self.registry.snapshot(running), now, self._settings.scheduler
        )
        self.stats.schedule_seconds.append(time.perf_counter() - started)
        by_id = {job.job_id: job for job in queued}
        for assignment in decisions.assignments:
            job = by_id[assignment.job_id]
            try:
                assigned = await asyncio.to_thread(
                    self._store.transition,
                    job.job_id,
                    JobState.ASSIGNED,
                    expected_version=job.version,
                    actor=ACTOR,
                    reason=assignment.reason,
                    worker_id=assignment.worker_id,
                    gpu_index=assignment.gpu_index,
                )
            except ConcurrentModification:
                continue
            self.stats.assignments += 1
            placement = Placement(assigned, assignment.worker_id, assignment.gpu_index, now)
            await self._send(placement, CommandKind.ASSIGN, force=True)
        for preemption in decisions.preemptions:
            victim = next(p for p in placements if p.job.job_id == preemption.victim_job_id)
            await self._checkpoint_now(victim, preemption.reason)

    async def _send(self, placement: Placement, kind: CommandKind, force: bool = False) -> None:
        job = placement.job
        key = (job.job_id, job.attempt, kind)
        now = self._clock.now()
        last = self._last_sent.get(key)
        if not force and last is not None and now - last < self._settings.resend_after:
            return
        command = Command(
            worker_id=placement.worker_id,
            sent_at=now,
            # The same id on every re-send: the worker acts once per (job, attempt, kind).
            command_id=command_id(kind, job),
            kind=kind,
            job_id=job.job_id,
            attempt=job.attempt,
            gpu_index=placement.gpu_index,
            spec=job.spec if kind is CommandKind.ASSIGN else None,
            resume_from=job.last_checkpoint if kind is CommandKind.ASSIGN else None,
        )
        try:
            await self.link.publish(
                topic(placement.worker_id, Channel.CMD), command.model_dump_json()
            )
        except NotConnected as error:
            log.info("command not sent yet: %s", error)
            return
        self._last_sent[key] = now
        self.stats.commands_sent += 1
