"""`framefleet demo` tells its story on a busy laptop: run as `make demo` runs it, on this
2-core machine with two busy loops keeping both cores loaded, it finishes within five minutes,
every job succeeds once, at least one job is checkpointed on a spot notice and resumed on
another instance with a byte-identical video, and at least one interruption comes without
notice. The whole product runs: moto, amqtt, `framefleet serve`, the autoscaler, the local fleet
runner (a `framefleet-worker serve` per instance) and the producer, on the replayed V100 trace.

It runs in a phase of its own (`make demo-loaded`), after the suite: beside the suite's own
load the busy loops would measure the suite, not the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PIL import Image

from framefleet.demo_producer import demo_jobs
from framefleet.demo_stack import DemoOptions
from tests.support.paths import ROOT

SEED = DemoOptions().seed
JOBS = DemoOptions().jobs
LIMIT_SECONDS = 300  # the whole run, from the command to its exit


@pytest.fixture
def both_cores_busy() -> Iterator[None]:
    loops = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    yield
    for loop in loops:
        loop.kill()
        loop.wait()


@pytest.mark.loaded_machine
def test_the_demo_tells_its_story_on_a_loaded_machine(
    tmp_path: Path, both_cores_busy: None
) -> None:
    # The repository first; then what pytest put there (the AWS call recorder).
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    with (tmp_path / "demo.out").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "framefleet", "demo", "--timeout", "240"],
            cwd=tmp_path,  # the demo writes .demo/ and demo-output/ where it runs
            env={**os.environ, "COLUMNS": "160", "PYTHONPATH": pythonpath},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            returncode = process.wait(timeout=LIMIT_SECONDS)
        finally:
            process.kill()
    took = time.monotonic() - started
    output = (tmp_path / "demo.out").read_text()
    assert returncode == 0, output[-6000:]
    assert took <= LIMIT_SECONDS
    _check_run(tmp_path, output)


def _check_run(folder: Path, output: str) -> None:
    facts = json.loads((folder / ".demo" / "summary.json").read_text())
    expected = {job.job_id for job in demo_jobs(JOBS, SEED, datetime.now(UTC), 1.0)}
    # Every job reached exactly one terminal state, and it is success.
    assert facts["ok"] is True
    assert set(facts["succeeded"]) == expected
    for bad in ("failed", "unfinished", "lost", "duplicated", "late"):
        assert facts[bad] == [], bad
    # The story: a notice reached a working instance, its job went on elsewhere from its
    # checkpoint and made the same video as an uninterrupted render; another instance died
    # without a notice.
    assert facts["noticed_on_running_jobs"] >= 1
    assert facts["resumed_from_checkpoint"] >= 1
    assert facts["resumed_identical"]
    assert all(facts["resumed_identical"].values())
    assert facts["interruptions_without_notice"] >= 1
    # One MP4 per job, as a real MP4 (an ISO BMFF `ftyp` box first), a contact sheet beside
    # each, and a strip of each resumed job against its twin.
    videos = sorted((folder / "demo-output").glob("*.mp4"))
    assert {video.stem for video in videos} == expected
    for video in videos:
        assert video.read_bytes()[4:8] == b"ftyp"
        assert Image.open(video.with_suffix(".png")).size[0] > 0
    strips = {p.name for p in (folder / "demo-output").glob("*-resumed-vs-uninterrupted.png")}
    assert strips == {f"{job}-resumed-vs-uninterrupted.png" for job in facts["resumed_identical"]}
    # The producer's two malformed messages. Besides them, only the hello of a worker whose
    # instance was already reported gone may be refused (a spot instance reclaimed as it booted).
    malformed = [reason for reason in facts["dead_lettered"] if reason != "gone_instance"]
    assert sorted(malformed) == ["invalid_job", "invalid_json"]
    assert facts["cost_usd"] > 0
    assert "summary: OK" in output
    assert "the console answers: http://127.0.0.1:" in output
    assert "random weights" in output
