"""Each job's own log lines land beside its video (`<prefix><job>.attempt-<n>.log`), as the
console's job page reads them: only the lines logged while that job's task ran, the newest
`MAX_LINES` of them, written again when new lines come, and once more at the end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest
from mypy_boto3_s3 import S3Client

from kernel.clock import FakeClock
from kernel.job_spec import attempt_log
from kernel.log_context import bind
from tests.support.renders import Buckets
from worker_ami.agent.job_logs import MAX_LINES, JobLogBuffer, JobLogShipper
from worker_ami.agent.object_store import S3ObjectStore

log = logging.getLogger("worker_ami.agent.runner")


@pytest.fixture
def buffer() -> Iterator[JobLogBuffer]:
    handler = JobLogBuffer()
    logging.getLogger().addHandler(handler)
    log.setLevel(logging.INFO)
    yield handler
    logging.getLogger().removeHandler(handler)


async def test_a_jobs_lines_are_written_beside_its_video(
    buffer: JobLogBuffer, object_store: S3ObjectStore, buckets: Buckets, s3: S3Client
) -> None:
    output = f"s3://{buckets.outputs}/videos/team-a/"

    async def job(job_id: str, attempt: int, lines: int) -> None:
        bind(job_id=job_id, attempt=attempt, output=output)
        for step in range(lines):
            log.info("job %s: step %d <b>not markup</b>", job_id, step)

    log.info("a line of no job")
    await asyncio.gather(job("clip-1", 2, 3), job("clip-2", 1, MAX_LINES + 10))
    shipper = JobLogShipper(buffer, object_store, FakeClock())
    await shipper.flush()
    bucket, key = attempt_log(output, "clip-1", 2)
    assert key == "videos/team-a/clip-1.attempt-2.log"
    text = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    assert [line.split(" INFO ")[1] for line in text.splitlines()] == [
        f"job clip-1: step {step} <b>not markup</b>" for step in range(3)
    ]
    long = s3.get_object(Bucket=bucket, Key=attempt_log(output, "clip-2", 1)[1])["Body"].read()
    lines = long.decode().splitlines()
    assert len(lines) == MAX_LINES  # the newest
    assert lines[-1].endswith(f"step {MAX_LINES + 9} <b>not markup</b>")
    assert buffer.take_changed() == []  # nothing new: nothing to write again
