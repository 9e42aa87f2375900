"""The whole local system for end-to-end tests: worker processes with their own IMDS
emulators, and EventBridge routing to the interruptions queue."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import boto3

from orchestrator.domain.clock import SystemClock
from orchestrator.domain.job_state import JobState
from orchestrator.store.job_store import JobStore
from tests.worker.test_exact_resume import worker_env
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.settings import WorkerSettings

WORKERS = ("w-a", "w-b", "w-c")


class Fleet:
    def __init__(self) -> None:
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.emulators: dict[str, ImdsEmulator] = {}


@asynccontextmanager
async def fleet(
    settings: WorkerSettings,
    tmp_path: Path,
    broker_port: int,
    worker_ids: tuple[str, ...] = WORKERS,
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[Fleet]:
    """`framefleet-worker serve` processes, each with an IMDS emulator of its own."""
    workers = Fleet()
    async with AsyncExitStack() as stack:
        for index, worker_id in enumerate(worker_ids):
            emulator = ImdsEmulator(
                SystemClock(),
                InstanceIdentity(instance_id=f"i-{index:017x}", lifecycle="spot"),
            )
            url = await emulator.start()
            stack.push_async_callback(emulator.stop)
            env = (
                worker_env(settings, tmp_path / f"cache-{worker_id}")
                | {
                    "FRAMEFLEET_WORKER_WORKER_ID": worker_id,
                    "FRAMEFLEET_WORKER_MQTT_PORT": str(broker_port),
                    "FRAMEFLEET_WORKER_IMDS_ENABLED": "true",
                    "FRAMEFLEET_WORKER_IMDS_URL": url,
                    "FRAMEFLEET_WORKER_IMDS_POLL_SECONDS": "0.1",
                    "FRAMEFLEET_WORKER_HEARTBEAT_SECONDS": "0.5",
                }
                | (extra_env or {})
            )
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


def spot_warning(instance_id: str) -> str:
    return json.dumps({"instance-id": instance_id, "instance-action": "terminate"})


def route_ec2_events_to(moto_endpoint: str, queue_arn: str) -> Any:
    """An EventBridge rule for EC2 interruption events with the SQS queue as its target."""
    events = boto3.client("events", region_name="us-east-1", endpoint_url=moto_endpoint)
    rule = f"framefleet-ec2-{uuid.uuid4().hex[:8]}"
    kinds = [
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
    ]
    events.put_rule(
        Name=rule, EventPattern=json.dumps({"source": ["aws.ec2"], "detail-type": kinds})
    )
    events.put_targets(Rule=rule, Targets=[{"Id": "interruptions", "Arn": queue_arn}])
    return events
