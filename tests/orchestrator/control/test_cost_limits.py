"""A job's cost limit: no GPU is bought for it that would cost it more, and once what it cost
so far reaches the limit it is cancelled with the reason. Jobs without one keep their
canonical form (and so their fingerprints) unchanged."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from autoscaler.policy import plan
from autoscaler.snapshot import PlanInput
from kernel.clock import FakeClock
from kernel.job_record import Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.worker_protocol import Channel, topic
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.store.job_store import JobStore
from simulator.fakes import MemoryLink
from tests.support.control_plane import OWNER, hello, listed, started
from tests.support.jobs import job_dict
from tests.support.market_snapshots import MARKET, NOW, SETTINGS, job
from tests.support.paces import linear_pace


def test_a_job_without_a_limit_keeps_its_canonical_form() -> None:
    plain = parse_job(job_dict("plain"), now=None)
    assert "max_cost_usd" not in plain.canonical_json()
    limited = parse_job(job_dict("limited", max_cost_usd=2.5), now=None)
    assert '"max_cost_usd":2.5' in limited.canonical_json()


def test_no_pool_that_would_cost_the_job_more_than_its_limit_is_bought() -> None:
    render = job("capped")  # about 49 minutes on an L40S: $0.57 on the cheapest spot pool
    affordable = plan(
        PlanInput(NOW, (replace(render, max_cost_usd=5.0),), (), MARKET), SETTINGS, linear_pace()
    )
    assert [launch.job_ids for launch in affordable.launches] == [("capped",)]
    too_dear = plan(
        PlanInput(NOW, (replace(render, max_cost_usd=0.05),), (), MARKET), SETTINGS, linear_pace()
    )
    assert too_dear.launches == ()
    assert [w.job_id for w in too_dear.waits] == ["capped"]


async def test_a_job_that_reaches_its_cost_limit_is_cancelled(
    store: JobStore, clock: FakeClock
) -> None:
    costs = {"capped": Decimal("1.99")}
    plane = ControlPlaneService(
        store,
        clock,
        # The worker sends no heartbeats here: it stays alive for the test's two minutes.
        ControlSettings(suspect_after=timedelta(minutes=5), lost_after=timedelta(minutes=10)),
        connect=lambda _deliver, _admit: MemoryLink(),
        refusals=RefusedMessages(clock, None),
        job_cost=costs.get,
    )
    listed(store, OWNER)
    await plane.on_message(topic(OWNER, Channel.HELLO), hello(OWNER, clock))
    spec = parse_job(job_dict("capped", max_cost_usd=2.0), now=None)
    store.intake.accept_batch([Submission(spec, "m-capped")])
    await plane.tick()
    await started(plane, store, "capped")
    await plane.tick()
    assert store.get("capped").state is JobState.RUNNING  # $1.99 of $2.00

    costs["capped"] = Decimal("2.01")
    await plane.tick()  # read at most once a minute
    assert store.get("capped").state is JobState.RUNNING
    clock.advance(61)
    await plane.tick()
    cancelled = store.get("capped")
    assert cancelled.state is JobState.CANCELLED
    assert "cost limit of $2.00 is reached ($2.01 so far)" in store.history("capped")[-1].reason
