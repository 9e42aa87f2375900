"""The real autoscaler loop on a replayed trace slice, over a queue in a real store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autoscaler.actuation import Actuator
from autoscaler.demand import StoreDemand
from autoscaler.ec2.fake import FakeEc2
from autoscaler.loop import AutoscalerLoop
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.trace import TraceMarket, load_trace
from autoscaler.reconcile import Reconciler
from autoscaler.snapshot import PurchaseSettings
from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.jobs import job_dict
from tests.support.paces import linear_pace
from tests.support.paths import TEST_TRACES

TRACES = TEST_TRACES / "v100-slice"


@pytest.fixture
def trace_clock() -> FakeClock:
    trace = load_trace(TRACES)
    # A tick where all three zones have spot capacity.
    for tick in range(200, trace.ticks):
        if all(z.available[tick] for z in trace.zones.values()):
            return FakeClock(trace.start + trace.gap * tick)
    raise AssertionError("no tick with all zones available")


@pytest.fixture
def queued_store(sqlite_url: str, trace_clock: FakeClock) -> Iterator[JobStore]:
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    store = JobStore(engine, trace_clock)
    store.intake.accept_batch(
        [Submission(parse_job(job_dict(f"j{i}", seed=i), now=None), f"m{i}") for i in range(3)]
    )
    yield store
    store.dispose()


def autoscaler(store: JobStore, clock: FakeClock, ec2: FakeEc2) -> AutoscalerLoop:
    trace = load_trace(TRACES)
    capacity = CapacityMemory(clock)
    return AutoscalerLoop(
        market=TraceMarket(trace, clock),
        actuator=Actuator(ec2, capacity, "test-fleet", clock),
        reconciler=Reconciler(ec2, "test-fleet", clock),
        demand=StoreDemand(store),
        capacity=capacity,
        model=linear_pace(),
        settings=PurchaseSettings(candidate_types=("p3.2xlarge",)),
        zones=sorted(trace.zones),
        clock=clock,
    )
