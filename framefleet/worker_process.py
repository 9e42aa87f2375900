"""Composition root of the worker process: builds the agent's parts from settings (the
object store, IMDS, the model cache, checkpoints, a runner per GPU)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import aiohttp
import torch

from kernel.clock import Clock, SystemClock
from kernel.errors import ConfigurationError
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.errors import ImdsError
from worker_ami.agent.imds import ImdsClient
from worker_ami.agent.imds_emulator import InstanceIdentity
from worker_ami.agent.model_cache import ModelCache, ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.preflight import GIB
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings


def resolve_device(settings: WorkerSettings) -> str:
    if settings.device != "auto":
        return settings.device
    if torch.cuda.is_available():
        return "cuda"
    if not settings.allow_cpu:
        raise ConfigurationError(
            "no CUDA device; set FRAMEFLEET_WORKER_ALLOW_CPU=true for CPU mode"
        )
    return "cpu"


@asynccontextmanager
async def worker_parts(
    settings: WorkerSettings, clock: Clock | None = None
) -> AsyncIterator[WorkerParts]:
    clock = clock or SystemClock()
    bucket = settings.require_checkpoint_bucket()
    device = resolve_device(settings)
    registry = ModelRegistry.from_file(settings.model_registry)
    async with s3_client(settings) as s3, aiohttp.ClientSession() as http:
        store = S3ObjectStore(s3)
        identity: InstanceIdentity | None = None
        imds: ImdsClient | None = None
        if settings.imds_enabled:
            imds = ImdsClient(http, settings.imds_url, clock)
            try:
                identity = await imds.identity()
            except ImdsError as error:
                raise ConfigurationError(f"IMDS at {settings.imds_url}: {error}") from None
        lifecycle = identity.lifecycle if identity else "on-demand"
        checkpoints = CheckpointStore(
            store, bucket, settings.checkpoint_root, settings.checkpoints_kept
        )
        models = ModelCache(store, settings.cache_dir, int(settings.cache_budget_gib * GIB), clock)

        def new_runner(on_device: str) -> JobRunner:
            runner_settings = replace(
                RunnerSettings(),
                device=on_device,
                mean_time_between_interruptions_s=settings.mtbi_seconds(lifecycle),
                initial_checkpoint_write_s=settings.initial_checkpoint_write_s,
                max_checkpoint_interval_s=settings.max_checkpoint_interval_s,
            )
            return JobRunner(store, checkpoints, models, registry, clock, runner_settings)

        yield WorkerParts(settings, new_runner(device), store, identity, imds, clock, new_runner)
