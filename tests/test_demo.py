"""`framefleet demo` runs the whole product: moto, amqtt, `framefleet serve`, the autoscaler, the
local fleet runner starting a `framefleet-worker serve` per instance the autoscaler launched, and
the producer, with the market replayed from the V100 trace. Two seeds, run side by side (each in
its own folder, with its own ports) to keep the suite's wall time down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from framefleet.demo_producer import demo_jobs

SEEDS = (11, 23)
JOBS = 3


@pytest.mark.end_to_end
def test_the_whole_demo_runs_for_two_seeds(tmp_path: Path) -> None:
    runs = {}
    for seed in SEEDS:
        folder = tmp_path / f"seed-{seed}"
        folder.mkdir()
        log = (folder / "demo.out").open("w")
        runs[seed] = (
            folder,
            log,
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "framefleet",
                    "demo",
                    "--jobs",
                    str(JOBS),
                    "--seed",
                    str(seed),
                    "--timeout",
                    "300",
                ],
                cwd=folder,  # the demo writes .demo/ and demo-output/ where it runs
                env={**os.environ, "COLUMNS": "160", "PYTHONPATH": str(Path(__file__).parents[1])},
                stdout=log,
                stderr=subprocess.STDOUT,
            ),
        )
    for seed, (folder, log, process) in runs.items():
        returncode = process.wait(timeout=480)
        log.close()
        output = (folder / "demo.out").read_text()
        assert returncode == 0, f"seed {seed}:\n{output[-5000:]}"
        _check_run(folder, seed, output)


def _check_run(folder: Path, seed: int, output: str) -> None:
    facts = json.loads((folder / ".demo" / "summary.json").read_text())
    expected = {job.job_id for job in demo_jobs(JOBS, seed, datetime.now(UTC), 1.0)}
    # Every job reached exactly one terminal state, and it is success.
    assert facts["ok"] is True
    assert set(facts["succeeded"]) == expected
    assert facts["failed"] == facts["lost"] == facts["duplicated"] == facts["late"] == []
    # One MP4 per job, as a real MP4 (an ISO BMFF `ftyp` box first).
    videos = sorted((folder / "demo-output").glob("*.mp4"))
    assert {video.stem for video in videos} == expected
    for video in videos:
        assert video.read_bytes()[4:8] == b"ftyp"
    # The slice's spot zones lose capacity within the run: workers were reclaimed.
    assert facts["interruptions_with_notice"] + facts["interruptions_without_notice"] >= 1
    assert all(facts["resumed_identical"].values())
    # The producer's two malformed messages. Besides them, only the hello of a worker whose
    # instance was already reported gone may be refused (a spot instance reclaimed as it booted).
    malformed = [reason for reason in facts["dead_lettered"] if reason != "gone_instance"]
    assert sorted(malformed) == ["invalid_job", "invalid_json"]
    assert 0 < facts["cost_usd"] <= facts["on_demand_only_usd"]
    assert "summary: OK" in output
    assert "timeline" in output
