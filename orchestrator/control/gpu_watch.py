"""The control plane's watch over running jobs and the GPUs they run on, each tick:

- a job whose step has not moved for longer than its stall bound (kernel.stall, with the
  control plane's grace on top, so that the worker's own watchdog acts first) is stalled: the
  service sends it back to the queue (resumed from its last checkpoint, elsewhere) and cancels
  it on its worker; the stall is recorded with the GPU that had it;
- each heartbeat's NVML health, each attempt's pace against its family's, and each GPU's
  recorded stalls decide a quarantine (orchestrator.scheduling.gpu_health), which is durable:
  every replica keeps work off that GPU.

What it finds it returns; the service acts (it owns the job moves and the commands).
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from kernel.clock import Clock
from kernel.fleet_facts import GpuFault, GpuFaultKind
from kernel.job_record import JobRecord, Placement
from kernel.job_state import JobState
from kernel.stall import StallRule, expected_step
from kernel.worker_protocol import JobProgress
from orchestrator.scheduling.gpu_health import SickRule, errors_in, quarantine_reason, too_slow
from orchestrator.scheduling.registry import WorkerRegistry

log = logging.getLogger(__name__)
LEARNED_PACES = 50  # recent attempts' seconds per step kept per family and work shape
_Slot = tuple[str, int]  # (worker, GPU index)
RECENT = 20  # step reports a GPU's current pace is judged over


class GpuFaultStore(Protocol):
    def record_gpu_fault(self, fault: GpuFault) -> None: ...

    def gpu_faults(self, worker_id: str | None = None) -> list[GpuFault]: ...

    def quarantined_gpus(self) -> set[tuple[str, int]]: ...


@dataclass(frozen=True)
class WatchSettings:
    stall: StallRule = field(default_factory=StallRule)
    sick: SickRule = field(default_factory=SickRule)
    enabled: bool = True  # off: no stall or sickness is looked for (the simulator's baseline)
    # Before an attempt's first step the worker fetches and loads the model (minutes for a
    # large one, more on a cold cache): its own load bound applies; this one is the backstop.
    before_first_step_seconds: float = 1800.0


@dataclass(frozen=True)
class Quarantine:
    worker_id: str
    instance_id: str
    gpu_index: int
    reason: str

    def holds(self, placement: Placement) -> bool:
        """Whether the placed job runs on the quarantined GPU (one of a span's, too)."""
        return placement.worker_id == self.worker_id and self.gpu_index in placement.gpus


@dataclass(frozen=True)
class Findings:
    stalled: list[tuple[Placement, str]] = field(default_factory=list)
    quarantined: list[Quarantine] = field(default_factory=list)


@dataclass
class _Pace:
    attempt: int
    worker_id: str
    gpu_index: int
    shape: tuple[str, str, int, int, int]  # family, model, width, height, frames
    step: int
    changed_at: datetime
    # The pace is measured from the attempt's first step on (model load and warm-up apart).
    origin: tuple[int, datetime] | None = None
    # The latest step reports: a GPU that turns slow in the middle of a long attempt shows it
    # here within minutes, where the attempt's average would take hours.
    recent: deque[tuple[int, datetime]] = field(default_factory=lambda: deque(maxlen=RECENT))

    def steps_and_seconds(self) -> tuple[int, float]:
        """Since the attempt's first step: what the family's pace learns from."""
        if self.origin is None:
            return 0, 0.0
        return self.step - self.origin[0], (self.changed_at - self.origin[1]).total_seconds()

    def recent_steps_and_seconds(self) -> tuple[int, float]:
        """Over the latest reports: what the GPU is judged slow on."""
        if len(self.recent) < 2:
            return 0, 0.0
        (first, since), (last, until) = self.recent[0], self.recent[-1]
        return last - first, (until - since).total_seconds()


def _shape(job: JobRecord, family: str) -> tuple[str, str, int, int, int]:
    spec = job.spec
    return (family, spec.model, spec.width, spec.height, spec.num_frames)


class GpuWatch:
    def __init__(
        self, store: GpuFaultStore, registry: WorkerRegistry, clock: Clock, settings: WatchSettings
    ) -> None:
        self._store, self._registry, self._clock = store, registry, clock
        self.settings = settings
        self._paces: dict[str, _Pace] = {}
        # Per family and work shape, recent attempts' seconds per step with the GPU that ran
        # each: a GPU is judged against the others only (its own slow attempts would drag
        # its family's median up to it in a small fleet).
        self._learned: dict[tuple[str, str, int, int, int], deque[tuple[_Slot, float]]] = {}

    def remembered(self) -> int:
        return len(self._paces) + len(self._learned)

    def expected_step(
        self, job: JobRecord, family: str | None, planned: float | None
    ) -> float | None:
        """The throughput estimate for this job on this family: the autoscaler's plan, or
        what the fleet's recent attempts of the same work on that family took (the longer)."""
        learned = [pace for _, pace in self._learned.get(_shape(job, family or ""), ())]
        return expected_step(planned, statistics.median(learned) if learned else None)

    def expected_step_at(self, placement: Placement, planned: Mapping[str, float]) -> float | None:
        """`expected_step` for a placed job, on the family of the GPU it is placed on."""
        family = self._registry.family_of(placement.worker_id, placement.gpu_index)
        job = placement.job
        return self.expected_step(job, family, planned.get(job.job_id))

    async def look(self, placements: list[Placement], planned: Mapping[str, float]) -> Findings:
        quarantined = await asyncio.to_thread(self._store.quarantined_gpus)
        self._registry.quarantined = quarantined
        findings = Findings()
        if not self.settings.enabled:
            return findings
        now = self._clock.now()
        for worker_id, hello, health in self._registry.gpu_health():
            reason = errors_in(health)
            if reason and (worker_id, health.index) not in quarantined:
                fault = GpuFault(
                    worker_id, hello.instance, health.index, GpuFaultKind.ERRORS, reason, now
                )
                findings.quarantined.extend(await self.record(fault))
        running = {p.job.job_id: p for p in placements if p.job.state is JobState.RUNNING}
        self._learn_finished(running)
        reported = current_progress(self._registry.progress())
        for job_id, placement in running.items():
            seen = self._follow(placement, reported.get(job_id), planned.get(job_id), now)
            if seen is None:
                continue
            if seen.kind is GpuFaultKind.STALL:
                findings.stalled.append((placement, seen.detail))
                del self._paces[job_id]
            findings.quarantined.extend(await self.record(seen))
        return findings

    async def record(self, fault: GpuFault) -> list[Quarantine]:
        """Write the fault; the quarantine it completes, if any (durable too)."""
        log.warning(
            "GPU %d of %s: %s: %s", fault.gpu_index, fault.worker_id, fault.kind.value, fault.detail
        )
        await asyncio.to_thread(self._store.record_gpu_fault, fault)
        if (fault.worker_id, fault.gpu_index) in self._registry.quarantined:
            return []
        faults = await asyncio.to_thread(self._store.gpu_faults, fault.worker_id)
        reason = quarantine_reason(
            [f for f in faults if f.gpu_index == fault.gpu_index], self.settings.sick
        )
        if reason is None:
            return []
        marked = GpuFault(
            fault.worker_id,
            fault.instance_id,
            fault.gpu_index,
            GpuFaultKind.QUARANTINE,
            reason,
            fault.at,
            fault.job_id,
        )
        await asyncio.to_thread(self._store.record_gpu_fault, marked)
        self._registry.quarantined.add((fault.worker_id, fault.gpu_index))
        return [Quarantine(fault.worker_id, fault.instance_id, fault.gpu_index, reason)]

    def _follow(
        self,
        placement: Placement,
        reported: tuple[int, int] | None,
        planned: float | None,
        now: datetime,
    ) -> GpuFault | None:
        """Track the job's step; a STALL or SLOW fault of its GPU, or None."""
        job = placement.job
        pace = self._paces.get(job.job_id)
        step = reported[1] if reported is not None and reported[0] == job.attempt else None
        if pace is None or pace.attempt != job.attempt:
            family = self._registry.family_of(placement.worker_id, placement.gpu_index) or ""
            start = step if step is not None else job.checkpoint_step
            self._paces[job.job_id] = _Pace(
                job.attempt,
                placement.worker_id,
                placement.gpu_index,
                _shape(job, family),
                start,
                now,
            )
            return None
        if step is not None and step != pace.step:
            pace.step, pace.changed_at = step, now
            pace.origin = pace.origin or (step, now)
            pace.recent.append((step, now))
        hello = self._registry.hello(placement.worker_id)
        instance = hello.instance if hello else ""
        if reported is not None and pace.step >= job.spec.steps:
            return None  # decoding and uploading: the worker bounds those on its own
        expected = self.expected_step(job, pace.shape[0], planned)
        rule = self.settings.stall
        bound = rule.bound(expected) + rule.startup_seconds
        if pace.origin is None:
            bound = max(bound, self.settings.before_first_step_seconds)
        silent = (now - pace.changed_at).total_seconds()
        if silent > bound:
            detail = (
                f"{job.job_id}: no step for {silent:.0f} s (bound {bound:.0f} s) on "
                f"{placement.worker_id} GPU {placement.gpu_index}"
            )
            return GpuFault(
                placement.worker_id,
                instance,
                placement.gpu_index,
                GpuFaultKind.STALL,
                detail,
                now,
                job.job_id,
            )
        slot = (placement.worker_id, placement.gpu_index)
        peers = [p for ran_on, p in self._learned.get(pace.shape, ()) if ran_on != slot]
        slow = too_slow(*pace.recent_steps_and_seconds(), peers, self.settings.sick)
        if slow is not None and (placement.worker_id, placement.gpu_index) not in (
            self._registry.quarantined
        ):
            return GpuFault(
                placement.worker_id,
                instance,
                placement.gpu_index,
                GpuFaultKind.SLOW,
                slow,
                now,
                job.job_id,
            )
        return None

    def _learn_finished(self, running: dict[str, Placement]) -> None:
        """Attempts no longer running teach their family's pace (enough steps only)."""
        for job_id in [j for j in self._paces if j not in running]:
            pace = self._paces.pop(job_id)
            steps, seconds = pace.steps_and_seconds()
            quarantined = (pace.worker_id, pace.gpu_index) in self._registry.quarantined
            if steps >= self.settings.sick.slow_min_steps and seconds > 0 and not quarantined:
                learned = self._learned.setdefault(pace.shape, deque(maxlen=LEARNED_PACES))
                learned.append(((pace.worker_id, pace.gpu_index), seconds / steps))


def current_progress(
    progress: Iterable[tuple[JobProgress, datetime]],
) -> dict[str, tuple[int, int]]:
    """job -> (attempt, step) of its latest attempt. A worker that went away keeps its last
    heartbeat in the registry, with the job's earlier attempt: that report must not hide the
    live one's steps (it did, and a resumed job was stopped as stalled while it stepped)."""
    latest: dict[str, tuple[int, int]] = {}
    for job, _ in progress:
        known = latest.get(job.job_id)
        if known is None or job.attempt > known[0]:
            latest[job.job_id] = (job.attempt, job.step)
    return latest
