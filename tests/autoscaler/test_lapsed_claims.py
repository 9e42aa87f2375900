"""Defect 2 of issue 46: a job waited for ever beside an idle, billed instance the scheduler
would not give it. Each round placed the job on that instance again, which renewed its claim, so
the instance was neither used nor scaled in. Now a claim is never extended on the same
instance: it lapses, the instance goes idle and is scaled in, and the job is neither placed
there nor bought that type again (it waits with the reason when no other type fits)."""

from __future__ import annotations

from datetime import timedelta

from autoscaler.ec2.fake import FakeEc2
from autoscaler.market.trace import load_trace
from autoscaler.pools import Pool
from autoscaler.reservations import RESERVATION_GRACE
from kernel.clock import FakeClock
from kernel.market import Market
from orchestrator.store.job_store import JobStore
from tests.support.autoscaling import autoscaler
from tests.support.simulation import TRACES


async def test_a_claim_the_scheduler_never_uses_lapses_and_frees_the_instance(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(queued_store, trace_clock, ec2)
    await loop.once()
    bought = set(ec2.instances)
    jobs = ["j0", "j1", "j2"]
    first = queued_store.reservations.of(jobs)
    assert {r.instance_id for r in first.values()} == bought

    # The instances come up; the scheduler never gives the jobs those GPUs (its workers'
    # slots are smaller than the type's GPU). Rounds go by: each places the jobs there again.
    for _ in range(20):
        trace_clock.advance(loop.settings.reaction_seconds)
        plans = await loop.once()
        assert all(plan.launches == () for plan in plans)
        assert queued_store.reservations.of(jobs) == first  # placed again, never extended

    lapse = max(r.expires_at for r in first.values())
    assert lapse <= min(ec2.instances[i].launched_at for i in bought) + timedelta(
        seconds=loop.settings.boot_seconds + loop.settings.model_load_seconds
    ) + RESERVATION_GRACE + timedelta(seconds=1)
    trace_clock.advance((lapse - trace_clock.now()).total_seconds())
    plans = await loop.once()

    # The only candidate type is the one the claims lapsed on: no new one is bought, each job
    # waits with the reason, and the idle instances are asked to drain (scaled in).
    assert all(plan.launches == () and plan.placed == () for plan in plans)
    waits = {w.job_id: w.reason for plan in plans for w in plan.waits}
    assert set(waits) == set(jobs)
    assert all("bought or picked for it (last" in reason for reason in waits.values())
    assert set(queued_store.instance_records.drain_requests()) == bought
    held = queued_store.reservations.of(jobs)
    assert not any(r.holds(trace_clock.now()) for r in held.values())


async def test_a_claim_on_an_instance_taken_back_before_it_ran_the_job_is_not_a_lapse(
    queued_store: JobStore, trace_clock: FakeClock
) -> None:
    """Issue 47: the spot instances bought for the jobs are taken back while they boot, no spot
    is left to buy, and their claims run out after. The type was never tried: the jobs wait
    for spot as any job does, and are bought the type again once there is some, where they
    waited for ever behind "could not run it" when it was the only type that fits."""
    ec2 = FakeEc2(trace_clock)
    loop = autoscaler(queued_store, trace_clock, ec2)
    await loop.once()
    jobs = ["j0", "j1", "j2"]
    first = queued_store.reservations.of(jobs)
    taken = {r.instance_id for r in first.values()}
    assert taken == set(ec2.instances)

    trace_clock.advance(loop.settings.reaction_seconds)
    for instance_id in taken:
        del ec2.instances[instance_id]  # reclaimed by EC2, unasked
    zones = load_trace(TRACES).zones.values()
    ec2.insufficient |= {Pool(z.instance_type, z.zone, Market.SPOT) for z in zones}
    await loop.once()  # the jobs' launches fail: no capacity

    lapse = max(r.expires_at for r in first.values())
    trace_clock.advance((lapse - trace_clock.now()).total_seconds())
    plans = await loop.once()
    assert not any("could not run it" in w.reason for plan in plans for w in plan.waits)

    ec2.insufficient.clear()  # spot comes back: the jobs are bought the type again
    bought: set[str] = set()
    for _ in range(240):  # an hour of rounds at most: the capacity memory's backoff
        trace_clock.advance(loop.settings.reaction_seconds)
        plans = await loop.once()
        bought |= {job for plan in plans for launch in plan.launches for job in launch.job_ids}
        if bought == set(jobs):
            break
    assert bought == set(jobs)
