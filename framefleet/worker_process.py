"""Composition root of the worker process: builds the agent's parts from settings (the
object store, IMDS, the model cache, checkpoints, a runner per GPU)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import torch

from framefleet.local_ports import free_port
from kernel.clock import Clock, SystemClock
from kernel.errors import ConfigurationError
from kernel.market import family_of_gpu
from kernel.stall import StallRule
from kernel.worker_protocol import GpuInfo
from worker_ami.agent.checkpoint import CheckpointStore
from worker_ami.agent.errors import ImdsError
from worker_ami.agent.gpus import MIG_DEVICE
from worker_ami.agent.imds import ImdsClient
from worker_ami.agent.imds_emulator import InstanceIdentity
from worker_ami.agent.job_cgroup import delegated_root
from worker_ami.agent.model_cache import LiveRegistry, ModelCache
from worker_ami.agent.object_store import S3ObjectStore, s3_client
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.preflight import GIB
from worker_ami.agent.render_limits import host_memory_bytes, limits_for
from worker_ami.agent.render_process import ChildRenders
from worker_ami.agent.render_session import RenderFactory
from worker_ami.agent.runner import JobRunner, RunnerSettings
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.spanned_render import SpannedRenders
from worker_ami.agent.telemetry import Nvml


def test_hooks(path: Path | None) -> dict[str, dict[str, Any]]:
    """The render fault hooks of the isolation tests (`render_test_hooks`), or none."""
    if path is None:
        return {}
    hooks = json.loads(path.read_text())
    if not isinstance(hooks, dict):
        raise ConfigurationError(f"{path}: render test hooks must be a JSON object")
    return hooks


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
    if settings.render_compile:
        # The render processes inherit it (KEPT_ENVIRONMENT): compiled kernels outlive them.
        cache = str(settings.compile_cache_dir)
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", cache)
        os.environ.setdefault("TRITON_CACHE_DIR", f"{cache}/triton")
    async with s3_client(settings) as s3, aiohttp.ClientSession() as http:
        store = S3ObjectStore(s3)
        registry = LiveRegistry(settings.model_registry, store, settings.model_registry_uri)
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

        gpus = Nvml().read()
        slots = (
            len(gpus) * settings.jobs_per_gpu
            if isinstance(gpus, list) and gpus
            else settings.cpu_slots
        )
        limits = limits_for(
            settings.job_memory_gib,
            settings.job_threads,
            settings.job_gpu_memory_fraction,
            slots,
            host_memory_bytes(),
            os.cpu_count() or 1,
        )
        hooks = test_hooks(settings.render_test_hooks)
        cgroups = delegated_root() if settings.render_isolation == "process" else None
        scratch = settings.scratch_dir or Path(tempfile.gettempdir()) / "framefleet-jobs"

        # One render factory per slot, shared by the runners that slot has in turn: the model
        # a job left warm on a GPU is there for the next job, whichever runner takes it. A
        # slot that shares its GPU caps its render processes at its part of the GPU's memory.
        factories: dict[int, RenderFactory] = {}

        def renders_on(on_device: str, slot: int = 0, part: float = 1.0) -> RenderFactory:
            if slot in factories:
                return factories[slot]
            if settings.render_isolation == "thread":
                # Here, not at the top: it imports diffusers into the agent's own process.
                from worker_ami.agent.thread_render import ThreadRenders

                factory: RenderFactory = ThreadRenders(on_device)
            else:
                spare = settings.render_spare
                if spare is None:
                    spare = on_device.startswith("cuda")
                warm_start = settings.render_warm_start
                if warm_start is None:
                    warm_start = spare
                factory = ChildRenders(
                    on_device,
                    replace(limits, gpu_memory_fraction=(limits.gpu_memory_fraction or 1.0) * part),
                    scratch,
                    hooks,
                    cgroups,
                    spare=spare,
                    reuse_jobs=settings.render_reuse_jobs,
                    warm_start=warm_start,
                )
            factories[slot] = factory
            return factory

        def settings_on(on_device: str, family: str) -> RunnerSettings:
            return replace(
                RunnerSettings(),
                device=on_device,
                gpu_family=family,
                compiled=settings.render_compile and on_device.startswith("cuda"),
                mean_time_between_interruptions_s=settings.mtbi_seconds(lifecycle),
                initial_checkpoint_write_s=settings.initial_checkpoint_write_s,
                # The ceiling is the autoscaler's spot deadline rule's; elsewhere Young/Daly.
                max_checkpoint_interval_s=settings.max_checkpoint_interval_s
                if lifecycle == "spot"
                else math.inf,
                stall=StallRule(
                    settings.stall_factor, settings.stall_floor_s, settings.stall_startup_s
                ),
                load_timeout_s=settings.load_timeout_s,
            )

        def new_runner(on_device: str, gpu: GpuInfo) -> JobRunner:
            runner_settings = settings_on(on_device, gpu.family)
            # A MIG slot is a device of its own; a shared GPU's slot has its part of the GPU.
            part = 1.0 if on_device.startswith(MIG_DEVICE) else gpu.compute_share
            renders = renders_on(on_device, gpu.index, part)
            return JobRunner(
                store, checkpoints, models, registry, clock, runner_settings, renders, False
            )

        def new_spanned_runner(devices: Sequence[str], family: str) -> JobRunner:
            """A job across `devices`: a render process on each (never in-thread)."""
            renders = SpannedRenders(
                devices, limits, scratch, cgroups, lambda: f"127.0.0.1:{free_port()}"
            )
            runner_settings = settings_on(devices[0], family)
            return JobRunner(
                store, checkpoints, models, registry, clock, runner_settings, renders, True
            )

        family = settings.cpu_family
        if device != "cpu" and isinstance(gpus, list) and gpus:
            family = family_of_gpu(gpus[0].name)
        default = JobRunner(
            store,
            checkpoints,
            models,
            registry,
            clock,
            settings_on(device, family),
            renders_on(device, slot=-1),  # the one-shot `run`'s, apart from the slots'
            False,
        )
        parts = WorkerParts(
            settings,
            default,
            store,
            identity,
            imds,
            clock,
            new_runner,
            Nvml(),
            new_spanned_runner if settings.render_isolation == "process" else None,
        )
        try:
            yield parts
        finally:
            await parts.runner.close()
            for factory in factories.values():
                await factory.close()
