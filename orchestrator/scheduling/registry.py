"""Live workers and their health (see `worker_health`), driven by protocol messages and the
injected clock. Workers offline or lost for longer than `forget_after` are forgotten, so the
registry stays the size of the fleet, not of its history."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta

from kernel.bounded import BoundedSet
from kernel.clock import Clock
from kernel.market import Market
from kernel.render_stage import warm_key
from kernel.worker_protocol import GpuHealth, GpuInfo, Heartbeat, Hello, JobProgress, Status
from orchestrator.scheduling.snapshots import GpuSlot, RunningJob, WorkerSnapshot
from orchestrator.scheduling.worker_health import (
    HealthChange,
    WorkerHealth,
    WorkerRecord,
    registered,
    transition,
)

# The store keeps every gone instance; memory keeps the newest (a day of a large fleet).
MAX_GONE_INSTANCES = 100_000


class WorkerRegistry:
    def __init__(
        self,
        clock: Clock,
        suspect_after: timedelta = timedelta(seconds=15),
        lost_after: timedelta = timedelta(seconds=60),
        forget_after: timedelta = timedelta(hours=1),
    ) -> None:
        self._clock = clock
        self._suspect_after = suspect_after
        self._lost_after = lost_after
        self._forget_after = forget_after
        self._workers: dict[str, WorkerRecord] = {}
        # Instances known to be terminated or interrupted, the newest ones.
        self._gone: BoundedSet[str] = BoundedSet(MAX_GONE_INSTANCES)
        # (worker, GPU) quarantined (the store's list): no new work goes there.
        self.quarantined: set[tuple[str, int]] = set()

    def on_hello(self, hello: Hello) -> bool:
        """False for a hello from an instance that is gone (a retained message, a zombie)."""
        if hello.instance in self._gone:
            return False
        previous = self._workers.get(hello.worker_id)
        self._workers[hello.worker_id] = registered(hello, self._clock.now(), previous)
        return True

    def seen(self) -> list[WorkerRecord]:
        return list(self._workers.values())

    def first_hellos(self) -> dict[str, tuple[datetime, tuple[GpuInfo, ...]]]:
        """Each known worker's instance: when its worker first said hello, and the slots it
        offers (a MIG slot names its GPU and its part of it)."""
        return {
            record.hello.instance: (
                min((c.at for c in record.history if c.before is None), default=record.last_seen),
                tuple(record.hello.gpus),
            )
            for record in self._workers.values()
        }

    def instance_gone(self, instance_id: str) -> None:
        """Never again accept a hello from this instance (AWS does not reuse instance ids)."""
        self._gone.add(instance_id)

    def on_heartbeat(self, heartbeat: Heartbeat) -> bool:
        """False for an unknown worker (it must say hello first) or an out-of-order beat."""
        record = self._workers.get(heartbeat.worker_id)
        if record is None or heartbeat.sequence <= record.heartbeat_sequence:
            return False
        now = self._clock.now()
        if record.health in {WorkerHealth.SUSPECT, WorkerHealth.LOST}:
            record = transition(record, WorkerHealth.ALIVE, now, "heartbeat")
        elif (
            record.health is WorkerHealth.OFFLINE
            and record.will_sent_at is not None
            and heartbeat.sent_at > record.will_sent_at
        ):
            record = transition(record, WorkerHealth.ALIVE, now, "heartbeat after its last will")
        self._workers[heartbeat.worker_id] = replace(
            record,
            last_seen=now,
            heartbeat_sequence=heartbeat.sequence,
            progress=heartbeat.jobs,
            gpu_health=heartbeat.gpus,
            warm_models=heartbeat.warm_models,
        )
        return True

    def progress(self) -> list[tuple[JobProgress, datetime]]:
        """Every job step the workers' last heartbeats reported, with when they were heard."""
        return [(job, r.last_seen) for r in self._workers.values() for job in r.progress]

    def gpu_health(self) -> list[tuple[str, Hello, GpuHealth]]:
        """Each GPU's health as its worker's last heartbeat gave it (worker, hello, health)."""
        return [(w, r.hello, g) for w, r in self._workers.items() for g in r.gpu_health]

    def family_of(self, worker_id: str, gpu_index: int) -> str | None:
        record = self._workers.get(worker_id)
        if record is None:
            return None
        return next((g.family for g in record.hello.gpus if g.index == gpu_index), None)

    def on_status(self, status: Status) -> None:
        if not status.online:
            self.mark(status.worker_id, WorkerHealth.OFFLINE, "status offline (last will)")
            record = self._workers.get(status.worker_id)
            if record is not None:
                self._workers[status.worker_id] = replace(record, will_sent_at=status.sent_at)

    def mark(self, worker_id: str, health: WorkerHealth, reason: str) -> None:
        record = self._workers.get(worker_id)
        if record is not None:
            self._workers[worker_id] = transition(record, health, self._clock.now(), reason)

    def size(self) -> int:
        return len(self._workers)

    def history(self, worker_id: str) -> tuple[HealthChange, ...]:
        record = self._workers.get(worker_id)
        return record.history if record else ()

    def by_instance(self, instance_id: str) -> list[str]:
        return [w for w, r in self._workers.items() if r.hello.instance == instance_id]

    def hello(self, worker_id: str) -> Hello | None:
        record = self._workers.get(worker_id)
        return record.hello if record else None

    def health(self, worker_id: str) -> WorkerHealth | None:
        record = self._workers.get(worker_id)
        return record.health if record else None

    def sweep(self) -> list[HealthChange]:
        """Apply heartbeat timeouts; returns what changed (lost workers' jobs must move).
        Workers offline or lost for `forget_after` are dropped."""
        now = self._clock.now()
        changes = []
        for worker_id, record in list(self._workers.items()):
            silent = now - record.last_seen
            after, why = record.health, ""
            if record.health is WorkerHealth.ALIVE and silent >= self._suspect_after:
                after, why = (
                    WorkerHealth.SUSPECT,
                    f"no heartbeat for {silent.total_seconds():.0f} s",
                )
            if record.health in {WorkerHealth.ALIVE, WorkerHealth.SUSPECT} and (
                silent >= self._lost_after
            ):
                after, why = WorkerHealth.LOST, f"no heartbeat for {silent.total_seconds():.0f} s"
            if after is not record.health:
                record = transition(record, after, now, why)
                self._workers[worker_id] = record
                changes.append(record.history[-1])
            elif record.health in {WorkerHealth.OFFLINE, WorkerHealth.LOST} and (
                silent >= self._forget_after
            ):
                del self._workers[worker_id]
        return changes

    def accepting(self) -> frozenset[str]:
        """The workers that take new work now."""
        return frozenset(w for w, r in self._workers.items() if r.health is WorkerHealth.ALIVE)

    def free_gpus(self, busy: set[tuple[str, int]], among: frozenset[str]) -> int:
        """GPUs of the workers `among` that hold none of the `busy` (worker, GPU) slots."""
        return sum(
            (worker_id, gpu.index) not in busy
            for worker_id in among
            if (record := self._workers.get(worker_id)) is not None
            for gpu in record.hello.gpus
            if (worker_id, gpu.index) not in self.quarantined
        )

    def snapshot(
        self,
        running: dict[tuple[str, int], RunningJob],
        freeing: Mapping[tuple[str, int], str] | None = None,
        accepting: frozenset[str] | None = None,
    ) -> tuple[WorkerSnapshot, ...]:
        """The scheduler's view: every known worker's GPUs with what runs on them, and which
        busy GPUs a preemption is freeing for which job (`freeing`); with `accepting`, only
        those workers take new work (the ones the tick sized its read of the queue for)."""
        freeing = freeing or {}
        warm = {
            (worker_id, w.gpu_index): warm_key(w.model, w.stage)
            for worker_id, record in self._workers.items()
            for w in record.warm_models
        }
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
                        reserved_for=freeing.get((worker_id, gpu.index)),
                        spot=record.hello.market is Market.SPOT,
                        warm_model=warm.get((worker_id, gpu.index)),
                        physical=gpu.physical,
                        time_shared=gpu.time_shared,
                    )
                    for gpu in record.hello.gpus
                    if (worker_id, gpu.index) not in self.quarantined
                ),
                accepting=record.health is WorkerHealth.ALIVE
                and (accepting is None or worker_id in accepting),
            )
            for worker_id, record in sorted(self._workers.items())
        )
