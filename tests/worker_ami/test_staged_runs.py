"""A render split into stages, run as three attempts of the job runner (as three workers would
run them: encoding, denoising, decoding), each starting from the checkpoint the one before
left in S3, makes the MP4 an unsplit run makes, byte for byte: in the agent's thread and in
render processes. A denoising stage stopped by a spot notice resumes from a checkpoint that
carries the prompt's embeddings; stages join up across GPU families of other dtypes (a cast
at the boundary, noted); a stage with nothing stored to start from fails as the job's own
fault, saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kernel.precision import Dtype, Precision
from kernel.render_stage import RenderStage
from kernel.worker_protocol import FailureKind
from tests.support.renders import Buckets, process_runner, read_object, video_job
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.state_codec import BLOB_NAMES, EMBEDDINGS

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

STEPS = 4


def _runner(
    objects: S3ObjectStore,
    registry: ModelRegistry,
    settings: WorkerSettings,
    buckets: Buckets,
    processes: Path | None,
    family: str = "cpu",
    on_cpu: Dtype | None = None,
) -> JobRunner:
    """`family` and `on_cpu`: a GPU family and the dtype it would compute in (on the CPU the
    registry's `on_cpu` decides it)."""
    if on_cpu is not None:
        registry = ModelRegistry(
            models={
                name: entry.model_copy(update={"precision": Precision(on_cpu=on_cpu)})
                for name, entry in registry.models.items()
            }
        )
    return process_runner(objects, registry, settings, processes, family)


def notice_at_step(runner: JobRunner, at: int) -> None:
    """A spot notice once the runner has done `at` steps: it checkpoints and stops there."""

    def notice(step: int) -> None:
        if step == at:
            runner.request_checkpoint("spot notice")

    runner.on_step = notice


def _blobs(s3: S3Client, buckets: Buckets, manifest_key: str) -> set[str]:
    manifest = json.loads(read_object(s3, buckets.checkpoints, manifest_key))
    return set(manifest["blobs"])


@pytest.mark.parametrize("in_processes", [False, True], ids=["thread", "render-process"])
async def test_three_stages_make_the_unsplit_video_byte_for_byte(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    s3: S3Client,
    tmp_path: Path,
    in_processes: bool,
) -> None:
    processes = tmp_path / "renders" if in_processes else None
    runner = _runner(object_store, published_model, worker_settings, buckets, processes)
    try:
        whole = await runner.run(video_job(buckets, "whole", steps=STEPS), attempt=1)
        assert whole.status is RunStatus.SUCCEEDED, whole.error
        spec = video_job(buckets, "staged", steps=STEPS)

        encoded = await runner.run(spec, attempt=1, stage=RenderStage.ENCODE)
        assert encoded.status is RunStatus.STAGE_DONE, encoded.error
        assert encoded.checkpoint is not None
        assert "/1/000000/" in encoded.checkpoint
        assert _blobs(s3, buckets, encoded.checkpoint) == {EMBEDDINGS}

        denoised = await runner.run(
            spec, attempt=2, resume_from=encoded.checkpoint, stage=RenderStage.DENOISE
        )
        assert denoised.status is RunStatus.STAGE_DONE, denoised.error
        assert denoised.steps_done == STEPS
        assert denoised.checkpoint is not None
        assert _blobs(s3, buckets, denoised.checkpoint) == {*BLOB_NAMES, EMBEDDINGS}

        decoded = await runner.run(
            spec, attempt=3, resume_from=denoised.checkpoint, stage=RenderStage.DECODE
        )
        assert decoded.status is RunStatus.SUCCEEDED, decoded.error
    finally:
        await runner.close()
    assert decoded.video_sha256 == whole.video_sha256
    staged_mp4 = read_object(s3, buckets.outputs, "staged/staged.mp4")
    assert staged_mp4 == read_object(s3, buckets.outputs, "whole/whole.mp4")


async def test_a_denoising_stage_stopped_midway_resumes_with_its_embeddings(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    s3: S3Client,
) -> None:
    runner = _runner(object_store, published_model, worker_settings, buckets, None)
    whole = await runner.run(video_job(buckets, "whole", steps=STEPS), attempt=1)
    spec = video_job(buckets, "noticed", steps=STEPS)
    encoded = await runner.run(spec, attempt=1, stage=RenderStage.ENCODE)

    notice_at_step(runner, 2)
    cut = await runner.run(
        spec, attempt=2, resume_from=encoded.checkpoint, stage=RenderStage.DENOISE
    )
    assert cut.status is RunStatus.PREEMPTED
    assert cut.checkpoint is not None
    assert _blobs(s3, buckets, cut.checkpoint) == {*BLOB_NAMES, EMBEDDINGS}

    runner = _runner(object_store, published_model, worker_settings, buckets, None)  # elsewhere
    resumed = await runner.run(
        spec, attempt=3, resume_from=cut.checkpoint, stage=RenderStage.DENOISE
    )
    assert resumed.status is RunStatus.STAGE_DONE, resumed.error
    decoded = await runner.run(
        spec, attempt=4, resume_from=resumed.checkpoint, stage=RenderStage.DECODE
    )
    assert decoded.video_sha256 == whole.video_sha256


async def test_stages_without_what_they_read_fail_and_say_why(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
) -> None:
    runner = _runner(object_store, published_model, worker_settings, buckets, None)
    spec = video_job(buckets, "nothing-stored", steps=STEPS)
    for stage, missing in (
        (RenderStage.DENOISE, "no stored prompt embeddings"),
        (RenderStage.DECODE, "no checkpoint with every step done"),
    ):
        report = await runner.run(spec, attempt=1, stage=stage)
        assert report.status is RunStatus.FAILED
        assert missing in (report.error or "")
        # The job's own fault: not the machine's, so not retried on machine after machine.
        assert report.failure_kind is FailureKind.JOB


async def test_a_split_render_joins_up_across_gpu_families_of_other_dtypes(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
) -> None:
    """The planner's default pairing for a 14B render: encoding on a T4 (no bf16: fp16),
    denoising on an L40S (bf16), decoding on a T4 again. The boundaries cast, and say so."""
    t4 = _runner(object_store, published_model, worker_settings, buckets, None, "t4", Dtype.FP16)
    l40s = _runner(
        object_store, published_model, worker_settings, buckets, None, "l40s", Dtype.BF16
    )
    spec = video_job(buckets, "across", steps=STEPS)
    encoded = await t4.run(spec, attempt=1, stage=RenderStage.ENCODE)
    assert encoded.status is RunStatus.STAGE_DONE, encoded.error

    denoised = await l40s.run(
        spec, attempt=2, resume_from=encoded.checkpoint, stage=RenderStage.DENOISE
    )
    assert denoised.status is RunStatus.STAGE_DONE, denoised.error
    assert any("stage boundary" in note and "fp16" in note for note in denoised.resume_notes)

    decoded = await t4.run(
        spec, attempt=3, resume_from=denoised.checkpoint, stage=RenderStage.DECODE
    )
    assert decoded.status is RunStatus.SUCCEEDED, decoded.error
    assert any("stage boundary" in note and "bf16" in note for note in decoded.resume_notes)


async def test_a_denoising_stage_cut_midway_restarts_on_its_embeddings_in_another_dtype(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
) -> None:
    """A spot notice stops the denoising stage on an L40S; the only GPU free is a T4. Its
    half-denoised bf16 state is never resumed in fp16 (two arithmetics), but the prompt's
    embeddings it carries are: denoising starts again from step 0 there, not a failure."""
    l40s = _runner(
        object_store, published_model, worker_settings, buckets, None, "l40s", Dtype.BF16
    )
    spec = video_job(buckets, "cut-across", steps=STEPS)
    encoded = await l40s.run(spec, attempt=1, stage=RenderStage.ENCODE)

    notice_at_step(l40s, 2)
    cut = await l40s.run(spec, attempt=2, resume_from=encoded.checkpoint, stage=RenderStage.DENOISE)
    assert cut.status is RunStatus.PREEMPTED

    t4 = _runner(object_store, published_model, worker_settings, buckets, None, "t4", Dtype.FP16)
    resumed = await t4.run(spec, attempt=3, resume_from=cut.checkpoint, stage=RenderStage.DENOISE)
    assert resumed.status is RunStatus.STAGE_DONE, resumed.error
    assert resumed.steps_done == STEPS
    notes = " | ".join(resumed.resume_notes)
    assert "mix two arithmetics" in notes  # the half-denoised state, refused
    # Denoising starts again from step 0 on the prompt's embeddings, cast from bf16.
    assert "(step 0)" in notes or "starts again from step 0" in notes
    assert "stage boundary" in notes
