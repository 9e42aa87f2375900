"""Runs one job on this worker: resume point, the step loop, checkpoints, output, cleanup.

At every step boundary (before the first step and after the last one too) the runner looks for
a pending checkpoint request (a spot notice): if there is one it writes a checkpoint and stops
with status `preempted`. Otherwise it writes periodic checkpoints at the Young/Daly interval.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from kernel.clock import Clock
from kernel.job_spec import JobSpec
from kernel.precision import Dtype
from kernel.render_stage import RenderStage
from kernel.stall import StallRule, expected_step
from kernel.worker_protocol import FailureKind
from worker_ami.agent.checkpoint import (
    CheckpointIdentity,
    CheckpointStore,
    ResumePoint,
    ResumeRule,
)
from worker_ami.agent.checkpoint_policy import (
    CheckpointClock,
    checkpoint_interval,
    periodic_checkpoint_due,
    smoothed,
)
from worker_ami.agent.errors import JobFault, WorkerError
from worker_ami.agent.input_fetch import InputFetcher
from worker_ami.agent.job_inputs import NO_INPUTS, JobInputs
from worker_ami.agent.model_cache import CachedModel, ModelCache, ModelLookup
from worker_ami.agent.object_store import ObjectStore
from worker_ami.agent.output import VideoOutput
from worker_ami.agent.recipe import RenderRecipe, recipe_for
from worker_ami.agent.render_session import RenderFactory, RenderSession, RenderStalled
from worker_ami.agent.report import JobReport, RunStatus
from worker_ami.agent.stage_input import stage_input_check

log = logging.getLogger(__name__)

StepObserver = Callable[[int], None]  # the steps done
CheckpointObserver = Callable[[str, int, float], None]  # key, step, write seconds


@dataclass(frozen=True)
class RunnerSettings:
    device: str = "cpu"
    # The family of this runner's GPU ("cpu" in CPU mode): with the device, it resolves the
    # registry's precision and goes into every checkpoint's recipe.
    gpu_family: str = "cpu"
    # The transformer's blocks compiled (the worker's `render_compile`, on a GPU only).
    compiled: bool = False
    # Mean time between interruptions of this instance's pool; infinity on on-demand.
    mean_time_between_interruptions_s: float = 6 * 3600.0
    # The first guess of delta before a checkpoint write has been measured.
    initial_checkpoint_write_s: float = 2.0
    # On spot, at most this long between checkpoints (`checkpoint_interval_seconds` assumes it).
    max_checkpoint_interval_s: float = 600.0
    # The watchdog: a step past this rule's bound stops the job (the render process killed).
    stall: StallRule = field(default_factory=StallRule)
    # What loading the model, a checkpoint's state or the video may take at most.
    load_timeout_s: float = 900.0


def checkpoint_identity(
    spec: JobSpec, model: CachedModel, inputs: JobInputs = NO_INPUTS
) -> CheckpointIdentity:
    return CheckpointIdentity(
        adapters=tuple(f"{a.sha256}@{a.weight!r}" for a in inputs.adapters),
        job_id=spec.job_id,
        job_spec_sha256=spec.fingerprint(),
        model=spec.model,
        model_revision=model.revision,
        pipeline_config_sha256=model.manifest.config_sha256(),
        total_steps=spec.steps,
    )


@dataclass
class _Prepared:
    """A job's render session, opened (and smoke-tested) by the preflight, used by its run."""

    job_id: str
    model: CachedModel
    identity: CheckpointIdentity
    recipe: RenderRecipe
    resume: ResumePoint
    session: RenderSession
    step: int
    loaded: bool  # the model was loaded for it (not already warm in the session)
    stage: RenderStage | None = None  # the stage of a split render it runs (None: whole)

    def describe(self) -> str:
        """How it runs, for the job's record."""
        warmth = "model loaded" if self.loaded else "model already warm"
        return "; ".join((f"{self.recipe.describe()}, {warmth}", *self.resume.notes))


class JobRunner:
    def __init__(
        self,
        objects: ObjectStore,
        checkpoints: CheckpointStore,
        models: ModelCache,
        registry: ModelLookup,
        clock: Clock,
        settings: RunnerSettings,
        renders: RenderFactory | None = None,
        owns_renders: bool = True,
    ) -> None:
        self._objects = objects
        self._checkpoints = checkpoints
        self._models = models
        self._registry = registry
        self._clock = clock
        self._settings = settings
        if renders is None:
            # Imported here: an agent rendering in child processes never loads diffusers.
            from worker_ami.agent.thread_render import ThreadRenders

            renders = ThreadRenders(settings.device)
        self._renders: RenderFactory = renders
        self._output = VideoOutput(objects, checkpoints, clock, settings.load_timeout_s)
        self._inputs = InputFetcher(objects, registry)
        self._owns_renders = owns_renders
        self._prepared: _Prepared | None = None
        self._warm_stage: RenderStage | None = None
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

    async def cached_model(self, name: str) -> CachedModel:
        """The model as this worker's cache holds it (fetched first if it must be)."""
        return await self._models.ensure(name, await self._registry.lookup(name))

    async def prepare(
        self, spec: JobSpec, resume_from: str | None = None, stage: RenderStage | None = None
    ) -> tuple[str | None, str | None]:
        """The preflight's part: the model in the cache, a render session open on this
        device (resumed from the newest checkpoint; for a `stage` of a split render, that
        stage's components only), one tiny smoke step in it. Returns
        (why the model does not load, why the smoke step failed), None for each that passed;
        the session is kept for `run` only when both passed. A JobFault (the job's own: an
        unknown model, a stage without its input) is raised: no machine would do better."""
        await self.release()
        limit = self._settings.load_timeout_s
        settings = self._settings
        try:
            entry = await self._registry.lookup(spec.model)
            recipe = recipe_for(entry.precision, settings.device, settings.gpu_family)
            recipe = recipe.model_copy(
                update={"compiled": settings.compiled, "model_family": entry.family}
            )
            model = await self._models.ensure(spec.model, entry)
            inputs = await self._inputs.fetch(spec)
            identity = checkpoint_identity(spec, model, inputs)
            rule = ResumeRule(recipe, exact=spec.exact)
            resume = await self._checkpoints.resume_point(identity, resume_from, rule)
            stage_input_check(stage, resume.state, resume.embeddings)
            session = await self._renders.start(spec.job_id)
        except JobFault:
            raise
        except WorkerError as error:
            return str(error), None
        try:
            opened = await session.open(
                model.path, recipe, spec, resume.state, limit, stage, resume.embeddings, inputs
            )
        except WorkerError as error:  # a JobFault too (an input the model cannot take)
            await session.close()
            if isinstance(error, JobFault):
                raise
            return str(error), None
        try:
            await session.smoke(limit)
        except WorkerError as error:
            await session.close()
            return None, str(error)
        self._prepared = _Prepared(
            spec.job_id, model, identity, recipe, resume, session, opened.step, opened.loaded, stage
        )
        return None, None

    @property
    def prepared(self) -> str | None:
        """How the job a preflight prepared will run (recipe, warm or loaded, resume notes)."""
        return self._prepared.describe() if self._prepared is not None else None

    @property
    def dtype(self) -> Dtype | None:
        """The dtype the prepared job computes in."""
        return self._prepared.recipe.dtypes.compute if self._prepared is not None else None

    @property
    def warm_model(self) -> str | None:
        """The model this runner's GPU holds loaded between jobs, if any."""
        return self._renders.warm_model

    @property
    def warm_stage(self) -> RenderStage | None:
        """The stage whose components alone that model holds (its last job's), if one."""
        return self._warm_stage

    async def warm_up(self) -> None:
        """Before the worker says hello (its render factory's warm start, if it has one)."""
        await self._renders.warm_up(self._settings.load_timeout_s)

    async def close(self) -> None:
        """This runner is done with (its GPU's next job gets a new one, or the agent stops);
        the render factory it was given stays open when shared (`owns_renders` False)."""
        await self.release()
        if self._owns_renders:
            await self._renders.close()

    async def release(self, keep_warm: bool = True) -> None:
        """Give back the render session a preflight opened (the job ended, or will not run
        here): kept warm for the next job of its model when healthy and `keep_warm` (not
        after a refused preflight: that machine is in doubt), else ended."""
        self._inputs.clear()
        if self._prepared is not None:
            prepared, self._prepared = self._prepared, None
            if keep_warm:
                await self._renders.give_back(prepared.session, prepared.model.name)
                self._warm_stage = prepared.stage
            else:
                await prepared.session.close()

    async def run(
        self,
        spec: JobSpec,
        attempt: int,
        resume_from: str | None = None,
        mtbi_seconds: float | None = None,
        expected_step_seconds: float | None = None,
        stage: RenderStage | None = None,
    ) -> JobReport:
        """`mtbi_seconds`: the pool's mean time between interruptions, which sets the run's
        Young/Daly checkpoint interval (else the worker's setting). `expected_step_seconds`:
        the throughput model's estimate, the watchdog's bound until steps are measured.
        `stage`: the split render's stage it does, ending with the next stage's checkpoint."""
        self._mtbi_s = mtbi_seconds
        report = JobReport(
            job_id=spec.job_id,
            attempt=attempt,
            status=RunStatus.FAILED,
            steps_done=0,
            total_steps=spec.steps,
        )
        try:
            await self._run(spec, attempt, resume_from, expected_step_seconds, report, stage)
        except JobFault as error:
            report.failure_kind, report.error = FailureKind.JOB, str(error)
        except torch.cuda.OutOfMemoryError as error:
            report.failure_kind, report.error = FailureKind.JOB, f"out of GPU memory: {error}"
        except RenderStalled as error:
            report.failure_kind, report.error = FailureKind.STALLED, str(error)
        except WorkerError as error:
            report.failure_kind, report.error = FailureKind.WORKER, str(error)
        finally:
            await self.release()
        if report.error:
            log.error("job %s attempt %d failed: %s", spec.job_id, attempt, report.error)
        return report

    async def _opened(
        self, spec: JobSpec, resume_from: str | None, stage: RenderStage | None
    ) -> _Prepared:
        prepared = self._prepared
        if prepared is None or prepared.job_id != spec.job_id or prepared.stage != stage:
            model_error, smoke_error = await self.prepare(spec, resume_from, stage)
            if model_error or smoke_error:
                raise WorkerError(model_error or f"smoke step failed: {smoke_error}")
            prepared = self._prepared
            assert prepared is not None
        return prepared

    async def _run(
        self,
        spec: JobSpec,
        attempt: int,
        resume_from: str | None,
        expected_step_s: float | None,
        report: JobReport,
        stage: RenderStage | None,
    ) -> None:
        started = self._clock.monotonic()
        prepared = await self._opened(spec, resume_from, stage)
        session, step = prepared.session, prepared.step
        report.resume_notes = list(prepared.resume.notes)
        report.resumed_from = prepared.resume.manifest_key
        report.recipe = prepared.recipe
        report.model_loaded = prepared.loaded
        report.timings.model_load_s = self._clock.monotonic() - started
        doing = "denoising" if stage is None else f"its {stage} stage"
        log.info("job %s: %s from step %d of %d", spec.job_id, doing, step, spec.steps)
        if stage is RenderStage.ENCODE:  # the open encoded the prompt: the stage's work
            await self._stage_done(prepared, attempt, report, None)
            return

        stall = self._settings.stall
        step_seconds = 0.0
        since_checkpoint = self._clock.monotonic()
        last_checkpoint: tuple[int, str] | None = None
        denoise_started = self._clock.monotonic()
        first = True
        while True:
            report.steps_done = step
            if self._checkpoint_request.is_set():
                if last_checkpoint is not None and last_checkpoint[0] == step:
                    report.checkpoint = last_checkpoint[1]  # this very state is already durable
                else:
                    report.checkpoint = await self._write_checkpoint(prepared, attempt, report)
                report.status = RunStatus.PREEMPTED
                report.timings.denoise_s = self._clock.monotonic() - denoise_started
                return
            if step >= spec.steps:
                break
            step_started = self._clock.monotonic()
            bound = stall.bound(expected_step(expected_step_s, step_seconds or None), first)
            step = await session.step(bound)
            first = False
            measured = self._clock.monotonic() - step_started
            step_seconds = measured if step_seconds == 0 else smoothed(step_seconds, measured)
            if self.on_step is not None:
                self.on_step(step)
            view = CheckpointClock(
                interval=self._interval(),
                seconds_since_last=self._clock.monotonic() - since_checkpoint,
                remaining_seconds=(spec.steps - step) * step_seconds,
                write_seconds=self._write_estimate,
            )
            if step < spec.steps and periodic_checkpoint_due(view):
                key = await self._write_checkpoint(prepared, attempt, report)
                last_checkpoint = (step, key)
                since_checkpoint = self._clock.monotonic()
        report.timings.denoise_s = self._clock.monotonic() - denoise_started
        if stage is RenderStage.DENOISE:
            fresh = last_checkpoint if last_checkpoint and last_checkpoint[0] == step else None
            await self._stage_done(prepared, attempt, report, fresh)
            return
        await self._output.publish(
            spec, attempt, session, step, prepared.model, prepared.recipe, report
        )

    async def _stage_done(
        self,
        prepared: _Prepared,
        attempt: int,
        report: JobReport,
        written: tuple[int, str] | None,
    ) -> None:
        """The stage's end: the checkpoint the next stage starts from (`written`, where one
        holds this very state already)."""
        if written is not None:
            report.checkpoint = written[1]
        else:
            report.checkpoint = await self._write_checkpoint(prepared, attempt, report)
        report.status = RunStatus.STAGE_DONE

    def _interval(self) -> float:
        return checkpoint_interval(
            self._write_estimate,
            self._mtbi_s or self._settings.mean_time_between_interruptions_s,
            self._settings.max_checkpoint_interval_s,
        )

    async def _write_checkpoint(self, prepared: _Prepared, attempt: int, report: JobReport) -> str:
        started = self._clock.monotonic()
        step, blobs = await prepared.session.checkpoint(self._settings.load_timeout_s)
        key = await self._checkpoints.write_encoded(
            blobs, step, prepared.identity, attempt, self._clock.now(), prepared.recipe
        )
        elapsed = self._clock.monotonic() - started
        self._write_estimate = smoothed(self._write_estimate, elapsed)
        report.timings.checkpoint_writes_s.append(elapsed)
        report.checkpoints_written.append(key)
        if self.on_checkpoint is not None:
            self.on_checkpoint(key, step, elapsed)
        log.info("checkpoint durable at step %d: %s (%.3fs)", step, key, elapsed)
        return key
