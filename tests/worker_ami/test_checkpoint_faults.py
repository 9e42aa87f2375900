"""Corrupt checkpoints are rejected; resume falls back to the previous one, then to step 0, and
says which. Nothing read from S3 is ever unpickled."""

from __future__ import annotations

import hashlib
import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kernel.job_spec import JobSpec
from tests.support.renders import Buckets, make_runner, read_object, video_job
from worker_ami.agent.checkpoint import MANIFEST, CheckpointIdentity, CheckpointStore
from worker_ami.agent.errors import CheckpointRejected
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.runner import JobRunner, checkpoint_identity
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.state_codec import LATENTS, RNG

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

NOTICE_AT = 4
RunnerFactory = Callable[[], JobRunner]


@pytest.fixture
def periodic_runners(
    object_store: S3ObjectStore, published_model: ModelRegistry, worker_settings: WorkerSettings
) -> RunnerFactory:
    """New runners with a tiny mean time between interruptions: periodic checkpoints as often
    as the measured step and write times allow (older ones to prune)."""
    return lambda: make_runner(
        object_store,
        published_model,
        worker_settings,
        mean_time_between_interruptions_s=1e-6,
        initial_checkpoint_write_s=1e-6,
    )


@pytest.fixture
def checkpoints(object_store: S3ObjectStore, buckets: Buckets) -> CheckpointStore:
    return CheckpointStore(object_store, buckets.checkpoints)


async def stop_at(runner: JobRunner, spec: JobSpec, step: int, attempt: int) -> JobReport:
    """Run until a notice at `step`; the runner checkpoints there and stops."""

    def notice(done: int) -> None:
        if done == step:
            runner.request_checkpoint("test notice")

    runner.on_step = notice
    report = await runner.run(spec, attempt=attempt)
    assert report.status is RunStatus.PREEMPTED
    assert report.checkpoint is not None
    assert report.checkpoints_written[-1] == report.checkpoint  # no second write of that step
    return report


async def interrupted(
    new_runner: RunnerFactory, buckets: Buckets, job_id: str
) -> tuple[JobSpec, CheckpointIdentity, list[str]]:
    """Interrupted at step NOTICE_AT - 1, then resumed elsewhere and interrupted at NOTICE_AT;
    return the spec, identity and the manifests left, newest first (older periodic ones are
    pruned). Notices, not periodic checkpoints, make both: the periodic rule weighs measured
    step and write times, and would make the steps of the survivors vary from run to run."""
    spec = video_job(buckets, job_id)
    first = await stop_at(new_runner(), spec, NOTICE_AT - 1, attempt=1)
    runner = new_runner()
    second = await stop_at(runner, spec, NOTICE_AT, attempt=2)
    assert second.resumed_from == first.checkpoint
    assert first.checkpoint is not None
    assert second.checkpoint is not None
    model = await runner.cached_model(spec.model)
    identity = checkpoint_identity(spec, model)
    return spec, identity, [second.checkpoint, first.checkpoint]


def prefix_of(manifest_key: str) -> str:
    return manifest_key.removesuffix(MANIFEST)


async def test_only_the_newest_two_checkpoints_are_kept(
    periodic_runners: RunnerFactory,
    buckets: Buckets,
    s3: S3Client,
    checkpoints: CheckpointStore,
) -> None:
    spec, _, newest = await interrupted(periodic_runners, buckets, "keep-two")
    assert await checkpoints.manifests(spec.job_id) == newest
    assert [f"/{NOTICE_AT:06d}/" in newest[0], f"/{NOTICE_AT - 1:06d}/" in newest[1]] == [
        True,
        True,
    ]
    listed = s3.list_objects_v2(Bucket=buckets.checkpoints, Prefix=f"checkpoints/{spec.job_id}/")
    assert listed["KeyCount"] == 8  # two checkpoints of three blobs and a manifest


@pytest.mark.parametrize(
    ("damage", "complaint"),
    [
        ("flip-byte", "fails its SHA-256"),
        ("missing-blob", "blob rng.safetensors missing"),
        ("truncated-manifest", "manifest unreadable or truncated"),
    ],
)
async def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(
    periodic_runners: RunnerFactory,
    buckets: Buckets,
    s3: S3Client,
    checkpoints: CheckpointStore,
    damage: str,
    complaint: str,
) -> None:
    _, identity, (newest, previous) = await interrupted(periodic_runners, buckets, f"d-{damage}")
    if damage == "flip-byte":
        key = prefix_of(newest) + LATENTS
        blob = bytearray(read_object(s3, buckets.checkpoints, key))
        blob[len(blob) // 2] ^= 0x01
        s3.put_object(Bucket=buckets.checkpoints, Key=key, Body=bytes(blob))
    elif damage == "missing-blob":
        s3.delete_object(Bucket=buckets.checkpoints, Key=prefix_of(newest) + RNG)
    else:
        manifest = read_object(s3, buckets.checkpoints, newest)
        s3.put_object(Bucket=buckets.checkpoints, Key=newest, Body=manifest[: len(manifest) // 2])

    resume = await checkpoints.resume_point(identity)
    assert resume.manifest_key == previous
    assert resume.state is not None
    assert resume.state.step == NOTICE_AT - 1
    assert complaint in resume.notes[0]
    assert resume.notes[-1] == f"fell back to {previous} (step {NOTICE_AT - 1})"


async def test_fallback_still_renders_the_same_video(
    periodic_runners: RunnerFactory,
    runner: JobRunner,
    buckets: Buckets,
    s3: S3Client,
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
) -> None:
    spec, _, (newest, _) = await interrupted(periodic_runners, buckets, "fallback-video")
    s3.delete_object(Bucket=buckets.checkpoints, Key=prefix_of(newest) + LATENTS)
    survivor = make_runner(object_store, published_model, worker_settings)
    resumed = await survivor.run(spec, attempt=2)
    assert resumed.status is RunStatus.SUCCEEDED
    assert any("fell back" in note for note in resumed.resume_notes)
    reference = await runner.run(video_job(buckets, "fallback-reference"), attempt=1)
    assert resumed.video_sha256 == reference.video_sha256


async def test_no_valid_checkpoint_restarts_from_step_zero_and_says_so(
    periodic_runners: RunnerFactory,
    buckets: Buckets,
    s3: S3Client,
    checkpoints: CheckpointStore,
) -> None:
    _, identity, manifests = await interrupted(periodic_runners, buckets, "all-bad")
    for key in manifests:
        s3.put_object(Bucket=buckets.checkpoints, Key=key, Body=b"{")
    resume = await checkpoints.resume_point(identity)
    assert resume.state is None
    assert resume.manifest_key is None
    assert resume.notes[-1] == "no checkpoint verified: restarting from step 0"
    assert len(resume.notes) == 3


async def test_a_pickle_in_a_blob_is_rejected_never_executed(
    periodic_runners: RunnerFactory,
    buckets: Buckets,
    s3: S3Client,
    checkpoints: CheckpointStore,
    tmp_path: Path,
) -> None:
    _, identity, (newest, previous) = await interrupted(periodic_runners, buckets, "pickle")
    sentinel = tmp_path / "executed"

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (Path.touch, (str(sentinel),))

    payload = pickle.dumps(Exploit())
    key = prefix_of(newest) + LATENTS
    s3.put_object(Bucket=buckets.checkpoints, Key=key, Body=payload)
    # The attacker can also rewrite the manifest so the digest matches.
    manifest = json.loads(read_object(s3, buckets.checkpoints, newest))
    manifest["blobs"][LATENTS] = {
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
    }
    s3.put_object(Bucket=buckets.checkpoints, Key=newest, Body=json.dumps(manifest).encode())

    with pytest.raises(CheckpointRejected, match="unreadable tensors"):
        await checkpoints.load(newest, identity)
    resume = await checkpoints.resume_point(identity)
    assert resume.manifest_key == previous
    assert not sentinel.exists()


async def test_a_checkpoint_of_another_job_is_refused(
    periodic_runners: RunnerFactory, buckets: Buckets, checkpoints: CheckpointStore
) -> None:
    _, identity, (newest, _) = await interrupted(periodic_runners, buckets, "owner")
    stranger = identity.model_copy(update={"job_id": "stranger", "job_spec_sha256": "0" * 64})
    with pytest.raises(CheckpointRejected, match="another job"):
        await checkpoints.load(newest, stranger)
    resume = await checkpoints.resume_point(stranger, preferred=newest)
    assert resume.state is None
    assert resume.notes[0].startswith(f"ignored {newest}: not a checkpoint of job stranger")
