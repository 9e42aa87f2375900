"""A worker's health: one transition table, one `transition()` that checks it and keeps the
recent history (when and why each change happened, what an operator asks first).

alive --(no heartbeat for suspect_after)--> suspect --(lost_after)--> lost; a heartbeat brings
a suspect or lost worker back. Any worker may go offline (last will), be interrupted (a spot
warning), drain (a rebalance, or it says it accepts no more) or be lost (its instance is gone).
A heartbeat sent after the last will brings an offline worker back: its connection is back (a
broker restart can deliver a retained will after the worker has reconnected, and a worker kept
offline by it would never get work again). Only a new hello brings an interrupted or draining
worker back. Only alive workers accept new work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from kernel.state_machine import StateMachine
from kernel.worker_protocol import GpuHealth, Hello, JobProgress, WarmModel

HISTORY = 16  # changes kept per worker


class WorkerHealth(StrEnum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    LOST = "lost"
    OFFLINE = "offline"
    INTERRUPTED = "interrupted"
    DRAINING = "draining"


_ANYONE_MAY = {
    WorkerHealth.LOST,
    WorkerHealth.OFFLINE,
    WorkerHealth.INTERRUPTED,
    WorkerHealth.DRAINING,
}
TRANSITIONS: dict[WorkerHealth, frozenset[WorkerHealth]] = {
    WorkerHealth.ALIVE: frozenset({WorkerHealth.SUSPECT, *_ANYONE_MAY}),
    WorkerHealth.SUSPECT: frozenset({WorkerHealth.ALIVE, *_ANYONE_MAY}),
    WorkerHealth.LOST: frozenset({WorkerHealth.ALIVE, *_ANYONE_MAY}),
    WorkerHealth.OFFLINE: frozenset({WorkerHealth.ALIVE, *_ANYONE_MAY}),
    WorkerHealth.INTERRUPTED: frozenset(_ANYONE_MAY),
    WorkerHealth.DRAINING: frozenset(_ANYONE_MAY),
}


HEALTH_MACHINE = StateMachine("worker", TRANSITIONS)


@dataclass(frozen=True)
class HealthChange:
    worker_id: str
    before: WorkerHealth | None  # None: it said hello
    after: WorkerHealth
    at: datetime
    reason: str = ""


@dataclass(frozen=True)
class WorkerRecord:
    hello: Hello
    health: WorkerHealth
    last_seen: datetime
    heartbeat_sequence: int = -1
    history: tuple[HealthChange, ...] = ()
    will_sent_at: datetime | None = None  # of the last will that took it offline
    progress: tuple[JobProgress, ...] = ()  # its jobs' steps, as its last heartbeat said
    gpu_health: tuple[GpuHealth, ...] = ()  # NVML's view of its GPUs, from that heartbeat
    warm_models: tuple[WarmModel, ...] = ()  # models its free GPUs hold loaded, likewise


def registered(hello: Hello, at: datetime, previous: WorkerRecord | None) -> WorkerRecord:
    """A hello starts the worker afresh (alive), whatever it was; its history goes on."""
    change = HealthChange(hello.worker_id, None, WorkerHealth.ALIVE, at, "hello")
    history = (*(previous.history if previous else ()), change)[-HISTORY:]
    return WorkerRecord(hello, WorkerHealth.ALIVE, at, history=history)


def transition(
    record: WorkerRecord, after: WorkerHealth, at: datetime, reason: str
) -> WorkerRecord:
    """The record in its new health (a no-op for the health it has), checked by the table."""
    if after is record.health:
        return record
    HEALTH_MACHINE.check(record.hello.worker_id, record.health, after)
    change = HealthChange(record.hello.worker_id, record.health, after, at, reason)
    return replace(record, health=after, history=(*record.history, change)[-HISTORY:])
