"""The whole system on one machine: SQS intake (moto), the control plane (in process), three
`framefleet-worker serve` processes with their own IMDS emulators, and a Mosquitto of the test's
own. One worker gets a spot notice in the middle of a job and is SIGKILLed once its checkpoint is
reported; every job still succeeds and the resumed video equals an uninterrupted render."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from prometheus_client import CollectorRegistry

from orchestrator.app import build_intake, build_store, sqs_client
from orchestrator.config import IntakeConfig, Settings
from orchestrator.control.service import ControlPlaneService, ControlSettings
from orchestrator.domain.clock import SystemClock
from orchestrator.domain.job_state import JobState
from orchestrator.intake.metrics import IntakeMetrics
from orchestrator.mqtt.link import LinkSettings
from orchestrator.store.job_store import JobStore
from tests.brokers import PrivateMosquitto
from tests.conftest import Queues, free_port
from tests.support import async_wait_until
from tests.worker.conftest import Buckets, read_object, video_job
from tests.worker.test_exact_resume import worker_env
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.report import RunStatus
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

WORKERS = ("w-a", "w-b", "w-c")


class Fleet:
    def __init__(self) -> None:
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.emulators: dict[str, ImdsEmulator] = {}


@asynccontextmanager
async def fleet(settings: WorkerSettings, tmp_path: Path, broker_port: int) -> AsyncIterator[Fleet]:
    workers = Fleet()
    async with AsyncExitStack() as stack:
        for index, worker_id in enumerate(WORKERS):
            emulator = ImdsEmulator(
                SystemClock(),
                InstanceIdentity(instance_id=f"i-0000000000000000{index}", lifecycle="spot"),
            )
            url = await emulator.start()
            stack.push_async_callback(emulator.stop)
            env = worker_env(settings, tmp_path / f"cache-{worker_id}") | {
                "FRAMEFLEET_WORKER_WORKER_ID": worker_id,
                "FRAMEFLEET_WORKER_MQTT_PORT": str(broker_port),
                "FRAMEFLEET_WORKER_IMDS_ENABLED": "true",
                "FRAMEFLEET_WORKER_IMDS_URL": url,
                "FRAMEFLEET_WORKER_IMDS_POLL_SECONDS": "0.1",
                "FRAMEFLEET_WORKER_HEARTBEAT_SECONDS": "0.5",
            }
            log = (tmp_path / f"{worker_id}.log").open("wb")
            stack.callback(log.close)
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "worker_ami.agent", "serve", env=env,
                stdout=log, stderr=log,
            )  # fmt: skip
            workers.processes[worker_id] = process
            workers.emulators[worker_id] = emulator
        try:
            yield workers
        finally:
            for process in workers.processes.values():
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            for process in workers.processes.values():
                async with asyncio.timeout(60):
                    await process.wait()


def where_running(store: JobStore, job_id: str) -> str | None:
    for placement in store.placements():
        if placement.job.job_id == job_id and placement.job.state is JobState.RUNNING:
            return placement.worker_id
    return None


@pytest.fixture
def broker(tmp_path: Path) -> AsyncIterator[PrivateMosquitto]:  # type: ignore[misc]
    mosquitto = PrivateMosquitto(tmp_path, free_port())
    mosquitto.start()
    yield mosquitto
    mosquitto.stop()


async def test_an_interrupted_job_resumes_elsewhere_and_every_job_succeeds_once(
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    runner: JobRunner,
    buckets: Buckets,
    s3: S3Client,
    sqs: SQSClient,
    queues: Queues,
    moto_endpoint: str,
    broker: PrivateMosquitto,
    tmp_path: Path,
) -> None:
    settings = Settings(
        endpoint_url=moto_endpoint,
        jobs_queue_url=queues.jobs_url,
        dead_letter_queue_url=queues.dead_letter_url,
        database_url=f"sqlite:///{tmp_path / 'cp.db'}",  # type: ignore[arg-type]
        intake=IntakeConfig(wait_seconds=1, concurrency=1),
    )
    clock = SystemClock()
    store = build_store(settings, clock)
    service = ControlPlaneService(
        store, LinkSettings(port=broker.port, client_id="control-plane"), clock,
        ControlSettings(tick_seconds=0.2),
    )  # fmt: skip
    target = video_job(buckets, "e2e-target", steps=300, priority=9)
    others = [video_job(buckets, f"e2e-{i}", steps=20, priority=5) for i in range(5)]
    for spec in [target, *others]:
        sqs.send_message(QueueUrl=queues.jobs_url, MessageBody=spec.canonical_json())

    stop = asyncio.Event()
    async with (
        sqs_client(settings) as client,
        fleet(worker_settings, tmp_path, broker.port) as workers,
    ):
        intake = build_intake(client, settings, store, clock, IntakeMetrics(CollectorRegistry()))
        tasks = [asyncio.create_task(intake.run(stop)), asyncio.create_task(service.run(stop))]
        try:
            await async_wait_until(lambda: where_running(store, target.job_id) is not None, 120)
            victim = where_running(store, target.job_id)
            assert victim is not None
            workers.emulators[victim].set_instance_action("terminate")
            # Killed once its checkpoint is reported (the job is back in the queue with it).
            await async_wait_until(lambda: store.get(target.job_id).attempt >= 2, 60)
            assert store.get(target.job_id).last_checkpoint is not None
            workers.processes[victim].send_signal(signal.SIGKILL)
            await async_wait_until(
                lambda: all(
                    store.get(s.job_id).state is JobState.SUCCEEDED for s in [target, *others]
                ),
                180,
            )
        finally:
            stop.set()
            await asyncio.gather(*tasks)

    final = store.get(target.job_id)
    history = store.history(target.job_id)
    assert JobState.PREEMPTED in [e.to_state for e in history]
    assert final.attempt >= 2
    assert history[-1].to_state is JobState.SUCCEEDED
    assert [e.to_state for e in history].count(JobState.SUCCEEDED) == 1
    metadata = json.loads(read_object(s3, buckets.outputs, "e2e-target/e2e-target.json"))
    assert metadata["resumed_from"] is not None
    reference = await runner.run(video_job(buckets, "e2e-reference", steps=300, priority=9), 1)
    assert reference.status is RunStatus.SUCCEEDED
    assert metadata["video_sha256"] == reference.video_sha256
    for spec in others:
        assert store.get(spec.job_id).state is JobState.SUCCEEDED
    store.dispose()
