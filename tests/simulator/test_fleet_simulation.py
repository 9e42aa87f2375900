"""The fleet simulator runs the product's own object graph (store, control plane, interruptions
loop, autoscaler loop, the worker's checkpoint policy) on a simulated cloud; the baselines run
on the same trace by the same product; `framefleet simulate` replays a user's trace and workload."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import autoscaler.loop
import autoscaler.policy
import simulator.workers
import worker_ami.agent.checkpoint_policy
from autoscaler.loop import AutoscalerLoop
from autoscaler.market.trace import load_trace
from framefleet.cli import run
from kernel.errors import ConfigurationError
from kernel.job_state import JobState
from orchestrator.control.service import ControlPlaneService
from simulator.companions import companions_for
from simulator.fleet import FleetSimulation, run_fleet
from simulator.fleet_bound import fleet_lower_bound
from simulator.fleet_setup import setup_for_changeover
from simulator.workload import SimJob, daily_poisson, dump_jobs, load_jobs
from tests.support.simulation import TRACES, small_workload, steady_trace


async def test_the_product_runs_the_fleet_meets_every_deadline_and_pays_less(
    tmp_path: Path,
) -> None:
    trace = load_trace(TRACES)
    jobs = small_workload()
    simulation = FleetSimulation(trace, jobs, setup_for_changeover(0.2), 100, tmp_path / "jobs.db")
    # The live classes, and the policies they call, not re-implementations.
    assert type(simulation.control) is ControlPlaneService
    assert type(simulation.autoscaler) is AutoscalerLoop
    assert vars(autoscaler.loop)["plan"] is autoscaler.policy.plan
    for name in ("checkpoint_interval", "periodic_checkpoint_due"):
        assert vars(simulator.workers)[name] is vars(worker_ami.agent.checkpoint_policy)[name]
    ours = await simulation.run()
    assert (ours.misses, ours.unfinished, ours.finished_twice) == (0, 0, 0)
    # On-demand only would pay at least the compute itself at the on-demand price.
    on_demand_floor = trace.zones["us-east-1a"].on_demand_price * sum(j.compute_hours for j in jobs)
    assert ours.cost < 0.6 * on_demand_floor
    assert ours.spot_hours > ours.on_demand_hours
    # Every job went through the store to the end, once.
    assert simulation.store.count_by_state() == {JobState.SUCCEEDED: len(jobs)}
    # Spot instances were reclaimed, and each job caught on one resumed from its checkpoint
    # on a later attempt after the control plane's notice path moved it.
    assert ours.interruptions > 0
    moved = [
        j.job_id
        for j in jobs
        if any("stopped on" in e.reason for e in simulation.store.history(j.job_id))
    ]
    assert moved
    for job_id in moved:
        history = simulation.store.history(job_id)
        assert history[-1].to_state is JobState.SUCCEEDED
        assert history[-1].attempt >= 2


def test_generated_workloads_leave_room_for_a_start_up() -> None:
    jobs = daily_poisson(200, 7, seed=1)
    assert len(jobs) == 200
    assert all(0 <= j.arrival_hours <= 7 * 24 for j in jobs)
    with_deadline = [j for j in jobs if j.deadline_hours is not None]
    assert 0.5 < len(with_deadline) / len(jobs) < 0.9
    assert all((j.deadline_hours or 0) >= j.compute_hours + 0.5 for j in with_deadline)
    assert {j.priority for j in jobs} == set(range(10))


def test_a_bad_jobs_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.json"
    bad.write_text(
        json.dumps([{"job_id": "x", "arrival_hours": 0, "compute_hours": 5, "deadline_hours": 2}])
    )
    with pytest.raises(ConfigurationError, match="deadline shorter than its compute"):
        load_jobs(bad)
    bad.write_text("[{]")
    with pytest.raises(ConfigurationError, match="cannot read jobs"):
        load_jobs(bad)


def test_framefleet_simulate_replays_a_trace_and_a_jobs_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs_file = tmp_path / "jobs.json"
    dump_jobs(small_workload()[:3], jobs_file)
    out = tmp_path / "result.json"
    chart = tmp_path / "result.png"
    argv = [
        "simulate",
        "--traces",
        str(TRACES),
        "--jobs",
        str(jobs_file),
        "--start-hours",
        "6",
        "--json",
        str(out),
        "--chart",
        str(chart),
    ]
    assert run(argv) == 0
    rows = {row["policy"]: row for row in json.loads(out.read_text())}
    assert set(rows) == {
        "framefleet",
        "on-demand only",
        "greedy (any zone, as SkyPilot)",
        "uniform progress (any zone)",
        "greedy (home zone)",
        "uniform progress (home zone)",
    }
    assert rows["framefleet"]["misses"] == 0
    assert rows["framefleet"]["cost"] < rows["on-demand only"]["cost"]
    # No policy pays less than the lower bound of simulator/fleet_bound.py.
    trace = load_trace(TRACES)
    start = round(6 * 3600 / trace.gap.total_seconds())
    bound = fleet_lower_bound(trace, small_workload()[:3], start, companions_for(trace))
    assert 0 < bound <= min(row["cost"] for row in rows.values())
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "would have cost" in capsys.readouterr().out


def retyped_trace(folder: Path, instance_type: str, price_factor: float) -> Path:
    """The V100 slice's capacity as another type's, at prices scaled to it."""
    folder.mkdir()
    shared = json.loads((TRACES / "spot_prices.json").read_text())
    for path in TRACES.glob("us-*.json"):
        zone = path.stem.split("_")[0]
        body = json.loads(path.read_text())
        body["prices"] = [p * price_factor for p in shared[f"{zone}_v100_1"]]
        (folder / f"{zone}_{instance_type}.json").write_text(json.dumps(body))
    return folder


async def test_a_trace_of_another_type_is_replayed_as_that_type(tmp_path: Path) -> None:
    """A g5 trace buys g5 instances at g5 prices for A10G jobs; an 8-GPU H100 trace buys 8-GPU
    instances whose workers run a job on each GPU."""
    trace = load_trace(retyped_trace(tmp_path / "g5", "g5.xlarge", 0.4))
    one_gpu_types = replace(setup_for_changeover(0.2), multi_gpu=False)
    result = await run_fleet(trace, small_workload()[:3], one_gpu_types, 100)
    assert (result.misses, result.unfinished) == (0, 0)
    assert result.launches > 0
    assert result.cost < 1.006 * (result.on_demand_hours + result.spot_hours)  # g5 prices
    h100 = load_trace(retyped_trace(tmp_path / "p5", "p5.48xlarge", 14))
    simulation = FleetSimulation(
        h100, small_workload()[:3], setup_for_changeover(0.2), 100, tmp_path / "jobs.db"
    )
    result = await simulation.run()
    simulation.store.dispose()
    assert (result.misses, result.unfinished, result.finished_twice) == (0, 0, 0)
    assert {i.pool.instance_type for i in simulation.cloud.records.values()} == {"p5.48xlarge"}
    assert result.cost < 55.04 * (result.on_demand_hours + result.spot_hours)  # p5 prices


async def test_four_jobs_that_arrive_together_share_one_four_gpu_instance(tmp_path: Path) -> None:
    """In us-east-1 the advisor prices a spot p3.8xlarge at 2.8 times a p3.2xlarge (cheaper
    per GPU): four jobs queued together buy one, each runs on its own GPU, and all finish once
    with their own checkpoints. A fifth, later job alone buys a one-GPU instance."""
    trace = load_trace(steady_trace(tmp_path / "trace", {"us-east-1a": 1.0, "us-east-1c": 1.1}))
    jobs = [SimJob(f"together-{n}", 0.0, 1.0 + n / 10, None) for n in range(4)]
    jobs.append(SimJob("alone", 5.0, 1.0, None))
    simulation = FleetSimulation(trace, jobs, setup_for_changeover(0.2), 0, tmp_path / "j.db")
    result = await simulation.run()
    assert (result.misses, result.unfinished, result.finished_twice) == (0, 0, 0)
    bought = sorted(
        (i.observed.launched_at, i.pool.instance_type) for i in simulation.cloud.records.values()
    )
    assert [instance_type for _, instance_type in bought] == ["p3.8xlarge", "p3.2xlarge"]
    assert simulation.store.count_by_state() == {JobState.SUCCEEDED: 5}
    quad = next(
        i for i in simulation.cloud.records.values() if i.pool.instance_type != "p3.2xlarge"
    )
    spans = simulation.store.cost_facts.attempts_on([quad.instance_id])
    simulation.store.dispose()
    assert {(s.job_id, s.outcome) for s in spans} == {
        (f"together-{n}", "succeeded") for n in range(4)
    }
    assert sorted(s.gpu_index for s in spans) == [0, 1, 2, 3]
    # Billed at the advisor-scaled spot price: 2.8 x $1.00 an hour.
    hours = (quad.ended_at or quad.observed.launched_at) - quad.observed.launched_at
    assert quad.cost == pytest.approx(2.8 * hours.total_seconds() / 3600, rel=1e-6)
