"""How the control plane moves jobs: decisions written as one batch, a job told to checkpoint
(durable first, then its worker), and the jobs on a worker or GPU that must leave it
checkpointed and moved. One collaborator, shared by the events, the watch and the instance
events, so "checkpoint and move" is written once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kernel.clock import Clock
from kernel.errors import FrameFleetError
from kernel.job_record import JobMove, JobRecord, Placement
from kernel.job_state import JobState
from kernel.log_context import log_context
from kernel.log_throttle import LogThrottle, held_back
from kernel.worker_protocol import CommandKind, WorkerEvent
from orchestrator.control.admission import Inbound, ids_of
from orchestrator.control.apply import as_move
from orchestrator.control.commands import CommandSender
from orchestrator.control.job_events import Decision, Ignore, Refusal
from orchestrator.control.leadership import ReplicaRole
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.settings import ACTOR, ControlStats, ControlStore
from orchestrator.store.leases import Fence

log = logging.getLogger(__name__)

# A decision, the job it is about, and the message that caused it (None: the plane's own).
Decided = tuple[JobRecord, Decision, Inbound | None]


class JobMover:
    def __init__(
        self,
        store: ControlStore,
        clock: Clock,
        stats: ControlStats,
        refusals: RefusedMessages,
        commands: CommandSender,
        role: ReplicaRole,
    ) -> None:
        self._store = store
        self._stats = stats
        self._refusals = refusals
        self._commands = commands
        self._role = role
        self._ignored_lines = LogThrottle(clock)

    def fence(self) -> Fence | None:
        """What every write of this replica carries while it leads (NotLeader once not)."""
        return self._role.fence()

    def ignored_line(self, key: str) -> int | None:
        """The count held back since the last line for `key`, or None: no line now (one a
        minute; heartbeats repeat their outcomes)."""
        return self._ignored_lines.allow(key)

    async def commit(self, decided: list[Decided]) -> None:
        """Write the moves; `None` for the cause marks a decision of the control plane's own."""
        moves = []
        for job, decision, cause in decided:
            quiet = cause is not None and cause.quiet
            move = as_move(job, decision)
            if move is not None:
                moves.append(move)
            elif isinstance(decision, Refusal) and cause is not None:
                assert isinstance(cause.message, WorkerEvent)  # refusals answer events only
                self._refusals.refuse_event(cause.message, decision.reason)
            elif isinstance(decision, Ignore):
                if "stale attempt" in decision.reason:
                    self._stats.stale_events += 1
                held = None if quiet else self.ignored_line(f"{job.job_id}|{decision.reason}")
                if held is not None:
                    with log_context(**ids_of(cause)):
                        log.info(
                            "job %s: ignored: %s%s", job.job_id, decision.reason, held_back(held)
                        )
        if not moves:
            return
        outcomes = await asyncio.to_thread(self._store.apply_moves, moves, ACTOR, self.fence())
        for move, outcome in zip(moves, outcomes, strict=True):
            if isinstance(outcome, FrameFleetError):
                log.info(
                    "job %s not moved (the next message or tick decides again): %s",
                    move.job_id,
                    outcome,
                )

    async def checkpoint_now(self, placement: Placement, reason: str) -> None:
        """Record that the job must checkpoint (durable first), then tell its worker."""
        job = placement.job
        move = JobMove(job.job_id, job.version, (JobState.CHECKPOINTING,), reason)
        fence = self.fence()
        (outcome,) = await asyncio.to_thread(self._store.apply_moves, [move], ACTOR, fence)
        if isinstance(outcome, FrameFleetError):
            return  # moved meanwhile: the next message or tick decides again
        await self._commands.send(placement, CommandKind.CHECKPOINT_NOW, force=True)

    async def move_off(
        self, placements: Iterable[Placement], where: Callable[[Placement], bool], reason: str
    ) -> None:
        """Every job placed `where` checkpoints now and moves once that is durable."""
        for placement in placements:
            if not where(placement):
                continue
            if placement.job.state is JobState.RUNNING:
                await self.checkpoint_now(placement, reason)
            elif placement.job.state is JobState.ASSIGNED:
                # Its `started` may still be on the way. A worker that runs it checkpoints and
                # reports `preempted`; one that never started it refuses the assignment; both
                # send the job back to the queue.
                await self._commands.send(placement, CommandKind.CHECKPOINT_NOW, force=True)
