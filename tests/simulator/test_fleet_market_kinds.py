"""Issue 47 in the fleet: the product's decisions do not depend on how often the market was
probed, an "on-demand" answer is acted on at once, and no job misses a deadline that on-demand
from its arrival would have met, on markets of every kind."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, example, given, note, settings
from hypothesis import strategies as st

from autoscaler.market.trace import load_trace
from simulator.fleet import FleetSimulation, run_fleet
from simulator.fleet_setup import setup_for_changeover
from simulator.market_families import MarketFamily, resampled
from simulator.workload import SimJob, daily_poisson
from tests.support.simulation import TRACES, small_workload

SETUP = setup_for_changeover(0.2)


async def test_a_market_probed_more_often_is_planned_and_paid_alike() -> None:
    """The shipped slice as probed (195 s) and the same market looked at every 60 s (each
    value held): the autoscaler plans on its own step of real time, so the fleet pays the
    same within 1% and misses nothing on either."""
    trace = load_trace(TRACES)
    jobs = small_workload()
    probed = await run_fleet(trace, jobs, SETUP, 100)
    finer = resampled(trace, 60.0)
    held = await run_fleet(finer, jobs, SETUP, round(100 * 195 / 60))
    assert abs(held.cost / probed.cost - 1) <= 0.01
    assert (probed.misses, held.misses) == (0, 0)


async def test_a_job_the_rule_sends_to_on_demand_starts_when_its_instance_boots(
    tmp_path: Path,
) -> None:
    """No spot anywhere for 14 hours; jobs without a deadline wait for it (and age), then tight
    jobs arrive: the rule answers on-demand at arrival, and each starts on an instance bought
    for it within a start-up and a round, not after the older jobs (issue 47: 2.4-4 h later).
    `late_on_demand` counts the jobs that did not."""
    market = MarketFamily("dry", availability=0.05, mean_outage_hours=20.0, days=3.0).trace(2)
    day, drought_end = round(86_400 / 195), round(1.6 * 86_400 / 195)
    zones = {
        name: replace(
            zone,
            available=tuple(0 if day <= i < drought_end else 1 for i in range(len(zone.available))),
        )
        for name, zone in market.zones.items()
    }
    trace = replace(market, zones=zones)
    jobs = [SimJob(f"whenever-{i}", 0.1 * i, 2.0, None, 5) for i in range(10)]
    jobs += [SimJob(f"tight-{i}", 3.0 + 0.1 * i, 1.0, 1.6, 5) for i in range(5)]
    simulation = FleetSimulation(trace, jobs, SETUP, day, tmp_path / "jobs.db")
    result = await simulation.run()
    assert {j for j in simulation.answers.answered_at if j.startswith("tight")} == {
        f"tight-{i}" for i in range(5)
    }  # every tight job was answered on-demand
    assert (result.late_on_demand, result.misses, result.unfinished) == (0, 0, 0)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[MarketFamily, list[SimJob], int]:
    family = MarketFamily(
        "drawn",
        probe_seconds=draw(st.sampled_from([60.0, 195.0, 600.0])),
        availability=draw(st.floats(0.2, 0.999)),
        mean_outage_hours=draw(st.floats(0.05, 8.0)),
        burstiness=draw(st.sampled_from([0.0, 0.8, 1.5])),
        shared_outages=draw(st.sampled_from([0.0, 0.8])),
        price_ratio=draw(st.floats(0.2, 0.7)),
        gpus=draw(st.sampled_from([1, 8])),
        days=3.0,
    )
    jobs = daily_poisson(draw(st.integers(4, 12)), 1.0, draw(st.integers(0, 2**16)))
    return family, jobs, draw(st.integers(0, 2**16))


# Found by this test (issue 47): the 8-GPU spot instance bought for job-0000 was taken back
# while it booted, its claim ran out, and the job, answered on-demand from then on, waited 6.5 h
# behind "could not run it" (`autoscaler/reservations.py`).
TAKEN_BACK_WHILE_BOOTING = (
    MarketFamily(
        "drawn",
        probe_seconds=195.0,
        availability=0.33015021851419707,
        mean_outage_hours=3.387894995063857,
        burstiness=1.5,
        shared_outages=0.8,
        price_ratio=0.42451153560148436,
        gpus=8,
        days=3.0,
    ),
    [
        SimJob("job-0000", 1.5271557625161556, 1.2314138173950055, 3.357449020075542, 5),
        SimJob("job-0001", 8.912575654943161, 1.7447365644730193, None, 2),
        SimJob("job-0002", 10.596650240833556, 5.431291006355353, None, 7),
        SimJob("job-0003", 13.07295169666849, 7.377105812659752, None, 1),
        SimJob("job-0004", 14.214893145210148, 0.6767829406439522, 1.51733572580287, 2),
        SimJob("job-0005", 15.007376067613219, 0.799862634663315, None, 5),
    ],
    6847,
)


# No shrinking: each example is a fleet simulation, and a failure's first example is enough
# to read (shrinking one took minutes). The draws are the same on every run, so the suite
# answers the same for the same code: on 2026-12-07 a fresh draw found a fleet whose
# on-demand answer started a job 2 minutes past its allowance (issue 47, not reproduced: its
# example was cut short in the report; it is printed whole now). Explore new fleets with
# FRAMEFLEET_EXPLORE=1, and add what they find as an `example`.
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    derandomize=os.environ.get("FRAMEFLEET_EXPLORE") != "1",
)
@given(fleets())
@example(TAKEN_BACK_WHILE_BOOTING)
def test_no_job_misses_a_deadline_on_demand_from_arrival_would_meet(
    fleet: tuple[MarketFamily, list[SimJob], int],
) -> None:
    family, jobs, seed = fleet
    trace = family.trace(seed)
    start = round(86_400 / trace.gap.total_seconds())  # a day of history first
    note(f"the fleet, whole: {fleet!r}")  # printed with a failure, to add as an `example`
    result = asyncio.run(run_fleet(trace, jobs, SETUP, start))
    assert result.avoidable_misses == 0, (family, result)
    assert result.late_on_demand == 0, (family, result)
    assert result.finished_twice == 0
