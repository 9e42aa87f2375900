"""The autoscaler reads each instance's one record: a spot warning recorded by any control-plane
replica takes the instance's GPUs out of capacity at once and buys the replacement for the job
on it in the same round, and its own moves (launched, working, terminating) land in the same
record (on SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from autoscaler.ec2.fake import FakeEc2
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.market.trace import load_trace
from kernel.clock import FakeClock
from kernel.instance_state import InstanceState
from kernel.job_record import JobMove, Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.support.autoscaling import TRACES, autoscaler
from tests.support.jobs import job_dict


@pytest.fixture
def clock() -> FakeClock:
    """The store's clock: a tick of the trace where all three zones have spot capacity."""
    trace = load_trace(TRACES)
    for tick in range(200, trace.ticks):
        if all(z.available[tick] for z in trace.zones.values()):
            return FakeClock(trace.start + trace.gap * tick)
    raise AssertionError("no tick with all zones available")


def run_on(store: JobStore, job_id: str, instance_id: str) -> None:
    job = store.get(job_id)
    path = (JobState.ASSIGNED, JobState.RUNNING)
    move = JobMove(job_id, job.version, path, "test", worker_id=instance_id, gpu_index=0)
    store.apply_moves([move], "test")


async def test_a_warned_instance_is_no_capacity_and_its_job_gets_a_replacement_at_once(
    store: JobStore, clock: FakeClock
) -> None:
    store.intake.accept_batch(
        [Submission(parse_job(job_dict(f"j{i}", seed=i), now=None), f"m{i}") for i in range(2)]
    )
    ec2 = FakeEc2(clock)
    loop = autoscaler(store, clock, ec2)
    await loop.once()
    bought = store.reservations.of(["j0"])["j0"].instance_id
    assert store.instance_records.instance_statuses()[bought].state is InstanceState.BOOTING
    run_on(store, "j0", bought)
    clock.advance(60)
    await loop.once()
    assert store.instance_records.instance_statuses()[bought].state is InstanceState.WORKING

    # A control-plane replica (any one) hears EC2's two-minute warning for it.
    store.instance_records.record_gone(bought, "EC2 Spot Instance Interruption")
    clock.advance(10)
    plans = await loop.once()

    assert bought in loop.drains.leaving
    views = loop.instance_views({}, MarketSnapshot(clock.now(), {}))
    assert bought not in {view.instance_id for view in views}
    replacement = [launch for plan in plans for launch in plan.launches if "j0" in launch.job_ids]
    assert replacement, "the job on the warned instance gets its next GPU bought now"
    assert bought in ec2.instances  # EC2 ends it; the autoscaler does not race it
    moves = [(c.after, c.actor) for c in store.instance_records.instance_history(bought)]
    assert moves == [
        (InstanceState.BOOTING, "autoscaler"),
        (InstanceState.WORKING, "autoscaler"),
        (InstanceState.WARNED, "control-plane"),
    ]
