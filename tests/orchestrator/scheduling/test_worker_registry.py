"""Worker health from hello, heartbeats, last wills and silence, on the injected clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kernel.clock import FakeClock
from kernel.errors import InvalidTransition
from kernel.worker_protocol import Heartbeat, Status, WarmModel
from orchestrator.scheduling.registry import WorkerRegistry
from orchestrator.scheduling.snapshots import RunningJob
from orchestrator.scheduling.worker_health import (
    HealthChange,
    WorkerHealth,
    WorkerRecord,
    transition,
)
from tests.support.worker_messages import hello


def beat(clock: FakeClock, sequence: int, worker_id: str = "w1") -> Heartbeat:
    return Heartbeat(worker_id=worker_id, sent_at=clock.now(), sequence=sequence)


def moves(changes: list[HealthChange]) -> list[tuple[str, WorkerHealth | None, WorkerHealth]]:
    return [(c.worker_id, c.before, c.after) for c in changes]


def test_silence_makes_a_worker_suspect_then_lost_and_a_heartbeat_revives_it() -> None:
    clock = FakeClock()
    registry = WorkerRegistry(clock, timedelta(seconds=15), timedelta(seconds=60))
    registry.on_hello(hello("w1"))
    clock.advance(14)
    assert registry.sweep() == []
    clock.advance(1)
    assert moves(registry.sweep()) == [("w1", WorkerHealth.ALIVE, WorkerHealth.SUSPECT)]
    assert registry.on_heartbeat(beat(clock, 1))
    assert registry.health("w1") is WorkerHealth.ALIVE
    clock.advance(60)
    assert moves(registry.sweep()) == [("w1", WorkerHealth.ALIVE, WorkerHealth.LOST)]
    assert registry.sweep() == []


def test_heartbeats_from_strangers_or_out_of_order_are_refused() -> None:
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    assert not registry.on_heartbeat(beat(clock, 1, "ghost"))
    registry.on_hello(hello("w1"))
    assert registry.on_heartbeat(beat(clock, 5))
    assert not registry.on_heartbeat(beat(clock, 5))
    assert not registry.on_heartbeat(beat(clock, 4))


def test_last_will_and_interruptions_stop_new_work() -> None:
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    registry.on_hello(hello("w1"))
    registry.on_hello(hello("w2"))
    registry.on_status(Status(worker_id="w1", sent_at=clock.now(), online=False))
    registry.mark("w2", WorkerHealth.INTERRUPTED, "spot warning")
    running = {("w2", 0): RunningJob("j", 5, None, clock.now())}
    snapshot = {w.worker_id: w for w in registry.snapshot(running)}
    assert not snapshot["w1"].accepting
    assert not snapshot["w2"].accepting
    assert snapshot["w2"].gpus[0].running == running[("w2", 0)]
    assert registry.by_instance("i-0123456789abcdef0") == ["w1", "w2"]


def test_only_a_hello_brings_back_a_worker_that_left_and_history_says_why() -> None:
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    registry.on_hello(hello("w1"))
    registry.mark("w1", WorkerHealth.INTERRUPTED, "spot warning for i-0123456789abcdef0")
    assert registry.on_heartbeat(beat(clock, 1))
    assert registry.health("w1") is WorkerHealth.INTERRUPTED  # a heartbeat does not revive it
    registry.on_hello(hello("w1"))
    assert registry.health("w1") is WorkerHealth.ALIVE
    assert [(c.before, c.after, c.reason) for c in registry.history("w1")] == [
        (None, WorkerHealth.ALIVE, "hello"),
        (WorkerHealth.ALIVE, WorkerHealth.INTERRUPTED, "spot warning for i-0123456789abcdef0"),
        (None, WorkerHealth.ALIVE, "hello"),
    ]


def test_the_table_refuses_what_it_does_not_list() -> None:
    clock = FakeClock()
    record = WorkerRecord(hello("w1"), WorkerHealth.OFFLINE, clock.now())
    with pytest.raises(InvalidTransition, match="offline -> suspect"):
        transition(record, WorkerHealth.SUSPECT, clock.now(), "silence")


def test_workers_long_gone_are_forgotten() -> None:
    clock = FakeClock()
    registry = WorkerRegistry(clock, timedelta(seconds=15), timedelta(seconds=60))
    registry.on_hello(hello("w1"))
    registry.on_status(Status(worker_id="w1", sent_at=clock.now(), online=False))
    clock.advance(3599)
    registry.sweep()
    assert registry.health("w1") is WorkerHealth.OFFLINE
    clock.advance(1)
    registry.sweep()
    assert registry.health("w1") is None


def test_a_heartbeat_sent_after_the_last_will_brings_an_offline_worker_back() -> None:
    """A broker restart can deliver a worker's retained will after it has reconnected: its
    next heartbeat shows the connection is back. One sent before the will does not."""
    clock = FakeClock()
    registry = WorkerRegistry(clock, timedelta(seconds=15), timedelta(seconds=60))
    registry.on_hello(hello("w1"))
    will_time = clock.now()
    clock.advance(5)
    stale = Heartbeat(worker_id="w1", sent_at=will_time - timedelta(seconds=1), sequence=1)
    registry.on_status(Status(worker_id="w1", sent_at=will_time, online=False))
    assert registry.health("w1") is WorkerHealth.OFFLINE
    registry.on_heartbeat(stale)
    assert registry.health("w1") is WorkerHealth.OFFLINE
    registry.on_heartbeat(Heartbeat(worker_id="w1", sent_at=clock.now(), sequence=2))
    assert registry.health("w1") is WorkerHealth.ALIVE
    assert registry.history("w1")[-1].reason == "heartbeat after its last will"


def test_a_tick_offers_work_only_to_the_workers_it_sized_its_queue_read_for() -> None:
    """A hello that arrives while a tick reads the queue waits for the next tick: the read
    was sized for the free GPUs counted before it (four queued jobs per GPU)."""
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    registry.on_hello(hello("w1"))
    registry.on_hello(hello("w2"))
    accepting = registry.accepting()
    busy = {("w2", 0)}
    assert registry.free_gpus(busy, accepting) == 1
    registry.on_hello(hello("w3"))  # while the queue is being read
    offered = {w.worker_id: w.accepting for w in registry.snapshot({}, None, accepting)}
    assert offered == {"w1": True, "w2": True, "w3": False}
    assert registry.free_gpus(busy, registry.accepting()) == 2  # the next tick's count


def test_the_models_a_heartbeat_says_are_warm_reach_the_schedulers_gpus() -> None:
    clock = FakeClock()
    registry = WorkerRegistry(clock)
    registry.on_hello(hello("w1"))
    warm = (WarmModel(gpu_index=0, model="wan/1.3b"),)
    registry.on_heartbeat(beat(clock, 1).model_copy(update={"warm_models": warm}))
    (worker,) = registry.snapshot({})
    assert worker.gpus[0].warm_model == "wan/1.3b"
    # The next beat without it (a job took the GPU, or the process was recycled): cold.
    registry.on_heartbeat(beat(clock, 2))
    (worker,) = registry.snapshot({})
    assert worker.gpus[0].warm_model is None
