"""The demo's embedded defaults and its processes.

Embedded (in the demo's own process): a moto server (SQS, S3, SES, EventBridge, EC2) on a free
port of 127.0.0.1, an amqtt MQTT 3.1.1 broker, the AWS resources a deployment's Terraform would
create (queues, buckets, the EventBridge rule, a worker image), the tiny model published to S3
through the model registry, and the settings files. Then the real processes, each its own OS
process with its own settings, as a deployment runs them: `framefleet serve`, `framefleet
autoscaler run`, `framefleet fleet local` and the producer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import boto3
from amqtt.broker import Broker
from moto.server import ThreadedMotoServer

from framefleet.demo_producer import DEMO_MODEL, OUTPUT_BUCKET
from framefleet.local_ports import free_port
from orchestrator.interruptions.events import REBALANCE, SPOT_WARNING, STATE_CHANGE
from worker_ami.agent.model_cache import publish_model
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.tiny_model import build_tiny_wan

REGION = "us-east-1"
INSTANCE_TYPE = "p3.2xlarge"  # the trace's type: one V100
ZONES = ("us-east-1a", "us-east-1c", "us-east-1d", "us-east-1f")
MODELS_BUCKET = "framefleet-demo-models"
CHECKPOINT_BUCKET = "framefleet-demo-checkpoints"
FLEET_ID = "demo"
PACE_FILE = "replay-pace.json"  # the demo holds the replayed market here (demo_pace.py)
# A slice of the V100 trace shipped with the package, so the demo runs on any clone
# (framefleet/data/v100-us-east-1/README.md); `--trace` takes the whole one from ../shared.
DEFAULT_TRACE = Path(__file__).resolve().parent / "data" / "v100-us-east-1"
EC2_EVENTS = [SPOT_WARNING, REBALANCE, STATE_CHANGE]


@dataclass(frozen=True)
class DemoAws:
    endpoint: str
    jobs_url: str
    dead_letter_url: str
    interruptions_url: str
    image_id: str
    subnets: dict[str, str]  # zone -> its default subnet


def create_aws(endpoint: str) -> DemoAws:
    """What the Terraform module creates in an account, here in moto."""
    sqs = boto3.client("sqs", region_name=REGION, endpoint_url=endpoint)
    dead_url = sqs.create_queue(QueueName="framefleet-jobs-dlq")["QueueUrl"]
    jobs_url = sqs.create_queue(QueueName="framefleet-jobs")["QueueUrl"]
    interruptions_url = sqs.create_queue(QueueName="framefleet-ec2-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=interruptions_url, AttributeNames=["QueueArn"])
    events = boto3.client("events", region_name=REGION, endpoint_url=endpoint)
    pattern = {"source": ["aws.ec2"], "detail-type": EC2_EVENTS}
    events.put_rule(Name="framefleet-ec2-events", EventPattern=json.dumps(pattern))
    events.put_targets(
        Rule="framefleet-ec2-events",
        Targets=[{"Id": "interruptions", "Arn": arn["Attributes"]["QueueArn"]}],
    )
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=endpoint)
    for bucket in (MODELS_BUCKET, CHECKPOINT_BUCKET, OUTPUT_BUCKET):
        s3.create_bucket(Bucket=bucket)
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
    image_id = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    found = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])
    subnets = {s["AvailabilityZone"]: s["SubnetId"] for s in found["Subnets"]}
    return DemoAws(endpoint, jobs_url, dead_url, interruptions_url, image_id, subnets)


async def publish_tiny_model(endpoint: str, folder: Path) -> Path:
    """Build the tiny random-weight pipeline, publish it to S3 and write the model registry
    the workers resolve `wan/tiny-demo` through."""
    uri = f"s3://{MODELS_BUCKET}/tiny-demo/"
    registry = folder / "models.json"
    registry.write_text(json.dumps({"models": {DEMO_MODEL: {"uri": uri, "revision": "r1"}}}))
    model_dir = await asyncio.to_thread(build_tiny_wan, folder / "tiny-demo-model")
    async with s3_client(WorkerSettings(endpoint_url=endpoint)) as client:
        await publish_model(S3ObjectStore(client), model_dir, uri, DEMO_MODEL, "r1")
    return registry


@dataclass(frozen=True)
class DemoOptions:
    jobs: int = 8
    speed: float = 240.0
    trace: Path = DEFAULT_TRACE
    trace_start: datetime | None = None
    seed: int = 7
    produce_over_seconds: float = 40.0
    min_notice_seconds: float = 4.0
    silent_every: int = 3
    api_port: int = 0  # the console's; 0: a free one


def plane_settings(
    aws: DemoAws,
    mqtt_port: int,
    root: Path,
    options: DemoOptions,
    epoch: datetime,
    trace_start: datetime,
    trace_end: datetime,
    registry: Path | None = None,
) -> dict[str, Any]:
    """`framefleet serve`, the autoscaler and the fleet runner read this file."""
    return {
        "region": REGION,
        **({"model_registry": str(registry.resolve())} if registry else {}),
        "endpoint_url": aws.endpoint,
        "jobs_queue_url": aws.jobs_url,
        "dead_letter_queue_url": aws.dead_letter_url,
        "interruptions_queue_url": aws.interruptions_url,
        "database_url": f"sqlite:///{(root / 'framefleet.db').resolve()}",
        "intake": {"wait_seconds": 1, "concurrency": 2},
        "mqtt": {"host": "127.0.0.1", "port": mqtt_port},
        "api": {"port": options.api_port, "event_poll_seconds": 0.5},
        "control": {
            "tick_seconds": 0.5,
            "suspect_after_seconds": 5.0,
            "lost_after_seconds": 12.0,
        },
        "autoscaler": {
            "fleet_id": FLEET_ID,
            "launch_template": "framefleet-demo-worker",
            "image_id": aws.image_id,
            "zones": list(ZONES),
            "subnets": {zone: aws.subnets[zone] for zone in ZONES if zone in aws.subnets},
            "candidate_types": [INSTANCE_TYPE],
            "interval_seconds": 2.0,
            "idle_timeout_seconds": 20.0,
            "boot_seconds": 15.0,
            "model_load_seconds": 5.0,
        },
        "replay": {
            "trace": str(options.trace.resolve()),
            "start": trace_start,
            "epoch": epoch,
            "speed": options.speed,
            "pace_file": str((root / PACE_FILE).resolve()),
            "end": trace_end,
        },
    }


def worker_settings(aws: DemoAws, mqtt_port: int, registry: Path) -> dict[str, Any]:
    """Every `framefleet-worker serve` reads this; the fleet runner adds each instance's IMDS
    address, cache folder and GPU slots."""
    return {
        "region": REGION,
        "endpoint_url": aws.endpoint,
        "checkpoint_bucket": CHECKPOINT_BUCKET,
        "model_registry": str(registry.resolve()),
        "device": "cpu",
        "allow_cpu": True,
        "min_free_disk_gib": 0.0,
        "mqtt_host": "127.0.0.1",
        "mqtt_port": mqtt_port,
        "imds_poll_seconds": 0.2,
        "heartbeat_seconds": 1.0,
        # Each instance's render process starts while it boots (the market waits for booting
        # instances), not when its first job came: a spot notice then finds that job rendering.
        "render_warm_start": True,
    }


@asynccontextmanager
async def embedded_services() -> AsyncIterator[tuple[str, int]]:
    """moto and amqtt, for as long as the demo runs: (AWS endpoint, MQTT port)."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    mqtt_port = free_port()
    broker = Broker(
        {
            "listeners": {"default": {"type": "tcp", "bind": f"127.0.0.1:{mqtt_port}"}},
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
            },
        }
    )
    await broker.start()
    try:
        yield f"http://{host}:{port}", mqtt_port
    finally:
        await broker.shutdown()
        server.stop()


@dataclass
class Processes:
    """The demo's child processes, each logging to its own file under .demo/logs."""

    logs: Path
    running: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    _files: list[IO[bytes]] = field(default_factory=list)

    async def start(self, name: str, *argv: str) -> asyncio.subprocess.Process:
        self.logs.mkdir(parents=True, exist_ok=True)
        log = (self.logs / f"{name}.log").open("ab")
        self._files.append(log)
        process = await asyncio.create_subprocess_exec(
            sys.executable, *argv, stdout=log, stderr=log, env=dict(os.environ)
        )
        self.running[name] = process
        return process

    def failed(self) -> list[str]:
        """Long-running processes that have exited with an error."""
        return [name for name, p in self.running.items() if p.returncode not in (None, 0)]

    async def stop_all(self, grace_seconds: float = 20.0) -> None:
        # The fleet first (its workers drain), then the autoscaler, then the control plane.
        for name in reversed(list(self.running)):
            process = self.running[name]
            if process.returncode is None:
                process.terminate()
                try:
                    async with asyncio.timeout(grace_seconds):
                        await process.wait()
                except TimeoutError:
                    process.kill()
                    await process.wait()
        for log in self._files:
            log.close()


@asynccontextmanager
async def demo_processes(root: Path) -> AsyncIterator[Processes]:
    processes = Processes(root / "logs")
    try:
        yield processes
    finally:
        await processes.stop_all()
