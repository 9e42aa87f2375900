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
from collections import deque
from functools import partial

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.job_record import JobRecord
from kernel.job_state import JobState
from kernel.log_context import log_context
from kernel.log_throttle import held_back
from kernel.outage import Outage
from kernel.worker_protocol import (
    CommandKind,
    EventKind,
    FailureKind,
    Status,
    WorkerEvent,
)
from orchestrator.control.admission import Inbound, ids_of
from orchestrator.control.checkpoint_pace import CheckpointPace
from orchestrator.control.commands import CommandSender
from orchestrator.control.cost_limits import CostLimits, JobCost
from orchestrator.control.drains import Drains
from orchestrator.control.gpu_watch import GpuWatch
from orchestrator.control.instance_events import InstanceEvents
from orchestrator.control.job_events import Decision, Ignore, apply_event
from orchestrator.control.job_mover import JobMover
from orchestrator.control.leadership import Leadership, ReplicaRole
from orchestrator.control.readiness import Readiness
from orchestrator.control.reception import Reception
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.scheduling_round import SchedulingRound, TeamSpend
from orchestrator.control.settings import (
    ACTOR,
    ConnectLink,
    ControlSettings,
    ControlStats,
    ControlStore,
    WorkerLink,
)
from orchestrator.control.watch_actions import WatchActions
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.worker_health import WorkerHealth

log = logging.getLogger(__name__)


REBALANCE_NOTICE = "rebalance"  # a worker's notice_seen: what its IMDS showed


# Worker events a standby keeps for when it leads (the newest; workers also repeat outcomes).
HELD_EVENTS = 20_000


class ControlPlaneService:
    def __init__(
        self,
        store: ControlStore,
        clock: Clock,
        settings: ControlSettings,
        *,
        connect: ConnectLink,
        refusals: RefusedMessages,
        leadership: Leadership | None = None,
        team_spend: TeamSpend | None = None,
        job_cost: JobCost | None = None,
    ) -> None:
        """Adapters come from the composition root; `connect` wraps this service's handler.
        With `leadership`, this replica schedules and moves jobs only while it leads; until
        then it keeps its worker registry current and holds the workers' job events."""
        self._store = store
        self._role = ReplicaRole(leadership)
        self._held: deque[Inbound] = deque(maxlen=HELD_EVENTS)
        self._clock = clock
        self._settings = settings
        self.registry = WorkerRegistry(clock, settings.suspect_after, settings.lost_after)
        self.stats = ControlStats()
        self.refusals = refusals
        self._lock = asyncio.Lock()  # one writer at a time inside this replica
        # job -> attempt known to be running, from the last tick: heartbeats repeat it.
        self._running: dict[str, int] = {}
        self.reception = Reception(
            self.registry,
            refusals,
            store.instance_records,
            self.stats,
            clock,
            budget=settings.budget,
            workers_off_ec2=settings.workers_off_ec2,
            running=lambda: self._running,
            quarantine=self._quarantine_flooder,
        )
        self._inbox = self.reception.inbox
        self.link: WorkerLink = connect(self.reception.deliver, self.reception.admit)
        pace = CheckpointPace(store.rates, self.registry, clock)
        self.watch = GpuWatch(store.faults, self.registry, clock, settings.watch)
        # job -> the seconds per step the autoscaler planned it at: the scheduling round
        # fills it, the watch and each assignment's stall bound read it.
        self._planned: dict[str, float] = {}
        self._commands = CommandSender(
            self.link,
            clock,
            settings,
            self.stats,
            pace,
            partial(self.watch.expected_step_at, planned=self._planned),
        )
        self._mover = JobMover(store, clock, self.stats, refusals, self._commands, self._role)
        self.instance_events = InstanceEvents(
            store, clock, self.registry, self._mover, self._lock, self._role
        )
        self._watch_actions = WatchActions(
            store, self.registry, self.watch, self._planned, self.stats, self._commands, self._mover
        )
        self._drains = Drains(
            store.instance_records, self.registry, self.instance_events.move_jobs_off
        )
        self._scheduling = SchedulingRound(
            store,
            self.registry,
            clock,
            settings,
            self.stats,
            self._commands,
            self._mover,
            self._planned,
            team_spend,
        )
        self._readiness = Readiness(store.cost_facts, self.registry)
        # Jobs' cost limits, where the composition root gives the ledger's per-job cost.
        self._cost_limits = CostLimits(store, job_cost, clock, ACTOR) if job_cost else None

    async def run(self, stop: asyncio.Event) -> None:
        await self.instance_events.remember_gone_instances()
        link = asyncio.create_task(self.link.run(stop))
        background = [
            asyncio.create_task(self._process_inbox(stop)),
            asyncio.create_task(self.refusals.run(stop)),
        ]
        outage = Outage("the control loop's store", log, self._clock)
        while not stop.is_set():
            wait = self._settings.tick_seconds
            try:
                if self.leads():
                    await self.tick()
                outage.answered()
            except FrameFleetError as error:
                wait = max(wait, outage.failed(error))
            except Exception:
                # A bug, not an input: log it loudly and keep the control plane up.
                log.exception("tick failed unexpectedly, retrying")
            await sleep_unless_stopped(self._clock, stop, wait)
        await link
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def memory_sizes(self) -> dict[str, int]:
        """Each in-memory map's size: the fleet's or the work in flight's, never more."""
        return {
            "workers": self.registry.size(),
            "commands": self._commands.remembered(),
            "refusals": self.refusals.remembered(),
            "running": len(self._running),
            "watch": self.watch.remembered(),
            "planned": len(self._planned),
            "inbox": self._inbox.qsize(),
            "budgets": self.reception.remembered(),
        }

    # -- messages from workers ---------------------------------------------------------------

    async def on_message(self, topic_name: str, payload: bytes) -> None:
        """What a worker published (see `Reception`): job events queue for the inbox."""
        await self.reception.on_message(topic_name, payload)

    async def _quarantine_flooder(self, worker_id: str) -> None:
        """A worker that floods is believed no more: no new work, and its instance drains
        (the autoscaler replaces it once its jobs are off)."""
        hello = self.registry.hello(worker_id)
        if hello is None:
            return
        await self.instance_events.stop_assigning(
            hello.instance_id or worker_id, "its worker floods the control plane"
        )

    async def _process_inbox(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            item = await self._inbox.get()
            if self.leads():
                await self._apply_batch([item])
            else:  # a standby: the leader applies it, or this replica once it leads
                self._held.append(item)

    async def apply_pending(self) -> None:
        """Apply every worker message received so far (the simulator's step)."""
        while not self._inbox.empty():
            await self._apply_batch([self._inbox.get_nowait()])

    async def _apply_batch(self, batch: list[Inbound]) -> None:
        while len(batch) < self._settings.max_batch and not self._inbox.empty():
            batch.append(self._inbox.get_nowait())
        await self._apply(batch)

    async def _apply(self, batch: list[Inbound]) -> None:
        try:
            async with self._lock:
                await self._handle(batch)
        except FrameFleetError as error:
            # Nothing is lost: workers repeat their outcomes in every heartbeat.
            log.warning(
                "%d worker messages not applied, waiting for repeats: %s", len(batch), error
            )
        except Exception as error:
            if len(batch) > 1:
                # Find the message at fault: each one again, on its own.
                for item in batch:
                    await self._apply([item])
                return
            message = batch[0].message
            with log_context(**ids_of(batch[0])):
                log.exception("worker message could not be applied")
            self.refusals.refuse(
                "handler_error",
                message.worker_id,
                f"{type(error).__name__}: {error}",
                message.model_dump_json().encode(),
            )

    async def _handle(self, batch: list[Inbound]) -> None:
        events: list[Inbound] = []
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
                    await self.instance_events.worker_gone(message.worker_id, "worker went offline")
            elif (message.notice or "").startswith(REBALANCE_NOTICE):
                hello = self.registry.hello(message.worker_id)
                if hello is not None:  # admitted messages come from workers that said hello
                    await self.instance_events.stop_assigning(
                        hello.instance, f"{message.notice} in IMDS"
                    )
            else:
                await self.instance_events.interrupt(message.worker_id, f"notice: {message.notice}")
        await self._apply_events(events)

    async def _apply_events(self, items: list[Inbound]) -> None:
        """One read and one write per round; a job named twice waits for the next round, so
        each event is decided on the state the one before it left."""
        while items:
            ids = {item.message.job_id for item in items if isinstance(item.message, WorkerEvent)}
            jobs = await asyncio.to_thread(self._store.find_many, [i for i in ids if i])
            decided: list[tuple[JobRecord, Decision, Inbound | None]] = []
            later: list[Inbound] = []
            stalls: list[WorkerEvent] = []
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
                if job is None:  # once a minute per worker: heartbeats repeat their outcomes
                    held = self._mover.ignored_line(f"{event.worker_id}|unknown job")
                    if held is not None:
                        with log_context(**ids_of(item)):
                            log.warning(
                                "event for unknown job %s ignored%s", event.job_id, held_back(held)
                            )
                    continue
                named.add(event.job_id)
                if event.kind is EventKind.CHECKPOINT_DURABLE and event.write_seconds is not None:
                    self.stats.observe_checkpoint_write(event.write_seconds)
                now = self._clock.now()
                decision = apply_event(job, event, now, self._settings.retry)
                decided.append((job, decision, item))
                if event.failure_kind is FailureKind.STALLED and not isinstance(decision, Ignore):
                    stalls.append(event)
                if event.kind is EventKind.STARTED and isinstance(decision, Ignore):
                    await self._commands.cancel_zombie(job, event)
            await self._mover.commit(decided)
            for stall in stalls:
                await self._watch_actions.stalled_on_worker(stall)
            items = later

    # -- the tick: timeouts, re-sends, scheduling ---------------------------------------------

    async def tick(self) -> None:
        if self._held:  # this replica has just come to lead: what it heard as a standby
            held = list(self._held)
            self._held.clear()
            await self._apply(held)
        self.reception.forget_idle()
        await self.reception.admit_listed()
        async with self._lock:
            for change in self.registry.sweep():
                if change.after is WorkerHealth.LOST:
                    await self.instance_events.worker_gone(change.worker_id, "heartbeats stopped")
            placements = await asyncio.to_thread(self._store.placements)
            self._running = {
                p.job.job_id: p.job.attempt
                for p in placements
                if p.job.state in (JobState.RUNNING, JobState.CHECKPOINTING)
            }
            self._commands.forget_all_but({(p.job.job_id, p.job.attempt) for p in placements})
            resend = {
                JobState.ASSIGNED: CommandKind.ASSIGN,
                JobState.CHECKPOINTING: CommandKind.CHECKPOINT_NOW,
            }
            await self._commands.send_all(
                [(p, resend[p.job.state]) for p in placements if p.job.state in resend]
            )
            await self._readiness.step()
            await self._drains.step(placements)  # before anything is assigned
            if self._cost_limits is not None:
                await self._cost_limits.step(placements)
            await self._watch_actions.step(placements)
            await self._scheduling.run(placements)

    def leads(self) -> bool:
        """Whether this replica schedules and moves jobs now (always, without leadership)."""
        return self._role.leads()
