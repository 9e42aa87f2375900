"""A simulated GPU worker: it speaks the real worker protocol (hello, heartbeats with recent
outcomes, job events, commands) and decides when to checkpoint with the worker agent's own
policy (`checkpoint_interval`, `periodic_checkpoint_due`); only the rendering is replaced by
time passing: a job needs `steps x step_seconds` of GPU time after its model is loaded.

On a spot notice (its IMDS) it stops taking work, reports the notice, checkpoints at once and
reports `preempted`, as the agent does. Checkpoint keys have the agent's layout
(`.../{attempt}/{step:06d}/manifest.json`), so the control plane and the autoscaler read the
progress from them as they do in production.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kernel.job_spec import JobSpec
from kernel.worker_protocol import (
    Channel,
    Command,
    CommandKind,
    EventKind,
    GpuInfo,
    Heartbeat,
    Hello,
    JobProgress,
    Status,
    WorkerEvent,
    topic,
)
from simulator.cloud import SimInstance
from worker_ami.agent.checkpoint_policy import (
    CheckpointClock,
    checkpoint_interval,
    periodic_checkpoint_due,
)

Send = Callable[[str, str], None]  # (topic, JSON payload) to the control plane
RECENT_OUTCOMES = 8  # repeated in every heartbeat, as the agent does


@dataclass(frozen=True)
class WorkerModel:
    """What the simulation assumes of a worker (what the agent measures in production)."""

    step_seconds: float = 30.0
    model_load_seconds: float = 120.0
    # A checkpoint is the denoising state (latents and scheduler state), megabytes: the
    # agent's first guess of its write time is 2 s.
    checkpoint_write_seconds: float = 2.0
    notice_seconds: float = 120.0
    # The agent's `max_checkpoint_interval_s`, set to two minutes here (about 2% of GPU time
    # at 2 s a write): what an interruption without a usable notice may lose.
    max_checkpoint_interval_seconds: float = 120.0
    family: str = "v100"
    vram_gib: float = 16.0
    gpus: int = 1  # per instance; each GPU runs its own job


@dataclass
class _Attempt:
    spec: JobSpec
    attempt: int
    gpu: int
    done_seconds: float  # GPU time of denoising done (resumed from the checkpoint's step)
    stall_seconds: float  # model load or a checkpoint write still in progress
    writing_step: int | None = None  # the step a periodic checkpoint in progress saves
    since_checkpoint: float = 0.0
    last_checkpoint: str | None = None
    last_step: int = 0  # of last_checkpoint
    model_load_seconds: float = 0.0  # what this attempt spent loading the model


@dataclass
class SimulatedWorker:
    instance: SimInstance
    model: WorkerModel
    mtbi_seconds: float  # the pool's mean time between interruptions, for Young/Daly
    send: Send
    finished: Callable[[str, datetime], None]  # the simulation's ledger of completions
    said_hello: bool = False
    accepting: bool = True
    jobs: dict[int, _Attempt] = field(default_factory=dict)  # by GPU index
    loaded_models: set[tuple[int, str]] = field(default_factory=set)  # (GPU, model)
    recent: list[WorkerEvent] = field(default_factory=list)
    _sequence: itertools.count[int] = field(default_factory=itertools.count)
    _events: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _seen_commands: set[str] = field(default_factory=set)
    interval: float = field(init=False)  # between periodic checkpoints

    def __post_init__(self) -> None:
        # Its pool's rate and the write time are fixed for the worker's life.
        self.interval = checkpoint_interval(
            self.model.checkpoint_write_seconds,
            self.mtbi_seconds,
            self.model.max_checkpoint_interval_seconds,
        )

    @property
    def worker_id(self) -> str:
        return self.instance.instance_id

    # -- protocol ------------------------------------------------------------------------------

    def hello(self, now: datetime) -> None:
        pool = self.instance.pool
        self.said_hello = True
        self.send(
            topic(self.worker_id, Channel.HELLO),
            Hello(
                worker_id=self.worker_id, sent_at=now, instance_id=self.worker_id,
                instance_type=pool.instance_type, availability_zone=pool.availability_zone,
                market=pool.market,
                gpus=tuple(GpuInfo(index=i, family=self.model.family, vram_gib=self.model.vram_gib)
                           for i in range(self.model.gpus)),
                agent_version="simulated",
            ).model_dump_json(),
        )  # fmt: skip

    def heartbeat(self, now: datetime) -> None:
        jobs = tuple(
            JobProgress(job_id=job.spec.job_id, attempt=job.attempt, gpu_index=job.gpu,
                        step=self._step(job), total_steps=job.spec.steps)
            for job in self.jobs.values()
        )  # fmt: skip
        beat = Heartbeat(
            worker_id=self.worker_id, sent_at=now, sequence=next(self._sequence), jobs=jobs,
            recent=tuple(self.recent[-RECENT_OUTCOMES:]), accepting=self.accepting,
        )  # fmt: skip
        self.send(topic(self.worker_id, Channel.HEARTBEAT), beat.model_dump_json())

    def offline(self, now: datetime) -> None:
        """Its last will, published by the broker when the instance is gone."""
        status = Status(worker_id=self.worker_id, sent_at=now, online=False)
        self.send(topic(self.worker_id, Channel.STATUS), status.model_dump_json())

    def on_command(self, command: Command, now: datetime) -> None:
        if command.command_id in self._seen_commands:
            return  # a re-send: acted on once already
        self._seen_commands.add(command.command_id)
        current = next((job for job in self.jobs.values()
                        if (job.spec.job_id, job.attempt) == (command.job_id, command.attempt)),
                       None)  # fmt: skip
        if command.kind is CommandKind.ASSIGN and command.spec is not None and current is None:
            self._assign(command, now)
        elif command.kind is CommandKind.CHECKPOINT_NOW and current is not None:
            self._stop_with_checkpoint(current, now)
        elif command.kind is CommandKind.CANCEL and current is not None:
            del self.jobs[current.gpu]
        elif command.kind is CommandKind.DRAIN:
            self.accepting = False

    def on_notice(self, now: datetime) -> None:
        """The spot notice on IMDS: no new work, checkpoint now, report."""
        self.accepting = False
        self._event(now, EventKind.NOTICE_SEEN, notice="terminate")
        for job in list(self.jobs.values()):
            self._stop_with_checkpoint(job, now)

    # -- time passing --------------------------------------------------------------------------

    def seconds_to_next_event(self) -> float:
        """Time until the first of its running jobs finishes (inf when idle)."""
        return min(
            (job.stall_seconds + job.spec.steps * self.model.step_seconds - job.done_seconds
             for job in self.jobs.values()),
            default=math.inf,
        )  # fmt: skip

    def run(self, start: datetime, seconds: float) -> None:
        """Work for `seconds` from `start` on every GPU: model load, denoising, periodic
        checkpoints."""
        for job in list(self.jobs.values()):
            self._run_attempt(job, start, seconds)

    def _run_attempt(self, job: _Attempt, start: datetime, seconds: float) -> None:
        elapsed = 0.0
        while self.jobs.get(job.gpu) is job and seconds - elapsed > 1e-9:
            if job.stall_seconds > 0:
                spent = min(job.stall_seconds, seconds - elapsed)
                job.stall_seconds -= spent
                elapsed += spent
                if job.stall_seconds <= 1e-9 and job.writing_step is not None:
                    self._checkpoint_durable(job, start + timedelta(seconds=elapsed))
                continue
            total = job.spec.steps * self.model.step_seconds
            if self._checkpoint_due(job, total):
                job.writing_step = self._step(job)
                job.stall_seconds = self.model.checkpoint_write_seconds
                continue
            to_due = self.interval - job.since_checkpoint
            if to_due <= 0:  # passed with no checkpoint due: the job ends before one would pay
                to_due = math.inf
            spent = min(seconds - elapsed, total - job.done_seconds, to_due)
            job.done_seconds += spent
            job.since_checkpoint += spent
            elapsed += spent
            if job.done_seconds >= total - 1e-6:
                self._finish(job, start + timedelta(seconds=elapsed))

    def _checkpoint_due(self, job: _Attempt, total: float) -> bool:
        view = CheckpointClock(
            interval=self.interval,
            seconds_since_last=job.since_checkpoint,
            remaining_seconds=total - job.done_seconds,
            write_seconds=self.model.checkpoint_write_seconds,
        )
        return periodic_checkpoint_due(view)

    # -- inside --------------------------------------------------------------------------------

    def _step(self, job: _Attempt) -> int:
        return min(job.spec.steps, int(job.done_seconds // self.model.step_seconds))

    def _assign(self, command: Command, now: datetime) -> None:
        assert command.spec is not None
        assert command.attempt is not None
        gpu = command.gpu_index or 0
        if gpu in self.jobs or gpu >= self.model.gpus or not self.accepting:
            why = f"GPU {gpu} is busy or missing" if self.accepting else "draining after a notice"
            self._event(now, EventKind.FAILED, job_id=command.job_id, attempt=command.attempt,
                        failure_kind="refused", error=why)  # fmt: skip
            return
        spec = command.spec
        loaded = (gpu, spec.model) in self.loaded_models
        load = 0.0 if loaded else self.model.model_load_seconds
        self.loaded_models.add((gpu, spec.model))
        resumed = (command.resume_step or 0) * self.model.step_seconds
        self.jobs[gpu] = _Attempt(spec, command.attempt, gpu, resumed, load,
                            last_checkpoint=command.resume_from,
                            last_step=command.resume_step or 0,
                            model_load_seconds=load)  # fmt: skip
        self._event(now, EventKind.STARTED, job_id=spec.job_id, attempt=command.attempt)

    def _stop_with_checkpoint(self, job: _Attempt, now: datetime) -> None:
        """Checkpoint at the current step and stop (a notice leaves time for one write)."""
        key, step = job.last_checkpoint, job.last_step
        if self.model.checkpoint_write_seconds <= self.model.notice_seconds:
            step = self._step(job)
            key = self._key(job, step)
        del self.jobs[job.gpu]
        wrote = key != job.last_checkpoint
        self._event(now, EventKind.PREEMPTED, job_id=job.spec.job_id, attempt=job.attempt,
                    step=step, checkpoint=key, outcome=True,
                    write_seconds=self.model.checkpoint_write_seconds if wrote else 0.0,
                    model_load_seconds=job.model_load_seconds)  # fmt: skip

    def _checkpoint_durable(self, job: _Attempt, at: datetime) -> None:
        assert job.writing_step is not None
        job.last_checkpoint = self._key(job, job.writing_step)
        job.last_step = job.writing_step
        job.writing_step = None
        job.since_checkpoint = 0.0
        self._event(at, EventKind.CHECKPOINT_DURABLE, job_id=job.spec.job_id,
                    attempt=job.attempt, step=job.last_step, checkpoint=job.last_checkpoint,
                    write_seconds=self.model.checkpoint_write_seconds)  # fmt: skip

    def _finish(self, job: _Attempt, at: datetime) -> None:
        del self.jobs[job.gpu]
        self.finished(job.spec.job_id, at)
        self._event(at, EventKind.FINISHED, job_id=job.spec.job_id, attempt=job.attempt,
                    output=f"{job.spec.output}{job.spec.job_id}.mp4", outcome=True,
                    denoise_seconds=job.spec.steps * self.model.step_seconds,
                    model_load_seconds=job.model_load_seconds)  # fmt: skip

    def _key(self, job: _Attempt, step: int) -> str:
        return (f"s3://simulated-checkpoints/{job.spec.job_id}/{job.attempt}/{step:06d}/"
                "manifest.json")  # fmt: skip

    def _event(self, at: datetime, kind: EventKind, outcome: bool = False,
               **fields: object) -> None:  # fmt: skip
        event = WorkerEvent.model_validate(
            {"worker_id": self.worker_id, "sent_at": at, "kind": kind,
             "event_id": f"{self.worker_id}-{next(self._events)}", **fields}
        )  # fmt: skip
        if outcome:
            self.recent.append(event)
        self.send(topic(self.worker_id, Channel.EVENTS), event.model_dump_json())
