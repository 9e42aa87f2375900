"""Workers without GPUs or brokers: a runner that finishes at once, no NVML, a link that keeps
what it would publish, and a worker's parts made of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

from kernel.clock import Clock
from kernel.job_spec import JobSpec
from kernel.mqtt_link import MessageHandler
from kernel.render_stage import RenderStage
from worker_ami.agent.object_store import S3ObjectStore
from worker_ami.agent.parts import WorkerParts
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.runner import JobRunner
from worker_ami.agent.settings import WorkerSettings
from worker_ami.agent.telemetry import NvmlUnavailable
from worker_ami.agent.thread_render import ThreadRenders


class InstantRunner(JobRunner):
    """Renders nothing: every job finishes at once, so what runs is the service's bookkeeping."""

    def __init__(self) -> None:  # no model, store or checkpoints: run() needs none
        self._checkpoint_request = asyncio.Event()
        self._prepared = None
        self._warm_stage = None
        self._renders = ThreadRenders("cpu")
        self.on_step = None
        self.on_checkpoint = None

    async def prepare(
        self, spec: JobSpec, resume_from: str | None = None, stage: RenderStage | None = None
    ) -> tuple[str | None, str | None]:
        """Preflight's model load and one-step smoke run: nothing to load, nothing to run."""
        return None, None

    async def release(self, keep_warm: bool = True) -> None:
        """No render session to end."""

    async def warm_up(self) -> None:
        """No render processes to start."""

    async def close(self) -> None:
        """No render processes to end."""

    async def run(
        self,
        spec: JobSpec,
        attempt: int,
        resume_from: str | None = None,
        mtbi_seconds: float | None = None,
        expected_step_seconds: float | None = None,
        stage: RenderStage | None = None,
    ) -> JobReport:
        return JobReport(
            job_id=spec.job_id,
            attempt=attempt,
            status=RunStatus.SUCCEEDED,
            steps_done=spec.steps,
            total_steps=spec.steps,
            output_video=f"{spec.output}{spec.job_id}.mp4",
        )


class NoNvml:
    """A host without an NVIDIA driver (CPU slots)."""

    def read(self) -> NvmlUnavailable:
        return NvmlUnavailable("no driver in this test")


class KeptPayloads:
    """The worker's link without a broker: what it publishes is kept."""

    def __init__(self) -> None:
        self.connected = asyncio.Event()
        self.payloads: list[str] = []
        self.sent = asyncio.Event()

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        self.payloads.append(payload)
        self.sent.set()

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


def without_broker() -> tuple[KeptPayloads, list[MessageHandler], ConnectKept]:
    """A worker service's link that keeps what it publishes, and the command handlers it was
    given (call one to deliver a command)."""
    link = KeptPayloads()
    handlers: list[MessageHandler] = []

    def connect(on_command: MessageHandler, on_connect: object, will: object) -> KeptPayloads:
        handlers.append(on_command)
        return link

    return link, handlers, connect


ConnectKept = Callable[[MessageHandler, object, object], KeptPayloads]


class ReachableBucket:
    """A checkpoint bucket that answers, and holds nothing."""

    async def list_keys(self, bucket: str, prefix: str) -> Sequence[str]:
        return []


def instant_parts(
    cache_dir: Path, clock: Clock, new_runner: Callable[[], JobRunner] = InstantRunner
) -> WorkerParts:
    """A one-slot CPU worker without IMDS whose runners are `new_runner`'s."""
    settings = WorkerSettings(
        imds_enabled=False,
        cache_dir=cache_dir,
        cpu_slots=1,
        allow_cpu=True,
        min_free_disk_gib=0,
        checkpoint_bucket="checkpoints",
    )
    return WorkerParts(
        settings,
        new_runner(),
        cast(S3ObjectStore, ReachableBucket()),
        None,
        None,
        clock,
        lambda _device, _gpu: new_runner(),
        NoNvml(),
    )
