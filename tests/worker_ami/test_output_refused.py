"""A job whose output the fleet cannot write fails once, as the job's own fault: retried on
other workers it would only render again to fail its upload again (issue 29)."""

from __future__ import annotations

from kernel.worker_protocol import FailureKind
from tests.support.renders import Buckets, make_runner, video_job
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.report import RunStatus
from worker_ami.agent.settings import WorkerSettings


async def test_an_output_the_fleet_cannot_write_is_the_jobs_fault_not_retried(
    object_store: S3ObjectStore,
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
) -> None:
    """The upload refused (no such bucket here; AccessDenied alike): every worker would render
    the job only to fail it, so it fails once as the job's fault."""
    runner = make_runner(object_store, published_model, worker_settings)
    spec = video_job(buckets, "nowhere", steps=1, output="s3://no-such-bucket-framefleet/videos/")
    report = await runner.run(spec, attempt=1)
    assert report.status is RunStatus.FAILED
    assert report.failure_kind is FailureKind.JOB
    assert "NoSuchBucket" in (report.error or "")
