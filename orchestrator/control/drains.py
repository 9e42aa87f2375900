"""Scale-in without a race: the autoscaler asks for an instance to be emptied (its record in
the store says draining), the control plane assigns nothing more there, moves what runs there
off it (checkpoint now, then the queue), and says when nothing is left; only then does the
autoscaler terminate it. Both sides read the same rows, so no assignment can land on an
instance between the decision and the termination."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from kernel.instance_state import InstanceState, InstanceStatus
from kernel.job_record import DrainKind, DrainRequest, Placement
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.worker_health import WorkerHealth

log = logging.getLogger(__name__)
# Workers that could still be given work (the others take none anyway).
_ASSIGNABLE = {WorkerHealth.ALIVE, WorkerHealth.SUSPECT}
# Workers whose jobs a spot warning still has to move (a lost one's jobs moved already).
_MAY_BE_WARNED = {*_ASSIGNABLE, WorkerHealth.DRAINING}


class DrainStore(Protocol):
    def drain_requests(self) -> dict[str, DrainRequest]: ...

    def instance_statuses(
        self, states: Iterable[InstanceState] | None = ...
    ) -> dict[str, InstanceStatus]: ...

    def mark_drained(self, instance_ids: list[str]) -> None: ...


class Drains:
    def __init__(
        self,
        store: DrainStore,
        registry: WorkerRegistry,
        move_jobs_off: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self._store, self._registry, self._move_jobs_off = store, registry, move_jobs_off
        self._moving: set[str] = set()  # workers whose jobs were told to move

    async def step(self, placements: list[Placement]) -> None:
        """Before scheduling: drained instances take no work; empty ones are reported; jobs on
        a spot-warned instance (whichever replica heard the warning) move off it."""
        requests = await asyncio.to_thread(self._store.drain_requests)
        warned = await asyncio.to_thread(self._store.instance_statuses, [InstanceState.WARNED])
        for status in warned.values():
            self._registry.instance_gone(status.instance_id)  # no new hello from it
            for worker_id in self._registry.by_instance(status.instance_id):
                if self._registry.health(worker_id) in _MAY_BE_WARNED:
                    self._registry.mark(worker_id, WorkerHealth.INTERRUPTED, status.reason)
                    await self._move_jobs_off(worker_id, f"spot warning: {status.reason}")
        pending = [r for r in requests.values() if r.drained_at is None]
        empty: list[str] = []
        asked_workers: set[str] = set()
        for request in pending:
            workers = set(self._registry.by_instance(request.instance_id))
            asked_workers |= workers
            reason = f"{request.kind.value}: {request.reason}"
            for worker_id in workers:
                if self._registry.health(worker_id) in _ASSIGNABLE:
                    log.info("draining %s: %s", worker_id, reason)
                    self._registry.mark(worker_id, WorkerHealth.DRAINING, reason)
            busy = {p.worker_id for p in placements if p.worker_id in workers}
            # Scale-in moves what runs there now; a rebalance lets it run to its end (or to a
            # spot notice, which moves it).
            if request.kind is DrainKind.SCALE_IN:
                for worker_id in busy - self._moving:
                    self._moving.add(worker_id)
                    await self._move_jobs_off(worker_id, reason)
            if not busy:
                empty.append(request.instance_id)
        self._moving &= asked_workers
        if empty:
            await asyncio.to_thread(self._store.mark_drained, empty)
