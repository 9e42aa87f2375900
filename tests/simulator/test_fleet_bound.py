"""The fleet lower bound: a sum of each job's optimum, priced per GPU at the cheapest of the
trace's type and its multi-GPU companions."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from autoscaler.market.trace import load_trace
from simulator.companions import companions_for, no_companions
from simulator.fleet_bound import fleet_lower_bound, fleet_offline_optimum, per_gpu_prices
from tests.support.simulation import TRACES, small_workload, steady_trace


def test_per_gpu_prices_take_the_cheapest_type(tmp_path: Path) -> None:
    trace = load_trace(steady_trace(tmp_path / "t", {"us-east-1a": 1.0, "us-west-2a": 1.0}))
    cheapest = per_gpu_prices(trace, companions_for(trace))
    # us-east-1: a p3.8xlarge is 2.8 times a p3.2xlarge for 4 GPUs; us-west-2: dearer per GPU.
    assert cheapest.zones["us-east-1a"].prices[0] == pytest.approx(0.7)
    assert cheapest.zones["us-west-2a"].prices[0] == pytest.approx(1.0)
    assert per_gpu_prices(trace, no_companions(trace)).zones["us-east-1a"].prices[0] == 1.0


def test_the_bound_is_each_jobs_optimum_and_rises_without_the_cheaper_gpus() -> None:
    """No policy paying less than the bound is checked against all six policies in
    test_framefleet_simulate_replays_a_trace_and_a_jobs_file."""
    trace = load_trace(TRACES)
    jobs = small_workload()
    bound = fleet_lower_bound(trace, jobs, 100, companions_for(trace))
    assert bound > 0
    one = fleet_lower_bound(trace, jobs[:1], 100, companions_for(trace))
    rest = fleet_lower_bound(trace, jobs[1:], 100, companions_for(trace))
    assert bound == pytest.approx(one + rest)
    # Without the companions' cheaper GPUs the bound can only rise.
    assert fleet_lower_bound(trace, jobs, 100, no_companions(trace)) >= bound


def test_an_eight_gpu_trace_is_priced_per_gpu(tmp_path: Path) -> None:
    """A one-GPU job on an 8-GPU type pays an eighth of the instance: the bound never rises
    above what every job on on-demand GPUs would pay (issue 47: it priced the instance)."""
    folder = tmp_path / "t"
    folder.mkdir()
    metadata = {"gap_seconds": 600, "on_demand_price": 24.48}
    body = {"metadata": metadata, "data": [1] * 400, "prices": [8.0] * 400}
    (folder / "us-east-1a_p4d.24xlarge.json").write_text(json.dumps(body))
    trace = load_trace(folder)
    per_gpu = per_gpu_prices(trace, no_companions(trace)).zones["us-east-1a"]
    assert per_gpu.prices[0] == pytest.approx(1.0)
    assert per_gpu.gpus == 1
    assert per_gpu.on_demand_price == pytest.approx(24.48 / 8)
    jobs = [j for j in small_workload() if j.deadline_hours is not None]
    bound = fleet_lower_bound(trace, jobs, 0, no_companions(trace))
    assert bound <= sum(j.compute_hours for j in jobs) * 1.0 + 1e-9


def test_the_offline_optimum_pays_start_ups_and_lies_above_the_bound() -> None:
    """An omniscient policy paying each start-up: never below the bound, and with no spot at
    all, every job on on-demand with its start-up, in whole steps."""
    trace = load_trace(TRACES)
    jobs = small_workload()
    startup = 720.0
    companions = companions_for(trace)
    optimum = fleet_offline_optimum(trace, jobs, 100, companions, startup)
    assert optimum >= fleet_lower_bound(trace, jobs, 100, companions)
    assert optimum > fleet_offline_optimum(trace, jobs, 100, companions, 1.0) - 1e-9
    none_up = {
        name: replace(zone, available=(0,) * trace.ticks) for name, zone in trace.zones.items()
    }
    dry = replace(trace, zones=none_up)
    on_demand = next(iter(trace.zones.values())).on_demand_price
    step_hours = 3 * trace.gap.total_seconds() / 3600  # its ten-minute steps of 195 s probes
    expected = sum(
        (math.ceil(j.compute_hours / step_hours - 1e-9) + math.ceil(startup / 3600 / step_hours))
        * step_hours
        * on_demand
        for j in jobs
    )
    alone = no_companions(dry)
    assert fleet_offline_optimum(dry, jobs, 100, alone, startup) == pytest.approx(expected)
