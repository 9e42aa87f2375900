"""Runs one job on this worker: resume point, the step loop, checkpoints, output, cleanup.

At every step boundary (before the first step and after the last one too) the runner looks for
a pending checkpoint request (a spot notice): if there is one it writes a checkpoint and stops
with status `preempted`. Otherwise it writes periodic checkpoints at the Young/Daly interval.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernel.clock import Clock
from kernel.job_spec import JobSpec
from worker_ami.agent.checkpoint import CheckpointIdentity, CheckpointStore
from worker_ami.agent.checkpoint_policy import (
    CheckpointClock,
    checkpoint_interval,
    periodic_checkpoint_due,
    smoothed,
)
from worker_ami.agent.denoise_state import DenoiseState
from worker_ami.agent.errors import JobFault, WorkerError
from worker_ami.agent.model_cache import CachedModel, ModelCache, ModelRegistry
from worker_ami.agent.object_store import ObjectStore
from worker_ami.agent.renderer import Renderer, load_pipeline
from worker_ami.agent.report import FailureKind, JobReport, RunStatus
from worker_ami.agent.video import ENCODER_SETTINGS, encode_mp4

log = logging.getLogger(__name__)

StepObserver = Callable[[DenoiseState], None]
CheckpointObserver = Callable[[str, int, float], None]  # key, step, write seconds


@dataclass(frozen=True)
class RunnerSettings:
    device: str = "cpu"
    # Mean time between interruptions of this instance's pool; infinity on on-demand.
    mean_time_between_interruptions_s: float = 6 * 3600.0
    # The first guess of delta before a checkpoint write has been measured.
    initial_checkpoint_write_s: float = 2.0
    # On spot, at most this long between checkpoints (the autoscaler's
    # `checkpoint_interval_seconds` assumes it).
    max_checkpoint_interval_s: float = 600.0


def checkpoint_identity(spec: JobSpec, model: CachedModel) -> CheckpointIdentity:
    return CheckpointIdentity(
        job_id=spec.job_id,
        job_spec_sha256=spec.fingerprint(),
        model=spec.model,
        model_revision=model.revision,
        pipeline_config_sha256=model.manifest.config_sha256(),
        total_steps=spec.steps,
    )


class JobRunner:
    def __init__(
        self,
        objects: ObjectStore,
        checkpoints: CheckpointStore,
        models: ModelCache,
        registry: ModelRegistry,
        clock: Clock,
        settings: RunnerSettings,
    ) -> None:
        self._objects = objects
        self._checkpoints = checkpoints
        self._models = models
        self._registry = registry
        self._clock = clock
        self._settings = settings
        self._renderers: dict[Path, Renderer] = {}
        self._checkpoint_request = asyncio.Event()
        self._write_estimate = settings.initial_checkpoint_write_s
        # The current job's pool's mean time between interruptions, as the control plane
        # measured it (None: this worker's own setting).
        self._mtbi_s: float | None = None
        self.on_step: StepObserver | None = None
        self.on_checkpoint: CheckpointObserver | None = None

    @property
    def checkpoint_requested(self) -> bool:
        return self._checkpoint_request.is_set()

    def request_checkpoint(self, reason: str) -> None:
        """Checkpoint at the next step boundary and stop (a spot notice or a drain)."""
        log.info("checkpoint requested: %s", reason)
        self._checkpoint_request.set()

    async def load(self, model_name: str) -> tuple[Renderer, CachedModel]:
        model = await self._models.ensure(model_name, self._registry.resolve(model_name))
        renderer = self._renderers.get(model.path)
        if renderer is None:
            pipe = await asyncio.to_thread(load_pipeline, model.path, self._settings.device)
            renderer = Renderer(pipe, self._settings.device)
            self._renderers[model.path] = renderer
        return renderer, model

    async def run(
        self,
        spec: JobSpec,
        attempt: int,
        resume_from: str | None = None,
        mtbi_seconds: float | None = None,
    ) -> JobReport:
        """`mtbi_seconds`: the pool's measured mean time between interruptions, which sets
        the Young/Daly checkpoint interval of this run (else the worker's setting)."""
        self._mtbi_s = mtbi_seconds
        report = JobReport(
            job_id=spec.job_id, attempt=attempt, status=RunStatus.FAILED, steps_done=0,
            total_steps=spec.steps,
        )  # fmt: skip
        try:
            await self._run(spec, attempt, resume_from, report)
        except JobFault as error:
            report.failure_kind, report.error = FailureKind.JOB, str(error)
        except torch.cuda.OutOfMemoryError as error:
            report.failure_kind, report.error = FailureKind.JOB, f"out of GPU memory: {error}"
        except WorkerError as error:
            report.failure_kind, report.error = FailureKind.WORKER, str(error)
        if report.error:
            log.error("job %s attempt %d failed: %s", spec.job_id, attempt, report.error)
        return report

    async def _run(
        self, spec: JobSpec, attempt: int, resume_from: str | None, report: JobReport
    ) -> None:
        started = self._clock.monotonic()
        renderer, model = await self.load(spec.model)
        identity = checkpoint_identity(spec, model)
        prompt = await asyncio.to_thread(renderer.encode, spec)
        resume = await self._checkpoints.resume_point(identity, preferred=resume_from)
        report.resume_notes = list(resume.notes)
        report.resumed_from = resume.manifest_key
        if resume.state is not None:
            await asyncio.to_thread(renderer.prepare_resume, resume.state)
            state = resume.state
        else:
            state = await asyncio.to_thread(renderer.initial_state, spec)
        report.timings.model_load_s = self._clock.monotonic() - started
        log.info("job %s: denoising from step %d of %d", spec.job_id, state.step, spec.steps)

        step_seconds = 0.0
        since_checkpoint = self._clock.monotonic()
        last_checkpoint: tuple[int, str] | None = None
        denoise_started = self._clock.monotonic()
        while True:
            report.steps_done = state.step
            if self._checkpoint_request.is_set():
                if last_checkpoint is not None and last_checkpoint[0] == state.step:
                    report.checkpoint = last_checkpoint[1]  # this very state is already durable
                else:
                    report.checkpoint = await self._write_checkpoint(
                        state, identity, attempt, report
                    )
                report.status = RunStatus.PREEMPTED
                report.timings.denoise_s = self._clock.monotonic() - denoise_started
                return
            if state.done:
                break
            step_started = self._clock.monotonic()
            state = await asyncio.to_thread(renderer.step, state, prompt, spec.guidance)
            measured = self._clock.monotonic() - step_started
            step_seconds = measured if step_seconds == 0 else smoothed(step_seconds, measured)
            if self.on_step is not None:
                self.on_step(state)
            view = CheckpointClock(
                interval=self._interval(),
                seconds_since_last=self._clock.monotonic() - since_checkpoint,
                remaining_seconds=(state.total_steps - state.step) * step_seconds,
                write_seconds=self._write_estimate,
            )
            if not state.done and periodic_checkpoint_due(view):
                key = await self._write_checkpoint(state, identity, attempt, report)
                last_checkpoint = (state.step, key)
                since_checkpoint = self._clock.monotonic()
        report.timings.denoise_s = self._clock.monotonic() - denoise_started
        await self._publish(spec, attempt, renderer, state, model, report)

    def _interval(self) -> float:
        return checkpoint_interval(
            self._write_estimate,
            self._mtbi_s or self._settings.mean_time_between_interruptions_s,
            self._settings.max_checkpoint_interval_s,
        )

    async def _write_checkpoint(
        self, state: DenoiseState, identity: CheckpointIdentity, attempt: int, report: JobReport
    ) -> str:
        started = self._clock.monotonic()
        key = await self._checkpoints.write(state, identity, attempt, self._clock.now())
        elapsed = self._clock.monotonic() - started
        self._write_estimate = smoothed(self._write_estimate, elapsed)
        report.timings.checkpoint_writes_s.append(elapsed)
        report.checkpoints_written.append(key)
        if self.on_checkpoint is not None:
            self.on_checkpoint(key, state.step, elapsed)
        log.info("checkpoint durable at step %d: %s (%.3fs)", state.step, key, elapsed)
        return key

    async def _publish(
        self,
        spec: JobSpec,
        attempt: int,
        renderer: Renderer,
        state: DenoiseState,
        model: CachedModel,
        report: JobReport,
    ) -> None:
        started = self._clock.monotonic()
        frames = await asyncio.to_thread(renderer.decode, state)
        video = await asyncio.to_thread(encode_mp4, frames, spec.fps)
        report.timings.decode_encode_s = self._clock.monotonic() - started
        digest = hashlib.sha256(video).hexdigest()
        video_key = f"{spec.output_prefix}{spec.job_id}.mp4"
        metadata_key = f"{spec.output_prefix}{spec.job_id}.json"
        metadata = {
            "schema": "framefleet.output/v1",
            "job_id": spec.job_id,
            "attempt": attempt,
            "model": spec.model,
            "model_revision": model.revision,
            "video_sha256": digest,
            "frames": int(frames.shape[0]),
            "width": spec.width,
            "height": spec.height,
            "fps": spec.fps,
            "steps": spec.steps,
            "seed": spec.seed,
            "encoder": ENCODER_SETTINGS,
            "resumed_from": report.resumed_from,
            "tags": spec.tags.model_dump(exclude_none=True),
            "finished_at": self._clock.now().isoformat(),
        }
        started = self._clock.monotonic()
        # Conditional puts: a duplicate attempt can never clobber a committed output.
        committed = await self._objects.put_if_absent(
            spec.output_bucket, video_key, video, "video/mp4"
        )
        if committed:
            await self._objects.put_if_absent(
                spec.output_bucket,
                metadata_key,
                json.dumps(metadata, indent=2).encode(),
                "application/json",
            )
        report.timings.upload_s = self._clock.monotonic() - started
        report.output_already_committed = not committed
        report.output_video = f"s3://{spec.output_bucket}/{video_key}"
        report.output_metadata = f"s3://{spec.output_bucket}/{metadata_key}"
        report.video_sha256 = digest
        report.steps_done = state.step
        report.status = RunStatus.SUCCEEDED
        await self._checkpoints.delete_all(spec.job_id)
