"""The store's guarantees for replicas: a lease with a growing fence token, writes that carry
the token and fail once it is stale, and one open attempt per GPU, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from autoscaler.market.capacity import CapacityMemory
from autoscaler.pools import Pool
from kernel.clock import FakeClock
from kernel.errors import ConcurrentModification
from kernel.job_record import JobMove
from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.store.job_store import JobStore
from orchestrator.store.leases import NotLeader
from tests.support.jobs import submission
from tests.support.waits import wait_until

TTL = timedelta(seconds=10)


def _expire(store: JobStore, clock: FakeClock, name: str) -> None:
    """Let the lease run out: the fake clock on SQLite, the database's own on PostgreSQL."""
    if store.engine.dialect.name == "postgresql":
        store.leases.claim_lease(name, "a", timedelta(milliseconds=1))  # renewed to expire at once
        wait_until(
            lambda: store.leases.claim_lease(name, "probe", timedelta(0)) is not None,
            timeout=5,
            what="the lease to expire",
        )
    else:
        clock.advance(TTL.total_seconds() + 1)


def test_one_holder_at_a_time_and_each_new_holder_a_larger_fence(
    store: JobStore, clock: FakeClock
) -> None:
    first = store.leases.claim_lease("control-plane", "a", TTL)
    assert first is not None
    assert store.leases.claim_lease("control-plane", "b", TTL) is None
    again = store.leases.claim_lease("control-plane", "a", TTL)
    assert again == first  # a renewal keeps the fence
    _expire(store, clock, "control-plane")
    taken = store.leases.claim_lease("control-plane", "b", TTL)
    assert taken is not None
    assert taken.token > first.token
    assert store.leases.claim_lease("control-plane", "a", TTL) is None
    store.leases.release_lease(taken)
    after = store.leases.claim_lease("control-plane", "a", TTL)  # at once: no wait for expiry
    assert after is not None
    assert after.token > taken.token


def test_a_deposed_holders_write_fails_and_changes_nothing(
    store: JobStore, clock: FakeClock
) -> None:
    store.intake.accept_batch([submission("fenced-1")])
    old = store.leases.claim_lease("control-plane", "a", TTL)
    assert old is not None
    assign = JobMove("fenced-1", 1, (JobState.ASSIGNED,), "test", worker_id="i-0a", gpu_index=0)
    _expire(store, clock, "control-plane")
    assert store.leases.claim_lease("control-plane", "b", TTL) is not None
    with pytest.raises(NotLeader):
        store.apply_moves([assign], "a", old)
    assert store.get("fenced-1").state is JobState.QUEUED
    assert [event.to_state for event in store.history("fenced-1")] == [JobState.QUEUED]


def test_the_database_refuses_two_open_attempts_on_one_gpu(store: JobStore) -> None:
    store.intake.accept_batch([submission("gpu-a"), submission("gpu-b")])
    on_gpu = {"worker_id": "i-0abc", "gpu_index": 0}

    def assign(job_id: str) -> JobMove:
        version = store.get(job_id).version
        return JobMove(job_id, version, (JobState.ASSIGNED,), "test", **on_gpu)  # type: ignore[arg-type]

    first, second = store.apply_moves([assign("gpu-a"), assign("gpu-b")], "control-plane")
    assert first.state is JobState.ASSIGNED  # type: ignore[union-attr]
    assert isinstance(second, ConcurrentModification)
    assert store.get("gpu-b").state is JobState.QUEUED
    done = store.get("gpu-a")
    path = (JobState.RUNNING, JobState.SUCCEEDED)
    store.apply_moves([JobMove("gpu-a", done.version, path, "finished")], "control-plane")
    (placed,) = store.apply_moves([assign("gpu-b")], "control-plane")
    assert placed.state is JobState.ASSIGNED  # type: ignore[union-attr]


async def test_a_pool_one_replica_found_failing_is_avoided_by_the_next(
    store: JobStore, clock: FakeClock
) -> None:
    first, second = (
        CapacityMemory(clock, log=store.pool_marks),
        CapacityMemory(clock, log=store.pool_marks),
    )
    pool = Pool("g5.xlarge", "us-east-1a", Market.SPOT)
    first.mark(pool, "InsufficientInstanceCapacity on launch")
    first.interrupted(Pool("g5.xlarge", "us-east-1b", Market.SPOT))
    await first.sync()
    await second.sync()
    assert "InsufficientInstanceCapacity" in (second.unavailable(pool) or "")
    interrupted = Pool("g5.xlarge", "us-east-1b", Market.SPOT)
    rate = first.observed_rate(interrupted)
    assert rate is not None
    assert rate > 0
    assert second.observed_rate(interrupted) == rate
    await first.sync()  # its own marks read back are not counted twice
    assert first.observed_rate(interrupted) == second.observed_rate(interrupted)
    clock.advance(16 * 60)
    assert second.unavailable(pool) is None
