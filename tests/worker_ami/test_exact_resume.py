"""Resuming from a checkpoint gives the same latents and the same MP4 bytes as an
uninterrupted run, whichever step the interruption hit (the first and the last included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch

from kernel.job_spec import parse_job
from kernel.precision import Precision
from tests.support.jobs import job_dict
from tests.support.renders import MODEL, Buckets, read_object, video_job
from tests.support.worker_process import run_worker, worker_env
from worker_ami.agent.families import load_renderer
from worker_ami.agent.recipe import recipe_for
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.state_codec import decode_state, encode_state

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STEPS = 8
CPU = recipe_for(Precision(), "cpu", "cpu")


def test_every_step_resumes_to_identical_latents(tiny_model_dir: Path) -> None:
    spec = parse_job(job_dict("exact", model=MODEL, steps=6), now=None)
    renderer = load_renderer(tiny_model_dir, "cpu", CPU)
    prompt = renderer.encode(spec)
    states = [renderer.initial_state(spec)]
    while not states[-1].done:
        states.append(renderer.step(states[-1], prompt, spec.guidance))
    final = states[-1].latents

    for saved in states:
        # Through bytes and into a freshly loaded pipeline, as on another worker.
        restored = decode_state(encode_state(saved))
        fresh = load_renderer(tiny_model_dir, "cpu", CPU)
        fresh.prepare_resume(restored)
        fresh_prompt = fresh.encode(spec)
        state = restored
        while not state.done:
            state = fresh.step(state, fresh_prompt, spec.guidance)
        assert torch.equal(state.latents, final), f"resume from step {saved.step} diverged"


@pytest.mark.parametrize("interrupt_at", [0, 1, STEPS // 2, STEPS])
async def test_resume_in_a_new_process_gives_identical_mp4_bytes(
    runner: JobRunner,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    s3: S3Client,
    tmp_path: Path,
    interrupt_at: int,
) -> None:
    reference = await runner.run(video_job(buckets, "reference", steps=STEPS), attempt=1)
    assert reference.status is RunStatus.SUCCEEDED
    reference_mp4 = read_object(s3, buckets.outputs, "reference/reference.mp4")

    spec = video_job(buckets, f"cut-at-{interrupt_at}", steps=STEPS)

    def interrupt(step: int) -> None:
        if step == interrupt_at:
            runner.request_checkpoint("test notice")

    runner.on_step = interrupt
    if interrupt_at == 0:
        runner.request_checkpoint("notice before the first step")
    cut = await runner.run(spec, attempt=1)
    assert cut.status is RunStatus.PREEMPTED
    assert cut.steps_done == interrupt_at
    assert cut.checkpoint is not None
    assert f"/{interrupt_at:06d}/" in cut.checkpoint

    job_file = tmp_path / "job.json"
    job_file.write_text(spec.canonical_json())
    resume_uri = f"s3://{buckets.checkpoints}/{cut.checkpoint}"
    env = worker_env(worker_settings, tmp_path / "other-worker-cache")
    result = run_worker(
        env, "run", "--job", str(job_file), "--attempt", "2", "--resume", resume_uri
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["status"] == "succeeded"
    assert report["resumed_from"] == cut.checkpoint
    assert report["resume_notes"] == []
    resumed_mp4 = read_object(s3, buckets.outputs, f"{spec.job_id}/{spec.job_id}.mp4")
    assert resumed_mp4 == reference_mp4
    assert report["video_sha256"] == reference.video_sha256
    # The output is committed: its checkpoints are gone.
    listed = s3.list_objects_v2(Bucket=buckets.checkpoints, Prefix=f"checkpoints/{spec.job_id}/")
    assert listed.get("KeyCount", 0) == 0
