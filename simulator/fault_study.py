"""Wasted GPU-hours from injected faults, with the stall watchdog and the GPU quarantine on and
off: a week of a saturated fleet, simulated attempt by attempt on an injected clock.

The fleet's GPUs take jobs from one queue (FIFO; a job that failed on a GPU goes to another).
Each attempt loads its model, then steps, checkpointing at the interval the worker agent uses by
default on the fleet's market (`product_checkpoint_interval`: Young/Daly of the spot pool's
interruptions under the 10-minute ceiling, or of the host's failures on on-demand). Faults are
drawn from the rates (`FaultRates`) with a seeded generator:
- hangs: a step that never ends (a hung kernel or decode), per job-hour;
- sick GPUs, per GPU-week: half of them slow down (`slow_factor`, thermal or power throttling),
  half corrupt (uncorrected ECC errors: every job there fails with non-finite latents);
- jobs that run out of memory at some step, on every attempt (the job's own fault);
- agent crashes, per instance-hour (the work since the last checkpoint is lost).

Detection on applies the product's own rules: the worker's stall bound (`kernel.stall`, with the
expected step time learned from the fleet's finished attempts), and the quarantine rules
(`orchestrator.scheduling.gpu_health`: uncorrected errors, a pace `slow_factor` times its
family's, two stalls), a quarantined GPU being replaced after `replace_s`. Detection off is the
product before them: a hung job holds its GPU to the end of the week, a sick GPU keeps taking
work. A third mode is the strongest fair baseline a user would otherwise run: a per-attempt
timeout at `timeout_factor` times the job's expected duration, then a retry from the
checkpoint.

Waste counts GPU time that produced nothing that survives: work lost since the last checkpoint,
time held by a stalled job, the extra time of steps on a slow GPU, attempts doomed to fail
(a job's own out-of-memory, a corrupting GPU's non-finite latents), and the model loads of
retries. The idle time of a quarantined GPU until its replacement boots is capacity, not
waste of a job's compute, and is not counted.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from kernel.market import Market
from kernel.stall import StallRule
from orchestrator.scheduling.gpu_health import SickRule, too_slow
from simulator.fleet_faults import FaultWaste
from worker_ami.agent.checkpoint_policy import checkpoint_interval
from worker_ami.agent.settings import WorkerSettings

WEEK_S = 7 * 24 * 3600.0
HOUR = 3600.0


class Detection(StrEnum):
    OFF = "off"
    TIMEOUT = "timeout"  # a per-attempt timeout, the baseline a user would set
    ON = "on"  # the stall watchdog and the quarantine


@dataclass(frozen=True)
class FaultRates:
    hangs_per_job_hour: float = 1 / 1000
    sick_gpus_per_gpu_week: float = 0.01
    slow_factor: float = 4.0
    oom_job_fraction: float = 0.002
    agent_crashes_per_instance_hour: float = 1 / 2000

    @classmethod
    def none(cls) -> FaultRates:
        return cls(0.0, 0.0, 1.0, 0.0, 0.0)


@dataclass(frozen=True)
class FleetShape:
    gpus: int = 256
    steps: int = 50
    step_s: float = 20.0
    step_jitter: float = 0.1  # lognormal sigma of a step's time
    slow_step_chance: float = 0.002  # a step that takes 3x (I/O, a neighbour): not a fault
    load_s: float = 90.0
    market: Market = Market.ON_DEMAND  # sets the checkpoint interval, as on the product
    checkpoint_write_s: float = 2.0
    heartbeat_s: float = 2.0
    lost_after_s: float = 30.0  # the control plane's heartbeat timeout
    replace_s: float = 600.0  # a quarantined GPU's instance, drained, replaced and booted
    timeout_factor: float = 3.0
    usd_per_gpu_hour: float = 1.006  # g5.xlarge on demand, us-east-1
    max_job_faults: int = 2

    @property
    def checkpoint_every_s(self) -> float:
        return product_checkpoint_interval(self.market, self.checkpoint_write_s)


def product_checkpoint_interval(market: Market, write_s: float) -> float:
    """The worker agent's interval with its default settings (worker_ami/agent/settings.py)."""
    defaults = WorkerSettings.model_fields
    lifecycle = "spot" if market is Market.SPOT else "on-demand"
    hours = defaults[f"{lifecycle.replace('-', '_')}_mtbi_hours"].default
    ceiling = defaults["max_checkpoint_interval_s"].default if market is Market.SPOT else math.inf
    return checkpoint_interval(write_s, float(hours) * 3600, float(ceiling))


@dataclass
class StudyResult:
    detection: Detection
    waste_s: FaultWaste
    jobs_done: int
    jobs_failed: int
    stall_kills: int
    quarantines: int
    healthy_jobs_killed: int  # watchdog kills without an injected hang (false positives)
    healthy_gpus_quarantined: int  # quarantines of GPUs with no injected sickness
    sick_gpus: int
    hangs: int


@dataclass
class _Gpu:
    index: int
    sick_at: float = math.inf
    sick_kind: str = ""  # "slow" | "corrupt"
    crash_at: float = math.inf
    stalls: int = 0
    quarantined: bool = False


@dataclass
class _Job:
    job_id: int
    oom_step: int | None
    checkpoint_step: int = 0
    faults: int = 0
    avoid: set[int] = field(default_factory=set)
    retry: bool = False  # its next attempt follows a fault


class FaultStudy:
    def __init__(
        self, rates: FaultRates, shape: FleetShape, detection: Detection, seed: int
    ) -> None:
        self.rates, self.shape, self.detection = rates, shape, detection
        self.rng = np.random.default_rng(seed)
        self.stall = StallRule()
        self.sick = SickRule()
        self.waste = FaultWaste()
        self.paces: deque[float] = deque(maxlen=50)  # seconds per step of finished attempts
        self.queue: deque[_Job] = deque()
        self.next_job = 0
        self.counts = {
            "done": 0,
            "failed": 0,
            "kills": 0,
            "quarantines": 0,
            "false_kills": 0,
            "false_quarantines": 0,
            "hangs": 0,
        }

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> StudyResult:
        shape = self.shape
        gpus = [self._new_gpu(i, 0.0) for i in range(shape.gpus)]
        free = [(0.0, g.index) for g in gpus]
        by_index = {g.index: g for g in gpus}
        heapq.heapify(free)
        while free:
            now, index = heapq.heappop(free)
            if now >= WEEK_S:
                continue
            gpu = by_index[index]
            if gpu.quarantined:
                replacement = self._new_gpu(len(by_index), now + shape.replace_s)
                by_index[replacement.index] = replacement
                heapq.heappush(free, (now + shape.replace_s, replacement.index))
                continue
            job = self._take(gpu)
            heapq.heappush(free, (self._attempt(gpu, job, now), index))
        sick = sum(1 for g in by_index.values() if g.sick_at < WEEK_S)
        return StudyResult(
            self.detection,
            self.waste,
            self.counts["done"],
            self.counts["failed"],
            self.counts["kills"],
            self.counts["quarantines"],
            self.counts["false_kills"],
            self.counts["false_quarantines"],
            sick,
            self.counts["hangs"],
        )

    def _new_gpu(self, index: int, at: float) -> _Gpu:
        gpu = _Gpu(index, crash_at=at + self._draw(self.rates.agent_crashes_per_instance_hour))
        weekly = self.rates.sick_gpus_per_gpu_week
        if weekly > 0 and self.rng.random() < weekly:
            gpu.sick_at = at + float(self.rng.uniform(0, WEEK_S))
            gpu.sick_kind = "slow" if self.rng.random() < 0.5 else "corrupt"
        return gpu

    def _draw(self, per_hour: float) -> float:
        return float(self.rng.exponential(HOUR / per_hour)) if per_hour > 0 else math.inf

    def _take(self, gpu: _Gpu) -> _Job:
        for _ in range(len(self.queue)):
            job = self.queue.popleft()
            if gpu.index not in job.avoid or self.detection is not Detection.ON:
                return job
            self.queue.append(job)
        oom = self.rng.random() < self.rates.oom_job_fraction
        self.next_job += 1
        oom_step = int(self.rng.integers(1, self.shape.steps)) if oom else None
        return _Job(self.next_job, oom_step)

    # -- one attempt -------------------------------------------------------------------------

    def _attempt(self, gpu: _Gpu, job: _Job, start: float) -> float:
        """Simulate the attempt; returns when its GPU is free again."""
        shape, on = self.shape, self.detection is Detection.ON
        load = shape.load_s
        if job.retry:
            self.waste.retry_loads += load
        t = start + load
        step = job.checkpoint_step
        saved_at_step, since_save = step, 0.0
        hang_step = self._hang_step(job)
        expected = statistics.median(self.paces) if self.paces else None
        timeout = start + shape.timeout_factor * (load + shape.steps * shape.step_s)
        first_measured: tuple[int, float] | None = None
        normal_s = 0.0  # what this attempt's steps would have taken on a healthy GPU
        while step < shape.steps:
            if t >= gpu.crash_at:  # the agent crashed: heartbeats stop, the work since the save
                self.waste.lost_work += since_save
                gpu.crash_at = (
                    t + shape.lost_after_s + self._draw(self.rates.agent_crashes_per_instance_hour)
                )
                return self._requeue(job, saved_at_step, t + shape.lost_after_s)
            if gpu.sick_kind == "corrupt" and t >= gpu.sick_at:
                return self._corrupt(gpu, job, t, since_save, saved_at_step, start, on)
            if step == hang_step:
                self.counts["hangs"] += 1
                return self._hung(
                    gpu, job, t, since_save, saved_at_step, expected, timeout, step, first_measured
                )
            if job.oom_step == step:
                return self._doomed(job, t - start, t)
            if self.detection is Detection.TIMEOUT and t >= timeout:
                self.waste.lost_work += since_save
                return self._requeue(job, saved_at_step, t)
            seconds = self._step_seconds(gpu, t)
            normal = seconds / (self.rates.slow_factor if self._slow(gpu, t) else 1.0)
            if on:
                bound = self.stall.bound(expected, first_step=first_measured is None)
                if seconds > bound:  # a slow step, but no hang: killed all the same
                    self.counts["kills"] += 1
                    self.counts["false_kills"] += not self._slow(gpu, t)
                    self.waste.lost_work += since_save + bound
                    return self._requeue(job, saved_at_step, t + bound)
            t += seconds
            step += 1
            since_save += seconds
            normal_s += normal
            self.waste.slow += seconds - normal
            first_measured = first_measured or (step, t)
            if on and self._slow_caught(gpu, first_measured, step, t):
                self.waste.lost_work += since_save
                return self._requeue(job, saved_at_step, t)
            if since_save >= shape.checkpoint_every_s and step < shape.steps:
                t += shape.checkpoint_write_s
                saved_at_step, since_save = step, 0.0
        job.checkpoint_step = shape.steps
        if first_measured is not None and step > first_measured[0]:
            self.paces.append((t - first_measured[1]) / (step - first_measured[0]))
        self.counts["done"] += 1
        return t

    def _step_seconds(self, gpu: _Gpu, t: float) -> float:
        shape = self.shape
        seconds = shape.step_s * float(self.rng.lognormal(0.0, shape.step_jitter))
        if self.rng.random() < shape.slow_step_chance:
            seconds *= 3.0
        return seconds * (self.rates.slow_factor if self._slow(gpu, t) else 1.0)

    def _slow(self, gpu: _Gpu, t: float) -> bool:
        return gpu.sick_kind == "slow" and t >= gpu.sick_at

    def _hang_step(self, job: _Job) -> int | None:
        shape, rate = self.shape, self.rates.hangs_per_job_hour
        hours = (shape.steps - job.checkpoint_step) * shape.step_s / HOUR
        if rate <= 0 or self.rng.random() >= 1 - math.exp(-rate * hours):
            return None
        return int(self.rng.integers(job.checkpoint_step, shape.steps))

    def _hung(
        self,
        gpu: _Gpu,
        job: _Job,
        t: float,
        since_save: float,
        saved: int,
        expected: float | None,
        timeout: float,
        step: int,
        measured: tuple[int, float] | None,
    ) -> float:
        if self.detection is Detection.ON:
            bound = self.stall.bound(expected, first_step=measured is None)
            self.counts["kills"] += 1
            self.waste.stalled += bound
            self.waste.lost_work += since_save
            gpu.stalls += 1
            if gpu.stalls >= self.sick.stalls_to_quarantine:
                self._quarantine(gpu)
            job.avoid.add(gpu.index)
            return self._requeue(job, saved, t + bound)
        end = timeout if self.detection is Detection.TIMEOUT else WEEK_S
        end = max(end, t)
        self.waste.stalled += min(end, WEEK_S) - t
        self.waste.lost_work += since_save
        return self._requeue(job, saved, end)

    def _corrupt(
        self, gpu: _Gpu, job: _Job, t: float, since_save: float, saved: int, start: float, on: bool
    ) -> float:
        if on:
            # The heartbeat's NVML shows the uncorrected errors (`errors_in`): quarantined
            # within a beat; the job moves from its last checkpoint taken before the errors.
            self._quarantine(gpu)
            self.waste.lost_work += since_save + self.shape.heartbeat_s
            job.avoid.add(gpu.index)
            return self._requeue(job, saved, t + self.shape.heartbeat_s)
        # Non-finite latents some steps later: the job's fault, as far as anyone can tell.
        fails_at = t + float(self.rng.uniform(0, self.shape.steps * self.shape.step_s / 2))
        return self._doomed(job, fails_at - start, fails_at)

    def _slow_caught(self, gpu: _Gpu, first: tuple[int, float], step: int, t: float) -> bool:
        if gpu.quarantined:
            return False
        reason = too_slow(step - first[0], t - first[1], list(self.paces), self.sick)
        if reason is None:
            return False
        self._quarantine(gpu)
        return True

    def _quarantine(self, gpu: _Gpu) -> None:
        gpu.quarantined = True
        self.counts["quarantines"] += 1
        if gpu.sick_at == math.inf:
            self.counts["false_quarantines"] += 1

    def _doomed(self, job: _Job, attempt_s: float, end: float) -> float:
        """The attempt fails by a job fault: all of it is waste; so is everything the job
        ever ran once it fails for good."""
        self.waste.doomed += attempt_s
        job.faults += 1
        if job.faults >= self.shape.max_job_faults:
            self.counts["failed"] += 1
            return end
        job.retry = True
        self.queue.append(job)
        return end

    def _requeue(self, job: _Job, saved_step: int, end: float) -> float:
        job.checkpoint_step = saved_step
        job.retry = True
        self.queue.append(job)
        return end


def study(rates: FaultRates, shape: FleetShape, detection: Detection, seed: int) -> StudyResult:
    return FaultStudy(rates, shape, detection, seed).run()
