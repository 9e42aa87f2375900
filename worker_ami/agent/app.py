"""Composition root of the worker agent: builds the object graph from settings."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import aioboto3
import aiohttp
import torch
from aiobotocore.config import AioConfig

from kernel.clock import Clock, SystemClock
from kernel.errors import ConfigurationError
from kernel.job_spec import JobSpec
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.errors import ImdsError, PreflightFailed, WorkerError
from worker_ami.agent.imds import ImdsClient, InterruptionWatcher, NoticeKind, SpotNotice
from worker_ami.agent.imds_emulator import InstanceIdentity
from worker_ami.agent.model_cache import ModelCache, ModelRegistry
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.preflight import GIB, PreflightFacts, preflight_problems
from worker_ami.agent.report import JobReport
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import read_gpus

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client

log = logging.getLogger(__name__)


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
async def s3_client(settings: WorkerSettings) -> AsyncIterator[S3Client]:
    session = aioboto3.Session(region_name=settings.region)
    config = AioConfig(retries={"mode": "standard", "max_attempts": 5}, max_pool_connections=32)
    async with session.client("s3", endpoint_url=settings.endpoint_url, config=config) as client:
        yield client


@dataclass
class WorkerParts:
    settings: WorkerSettings
    runner: JobRunner
    store: S3ObjectStore
    identity: InstanceIdentity | None
    imds: ImdsClient | None
    clock: Clock
    new_runner: Callable[[str], JobRunner]  # one per GPU (device "cuda:N" or "cpu")

    async def preflight(self, spec: JobSpec) -> None:
        """Refuse the job (PreflightFailed with every reason) unless this worker can run it."""
        model_error = smoke_error = None
        try:
            renderer, _ = await self.runner.load(spec.model)
        except WorkerError as error:
            model_error = str(error)
        else:
            smoke = spec.model_copy(update={"width": 16, "height": 16, "num_frames": 1, "steps": 1})
            try:
                state = await asyncio.to_thread(renderer.initial_state, smoke)
                prompt = await asyncio.to_thread(renderer.encode, smoke)
                await asyncio.to_thread(renderer.step, state, prompt, smoke.guidance)
            except (WorkerError, RuntimeError, ValueError) as error:
                smoke_error = str(error)
        disk = shutil.disk_usage(self.settings.cache_dir)
        facts = PreflightFacts(
            gpus=read_gpus(),
            allow_cpu=self.settings.allow_cpu,
            free_disk_bytes=disk.free,
            min_free_disk_bytes=int(self.settings.min_free_disk_gib * GIB),
            model_error=model_error,
            smoke_error=smoke_error,
        )
        problems = preflight_problems(spec, facts)
        if problems:
            raise PreflightFailed(problems)

    async def run_job(
        self, spec: JobSpec, attempt: int, resume_from: str | None = None
    ) -> JobReport:
        """Run with the IMDS watcher alongside: an instance-action checkpoints and stops."""
        notices: list[SpotNotice] = []

        async def on_notice(notice: SpotNotice) -> None:
            notices.append(notice)
            if notice.kind is NoticeKind.INSTANCE_ACTION:
                self.runner.request_checkpoint(f"spot {notice.action} at {notice.time}")

        stop = asyncio.Event()
        watcher_task = None
        if self.imds is not None:
            watcher = InterruptionWatcher(
                self.imds, self.clock, on_notice, self.settings.imds_poll_seconds
            )
            watcher_task = asyncio.create_task(watcher.run(stop))
        try:
            report = await self.runner.run(spec, attempt, resume_from)
        finally:
            stop.set()
            if watcher_task is not None:
                await watcher_task
        report.notices = [
            f"{n.kind.value} {n.action or ''} at {n.time.isoformat()}" for n in notices
        ]
        return report


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
