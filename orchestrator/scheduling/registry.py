"""Live workers and their health, driven by protocol messages and the injected clock.

alive --(no heartbeat for suspect_after)--> suspect --(lost_after)--> lost
any --(last will / status offline)--> offline; a spot warning or rebalance -> interrupted;
a drain -> draining. Only alive workers accept new work.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from kernel.clock import Clock
from kernel.market import Market
from kernel.worker_protocol import Heartbeat, Hello, Status
from orchestrator.scheduling.snapshots import GpuSlot, RunningJob, WorkerSnapshot

# The store keeps every gone instance; memory keeps the newest (a day of a large fleet).
MAX_GONE_INSTANCES = 100_000


class WorkerHealth(StrEnum):
    ALIVE = "alive"
    SUSPECT = "suspect"
    LOST = "lost"
    OFFLINE = "offline"
    INTERRUPTED = "interrupted"
    DRAINING = "draining"


@dataclass(frozen=True)
class WorkerRecord:
    hello: Hello
    health: WorkerHealth
    last_seen: datetime
    heartbeat_sequence: int = -1


@dataclass(frozen=True)
class HealthChange:
    worker_id: str
    before: WorkerHealth
    after: WorkerHealth


class WorkerRegistry:
    def __init__(
        self,
        clock: Clock,
        suspect_after: timedelta = timedelta(seconds=15),
        lost_after: timedelta = timedelta(seconds=60),
    ) -> None:
        self._clock = clock
        self._suspect_after = suspect_after
        self._lost_after = lost_after
        self._workers: dict[str, WorkerRecord] = {}
        # Instances known to be terminated or interrupted, oldest first, bounded.
        self._gone: OrderedDict[str, None] = OrderedDict()

    def on_hello(self, hello: Hello) -> bool:
        """False for a hello from an instance that is gone (a retained message, a zombie)."""
        if hello.instance_id in self._gone:
            return False
        self._workers[hello.worker_id] = WorkerRecord(hello, WorkerHealth.ALIVE, self._clock.now())
        return True

    def instance_gone(self, instance_id: str) -> None:
        """Never again accept a hello from this instance (AWS does not reuse instance ids)."""
        self._gone[instance_id] = None
        self._gone.move_to_end(instance_id)
        while len(self._gone) > MAX_GONE_INSTANCES:
            self._gone.popitem(last=False)

    def on_heartbeat(self, heartbeat: Heartbeat) -> bool:
        """False for an unknown worker (it must say hello first) or an out-of-order beat."""
        record = self._workers.get(heartbeat.worker_id)
        if record is None or heartbeat.sequence <= record.heartbeat_sequence:
            return False
        health = record.health
        if health in {WorkerHealth.SUSPECT, WorkerHealth.LOST}:
            health = WorkerHealth.ALIVE
        self._workers[heartbeat.worker_id] = replace(
            record, health=health, last_seen=self._clock.now(),
            heartbeat_sequence=heartbeat.sequence,
        )  # fmt: skip
        return True

    def on_status(self, status: Status) -> None:
        record = self._workers.get(status.worker_id)
        if record is not None and not status.online:
            self._workers[status.worker_id] = replace(record, health=WorkerHealth.OFFLINE)

    def mark(self, worker_id: str, health: WorkerHealth) -> None:
        record = self._workers.get(worker_id)
        if record is not None:
            self._workers[worker_id] = replace(record, health=health)

    def by_instance(self, instance_id: str) -> list[str]:
        return [w for w, r in self._workers.items() if r.hello.instance_id == instance_id]

    def health(self, worker_id: str) -> WorkerHealth | None:
        record = self._workers.get(worker_id)
        return record.health if record else None

    def sweep(self) -> list[HealthChange]:
        """Apply heartbeat timeouts; returns what changed (lost workers' jobs must move)."""
        now = self._clock.now()
        changes = []
        for worker_id, record in self._workers.items():
            silent = now - record.last_seen
            after = record.health
            if record.health is WorkerHealth.ALIVE and silent >= self._suspect_after:
                after = WorkerHealth.SUSPECT
            if record.health in {WorkerHealth.ALIVE, WorkerHealth.SUSPECT} and (
                silent >= self._lost_after
            ):
                after = WorkerHealth.LOST
            if after is not record.health:
                changes.append(HealthChange(worker_id, record.health, after))
        for change in changes:
            self._workers[change.worker_id] = replace(
                self._workers[change.worker_id], health=change.after
            )
        return changes

    def snapshot(self, running: dict[tuple[str, int], RunningJob]) -> tuple[WorkerSnapshot, ...]:
        """The scheduler's view: every known worker's GPUs with what runs on them."""
        return tuple(
            WorkerSnapshot(
                worker_id=worker_id,
                gpus=tuple(
                    GpuSlot(
                        worker_id,
                        gpu.index,
                        gpu.family,
                        gpu.vram_gib,
                        running.get((worker_id, gpu.index)),
                        spot=record.hello.market is Market.SPOT,
                    )
                    for gpu in record.hello.gpus
                ),
                accepting=record.health is WorkerHealth.ALIVE,
            )
            for worker_id, record in sorted(self._workers.items())
        )
