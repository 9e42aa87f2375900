"""Worker fixtures: a tiny random-weight Wan pipeline published to moto's S3, a model cache,
checkpoint store and runner built the way the agent's composition root builds them."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from kernel.clock import SystemClock
from tests.support.local_services import Queues
from tests.support.mosquitto import LocalMosquitto
from tests.support.renders import MODEL, REVISION, Buckets, make_runner, published
from worker_ami.agent.imds_emulator import ImdsEmulator, InstanceIdentity
from worker_ami.agent.model_cache import ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.tiny_model import build_tiny_wan

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

    from tests.worker_ami.system import LocalSystem


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_wan(tmp_path_factory.mktemp("models") / "wan-tiny")


@pytest.fixture(scope="session")
def four_head_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with four attention heads, so that they divide among 2 or 4 processes
    (a render across GPUs splits the heads)."""
    return build_tiny_wan(tmp_path_factory.mktemp("models") / "wan-tiny-4", heads=4, head_dim=8)


@pytest.fixture
def s3(moto_endpoint: str) -> S3Client:
    return boto3.client("s3", region_name="us-east-1", endpoint_url=moto_endpoint)


@pytest.fixture
def buckets(s3: S3Client) -> Buckets:
    suffix = uuid.uuid4().hex[:10]
    made = Buckets(f"models-{suffix}", f"ckpt-{suffix}", f"out-{suffix}")
    for name in (made.models, made.checkpoints, made.outputs):
        s3.create_bucket(Bucket=name)
    return made


@pytest.fixture
def worker_settings(moto_endpoint: str, buckets: Buckets, tmp_path: Path) -> WorkerSettings:
    registry = tmp_path / "models.json"
    registry.write_text(
        json.dumps(
            {"models": {MODEL: {"uri": f"s3://{buckets.models}/wan-tiny/", "revision": REVISION}}}
        )
    )
    return WorkerSettings(
        endpoint_url=moto_endpoint,
        checkpoint_bucket=buckets.checkpoints,
        model_registry=registry,
        cache_dir=tmp_path / "cache",
        device="cpu",
        allow_cpu=True,
        imds_enabled=False,
        min_free_disk_gib=0,
    )


@pytest.fixture
async def object_store(worker_settings: WorkerSettings) -> AsyncIterator[S3ObjectStore]:
    async with s3_client(worker_settings) as client:
        yield S3ObjectStore(client)


@pytest.fixture
async def published_model(
    object_store: S3ObjectStore, tiny_model_dir: Path, buckets: Buckets
) -> ModelRegistry:
    return await published(object_store, tiny_model_dir, buckets, "wan-tiny")


@pytest.fixture
def runner(
    object_store: S3ObjectStore, published_model: ModelRegistry, worker_settings: WorkerSettings
) -> JobRunner:
    return make_runner(object_store, published_model, worker_settings)


@pytest.fixture
async def imds() -> AsyncIterator[tuple[ImdsEmulator, str]]:
    emulator = ImdsEmulator(SystemClock(), InstanceIdentity(lifecycle="spot"))
    url = await emulator.start()
    yield emulator, url
    await emulator.stop()


@pytest.fixture
def system(
    published_model: ModelRegistry,
    worker_settings: WorkerSettings,
    buckets: Buckets,
    sqs: SQSClient,
    queues: Queues,
    moto_endpoint: str,
    broker: LocalMosquitto,
    tmp_path: Path,
) -> LocalSystem:
    from tests.worker_ami.system import LocalSystem

    return LocalSystem(worker_settings, buckets, sqs, queues, moto_endpoint, broker, tmp_path)
