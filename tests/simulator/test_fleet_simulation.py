"""The fleet simulator drives the live loop's own policy and market port; the baselines run on
the same trace; `framefleet simulate` replays a user's trace and workload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import autoscaler.loop
import autoscaler.policy
from autoscaler.market.trace import load_trace
from autoscaler.simulation import fleet
from autoscaler.simulation.fleet import run_baseline, run_framefleet
from autoscaler.simulation.workload import SimJob, daily_poisson, dump_jobs, load_jobs
from orchestrator.cli import run
from orchestrator.domain.errors import ConfigurationError

TRACES = Path(__file__).parent.parent / "data" / "traces" / "v100-slice"


def small_workload() -> list[SimJob]:
    return [
        SimJob("tight", 0.5, 2.0, 2.6, 9),
        SimJob("loose", 1.0, 3.0, 12.0, 5),
        SimJob("whenever", 2.0, 1.5, None, 1),
        *daily_poisson(12, 1.5, seed=3),
    ]


def test_the_simulator_drives_the_live_policy_function() -> None:
    assert fleet.PLANNER is autoscaler.policy.plan
    assert vars(autoscaler.loop)["plan"] is fleet.PLANNER  # the live loop calls the same one


async def test_framefleet_meets_every_deadline_and_pays_less_than_on_demand() -> None:
    trace = load_trace(TRACES)
    jobs = small_workload()
    ours = await run_framefleet(trace, jobs, changeover=4, start_tick=100)
    on_demand = run_baseline("on-demand only", trace, jobs, changeover=4, start_tick=100)
    greedy = run_baseline("greedy", trace, jobs, changeover=4, start_tick=100)
    assert (ours.misses, ours.unfinished) == (0, 0)
    assert on_demand.misses == 0
    assert greedy.misses == 0  # the safety net
    assert ours.cost < on_demand.cost
    assert ours.spot_hours > ours.on_demand_hours
    assert set(ours.per_job_cost) == {j.job_id for j in jobs}
    assert sum(ours.per_job_cost.values()) == pytest.approx(ours.cost)


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
    bad.write_text(json.dumps([{"job_id": "x", "arrival_hours": 0, "compute_hours": 5,
                                "deadline_hours": 2}]))  # fmt: skip
    with pytest.raises(ConfigurationError, match="deadline shorter than its compute"):
        load_jobs(bad)
    bad.write_text("[{]")
    with pytest.raises(ConfigurationError, match="cannot read jobs"):
        load_jobs(bad)


def test_framefleet_simulate_replays_a_trace_and_a_jobs_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs_file = tmp_path / "jobs.json"
    dump_jobs(small_workload(), jobs_file)
    out = tmp_path / "result.json"
    chart = tmp_path / "result.png"
    argv = ["simulate", "--traces", str(TRACES), "--jobs", str(jobs_file), "--start-hours", "6",
            "--json", str(out), "--chart", str(chart)]  # fmt: skip
    assert run(argv) == 0
    rows = {row["policy"]: row for row in json.loads(out.read_text())}
    assert set(rows) == {"framefleet", "on-demand only", "greedy", "uniform progress"}
    assert rows["framefleet"]["misses"] == 0
    assert rows["framefleet"]["cost"] < rows["on-demand only"]["cost"]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "would have cost" in capsys.readouterr().out
