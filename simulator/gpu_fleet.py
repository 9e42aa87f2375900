"""A fleet of GPU instances rendering a mixed video workload, with GPU sharing, spanning and
stages each on or off: what each costs per video (issue 35). Time advances in ticks; every
render keeps the step-time model's pace (`kernel.step_time`, `kernel.stage_cost`).

The product's own rules decide: `autoscaler.render_plan.plan_render` where each job renders
(and whether it splits into stages), `orchestrator.scheduling.gpu_sharing.best_gpu_to_join`
which GPU a job shares, `orchestrator.scheduling.gangs.plan_gangs` which GPUs a job takes
whole. What is simple here is the autoscaler: it buys, for a job no GPU can take, the type of
the planned family that is cheapest per GPU it would fill from the queue, boots it in
`boot_seconds`, and ends an instance idle for `idle_seconds`. Every configuration runs the same
rules; only the features differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from autoscaler.render_plan import GpuOffer, Placement, plan_render
from kernel.stage_cost import PROMPT_TOKENS
from orchestrator.scheduling.gangs import GangGpu, GangJob, GangWorker, plan_gangs
from orchestrator.scheduling.gpu_sharing import SharedGpu, SharingPace, Tenant, best_gpu_to_join
from simulator.gpu_workload import VideoJob

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Features:
    sharing: bool = False
    spanning: bool = False
    stages: bool = False

    @property
    def name(self) -> str:
        flags = {"sharing": self.sharing, "spanning": self.spanning, "stages": self.stages}
        return " + ".join(name for name, on in flags.items() if on) or "one job per GPU"


@dataclass
class Unit:
    """A stage of a job (or its whole render) waiting for, or running on, its GPUs."""

    uid: int
    job: VideoJob
    placement: Placement
    later: tuple[Placement, ...]  # the job's stages after this one
    step_seconds: float  # alone; a side stage is one "step" of its whole time
    tokens: int  # how much of a step is compute (`gpu_sharing.SharingPace`)
    work_left: float  # seconds alone
    where: tuple[int, tuple[int, ...]] | None = None  # instance, GPU indexes

    def tenant(self) -> Tenant:
        deadline = None if self.job.deadline_s is None else _at(self.job.deadline_s)
        steps = max(1, math.ceil(self.work_left / self.step_seconds - 1e-9))
        need = self.placement.need_gib
        return Tenant(str(self.uid), need, self.step_seconds, steps, deadline, self.tokens)


@dataclass
class Instance:
    iid: int
    offer: GpuOffer
    bought_at: float
    ready_at: float
    tenants: list[list[Unit]]  # per GPU
    promised: set[int] = field(default_factory=set)  # units it was bought for
    idle_since: float | None = None
    ended_at: float | None = None

    def busy(self) -> bool:
        return any(self.tenants)


@dataclass(frozen=True)
class FleetOutcome:
    features: str
    videos: int
    cost: float
    gpu_hours: float
    busy_gpu_hours: float
    instances: int
    misses: int
    split_jobs: int
    spanned_jobs: int

    @property
    def cost_per_video(self) -> float:
        return self.cost / self.videos if self.videos else float("inf")


def _at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


class GpuFleet:
    def __init__(
        self,
        offers: Sequence[GpuOffer],
        features: Features,
        pace: SharingPace | None = None,
        boot_seconds: float = 240.0,
        idle_seconds: float = 300.0,
        tick_seconds: float = 5.0,
    ) -> None:
        self._offers = list(offers)
        self._features = features
        self._pace = pace or SharingPace()
        self._boot, self._idle, self._tick = boot_seconds, idle_seconds, tick_seconds
        self._instances: list[Instance] = []
        self._queue: list[Unit] = []
        self._running: list[Unit] = []
        self._holds: dict[str, str] = {}
        self._uids = 0
        self._finished: dict[str, float] = {}
        self._busy_gpu_seconds = 0.0
        self._split = self._spanned = 0

    def run(self, jobs: Sequence[VideoJob]) -> FleetOutcome:
        arrivals = sorted(jobs, key=lambda j: (j.arrival_s, j.job_id))
        now = 0.0
        while arrivals or self._queue or self._running:
            while arrivals and arrivals[0].arrival_s <= now:
                self._arrive(arrivals.pop(0), now)
            self._advance(now)
            self._place(now)
            self._buy(now)
            self._release(now)
            now += self._tick
        for instance in self._instances:
            if instance.ended_at is None:
                instance.ended_at = now
        return self._outcome(jobs)

    def _arrive(self, job: VideoJob, now: float) -> None:
        window = None if job.deadline_s is None else job.deadline_s - now
        features = self._features
        plan = plan_render(
            job.video, self._offers, features.spanning, features.stages, window, self._boot
        )
        if plan is None:
            raise ValueError(f"no offered GPU holds a {job.kind} render")
        self._split += plan.split
        self._spanned += any(p.gpus > 1 for p in plan.stages)
        self._enqueue(job, plan.stages)

    def _enqueue(self, job: VideoJob, stages: tuple[Placement, ...]) -> None:
        placement, later = stages[0], stages[1:]
        video = job.video
        if placement.stage in ("render", "denoise"):
            step, tokens = placement.seconds / video.steps, video.tokens
        else:
            step = placement.seconds
            tokens = PROMPT_TOKENS if placement.stage == "encode" else video.tokens
        self._uids += 1
        unit = Unit(self._uids, job, placement, later, step, tokens, placement.seconds)
        self._queue.append(unit)

    def _advance(self, now: float) -> None:
        """Every running unit does a tick of work, at the pace its GPU's neighbours leave it."""
        done = []
        for unit in self._running:
            assert unit.where is not None
            instance = self._instances[unit.where[0]]
            on_gpu = instance.tenants[unit.where[1][0]]
            rate = 1.0
            if len(on_gpu) > 1:
                tenants = [u.tenant() for u in on_gpu]
                mine = tenants[on_gpu.index(unit)]
                rate = mine.seconds_per_step / self._pace.shared_step(mine, tenants)
            unit.work_left -= self._tick * rate
            self._busy_gpu_seconds += self._tick * len(unit.where[1]) / len(on_gpu)
            if unit.work_left <= 1e-9:
                done.append(unit)
        for unit in done:
            assert unit.where is not None
            instance = self._instances[unit.where[0]]
            for index in unit.where[1]:
                instance.tenants[index].remove(unit)
            self._running.remove(unit)
            if unit.later:
                self._enqueue(unit.job, unit.later)
            else:
                self._finished[unit.job.job_id] = now

    def _ready(self, now: float) -> list[Instance]:
        return [i for i in self._instances if i.ready_at <= now and i.ended_at is None]

    def _start(self, unit: Unit, instance: Instance, indexes: tuple[int, ...]) -> None:
        unit.where = (instance.iid, indexes)
        for index in indexes:
            instance.tenants[index].append(unit)
        instance.idle_since = None
        self._queue.remove(unit)
        self._running.append(unit)
        for other in self._instances:
            other.promised.discard(unit.uid)

    def _place(self, now: float) -> None:
        ready = self._ready(now)
        order = sorted(
            self._queue, key=lambda u: (u.job.deadline_s or math.inf, u.job.arrival_s, u.uid)
        )
        whole: list[Unit] = []
        for unit in order:
            if self._features.sharing and unit.placement.gpus == 1:
                self._share(unit, ready, now)
            else:
                whole.append(unit)
        if not whole:
            return
        by_id = {str(u.uid): u for u in whole}
        gangs = [
            GangJob(
                str(u.uid), u.placement.gpus, u.placement.need_gib, frozenset({u.placement.family})
            )
            for u in whole
        ]
        workers = [self._gang_worker(i, now) for i in ready]
        plan = plan_gangs(gangs, workers, _at(now), held_before=self._holds)
        self._holds = dict(plan.holds)
        for uid, (worker_id, indexes) in plan.starts.items():
            self._start(by_id[uid], self._instances[int(worker_id)], indexes)

    def _gang_worker(self, instance: Instance, now: float) -> GangWorker:
        gpus = []
        for index, on_gpu in enumerate(instance.tenants):
            busy = None
            if on_gpu:
                left = max(u.work_left for u in on_gpu) * len(on_gpu)
                busy = _at(now + left)
            gpus.append(GangGpu(index, instance.offer.family, instance.offer.vram_gib, busy))
        return GangWorker(str(instance.iid), tuple(gpus))

    def _share(self, unit: Unit, ready: list[Instance], now: float) -> None:
        held = set(self._holds)
        gpus = [
            SharedGpu(str(i.iid), index, i.offer.vram_gib, tuple(u.tenant() for u in on_gpu))
            for i in ready
            if i.offer.family == unit.placement.family and str(i.iid) not in held
            for index, on_gpu in enumerate(i.tenants)
            if all(u.placement.gpus == 1 for u in on_gpu)
        ]
        best = best_gpu_to_join(gpus, unit.tenant(), _at(now), self._pace)
        if best is None:  # a job late even alone still renders, alone
            best = next((gpu for gpu in gpus if not gpu.tenants), None)
        if best is not None:
            self._start(unit, self._instances[int(best.worker_id)], (best.index,))

    def _buy(self, now: float) -> None:
        """For each waiting unit no instance was bought for, the family's type cheapest per GPU
        that the waiting units of that family would fill."""
        booting = [i for i in self._instances if i.ready_at > now]
        held = set(self._holds.values())
        waiting = [u for u in self._queue if str(u.uid) not in held]
        for unit in waiting:
            if any(unit.uid in i.promised for i in booting):
                continue
            family, gpus = unit.placement.family, unit.placement.gpus
            spare = [
                i
                for i in booting
                if i.offer.family == family and i.offer.gpus - self._promised_gpus(i) >= gpus
            ]
            if spare:
                spare[0].promised.add(unit.uid)
                continue
            alike = [
                u
                for u in waiting
                if u.placement.family == family and not any(u.uid in i.promised for i in booting)
            ]
            demand = sum(u.placement.gpus for u in alike)
            fitting = [o for o in self._offers if o.family == family and o.gpus >= gpus]
            offer = min(
                fitting,
                key=lambda o: (o.price_per_hour / min(o.gpus, max(demand, gpus)), o.gpus),
            )
            instance = Instance(
                len(self._instances), offer, now, now + self._boot, [[] for _ in range(offer.gpus)]
            )
            self._instances.append(instance)
            booting.append(instance)
            instance.promised.add(unit.uid)

    def _promised_gpus(self, instance: Instance) -> int:
        gpus = {u.uid: u.placement.gpus for u in self._queue}
        return sum(gpus.get(uid, 0) for uid in instance.promised)

    def _release(self, now: float) -> None:
        held = set(self._holds)
        for instance in self._ready(now):
            if instance.busy() or str(instance.iid) in held:
                instance.idle_since = None
                continue
            if instance.idle_since is None:
                instance.idle_since = now
            elif now - instance.idle_since >= self._idle:
                instance.ended_at = now

    def _outcome(self, jobs: Sequence[VideoJob]) -> FleetOutcome:
        cost = sum(
            i.offer.price_per_hour * ((i.ended_at or i.bought_at) - i.bought_at) / 3600
            for i in self._instances
        )
        gpu_hours = sum(
            i.offer.gpus * ((i.ended_at or i.bought_at) - i.bought_at) / 3600
            for i in self._instances
        )
        misses = sum(
            1
            for j in jobs
            if j.deadline_s is not None and self._finished.get(j.job_id, math.inf) > j.deadline_s
        )
        return FleetOutcome(
            self._features.name,
            len(self._finished),
            cost,
            gpu_hours,
            self._busy_gpu_seconds / 3600,
            len(self._instances),
            misses,
            self._split,
            self._spanned,
        )


def lower_bound(
    jobs: Sequence[VideoJob], offers: Sequence[GpuOffer], pace: SharingPace | None = None
) -> float:
    """No configuration pays less: each job in its cheapest plan with every feature on and no
    deadline, every GPU-second at its family's cheapest per-GPU price, no boot or idle time,
    and a small render's latency wholly filled by neighbours (only its compute paid)."""
    pace = pace or SharingPace()
    total = 0.0
    for job in jobs:
        plan = plan_render(job.video, offers, may_span=True, may_split=True, packed=True)
        if plan is None:
            continue
        for placement in plan.stages:
            tokens = PROMPT_TOKENS if placement.stage == "encode" else job.video.tokens
            share = pace.small_latency_share if tokens <= pace.small_tokens else 0.0
            total += placement.cost * (1 - share)
    return total
