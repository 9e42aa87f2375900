"""The worker agent's parts, as its composition root (framefleet.worker_process) builds them:
settings, a runner per GPU, the object store, the instance's identity and IMDS client, and the
clock; and what a one-shot job run needs of them (preflight, the IMDS watcher alongside)."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kernel.clock import Clock
from kernel.job_spec import JobSpec
from kernel.render_stage import RenderStage
from kernel.worker_protocol import GpuInfo
from worker_ami.agent.errors import PreflightFailed
from worker_ami.agent.imds import ImdsClient, InterruptionWatcher, NoticeKind, SpotNotice
from worker_ami.agent.imds_emulator import InstanceIdentity
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.preflight import GIB, PreflightFacts, preflight_problems
from worker_ami.agent.report import JobReport
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import GpuReadings


@dataclass
class WorkerParts:
    settings: WorkerSettings
    runner: JobRunner
    store: S3ObjectStore
    identity: InstanceIdentity | None
    imds: ImdsClient | None
    clock: Clock
    # One per slot: its device ("cuda:N", "cuda:MIG-<uuid>" or "cpu") and what it offers.
    new_runner: Callable[[str, GpuInfo], JobRunner]
    gpu_readings: GpuReadings  # NVML (a fake in tests)
    # A job across several of them (`gpu.count`): their devices and family. None: this
    # worker runs no such job (renders in-thread cannot span).
    new_spanned_runner: Callable[[Sequence[str], str], JobRunner] | None = None

    async def preflight(
        self,
        spec: JobSpec,
        runner: JobRunner | None = None,
        resume_from: str | None = None,
        stage: RenderStage | None = None,
    ) -> None:
        """Refuse the job (PreflightFailed with every reason) unless this worker can run it
        (on `runner`'s device: the default one unless given). The render session it opens
        for the smoke step is the one the run goes on with."""
        model_error, smoke_error = await (runner or self.runner).prepare(spec, resume_from, stage)
        disk = shutil.disk_usage(self.settings.cache_dir)
        facts = PreflightFacts(
            gpus=self.gpu_readings.read(),
            allow_cpu=self.settings.allow_cpu,
            free_disk_bytes=disk.free,
            min_free_disk_bytes=int(self.settings.min_free_disk_gib * GIB),
            model_error=model_error,
            smoke_error=smoke_error,
        )
        problems = preflight_problems(spec, facts, stage)
        if problems:
            await (runner or self.runner).release(keep_warm=False)
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
