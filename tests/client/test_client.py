"""The producers' client (client/, framefleet_client) against a served control plane: submit
(idempotent), get, wait on the event stream, download through the presigned link, cancel,
the typed errors; and SQS batches of ten through moto."""

from __future__ import annotations

import subprocess
import sys
import threading
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from framefleet_client import Client, Conflict, Invalid, NotFound, Unauthorized, WaitTimedOut
from framefleet_client.sqs import QueueSender

from kernel.clock import FakeClock
from kernel.worker_protocol import EventKind
from tests.support.fleet_history import FleetHistory
from tests.support.jobs import job_dict
from tests.support.local_services import REGION
from tests.support.served_api import ServedApi, serve_api
from tests.support.waits import wait_until


@pytest.fixture(scope="module")
def served(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    yield from serve_api(moto_endpoint, tmp_path_factory.mktemp("client"))


def _client(served: ServedApi, role: str = "console") -> Client:
    return Client(served.base, served.tokens[role], timeout=10)


def test_submit_wait_and_download_a_video(
    served: ServedApi, moto_endpoint: str, tmp_path: Path
) -> None:
    client = _client(served)
    job = job_dict(f"client-{uuid.uuid4().hex[:8]}")
    job_id = job["job_id"]
    assert client.submit(job).state == "queued"
    assert client.submit(job).job_id == job_id  # resent: the same job
    with pytest.raises(Conflict):
        client.submit({**job, "prompt": "another"})

    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
    s3.create_bucket(Bucket="framefleet-output")
    s3.put_object(Bucket="framefleet-output", Key=f"videos/{job_id}.mp4", Body=b"\x00mp4")
    fleet = FleetHistory(served.store, FakeClock())
    fleet.assign(job_id, f"i-0{uuid.uuid4().hex[:16]}")
    fleet.event(job_id, EventKind.STARTED)

    waited: list[object] = []
    waiting = threading.Thread(target=lambda: waited.append(client.wait(job_id, timeout=60)))
    waiting.start()
    fleet.finish(job_id, model_load_seconds=1.0)  # before or after the stream opens: either
    waiting.join(timeout=60)
    (done,) = waited
    assert getattr(done, "succeeded", False)
    video = client.download(job_id, tmp_path / "video.mp4")
    assert video.read_bytes() == b"\x00mp4"


def test_waiting_gives_up_and_cancelling_ends_it(served: ServedApi) -> None:
    client = _client(served)
    job_id = client.submit(job_dict(f"waited-{uuid.uuid4().hex[:8]}")).job_id
    with pytest.raises(WaitTimedOut):
        client.wait(job_id, timeout=0.5)
    assert client.cancel(job_id, "not needed").state == "cancelled"
    assert client.wait(job_id, timeout=5).state == "cancelled"


def test_errors_are_typed(served: ServedApi) -> None:
    client = _client(served)
    with pytest.raises(NotFound):
        client.get("no-such-job")
    with pytest.raises(Invalid) as invalid:
        client.submit({**job_dict(), "steps": "thirty"})
    assert any(line.startswith("steps") for line in invalid.value.errors)
    with pytest.raises(Unauthorized):
        Client(served.base, "ff_wrong_token").get("any")


def test_many_jobs_go_through_sqs_ten_at_a_time(served: ServedApi, moto_endpoint: str) -> None:
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=moto_endpoint)
    jobs = [job_dict(f"batch-{uuid.uuid4().hex[:8]}") for _ in range(23)]
    sent = QueueSender(served.jobs_url, sqs).submit_batch(jobs)
    assert set(sent) == {job["job_id"] for job in jobs}
    wait_until(
        lambda: all(served.store.find(job["job_id"]) is not None for job in jobs),
        what="the batch stored by the intake",
    )


def test_the_client_needs_nothing_the_server_does() -> None:
    """Its distribution declares no dependency (boto3 only in the sqs extra), and importing
    every module of it loads none of the server's libraries."""
    project = tomllib.loads((Path(__file__).parents[2] / "client" / "pyproject.toml").read_text())
    assert project["project"]["dependencies"] == []
    modules = "framefleet_client, framefleet_client.sqs, framefleet_client.client"
    heavy = ("torch", "fastapi", "sqlalchemy", "pydantic", "boto3", "framefleet", "kernel")
    check = f"import sys, {modules}; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert loaded.stdout.strip() == "[]", loaded.stderr
