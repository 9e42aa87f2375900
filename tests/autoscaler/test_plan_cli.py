"""`framefleet autoscaler plan` on a trace prints explained decisions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framefleet.cli import run
from tests.support.paths import ROOT

TRACES = ROOT / "tests" / "data" / "traces" / "v100-slice"
EXAMPLES = ROOT / "examples" / "autoscaler"


def plan(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    argv = [
        "autoscaler",
        "plan",
        "--trace",
        str(TRACES),
        "--at",
        "2023-02-18T14:00:00+00:00",
        "--jobs",
        str(EXAMPLES / "jobs.json"),
        *extra,
    ]
    assert run(argv) == 0
    return " ".join(capsys.readouterr().out.split())  # the table wraps; words stay in order


def test_plan_on_a_trace_explains_every_decision(capsys: pytest.CaptureFixture[str]) -> None:
    jobs = json.loads((EXAMPLES / "jobs.json").read_text())
    out = plan(capsys, "--instances", str(EXAMPLES / "instances.json"))
    assert "autoscaler plan at 2023-02-18 14:00 UTC" in out
    assert f"{len(jobs)} queued jobs" in out
    assert "no deadline: spot" in out
    assert "on-demand" in out
    assert "cheapest" in out
    assert "trailer-final" in out
    assert "1 placed on free GPUs" in out  # the idle on-demand instance takes the urgent job


def test_plan_with_a_spent_budget_holds_the_work_back(capsys: pytest.CaptureFixture[str]) -> None:
    out = plan(capsys, "--budget-per-hour", "0.5")
    assert "0 spot and 0 on-demand launches" in out
    assert "budget: $0.00/h running" in out


def test_plan_refuses_a_bad_jobs_file(tmp_path: Path) -> None:
    bad = tmp_path / "jobs.json"
    bad.write_text('[{"job_id": "x", "steps": -1}]')
    with pytest.raises(Exception, match="job x"):
        run(["autoscaler", "plan", "--trace", str(TRACES), "--jobs", str(bad)])
