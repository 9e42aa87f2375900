"""A simulated GPU worker: it speaks the real worker protocol (hello, heartbeats with recent
outcomes, job events, commands) and decides when to checkpoint with the worker agent's own
policy (`checkpoint_interval`, `periodic_checkpoint_due`); only the rendering is replaced by
time passing: a job needs `steps x step_seconds` of GPU time after its model is loaded. On a
spot notice (its IMDS) it stops taking work, reports the notice, checkpoints at once and
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

from kernel.market import Market
from kernel.worker_protocol import (
    Command,
    CommandKind,
    EventKind,
    FailureKind,
    GpuHealth,
    GpuInfo,
    JobProgress,
)
from kernel.worker_side import Machine, Outgoing, WorkerSide
from simulator.cloud import SimInstance
from simulator.fleet_faults import WorkerFaults
from simulator.worker_model import Attempt, WorkerModel
from worker_ami.agent.checkpoint_policy import (
    CheckpointClock,
    checkpoint_interval,
    periodic_checkpoint_due,
)

Send = Callable[[str, str], None]  # (topic, JSON payload) to the control plane
RECENT_OUTCOMES = 8  # repeated in every heartbeat, as the agent does


@dataclass
class SimulatedWorker:
    instance: SimInstance
    model: WorkerModel
    mtbi_seconds: float  # the pool's mean time between interruptions, for Young/Daly
    send: Send
    finished: Callable[[str, datetime], None]  # the simulation's ledger of completions
    said_hello: bool = False
    accepting: bool = True
    jobs: dict[int, Attempt] = field(default_factory=dict)  # by GPU index
    loaded_models: set[tuple[int, str]] = field(default_factory=set)  # (GPU, model)
    side: WorkerSide = field(init=False)  # what it publishes, as every worker builds it
    _seen_commands: set[str] = field(default_factory=set)
    interval: float = field(init=False)  # between periodic checkpoints
    faults: WorkerFaults | None = None  # injected faults (none: a healthy worker)

    def __post_init__(self) -> None:
        events = itertools.count(1)  # ids in order: a run replays the same
        self.side = WorkerSide(
            self.worker_id, RECENT_OUTCOMES, lambda: f"{self.worker_id}-{next(events)}"
        )
        # Rate and write time are fixed for its life; the ceiling is the spot deadline rule's.
        spot = self.instance.pool.market is Market.SPOT
        ceiling = self.model.max_checkpoint_interval_seconds if spot else math.inf
        self.interval = checkpoint_interval(
            self.model.checkpoint_write_seconds, self.mtbi_seconds, ceiling
        )

    @property
    def worker_id(self) -> str:
        return self.instance.instance_id

    # -- protocol ------------------------------------------------------------------------------

    def slots(self) -> tuple[GpuInfo, ...]:
        """What its hello offers the scheduler: each GPU whole."""
        return tuple(
            GpuInfo(index=i, family=self.model.family, vram_gib=self.model.vram_gib)
            for i in range(self.model.gpus)
        )

    def hello(self, now: datetime) -> None:
        pool = self.instance.pool
        self.said_hello = True
        machine = Machine(
            self.worker_id,
            pool.instance_type,
            pool.availability_zone,
            pool.market,
            self.slots(),
            agent_version="simulated",
        )
        self._send(self.side.hello(now, machine))

    def heartbeat(self, now: datetime) -> None:
        jobs = tuple(
            JobProgress(
                job_id=job.spec.job_id,
                attempt=job.attempt,
                gpu_index=job.gpu,
                step=self._step(job),
                total_steps=job.spec.steps,
            )
            for job in self.jobs.values()
        )
        sick = self.faults is not None and self.faults.corrupt(0, now)
        gpus = (
            (
                GpuHealth(
                    index=0,
                    utilization_percent=100,
                    memory_used_gib=10.0,
                    temperature_celsius=70,
                    ecc_uncorrected_errors=2,
                ),
            )
            if sick
            else ()
        )
        self._send(self.side.heartbeat(now, jobs, gpus, accepting=self.accepting))

    def offline(self, now: datetime) -> None:
        """Its last will, published by the broker when the instance is gone."""
        self._send(self.side.status(now, online=False))

    def on_command(self, command: Command, now: datetime) -> None:
        if command.command_id in self._seen_commands:
            return  # a re-send: acted on once already
        self._seen_commands.add(command.command_id)
        current = next(
            (
                job
                for job in self.jobs.values()
                if (job.spec.job_id, job.attempt) == (command.job_id, command.attempt)
            ),
            None,
        )
        if command.kind is CommandKind.ASSIGN and command.spec is not None and current is None:
            self._assign(command, now)
        elif command.kind is CommandKind.CHECKPOINT_NOW and current is not None:
            if not current.hung:  # a hung step never reaches the boundary to checkpoint at
                self._stop_with_checkpoint(current, now)
        elif command.kind is CommandKind.CANCEL and current is not None:
            del self.jobs[current.gpu]

    def on_notice(self, now: datetime) -> None:
        """The spot notice on IMDS: no new work, checkpoint now, report."""
        self.accepting = False
        self._event(now, EventKind.NOTICE_SEEN, notice="terminate")
        for job in list(self.jobs.values()):
            if not job.hung:
                self._stop_with_checkpoint(job, now)

    # -- time passing --------------------------------------------------------------------------

    def seconds_to_next_event(self) -> float:
        """Time until the first of its running jobs finishes, hangs, fails or is killed by the
        watchdog (inf when idle)."""
        return min((self._next_event(job) for job in self.jobs.values()), default=math.inf)

    def _next_event(self, job: Attempt) -> float:
        total = job.spec.steps * self.model.step_seconds
        if self.faults is None:
            return job.stall_seconds + total - job.done_seconds
        if job.hung:
            bound = self._stall_bound(job)
            return bound - job.hung_for if bound is not None else math.inf
        # At full speed: on a slow GPU this is early, and the next round just comes sooner.
        ends = [total, job.hang_at or math.inf, job.doom_at or math.inf]
        return job.stall_seconds + min(ends) - job.done_seconds

    def _stall_bound(self, job: Attempt) -> float | None:
        """The agent's watchdog bound for this attempt's step (None: no watchdog)."""
        if self.faults is None or self.faults.watchdog is None:
            return None
        return self.faults.watchdog.bound(job.expected_step or self.model.step_seconds)

    def run(self, start: datetime, seconds: float) -> None:
        """Work for `seconds` from `start` on every GPU: model load, denoising, periodic
        checkpoints."""
        for job in list(self.jobs.values()):
            self._run_attempt(job, start, seconds)

    def _run_attempt(self, job: Attempt, start: datetime, seconds: float) -> None:
        elapsed = 0.0
        while self.jobs.get(job.gpu) is job and seconds - elapsed > 1e-9:
            if job.stall_seconds > 0:
                spent = min(job.stall_seconds, seconds - elapsed)
                job.stall_seconds -= spent
                elapsed += spent
                if job.stall_seconds <= 1e-9 and job.writing_step is not None:
                    self._checkpoint_durable(job, start + timedelta(seconds=elapsed))
                continue
            if job.hung:
                elapsed += self._hang(job, start + timedelta(seconds=elapsed), seconds - elapsed)
                continue
            total = job.spec.steps * self.model.step_seconds
            if self._checkpoint_due(job, total):
                job.writing_step = self._step(job)
                job.stall_seconds = self.model.checkpoint_write_seconds
                continue
            to_due = self.interval - job.since_checkpoint
            if to_due <= 0:  # passed with no checkpoint due: the job ends before one would pay
                to_due = math.inf
            speed = (
                self.faults.speed(job.gpu, start + timedelta(seconds=elapsed))
                if (self.faults)
                else 1.0
            )
            ahead = min(total, job.hang_at or math.inf, job.doom_at or math.inf)
            spent = min(seconds - elapsed, (ahead - job.done_seconds) / speed, to_due)
            job.done_seconds += spent * speed
            job.since_checkpoint += spent
            elapsed += spent
            if self.faults is not None:
                self.faults.waste.slow += spent * (1.0 - speed)
            if job.done_seconds >= total - 1e-6:
                self._finish(job, start + timedelta(seconds=elapsed))
            elif job.doom_at is not None and job.done_seconds >= job.doom_at - 1e-6:
                self._doomed(job, start + timedelta(seconds=elapsed))

    def _hang(self, job: Attempt, at: datetime, seconds: float) -> float:
        """A hung step: time passes, nothing moves, until the watchdog (if any) kills it."""
        assert self.faults is not None
        bound = self._stall_bound(job)
        spent = seconds if bound is None else min(seconds, bound - job.hung_for)
        job.hung_for += spent
        self.faults.waste.stalled += spent
        if bound is not None and job.hung_for >= bound - 1e-9:
            waste = self.faults.waste
            waste.stall_kills += 1
            waste.lost_work += job.done_seconds - job.last_step * self.model.step_seconds
            del self.jobs[job.gpu]
            self._event(
                at + timedelta(seconds=spent),
                EventKind.FAILED,
                job_id=job.spec.job_id,
                attempt=job.attempt,
                outcome=True,
                failure_kind=FailureKind.STALLED,
                gpu_index=job.gpu,
                error=f"stalled: no step within {bound:.1f} s",
            )
        return spent

    def _doomed(self, job: Attempt, at: datetime) -> None:
        """Non-finite latents on a corrupting GPU: the attempt fails as the job's fault."""
        assert self.faults is not None
        self.faults.waste.doomed += job.done_seconds - job.started_done + job.model_load_seconds
        del self.jobs[job.gpu]
        self._event(
            at,
            EventKind.FAILED,
            job_id=job.spec.job_id,
            attempt=job.attempt,
            outcome=True,
            failure_kind=FailureKind.JOB,
            gpu_index=job.gpu,
            error=f"non-finite latents after step {self._step(job)}",
        )

    def _checkpoint_due(self, job: Attempt, total: float) -> bool:
        view = CheckpointClock(
            interval=self.interval,
            seconds_since_last=job.since_checkpoint,
            remaining_seconds=total - job.done_seconds,
            write_seconds=self.model.checkpoint_write_seconds,
        )
        return periodic_checkpoint_due(view)

    # -- inside --------------------------------------------------------------------------------

    def _step(self, job: Attempt) -> int:
        return min(job.spec.steps, int(job.done_seconds // self.model.step_seconds))

    def _assign(self, command: Command, now: datetime) -> None:
        assert command.spec is not None
        assert command.attempt is not None
        gpu = command.gpu_index or 0
        if gpu in self.jobs or gpu >= self.model.gpus or not self.accepting:
            why = f"GPU {gpu} is busy or missing" if self.accepting else "draining after a notice"
            self._refuse(command, now, why)
            return
        spec = command.spec
        loaded = (gpu, spec.model) in self.loaded_models
        load = 0.0 if loaded else self.model.model_load_seconds
        self.loaded_models.add((gpu, spec.model))
        resumed = (command.resume_step or 0) * self.model.step_seconds
        self.jobs[gpu] = job = Attempt(
            spec,
            command.attempt,
            gpu,
            resumed,
            load,
            last_checkpoint=command.resume_from,
            last_step=command.resume_step or 0,
            model_load_seconds=load,
            started_done=resumed,
            expected_step=command.expected_step_seconds,
        )
        if self.faults is not None:
            left = spec.steps * self.model.step_seconds - resumed
            hang = self.faults.hang_after(left)
            job.hang_at = resumed + hang if hang is not None else None
            if self.faults.corrupt(gpu, now):
                job.doom_at = resumed + self.faults.rng.uniform(0, left)
        self._event(now, EventKind.STARTED, job_id=spec.job_id, attempt=command.attempt)

    def _refuse(self, command: Command, now: datetime, why: str) -> None:
        """An assignment declined before it starts: the job goes elsewhere."""
        self._event(
            now,
            EventKind.FAILED,
            job_id=command.job_id,
            attempt=command.attempt,
            failure_kind=FailureKind.REFUSED,
            error=why,
        )

    def _stop_with_checkpoint(self, job: Attempt, now: datetime) -> None:
        """Checkpoint at the current step and stop (a notice leaves time for one write)."""
        key, step = job.last_checkpoint, job.last_step
        if self.model.checkpoint_write_seconds <= self.model.notice_seconds:
            step = self._step(job)
            key = self._key(job, step)
        del self.jobs[job.gpu]
        wrote = key != job.last_checkpoint
        self._event(
            now,
            EventKind.PREEMPTED,
            job_id=job.spec.job_id,
            attempt=job.attempt,
            step=step,
            checkpoint=key,
            outcome=True,
            write_seconds=self.model.checkpoint_write_seconds if wrote else 0.0,
            model_load_seconds=job.model_load_seconds,
        )

    def _checkpoint_durable(self, job: Attempt, at: datetime) -> None:
        assert job.writing_step is not None
        job.last_checkpoint = self._key(job, job.writing_step)
        job.last_step = job.writing_step
        job.writing_step = None
        job.since_checkpoint = 0.0
        self._event(
            at,
            EventKind.CHECKPOINT_DURABLE,
            job_id=job.spec.job_id,
            attempt=job.attempt,
            step=job.last_step,
            checkpoint=job.last_checkpoint,
            write_seconds=self.model.checkpoint_write_seconds,
        )

    def _finish(self, job: Attempt, at: datetime) -> None:
        del self.jobs[job.gpu]
        self.finished(job.spec.job_id, at)
        self._event(
            at,
            EventKind.FINISHED,
            job_id=job.spec.job_id,
            attempt=job.attempt,
            output=f"{job.spec.output}{job.spec.job_id}.mp4",
            outcome=True,
            denoise_seconds=job.spec.steps * self.model.step_seconds,
            model_load_seconds=job.model_load_seconds,
        )

    def _key(self, job: Attempt, step: int) -> str:
        return (
            f"s3://simulated-checkpoints/{job.spec.job_id}/{job.attempt}/{step:06d}/manifest.json"
        )

    def _event(
        self, at: datetime, kind: EventKind, outcome: bool = False, **fields: object
    ) -> None:
        said = self.side.outcome if outcome else self.side.event
        self._send(said(at, kind, **fields)[1])

    def _send(self, message: Outgoing) -> None:
        self.send(message.topic, message.payload)
