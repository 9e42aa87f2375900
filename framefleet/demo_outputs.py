"""The demo's videos: every finished job's MP4 from S3 into ./demo-output/ with a contact sheet
beside it, and each resumed job's video against an uninterrupted render of the same spec by the
worker agent in process (a strip of the two beside them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import boto3
from botocore.config import Config

from framefleet.demo_report import reference_spec, sha256_of
from framefleet.demo_sheets import contact_sheet, twin_strip
from framefleet.demo_stack import CHECKPOINT_BUCKET, REGION
from framefleet.worker_process import worker_parts
from kernel.clock import SystemClock
from kernel.job_record import JobRecord
from kernel.job_spec import JobSpec
from worker_ami.agent.report import RunStatus
from worker_ami.agent.settings import WorkerSettings


def _download(endpoint: str, spec: JobSpec, target: Path) -> Path:
    # The demo's own reading, not a product role's (its transfer threads carry no frame).
    setup = Config(user_agent_extra="framefleet/setup")
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint, config=setup)
    target.parent.mkdir(parents=True, exist_ok=True)
    s3.download_file(spec.output_bucket, f"{spec.output_prefix}{spec.job_id}.mp4", str(target))
    return target


def download_videos(endpoint: str, records: Sequence[JobRecord], folder: Path) -> dict[str, Path]:
    """Each job's MP4, with its contact sheet beside it."""
    videos = {}
    for record in records:
        video = _download(endpoint, record.spec, folder / f"{record.job_id}.mp4")
        contact_sheet(video, f"{record.job_id}: {record.spec.prompt}")
        videos[record.job_id] = video
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
            twin_spec = reference_spec(record.spec)
            report = await agent.run_job(twin_spec, 1)
            resumed = videos[record.job_id]
            check = ResumeCheck(record.job_id, sha256_of(resumed), None)
            if report.status is RunStatus.SUCCEEDED:
                twin = _download(endpoint, twin_spec, work / "twins" / f"{record.job_id}.mp4")
                check = ResumeCheck(record.job_id, check.resumed_sha256, report.video_sha256)
                strip = resumed.with_name(f"{record.job_id}-resumed-vs-uninterrupted.png")
                twin_strip(resumed, twin, strip, check.identical)
            checks.append(check)
    return checks
