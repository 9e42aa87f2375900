"""The autoscaler loop over the real store and the trace market, with a programmable EC2:
capacity errors send the policy to other pools, launches carry tokens, tags and reasons, a
second round buys nothing more, and idle capacity goes after the timeout."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from autoscaler.demand import job_demand
from autoscaler.ec2.fake import FakeEc2
from autoscaler.ec2.ports import REASON_TAG, LaunchRequest
from autoscaler.learning import LEARN_EVERY
from autoscaler.loop import AutoscalerLoop
from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.market.trace import load_trace
from autoscaler.pools import Pool
from autoscaler.snapshot import SplitMode
from autoscaler.spend import Spend
from autoscaler.throughput import ThroughputModel
from kernel.clock import FakeClock
from kernel.job_record import DrainKind, JobChanges, JobMove, JobRecord, Submission
from kernel.job_spec import parse_job
from kernel.job_state import JobState
from kernel.market import Market
from kernel.render_stage import RenderStage
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from orchestrator.store.migrate import upgrade_to_head
from tests.support.autoscaling import TRACES, autoscaler
from tests.support.jobs import job_dict


def cheapest_price(quotes: list[PoolQuote]) -> float:
    return min(q.price_per_hour for q in quotes)


async def bought(store: JobStore, clock: FakeClock) -> tuple[FakeEc2, AutoscalerLoop, str]:
    """A first round bought instances for the queue; one of them."""
    ec2 = FakeEc2(clock)
    loop = autoscaler(store, clock, ec2)
    await loop.once()
    return ec2, loop, next(iter(ec2.instances))


async def test_capacity_errors_send_the_launch_to_other_pools(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(queued_store, trace_clock, ec2)
    # One pool per launch: CreateFleet may not dodge the error through an alternative.
    loop.settings = replace(loop.settings, max_alternatives=0)
    snapshot = await loop.market.snapshot(loop.pools())
    spot = [q for q in snapshot.quotes.values() if q.pool.market is Market.SPOT]
    cheapest = min(spot, key=lambda q: q.price_per_hour).pool
    # Every pool at that price (two zones tie): whichever the policy ranks first fails.
    tied = {q.pool for q in spot if q.price_per_hour == cheapest_price(spot)}
    ec2.insufficient.update(tied)

    plans = await loop.once()

    assert len(plans) == len(tied) + 1  # a round per failing pool, then one bought elsewhere
    launched = list(ec2.instances.values())
    assert len(launched) == 3
    assert all(i.pool not in tied and i.pool.market is Market.SPOT for i in launched)
    assert all(
        "cheapest" in i.tags[REASON_TAG] or "least-loaded" in i.tags[REASON_TAG] for i in launched
    )
    assert len({r.client_token for r in ec2.requests}) == len(ec2.requests)
    assert loop.capacity.unavailable(cheapest) is not None

    again = await loop.once()  # nothing registered yet, but the new GPUs are counted
    assert again[0].launches == ()
    assert len(again[0].placed) == 3
    assert len(ec2.instances) == 3


async def test_idle_instances_go_after_the_timeout_and_spend_is_accrued(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(queued_store, trace_clock, ec2)
    loop.settings = replace(loop.settings, idle_timeout=timedelta(minutes=10))
    await loop.once()
    assert len(ec2.instances) == 3
    for job in queued_store.list_jobs():  # the jobs went elsewhere meanwhile
        queued_store.transition(
            job.job_id,
            job.state.CANCELLED,
            expected_version=job.version,
            actor="test",
            reason="cancelled",
        )
    await loop.once()  # first seen idle now
    assert len(ec2.instances) == 3
    trace_clock.advance(11 * 60)
    await loop.once()
    # Scale-in asks the control plane to empty them first; nothing is terminated yet.
    asked = queued_store.instance_records.drain_requests()
    assert set(asked) == set(ec2.instances)
    assert all("idle" in request.reason for request in asked.values())
    await loop.once()
    assert len(ec2.instances) == 3
    queued_store.instance_records.mark_drained(
        list(asked)
    )  # what the control plane does once they are empty
    await loop.once()
    assert ec2.instances == {}
    await loop.once()  # EC2 no longer lists them: their requests are done with
    assert queued_store.instance_records.drain_requests() == {}
    assert loop.recorder.accrued.dollars > 0


async def test_a_drain_the_control_plane_never_finishes_is_cut_short(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2, loop, instance = await bought(queued_store, trace_clock)
    queued_store.instance_records.ask_to_drain([instance], "scale-in: idle")
    await loop.once()
    assert instance in ec2.instances
    assert instance not in {
        view.instance_id for view in loop.instance_views({}, MarketSnapshot(trace_clock.now(), {}))
    }
    trace_clock.advance(loop.drains.timeout.total_seconds())
    await loop.once()
    assert instance not in ec2.instances
    await loop.once()
    assert instance not in queued_store.instance_records.drain_requests()


async def test_a_spot_instance_that_vanished_counts_as_an_interruption(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(queued_store, trace_clock, ec2)
    await loop.once()
    gone = next(iter(ec2.instances.values()))
    await ec2.terminate([gone.instance_id])  # AWS took it back
    await loop.once()
    assert "spot interruption" in (loop.capacity.unavailable(gone.pool) or "")
    assert (loop.capacity.observed_rate(gone.pool) or 0) > 0
    # ...and its job was bought a place in another pool.
    assert all(i.pool != gone.pool for i in list(ec2.instances.values())[2:])
    assert len(ec2.instances) == 3


def test_spend_restarts_each_day(trace_clock: FakeClock) -> None:
    spend = Spend()
    start = trace_clock.now()
    assert spend.accrue(start, 10.0) == 0.0
    assert spend.accrue(start + timedelta(minutes=30), 10.0) == pytest.approx(5.0)
    assert spend.accrue(start + timedelta(days=1), 10.0) == 0.0


def test_progress_is_the_stored_step_of_the_newest_checkpoint(queued_store: JobStore) -> None:
    job = queued_store.get("j0")
    moved = queued_store.apply_moves(
        [
            JobMove(
                "j0",
                job.version,
                (),
                "checkpoint",
                JobChanges(last_checkpoint="anywhere/at/all.json", checkpoint_step=3),
            )
        ],
        "test",
    )
    record = moved[0]
    assert isinstance(record, JobRecord)
    assert job_demand(record).steps_done == 3  # of 4


async def test_the_throughput_model_learns_from_jobs_finished_on_the_fleet(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    _ec2, loop, instance = await bought(queued_store, trace_clock)
    job = queued_store.get("j0")
    shape = job_demand(job).shape
    prior = loop.model.seconds_per_step(shape, "v100")
    for target in (JobState.ASSIGNED, JobState.RUNNING):
        record = queued_store.get("j0")
        queued_store.transition(
            "j0",
            target,
            expected_version=record.version,
            actor="test",
            reason="placed",
            worker_id=instance,
        )
    measured = 10 * prior
    trace_clock.advance(3600)  # model loads, uploads and waits are not the pace of its steps
    record = queued_store.get("j0")
    timed = JobChanges(denoise_seconds=measured * job.spec.steps)  # what its worker reported
    queued_store.apply_moves(
        [JobMove("j0", record.version, (JobState.SUCCEEDED,), "done", timed)], "test"
    )
    trace_clock.advance(LEARN_EVERY.total_seconds())  # it looks once a minute
    await loop.once()
    assert loop.model.seconds_per_step(shape, "v100") == pytest.approx(measured, rel=1e-3)
    trace_clock.advance(LEARN_EVERY.total_seconds())
    await loop.once()  # a job is learned from once
    assert loop.model.seconds_per_step(shape, "v100") == pytest.approx(measured, rel=1e-3)


async def test_a_rebalanced_instance_is_replaced_now_and_terminated_once_empty(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2, loop, instance = await bought(queued_store, trace_clock)
    queued_store.instance_records.ask_to_drain(
        [instance], "EC2 Instance Rebalance Recommendation", DrainKind.REBALANCE
    )
    await loop.once()
    # No longer capacity to plan with, so its jobs' replacement can be bought now.
    assert instance in loop.drains.leaving
    # Its jobs run to their end: no drain timeout cuts a rebalance short.
    trace_clock.advance(2 * loop.drains.timeout.total_seconds())
    await loop.once()
    assert instance in ec2.instances
    queued_store.instance_records.mark_drained([instance])
    await loop.once()
    assert instance not in ec2.instances


async def test_a_job_on_on_demand_moves_back_to_spot_once_its_spot_instance_has_booted(
    sqlite_url: str, trace_clock: FakeClock
) -> None:
    """A job without a deadline runs on an on-demand instance (a free GPU it was given): the
    loop buys it a spot instance and holds it for the job, and once that has booted asks the
    control plane to drain the on-demand one, so the job resumes on spot."""
    engine = make_engine(sqlite_url)
    upgrade_to_head(engine)
    store = JobStore(engine, trace_clock)
    spec = parse_job(job_dict("long", steps=1000), now=None)
    store.intake.accept_batch([Submission(spec, "m-long")])
    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(store, trace_clock, ec2)
    # Five hours of work on a V100: 18 s a step.
    loop.model = ThroughputModel(prior=lambda _shape, _family: 18.0)
    on_demand = Pool("p3.2xlarge", sorted(load_trace(TRACES).zones)[0], Market.ON_DEMAND)
    request = LaunchRequest("test-fleet", Market.ON_DEMAND, (on_demand,), 1, "t-od", "test", ())
    (instance,) = (await ec2.launch(request)).instances
    for target in (JobState.ASSIGNED, JobState.RUNNING):
        record = store.get("long")
        store.transition(
            "long",
            target,
            expected_version=record.version,
            actor="test",
            reason="placed",
            worker_id=instance.instance_id,
        )

    await loop.once()
    spot = [i for i in ec2.instances.values() if i.pool.market is Market.SPOT]
    assert len(spot) == 1
    assert "job long back to spot from on-demand" in spot[0].tags[REASON_TAG]
    held = store.reservations.of(["long"])["long"]
    assert held.instance_id == spot[0].instance_id
    assert not held.on_demand
    assert (
        store.instance_records.drain_requests() == {}
    )  # the job runs on while its spot instance boots

    await loop.once()  # nothing new: one spot instance per move
    assert len(ec2.instances) == 2
    trace_clock.advance(loop.settings.boot_seconds)
    await loop.once()
    (drain,) = store.instance_records.drain_requests().items()
    assert drain[0] == instance.instance_id
    assert f"moves to spot instance {spot[0].instance_id}" in drain[1].reason
    store.dispose()


async def test_a_round_splits_the_renders_its_rule_picks_before_it_buys(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ids = ["j0", "j1", "j2"]
    await autoscaler(queued_store, trace_clock, FakeEc2(trace_clock)).once()
    # `auto`, the default: no split pays for renders this small.
    assert all(job.stage is None for job in queued_store.find_many(ids).values())

    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(queued_store, trace_clock, ec2)
    loop.settings = replace(loop.settings, split_renders=SplitMode.ALWAYS)
    await loop.once()
    for job_id in ids:
        assert queued_store.get(job_id).stage is RenderStage.ENCODE
        reason = queued_store.history(job_id)[-1].reason
        assert reason == "split into stages: split_renders is always"
    # The round bought for what it read after the split: each job's encoding stage.
    assert {j for launch in ec2.requests for j in launch.job_ids} == set(ids)
