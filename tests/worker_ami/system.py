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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from framefleet.settings import ControlConfig, IntakeConfig, MqttConfig, Settings
from kernel.clock import SystemClock
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.store.job_store import JobStore
from tests.support.control_plane import listed_in
from tests.support.local_services import Queues
from tests.support.mosquitto import LocalBroker
from tests.support.renders import Buckets
from tests.support.worker_process import worker_env
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.settings import WorkerSettings

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

# On EC2 a worker is its instance (the broker account and the control plane know it by that).
WORKERS = tuple(f"i-{index:017x}" for index in range(3))


@dataclass(frozen=True)
class LocalSystem:
    """Everything an end-to-end test talks to: moto, the queues and buckets, a broker of its
    own, the worker settings (with the tiny model published) and a scratch folder."""

    worker_settings: WorkerSettings
    buckets: Buckets
    sqs: SQSClient
    queues: Queues
    moto_endpoint: str
    broker: LocalBroker
    tmp_path: Path

    def submit(self, *specs: JobSpec) -> None:
        for spec in specs:
            self.sqs.send_message(QueueUrl=self.queues.jobs_url, MessageBody=spec.canonical_json())

    @property
    def database_url(self) -> str:
        return f"sqlite:///{self.tmp_path / 'cp.db'}"

    def plane_settings(
        self, control: ControlConfig, interruptions_queue_url: str | None = None
    ) -> Settings:
        return Settings(
            endpoint_url=self.moto_endpoint,
            jobs_queue_url=self.queues.jobs_url,
            dead_letter_queue_url=self.queues.dead_letter_url,
            interruptions_queue_url=interruptions_queue_url,
            database_url=self.database_url,
            intake=IntakeConfig(wait_seconds=1, concurrency=1),
            mqtt=MqttConfig(host="127.0.0.1", port=self.broker.port),
            control=control,
            model_registry=str(self.worker_settings.model_registry),  # checked at the door
        )


class Fleet:
    def __init__(self) -> None:
        self.processes: dict[str, asyncio.subprocess.Process] = {}
        self.emulators: dict[str, ImdsEmulator] = {}


@asynccontextmanager
async def fleet(
    system: LocalSystem,
    worker_ids: tuple[str, ...] = WORKERS,
    extra_env: dict[str, str] | None = None,
    lifecycle: str = "spot",
    instance_type: str = "g6e.xlarge",
    database_url: str | None = None,
) -> AsyncIterator[Fleet]:
    """`framefleet-worker serve` processes, each with an IMDS emulator of its own saying the
    instance is an `instance_type` on `lifecycle` ("spot" or "on-demand")."""
    settings, tmp_path, broker_port = system.worker_settings, system.tmp_path, system.broker.port
    market = Market.SPOT if lifecycle == "spot" else Market.ON_DEMAND
    # Listed, as the autoscaler would have them, where the control plane keeps its store.
    listed_in(
        database_url or system.database_url, *worker_ids, instance_type=instance_type, market=market
    )
    workers = Fleet()
    async with AsyncExitStack() as stack:
        for worker_id in worker_ids:
            emulator = ImdsEmulator(
                SystemClock(),
                InstanceIdentity(
                    instance_id=worker_id, instance_type=instance_type, lifecycle=lifecycle
                ),
            )
            url = await emulator.start()
            stack.push_async_callback(emulator.stop)
            env = (
                worker_env(settings, tmp_path / f"cache-{worker_id}")
                | {
                    # What a GPU of a g6e (the emulator's type) has, so nothing is clamped.
                    "FRAMEFLEET_WORKER_CPU_FAMILY": "l40s",
                    "FRAMEFLEET_WORKER_CPU_VRAM_GIB": "48",
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
                sys.executable,
                "-m",
                "framefleet.worker_cli",
                "serve",
                env=env,
                stdout=log,
                stderr=log,
            )
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
