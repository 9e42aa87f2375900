"""Which worker messages the control plane believes, and what they become.

Liveness is noted at once, in the registry, so a backlog of job events can never make a live
worker look lost; everything that touches a job is handed on as `Inbound` items, in arrival
order, to be written in batches. A hello from a gone instance and an event from a worker that
never said hello are refused.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kernel.worker_protocol import (
    EventKind,
    Heartbeat,
    Hello,
    Status,
    WorkerEvent,
)
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.worker_health import WorkerHealth


@dataclass(frozen=True)
class Inbound:
    """A worker message that touches jobs, in arrival order."""

    message: WorkerEvent | Status
    quiet: bool = False


@dataclass(frozen=True)
class Refused:
    reason: str
    error: str
    key: str = ""  # names a message that may come again, so it is dead-lettered once


Admission = tuple[list[Inbound], Refused | None]


def admit(
    message: Hello | Heartbeat | WorkerEvent | Status,
    registry: WorkerRegistry,
    running: dict[str, int],
) -> Admission:
    """`running`: job -> attempt known to run, whose heartbeat progress needs no `started`."""
    if isinstance(message, Hello):
        if registry.on_hello(message):
            return [], None
        # Whatever it still holds moves on, as if it had gone offline.
        offline = Status(worker_id=message.worker_id, sent_at=message.sent_at, online=False)
        return [Inbound(offline)], Refused("gone_instance", f"{message.instance_id} is gone")
    if isinstance(message, WorkerEvent) and registry.health(message.worker_id) is None:
        # Only a worker that said hello (from an instance that is not gone) is believed.
        key = f"{message.worker_id}:{message.event_id}"
        return [], Refused("unknown_worker", "no hello from this worker", key)
    if isinstance(message, Heartbeat):
        return _heartbeat(message, registry, running), None
    return [Inbound(message)], None


def _heartbeat(beat: Heartbeat, registry: WorkerRegistry, running: dict[str, int]) -> list[Inbound]:
    if not registry.on_heartbeat(beat):
        return []  # an unknown worker (it must say hello first) or an out-of-order beat
    if not beat.accepting:
        registry.mark(beat.worker_id, WorkerHealth.DRAINING, "it accepts no more work")
    items = [Inbound(outcome) for outcome in beat.recent]
    for progress in beat.jobs:
        if running.get(progress.job_id) == progress.attempt:
            continue  # already known to run there
        # A job the worker is running counts as started even if `started` was lost.
        started = WorkerEvent(
            worker_id=beat.worker_id,
            sent_at=beat.sent_at,
            event_id=f"hb-{uuid.uuid4()}",
            kind=EventKind.STARTED,
            job_id=progress.job_id,
            attempt=progress.attempt,
        )
        items.append(Inbound(started, quiet=True))
    return items


def ids_of(item: Inbound | None) -> dict[str, str | int | None]:
    """The worker, job and attempt a message is about, for its log lines."""
    if item is None:
        return {}
    message = item.message
    if isinstance(message, WorkerEvent):
        return {
            "worker_id": message.worker_id,
            "job_id": message.job_id,
            "attempt": message.attempt,
        }
    return {"worker_id": message.worker_id}
