"""Each model family as a worker runs it (issue 50): published to S3, its input image fetched,
rendered whole, split into three stages, and cut by a spot notice then resumed, all in render
processes, making the same MP4 byte for byte (Wan 2.2 cut on each side of its expert switch).
LoRA adapters: a job with one on a warm base model loads no base weights again and renders
another video; the next job on that GPU runs without it (the first job's bytes again); a LoRA
job cut and resumed makes its uncut video; a checkpoint made under another adapter file is
refused; an adapter that does not fit fails the job as its own fault."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kernel.job_spec import JobSpec
from kernel.model_family import ModelFamily, traits_of
from kernel.model_registry import AdapterEntry, ModelEntry
from kernel.render_stage import RenderStage
from kernel.worker_protocol import FailureKind
from tests.support.renders import MODEL, REVISION, Buckets, process_runner, video_job
from tests.support.tiny_inputs import png_bytes, tiny_lora
from worker_ami.agent.model_cache import ModelRegistry, publish_model
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.tiny_families import build_tiny

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STEPS = 6


async def registry_of(
    objects: S3ObjectStore, folder: Path, buckets: Buckets, family: ModelFamily
) -> ModelRegistry:
    uri = f"s3://{buckets.models}/{family.value}/"
    await publish_model(objects, folder, uri, MODEL, REVISION)
    return ModelRegistry(models={MODEL: ModelEntry(uri=uri, revision=REVISION, family=family)})


def cut_at(runner: JobRunner, at: int) -> None:
    def notice(step: int) -> None:
        if step == at:
            runner.request_checkpoint("spot notice")

    runner.on_step = notice


def succeeded(report: JobReport) -> JobReport:
    assert report.status is RunStatus.SUCCEEDED, report.error
    return report


@pytest.mark.parametrize(
    "family", [f for f in ModelFamily if f is not ModelFamily.WAN21_T2V], ids=str
)
async def test_each_family_renders_stages_and_resumes_to_the_same_bytes(
    object_store: S3ObjectStore,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    s3: S3Client,
    tmp_path: Path,
    family: ModelFamily,
) -> None:
    folder = build_tiny(family, tmp_path / "model")
    registry = await registry_of(object_store, folder, buckets, family)
    s3.put_object(Bucket=buckets.models, Key="inputs/first.png", Body=png_bytes())
    fields: dict[str, Any] = {
        "steps": STEPS,
        "width": 32,
        "height": 32,
        "num_frames": 1 + 2 * traits_of(family).frames_step,
    }
    if traits_of(family).image_input:
        fields["image"] = f"s3://{buckets.models}/inputs/first.png"
    runner = process_runner(object_store, registry, worker_settings, tmp_path / "renders")
    # Another worker: a spot notice ends the first one's life, whatever it ran.
    resumer = process_runner(object_store, registry, worker_settings, tmp_path / "other")
    try:
        whole = succeeded(await runner.run(video_job(buckets, "whole", **fields), attempt=1))
        staged = video_job(buckets, "staged", **fields)
        resume_from = None
        for attempt, stage in enumerate(RenderStage, start=1):
            done = await runner.run(staged, attempt, resume_from=resume_from, stage=stage)
            assert done.status in (RunStatus.STAGE_DONE, RunStatus.SUCCEEDED), done.error
            resume_from = done.checkpoint
        assert done.video_sha256 == whole.video_sha256
        # Wan 2.2 hands over to its low-noise expert after step 2 of 6: cut before and after.
        for at in (1, 4):
            spec = video_job(buckets, f"cut-{at}", **fields)
            # In a render process too: one thread, as the others (a CPU's sums differ by threads).
            processes = tmp_path / f"cut-{at}"
            cutter = process_runner(object_store, registry, worker_settings, processes)
            cut_at(cutter, at)
            cut = await cutter.run(spec, attempt=1)
            await cutter.close()
            assert cut.status is RunStatus.PREEMPTED, cut.error
            resumed = succeeded(await resumer.run(spec, attempt=2, resume_from=cut.checkpoint))
            assert resumed.resumed_from == cut.checkpoint
            assert resumed.video_sha256 == whole.video_sha256
    finally:
        await runner.close()
        await resumer.close()


async def test_lora_adapters_come_and_go_on_a_warm_model(
    object_store: S3ObjectStore,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    s3: S3Client,
    tiny_model_dir: Path,
    tmp_path: Path,
) -> None:
    registry = await registry_of(object_store, tiny_model_dir, buckets, ModelFamily.WAN21_T2V)
    style = tiny_lora(tiny_model_dir, tmp_path / "style", seed=1)
    s3.put_object(Bucket=buckets.models, Key="lora/style.safetensors", Body=style.read_bytes())
    registry = ModelRegistry(
        models=registry.models,
        adapters={
            "acme/style": AdapterEntry(
                uri=f"s3://{buckets.models}/lora/style.safetensors", base=MODEL
            )
        },
    )
    runner = process_runner(object_store, registry, worker_settings, tmp_path / "renders")
    lora = {"adapters": [{"name": "acme/style", "weight": 0.8}]}

    async def cut_elsewhere(spec: JobSpec, at: int) -> JobReport:
        """A spot notice at step `at` on another (in-thread) worker."""
        cutter = process_runner(object_store, registry, worker_settings, None)
        cut_at(cutter, at)
        try:
            return await cutter.run(spec, attempt=1)
        finally:
            await cutter.close()

    try:
        plain = succeeded(await runner.run(video_job(buckets, "plain"), attempt=1))
        styled = succeeded(await runner.run(video_job(buckets, "styled", **lora), attempt=1))
        assert not styled.model_loaded  # the base weights stayed loaded: only the adapter came
        assert styled.video_sha256 != plain.video_sha256
        again = succeeded(await runner.run(video_job(buckets, "plain-again"), attempt=1))
        assert not again.model_loaded
        assert again.video_sha256 == plain.video_sha256  # the adapter is gone

        spec = video_job(buckets, "styled-cut", **lora)
        cut = await cut_elsewhere(spec, 3)
        assert cut.status is RunStatus.PREEMPTED
        resumed = succeeded(await runner.run(spec, attempt=2, resume_from=cut.checkpoint))
        assert resumed.resumed_from == cut.checkpoint
        assert resumed.video_sha256 == styled.video_sha256

        # The adapter's file replaced under the same name: the checkpoint is refused.
        other = tiny_lora(tiny_model_dir, tmp_path / "other", seed=2)
        s3.put_object(Bucket=buckets.models, Key="lora/style.safetensors", Body=other.read_bytes())
        respec = video_job(buckets, "styled-swapped", **lora)
        cut = await cut_elsewhere(respec, 3)
        s3.put_object(Bucket=buckets.models, Key="lora/style.safetensors", Body=style.read_bytes())
        redone = succeeded(await runner.run(respec, attempt=2, resume_from=cut.checkpoint))
        assert redone.resumed_from is None
        assert any("other LoRA adapters" in note for note in redone.resume_notes)

        # A file that fits no module of this model fails the job as its own fault.
        s3.put_object(Bucket=buckets.models, Key="lora/junk.safetensors", Body=junk_lora())
        junk = {"adapters": [{"uri": f"s3://{buckets.models}/lora/junk.safetensors"}]}
        failed = await runner.run(video_job(buckets, "junk", **junk), attempt=1)
        assert failed.status is RunStatus.FAILED
        assert failed.failure_kind is FailureKind.JOB
        assert "adapter does not fit" in (failed.error or "")
        after = succeeded(await runner.run(video_job(buckets, "plain-after"), attempt=1))
        assert after.video_sha256 == plain.video_sha256
    finally:
        await runner.close()


def junk_lora() -> bytes:
    import torch
    from safetensors.torch import save

    return save(
        {
            "transformer.nothing.lora_A.weight": torch.ones(4, 8),
            "transformer.nothing.lora_B.weight": torch.ones(8, 4),
        }
    )
