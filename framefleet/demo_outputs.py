"""The demo's videos: every finished job's MP4 from S3 into ./demo-output/, and each resumed
job's video against an uninterrupted render of the same spec by the worker agent in process."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import boto3

from framefleet.demo_report import reference_spec, sha256_of
from framefleet.demo_stack import CHECKPOINT_BUCKET, REGION
from framefleet.worker_process import worker_parts
from kernel.clock import SystemClock
from kernel.job_record import JobRecord
from worker_ami.agent.report import RunStatus
from worker_ami.agent.settings import WorkerSettings


def download_videos(endpoint: str, records: Sequence[JobRecord], folder: Path) -> dict[str, Path]:
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    folder.mkdir(parents=True, exist_ok=True)
    videos = {}
    for record in records:
        spec = record.spec
        target = folder / f"{spec.job_id}.mp4"
        s3.download_file(spec.output_bucket, f"{spec.output_prefix}{spec.job_id}.mp4", str(target))
        videos[spec.job_id] = target
    return videos


@dataclass(frozen=True)
class ResumeCheck:
    job_id: str
    resumed_sha256: str
    reference_sha256: str | None

    @property
    def identical(self) -> bool:
        return self.resumed_sha256 == self.reference_sha256


async def check_resumed(
    endpoint: str, registry: Path, work: Path, records: Sequence[JobRecord], videos: dict[str, Path]
) -> list[ResumeCheck]:
    """Render each job again without interruption, on a worker of its own, and compare."""
    if not records:
        return []
    settings = WorkerSettings(
        endpoint_url=endpoint,
        checkpoint_bucket=CHECKPOINT_BUCKET,
        model_registry=registry,
        cache_dir=work / "reference-cache",
        device="cpu",
        allow_cpu=True,
        imds_enabled=False,
        min_free_disk_gib=0,
    )
    checks = []
    async with worker_parts(settings, SystemClock()) as agent:
        for record in records:
            report = await agent.run_job(reference_spec(record.spec), 1)
            reference = report.video_sha256 if report.status is RunStatus.SUCCEEDED else None
            checks.append(ResumeCheck(record.job_id, sha256_of(videos[record.job_id]), reference))
    return checks
