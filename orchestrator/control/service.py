"""The control plane's worker side: MQTT messages in, scheduling, commands out.

Every command is derived from the database: an `assign` is re-sent while its job stays
`assigned`, a `checkpoint_now` while it stays `checkpointing`. So a lost command, a broker
restart or a control-plane restart loses nothing; workers ignore repeats. Worker outcomes arrive
as events and again in every heartbeat; the attempt fence makes repeats and zombies harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Protocol

from orchestrator.control.apply import as_move
from orchestrator.control.job_events import (
    Decision,
    Ignore,
    Refusal,
    RetryPolicy,
    apply_event,
    requeue,
)
from orchestrator.control.refusals import RefusedMessages
from orchestrator.domain.clock import Clock, sleep_unless_stopped
from orchestrator.domain.errors import ConcurrentModification, FrameFleetError
from orchestrator.domain.job_record import (
    JobMove,
    JobRecord,
    Placement,
    Reservation,
    checkpoint_step,
)
from orchestrator.domain.job_state import ACTIVE_STATES, JobState
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
from orchestrator.store.instances import InstanceLedger
from orchestrator.store.job_store import JobStore

log = logging.getLogger(__name__)
ACTOR = "control-plane"
WORKER_TOPICS = [
    f"ff/v1/workers/+/{channel.value}"
    for channel in (Channel.HELLO, Channel.HEARTBEAT, Channel.EVENTS, Channel.STATUS)
]


# How far back gone instances are loaded at start (a retained hello can be older than any
# instance's life, but not older than this).
GONE_MEMORY = timedelta(days=30)


class GoneInstances(Protocol):
    """Where instances that are gone are remembered (InstanceLedger)."""

    def record_gone(self, instance_id: str, reason: str) -> None: ...

    def gone_since(self, since: datetime) -> list[str]: ...


@dataclass(frozen=True)
class ControlSettings:
    tick_seconds: float = 0.5
    resend_after: timedelta = timedelta(seconds=3)
    resend_max: timedelta = timedelta(seconds=30)
    suspect_after: timedelta = timedelta(seconds=10)
    lost_after: timedelta = timedelta(seconds=30)
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_batch: int = 500  # worker messages written in one transaction


@dataclass(frozen=True)
class _Inbound:
    """A worker message that touches jobs, in arrival order."""

    message: WorkerEvent | Status
    quiet: bool = False


@dataclass
class ControlStats:
    ignored_messages: int = 0
    stale_events: int = 0
    commands_sent: int = 0
    assignments: int = 0
    # Seconds per scheduling decision (the pure scheduler call), the most recent ones.
    schedule_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=10_000))


class WorkerLink(Protocol):
    """How commands reach workers: MQTT in production, in memory in the simulator."""

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None: ...

    async def run(self, stop: asyncio.Event) -> None: ...


def _steps_left(job: JobRecord) -> int:
    """Steps after its newest checkpoint (what a restart would have to do again)."""
    return job.spec.steps - checkpoint_step(job.last_checkpoint)


def _can_restart(job: JobRecord, reservation: Reservation | None, now: datetime) -> bool:
    """Could the job be stopped and started again elsewhere and still meet its deadline?
    Not once its deadline could no longer take an interruption (it may be on the on-demand
    GPU bought for exactly that)."""
    until = reservation.spot_until(job.deadline, _steps_left(job)) if reservation else None
    return until is None or now <= until


def command_id(kind: CommandKind, job: JobRecord) -> str:
    attempt_id = uuid.uuid5(uuid.NAMESPACE_URL, f"framefleet:{job.job_id}/{job.attempt}")
    return f"{kind.value.replace('_', '-')}-{attempt_id}"


class ControlPlaneService:
    def __init__(
        self,
        store: JobStore,
        link_settings: LinkSettings,
        clock: Clock,
        settings: ControlSettings,
        link: WorkerLink | None = None,
        refusals: RefusedMessages | None = None,
        instances: GoneInstances | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self.registry = WorkerRegistry(clock, settings.suspect_after, settings.lost_after)
        self.stats = ControlStats()
        self.refusals = refusals or RefusedMessages(clock)
        self._instances = instances or InstanceLedger(store.engine, clock)
        # (job, attempt, kind) -> when it last went out and how often it has.
        self._last_sent: dict[tuple[str, int, CommandKind], tuple[datetime, int]] = {}
        # (instance type, AZ, market) -> when it last lost an instance; read by the autoscaler.
        self.interrupted_pools: dict[tuple[str, str, str], datetime] = {}
        self._lock = asyncio.Lock()  # one writer at a time inside this replica
        self._inbox: asyncio.Queue[_Inbound] = asyncio.Queue()
        # job -> attempt known to be running, from the last tick: heartbeats repeat it.
        self._running: dict[str, int] = {}
        self.link: WorkerLink = link or MqttLink(
            link_settings, WORKER_TOPICS, self.on_message, clock
        )

    async def run(self, stop: asyncio.Event) -> None:
        await self.remember_gone_instances()
        link = asyncio.create_task(self.link.run(stop))
        background = [
            asyncio.create_task(self._process_inbox(stop)),
            asyncio.create_task(self.refusals.run(stop)),
        ]
        while not stop.is_set():
            try:
                await self.tick()
            except FrameFleetError as error:
                log.warning("tick failed, retrying: %s", error)
            except Exception:
                # A bug, not an input: log it loudly and keep the control plane up.
                log.exception("tick failed unexpectedly, retrying")
            await sleep_unless_stopped(self._clock, stop, self._settings.tick_seconds)
        await link
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def remember_gone_instances(self) -> None:
        """Load the instances known to be gone, so their retained hellos are refused."""
        since = self._clock.now() - GONE_MEMORY
        for instance_id in await asyncio.to_thread(self._instances.gone_since, since):
            self.registry.instance_gone(instance_id)

    # -- messages from workers ---------------------------------------------------------------

    async def on_message(self, topic_name: str, payload: bytes) -> None:
        """Liveness is noted at once, in memory, so a backlog of job events can never make a
        live worker look lost; everything that touches a job goes through the inbox in
        arrival order and is written in batches."""
        try:
            message = decode_worker_message(topic_name, payload)
        except ProtocolError as error:
            self.stats.ignored_messages += 1
            self.refusals.refuse("malformed", topic_name, str(error), payload)
            return
        if isinstance(message, Hello):
            if not self.registry.on_hello(message):
                self.refusals.refuse("gone_instance", topic_name,
                                     f"{message.instance_id} is gone", payload)  # fmt: skip
                # Whatever it still holds moves on, as if it had gone offline.
                offline = Status(worker_id=message.worker_id, sent_at=message.sent_at,
                                 online=False)  # fmt: skip
                self._inbox.put_nowait(_Inbound(offline))
        elif isinstance(message, WorkerEvent) and self.registry.health(message.worker_id) is None:
            # Only a worker that said hello (from an instance that is not gone) is believed.
            key = f"{message.worker_id}:{message.event_id}"
            self.refusals.refuse(
                "unknown_worker", topic_name, "no hello from this worker", payload, key
            )
        elif isinstance(message, Heartbeat):
            if self._note_liveness(message):
                for outcome in message.recent:
                    self._inbox.put_nowait(_Inbound(outcome))
                for progress in message.jobs:
                    if self._running.get(progress.job_id) == progress.attempt:
                        continue  # already known to run there
                    # A job the worker is running counts as started even if `started` was lost.
                    started = WorkerEvent(
                        worker_id=message.worker_id,
                        sent_at=message.sent_at,
                        event_id=f"hb-{uuid.uuid4()}",
                        kind=EventKind.STARTED,
                        job_id=progress.job_id,
                        attempt=progress.attempt,
                    )
                    self._inbox.put_nowait(_Inbound(started, quiet=True))
        else:
            self._inbox.put_nowait(_Inbound(message))

    def _note_liveness(self, beat: Heartbeat) -> bool:
        """False for a heartbeat the registry refuses (unknown worker, out of order)."""
        if not self.registry.on_heartbeat(beat):
            return False
        if not beat.accepting:
            self.registry.mark(beat.worker_id, WorkerHealth.DRAINING)
        return True

    async def _process_inbox(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._apply_batch([await self._inbox.get()])

    async def apply_pending(self) -> None:
        """Apply every worker message received so far (the simulator's step between
        deliveries; the live service does the same continuously)."""
        while not self._inbox.empty():
            await self._apply_batch([self._inbox.get_nowait()])

    async def _apply_batch(self, batch: list[_Inbound]) -> None:
        while len(batch) < self._settings.max_batch and not self._inbox.empty():
            batch.append(self._inbox.get_nowait())
        await self._apply(batch)

    async def _apply(self, batch: list[_Inbound]) -> None:
        try:
            async with self._lock:
                await self._handle(batch)
        except FrameFleetError as error:
            # Nothing is lost: workers repeat their outcomes in every heartbeat.
            log.warning("%d worker messages not applied, waiting for repeats: %s",
                        len(batch), error)  # fmt: skip
        except Exception as error:
            if len(batch) > 1:
                # Find the message at fault: each one again, on its own.
                for item in batch:
                    await self._apply([item])
                return
            log.exception("worker message could not be applied")
            message = batch[0].message
            self.refusals.refuse("handler_error", message.worker_id,
                                 f"{type(error).__name__}: {error}",
                                 message.model_dump_json().encode())  # fmt: skip

    async def _handle(self, batch: list[_Inbound]) -> None:
        events: list[_Inbound] = []
        for item in batch:
            message = item.message
            if isinstance(message, WorkerEvent) and message.kind is not EventKind.NOTICE_SEEN:
                events.append(item)
                continue
            await self._apply_events(events)  # what came before, first
            events = []
            if isinstance(message, Status):
                self.registry.on_status(message)
                if not message.online:
                    await self._worker_gone(message.worker_id, "worker went offline")
            else:
                await self._interrupt(message.worker_id, f"notice: {message.notice}")
        await self._apply_events(events)

    async def _apply_events(self, items: list[_Inbound]) -> None:
        """One read and one write per round; a job named twice waits for the next round, so
        each event is decided on the state the one before it left."""
        while items:
            ids = {item.message.job_id for item in items if isinstance(item.message, WorkerEvent)}
            jobs = await asyncio.to_thread(self._store.find_many, [i for i in ids if i])
            decided: list[tuple[JobRecord, Decision, _Inbound | None]] = []
            later: list[_Inbound] = []
            named: set[str] = set()
            for item in items:
                event = item.message
                assert isinstance(event, WorkerEvent)
                if event.job_id is None:
                    continue
                if event.job_id in named:
                    later.append(item)
                    continue
                job = jobs.get(event.job_id)
                if job is None:
                    log.warning("event for unknown job %s ignored", event.job_id)
                    continue
                named.add(event.job_id)
                now = self._clock.now()
                decision = apply_event(job, event, now, self._settings.retry)
                decided.append((job, decision, item))
                if event.kind is EventKind.STARTED and isinstance(decision, Ignore):
                    await self._cancel_zombie(job, event)
            await self._commit(decided)
            items = later

    async def _cancel_zombie(self, job: JobRecord, event: WorkerEvent) -> None:
        """A worker runs an attempt the job has left (it was cut off, the job moved on): stop
        it, so its GPU is free for the work the scheduler believes it can give it."""
        if job.state in ACTIVE_STATES and event.attempt == job.attempt:
            return
        attempt = event.attempt or 0
        zombie = Placement(replace(job, attempt=attempt), event.worker_id, 0, self._clock.now())
        if not await self._send(zombie, CommandKind.CANCEL):
            return
        log.info("cancelled %s attempt %d on %s: the job is %s at attempt %d", job.job_id,
                 attempt, event.worker_id, job.state.value, job.attempt)  # fmt: skip

    async def _commit(self, decided: list[tuple[JobRecord, Decision, _Inbound | None]]) -> None:
        """Write the moves; `None` for the cause marks a decision of the control plane's own."""
        moves = []
        for job, decision, cause in decided:
            quiet = cause is not None and cause.quiet
            move = as_move(job, decision)
            if move is not None:
                moves.append(move)
            elif isinstance(decision, Refusal) and cause is not None:
                self._refuse_event(cause.message, decision)
            elif isinstance(decision, Ignore):
                if "stale attempt" in decision.reason:
                    self.stats.stale_events += 1
                if not quiet:
                    log.info("job %s: ignored: %s", job.job_id, decision.reason)
        if not moves:
            return
        outcomes = await asyncio.to_thread(self._store.apply_moves, moves, ACTOR)
        for move, outcome in zip(moves, outcomes, strict=True):
            if isinstance(outcome, FrameFleetError):
                log.info("job %s not moved (the next message or tick decides again): %s",
                         move.job_id, outcome)  # fmt: skip

    def _refuse_event(self, message: WorkerEvent | Status, refusal: Refusal) -> None:
        assert isinstance(message, WorkerEvent)
        # Heartbeats repeat events (and progress reports become `started` events anew):
        # one dead letter per worker, job, attempt and kind.
        key = f"{message.worker_id}:{message.job_id}:{message.attempt}:{message.kind.value}"
        self.refusals.refuse("not_owner", topic(message.worker_id, Channel.EVENTS),
                             refusal.reason, message.model_dump_json().encode(), key)  # fmt: skip

    # -- what EventBridge says about instances -------------------------------------------------

    async def interrupt_instance(self, instance_id: str, reason: str) -> list[str]:
        """A spot warning for an instance: checkpoint-and-move its workers' jobs. Returns the
        workers affected; the pool is remembered as recently interrupted."""
        await self._record_gone(instance_id, reason)
        async with self._lock:
            workers = self.registry.by_instance(instance_id)
            for worker_id in workers:
                self.interrupted_pools[self.registry.pool(worker_id)] = self._clock.now()
                await self._interrupt(worker_id, reason)
            return workers

    async def _record_gone(self, instance_id: str, reason: str) -> None:
        """Durable first: a restarted control plane must refuse its retained hello too."""
        await asyncio.to_thread(self._instances.record_gone, instance_id, reason)
        self.registry.instance_gone(instance_id)

    async def stop_assigning(self, instance_id: str, reason: str) -> None:
        async with self._lock:
            for worker_id in self.registry.by_instance(instance_id):
                log.info("no new work for %s: %s", worker_id, reason)
                self.registry.mark(worker_id, WorkerHealth.DRAINING)

    async def instance_gone(self, instance_id: str, reason: str) -> None:
        await self._record_gone(instance_id, reason)
        async with self._lock:
            for worker_id in self.registry.by_instance(instance_id):
                self.registry.mark(worker_id, WorkerHealth.LOST)
                await self._worker_gone(worker_id, reason)

    # -- workers going away --------------------------------------------------------------------

    async def _interrupt(self, worker_id: str, reason: str) -> None:
        """A spot notice: no new work there; its jobs checkpoint now and move when durable."""
        self.registry.mark(worker_id, WorkerHealth.INTERRUPTED)
        for placement in await asyncio.to_thread(self._store.placements):
            if placement.worker_id != worker_id:
                continue
            if placement.job.state is JobState.RUNNING:
                await self._checkpoint_now(placement, reason)
            elif placement.job.state is JobState.ASSIGNED:
                # Its `started` may still be on the way. A worker that runs it checkpoints and
                # reports `preempted`; one that never started it refuses the assignment; both
                # send the job back to the queue.
                await self._send(placement, CommandKind.CHECKPOINT_NOW, force=True)

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
        await self._commit(
            [
                (p.job, requeue(p.job, f"{reason} ({worker_id})"), None)
                for p in await asyncio.to_thread(self._store.placements)
                if p.worker_id == worker_id
            ]
        )

    # -- the tick: timeouts, re-sends, scheduling ---------------------------------------------

    async def tick(self) -> None:
        async with self._lock:
            for change in self.registry.sweep():
                if change.after is WorkerHealth.LOST:
                    await self._worker_gone(change.worker_id, "heartbeats stopped")
            placements = await asyncio.to_thread(self._store.placements)
            self._running = {
                p.job.job_id: p.job.attempt
                for p in placements
                if p.job.state in (JobState.RUNNING, JobState.CHECKPOINTING)
            }
            resend = {JobState.ASSIGNED: CommandKind.ASSIGN,
                      JobState.CHECKPOINTING: CommandKind.CHECKPOINT_NOW}  # fmt: skip
            await self._send_all(
                [(p, resend[p.job.state]) for p in placements if p.job.state in resend]
            )
            await self._schedule(placements)

    async def _schedule(self, placements: list[Placement]) -> None:
        now = self._clock.now()
        queued = await asyncio.to_thread(self._store.schedulable, now)
        if not queued:
            return
        ids = [j.job_id for j in queued] + [p.job.job_id for p in placements]
        reserved = await asyncio.to_thread(self._store.reservations, ids)
        pending = []
        for job in queued:
            reservation = reserved.get(job.job_id)
            holds = reservation is not None and reservation.holds(now)
            steps_left = _steps_left(job)
            pending.append(
                PendingJob(
                    job.job_id,
                    job.priority,
                    job.deadline,
                    job.created_at,
                    job.spec.gpu.min_vram_gib,
                    frozenset(job.spec.gpu.families),
                    reserved_on=frozenset(
                        self.registry.by_instance(reservation.instance_id)
                        if reservation and holds
                        else ()
                    ),
                    on_demand_only=holds and reservation is not None and reservation.on_demand,
                    capacity_coming=holds,
                    spot_until=reservation.spot_until(job.deadline, steps_left)
                    if reservation
                    else None,
                )
            )
        running = {
            (p.worker_id, p.gpu_index): RunningJob(
                p.job.job_id,
                p.job.priority,
                p.job.deadline,
                p.since,
                preemptible=p.job.state is JobState.RUNNING
                and _can_restart(p.job, reserved.get(p.job.job_id), now),
            )
            for p in placements
        }
        started = time.perf_counter()
        decisions = schedule(
            pending, self.registry.snapshot(running), now, self._settings.scheduler
        )
        self.stats.schedule_seconds.append(time.perf_counter() - started)
        by_id = {job.job_id: job for job in queued}
        moves = [
            JobMove(
                a.job_id,
                by_id[a.job_id].version,
                (JobState.ASSIGNED,),
                a.reason,
                worker_id=a.worker_id,
                gpu_index=a.gpu_index,
            )
            for a in decisions.assignments
        ]
        outcomes = await asyncio.to_thread(self._store.apply_moves, moves, ACTOR) if moves else []
        placed = [
            Placement(assigned, move.worker_id or "", move.gpu_index or 0, now)
            for move, assigned in zip(moves, outcomes, strict=True)
            if not isinstance(assigned, FrameFleetError)  # else moved meanwhile: next tick
        ]
        self.stats.assignments += len(placed)
        await self._send_all([(p, CommandKind.ASSIGN) for p in placed], force=True)
        for preemption in decisions.preemptions:
            victim = next(p for p in placements if p.job.job_id == preemption.victim_job_id)
            await self._checkpoint_now(victim, preemption.reason)

    async def _send_all(
        self, commands: list[tuple[Placement, CommandKind]], force: bool = False
    ) -> None:
        """Publish side by side: each QoS 1 publish waits for its PUBACK, and a thousand of
        them one after another would take seconds."""
        await asyncio.gather(*(self._send(p, kind, force) for p, kind in commands))

    async def _send(self, placement: Placement, kind: CommandKind, force: bool = False) -> bool:
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
            spec=job.spec if kind is CommandKind.ASSIGN else None,
            resume_from=job.last_checkpoint if kind is CommandKind.ASSIGN else None,
        )
        try:
            await self.link.publish(
                topic(placement.worker_id, Channel.CMD), command.model_dump_json()
            )
        except NotConnected as error:
            log.info("command not sent yet: %s", error)
            return False
        self._last_sent[key] = (now, sends + 1)
        self.stats.commands_sent += 1
        return True
