"""Every feature at once, at default settings (issue 46): the product's own loops (the job
store, the control plane's service and scheduler, the autoscaler with its default purchase
settings and candidate types) over a simulated cloud and simulated workers, on a fake clock.

The queue mixes 1.3B and 14B renders at 480p and 720p, deadlines, `exact` jobs, a spanned
render and two teams with GPU quotas; the autoscaler splits what it finds cheaper to split.
Workers on g6e instances share each GPU between two slots, workers on p4d instances slice
theirs by MIG, the others offer whole GPUs. The account's P spot quota is zero (one quota
error), and one zone loses its spot capacity midway (notices, checkpoints, resumes). The run
reports each job's end (done, or waiting and why), whether any attempt failed through a
machine's fault, and how long each instance stood idle and billed while claimed for a job it
did not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from autoscaler.actuation import Actuator
from autoscaler.demand import StoreDemand
from autoscaler.ec2.fake import FakeEc2
from autoscaler.ec2.ports import LaunchRequest, LaunchResult
from autoscaler.fleet_record import FleetRecorder
from autoscaler.loop import AutoscalerLoop
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.on_demand import fallback_price
from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.planned_market import PlannedMarketRule, SpotHistory
from autoscaler.pools import Pool
from autoscaler.reconcile import Reconciler
from autoscaler.snapshot import PurchaseSettings
from autoscaler.throughput import ThroughputModel
from autoscaler.wait_notes import WaitNotes
from kernel.clock import FakeClock
from kernel.instance_types import kind_of
from kernel.job_record import Submission
from kernel.job_spec import JobSpec, parse_job
from kernel.job_state import JobState
from kernel.market import Market
from kernel.model_memory import gpu_need_gib
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.costs.fleet_record import StoreFleetRecord
from orchestrator.costs.ledger import CostLedger
from orchestrator.intake.ports import ReceivedMessage
from orchestrator.interruptions.loop import InterruptionSettings, InterruptionsLoop
from orchestrator.scheduling.quotas import TeamQuota
from orchestrator.scheduling.snapshots import SchedulerSettings
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from simulator.cloud import SimInstance, spot_warning
from simulator.fakes import HandledQueue, KeptDeadLetters, MemoryLink
from simulator.message_bus import MessageBus
from simulator.scenario_worker import ScenarioWorker, SlotLayout
from simulator.worker_model import WorkerModel

START = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
ZONES = ("us-east-1a", "us-east-1b")
LOST_ZONE, LOSS_AT = "us-east-1a", timedelta(minutes=6)  # its spot capacity goes
STEP = timedelta(seconds=10)
STEP_SECONDS = 6.0  # a denoising step of every simulated render, whatever the GPU
NOTICE = timedelta(minutes=2)
ROUND_EVERY = 3  # steps: the autoscaler's 30 s
SPOT_SHARE = 0.4  # of the on-demand price
FLEET_ID = "scenario"
LAYOUTS = {"l40s": SlotLayout(shares=2), "a100": SlotLayout(mig_slices=(3, 3))}
# The account's P spot quota: one p5.48xlarge's vCPUs (a new account's is smaller still), so
# a second P spot instance is refused.
QUOTAS = {"L-7212CCBC": 192}


@dataclass
class Outcome:
    done: list[str] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # job -> why
    failed: list[str] = field(default_factory=list)
    machine_faults: int = 0  # attempts ended through a machine's fault
    idle_claimed_seconds: dict[str, float] = field(default_factory=dict)  # instance -> s
    notices: int = 0
    limit_errors: int = 0
    split: list[str] = field(default_factory=list)
    lapsed: list[str] = field(default_factory=list)  # jobs whose claim the scheduler let lapse
    quota_waits: list[str] = field(default_factory=list)  # jobs their team's quota held back
    minutes: float = 0.0


class ScenarioEc2(FakeEc2):
    """FakeEc2 that counts the account-limit errors its launches met."""

    limit_errors = 0

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        result = await super().launch(request)
        self.limit_errors += len(result.limits)
        return result


class ScenarioMarket:
    """Every default candidate type in both zones: on-demand at the dated list price, spot at
    a share of it; spot in the lost zone is gone after the loss."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        quotes = {}
        lost = self._clock.now() >= START + LOSS_AT
        for pool in pools:
            price = fallback_price("us-east-1", pool.instance_type)
            if price is None:
                continue
            if pool.market is Market.ON_DEMAND:
                quotes[pool] = PoolQuote(pool, price, 0.0)
                continue
            gone = lost and pool.availability_zone == LOST_ZONE
            why = "no spot capacity (the scenario's loss)" if gone else ""
            quotes[pool] = PoolQuote(pool, price * SPOT_SHARE, 0.05, not gone, why)
        return MarketSnapshot(self._clock.now(), quotes)


def scenario_jobs() -> list[JobSpec]:
    """The queue, with each job's memory need as the door gives it (the registry's figure)."""
    small, large = "wan/wan2.1-t2v-1.3b", "wan/wan2.1-t2v-14b"
    plan: list[tuple[str, str, int, int, dict[str, object]]] = [
        ("s480-a", small, 832, 480, {"deadline_hours": 3}),
        ("s480-b", small, 832, 480, {"exact": True}),
        ("s480-c", small, 832, 480, {}),
        ("s480-d", small, 832, 480, {"deadline_hours": 2}),
        ("s720-a", small, 1280, 720, {}),
        ("s720-b", small, 1280, 720, {"exact": True}),
        ("l480-a", large, 832, 480, {}),
        ("l480-b", large, 832, 480, {"deadline_hours": 4}),
        ("l720-a", large, 1280, 720, {}),
        ("l720-span", large, 1280, 720, {"gpus": 2}),
        ("s480-a100", small, 832, 480, {"families": ["a100"]}),
    ]
    specs = []
    for index, (job_id, model, width, height, extra) in enumerate(plan):
        team = ("research", "marketing")[index % 2]
        body: dict[str, object] = {
            "schema": "framefleet.job/v1",
            "job_id": job_id,
            "model": model,
            "prompt": f"scenario {job_id}",
            "width": width,
            "height": height,
            "num_frames": 81,
            "steps": 30,
            "seed": index,
            "priority": 5,
            "output": f"s3://scenario-output/{team}/",
            "tags": {"team": team},
            "exact": bool(extra.get("exact", False)),
            "gpu": {
                "count": int(str(extra.get("gpus", 1))),
                "families": list(extra.get("families", [])),  # type: ignore[call-overload]
            },
        }
        if "deadline_hours" in extra:
            hours = float(str(extra["deadline_hours"]))
            body["deadline"] = (START + timedelta(hours=hours)).isoformat()
        spec = parse_job(body, now=START)
        need = gpu_need_gib(spec)
        specs.append(
            spec.model_copy(update={"gpu": spec.gpu.model_copy(update={"min_vram_gib": need})})
        )
    return specs


class Scenario:
    def __init__(self, database: Path, hours: float = 2.0) -> None:
        self.clock = FakeClock(START)
        self.hours = hours
        self.store = JobStore(make_engine(f"sqlite:///{database}"), self.clock)
        self.store.upgrade()
        self.link = MemoryLink()
        # Research may not borrow past its three GPUs; marketing may, on what is idle.
        quotas = {
            "research": TeamQuota({"*": 3}, borrow=False),
            "marketing": TeamQuota({"*": 3}),
        }
        settings = ControlSettings(scheduler=SchedulerSettings(quotas=quotas))
        self.control = ControlPlaneService(
            self.store,
            self.clock,
            settings,
            connect=lambda _deliver, _admit: self.link,
            refusals=RefusedMessages(self.clock),
        )
        self.bus = MessageBus(self.control, self.link)
        self.interruptions = InterruptionsLoop(
            HandledQueue(),
            KeptDeadLetters(),
            self.control.instance_events,
            self.clock,
            InterruptionSettings(region=""),
        )
        self.cloud = ScenarioEc2(self.clock)
        self.cloud.vcpu_quotas.update(QUOTAS)
        capacity = CapacityMemory(self.clock)
        history = SpotHistory.for_interval(ROUND_EVERY * STEP.total_seconds())
        self.autoscaler = AutoscalerLoop(
            market=ScenarioMarket(self.clock),
            actuator=Actuator(self.cloud, capacity, FLEET_ID, self.clock),
            reconciler=Reconciler(self.cloud, FLEET_ID, self.clock),
            demand=StoreDemand(self.store),
            capacity=capacity,
            model=ThroughputModel(),
            settings=PurchaseSettings(),  # the defaults
            zones=ZONES,
            clock=self.clock,
            wait_notes=WaitNotes(self.store.wait_notes),
            # The spot planner, as `autoscaler.spot_planner` has it by default.
            market_rule=PlannedMarketRule(history),
            spot_history=history,
            interval_seconds=ROUND_EVERY * STEP.total_seconds(),
            # EC2's list as the product records it: only listed instances get work.
            recorder=FleetRecorder(
                StoreFleetRecord(
                    self.store.cost_facts, CostLedger(self.store.cost_facts, self.clock)
                )
            ),
        )
        self.workers: dict[str, ScenarioWorker] = {}
        self.finished: dict[str, datetime] = {}
        self.outcome = Outcome()
        self.ending: dict[str, datetime] = {}  # noticed spot instance -> when it is reclaimed
        self.quota_waits: set[str] = set()

    async def run(self) -> Outcome:
        self.store.intake.accept_batch(
            [Submission(spec, f"scenario-{spec.job_id}") for spec in scenario_jobs()]
        )
        for step in range(int(timedelta(hours=self.hours) / STEP)):
            now = self.clock.now()
            await self._capacity_loss(now)
            await self.bus.report(self.workers, now)
            if step % ROUND_EVERY == 0:
                await self.autoscaler.once()
                self._sync_workers()
            await self.control.tick()
            await self.bus.commands(self.workers, now)
            self._measure_idle(now)
            jobs = self.store.list_jobs()
            self.quota_waits.update(job.job_id for job in jobs if job.held_by_quota)
            if all(job.state.terminal for job in jobs):
                break
            for worker in self.workers.values():
                if worker.said_hello:
                    worker.run(now, STEP.total_seconds())
            self.clock.advance(STEP.total_seconds())
        return self._report()

    # -- the cloud -----------------------------------------------------------------------------

    async def _capacity_loss(self, now: datetime) -> None:
        """At LOSS_AT every spot instance in the lost zone gets its notice (IMDS), and is
        reclaimed two minutes later; no spot capacity is left there."""
        if now < START + LOSS_AT:
            return
        for instance_type in PurchaseSettings().candidate_types:
            self.cloud.insufficient.add(Pool(instance_type, LOST_ZONE, Market.SPOT))
        for instance_id, instance in list(self.cloud.instances.items()):
            pool = instance.pool
            if pool.market is not Market.SPOT or pool.availability_zone != LOST_ZONE:
                continue
            worker = self.workers.get(instance_id)
            if instance_id not in self.ending:
                self.ending[instance_id] = now + NOTICE
                self.outcome.notices += 1
                if worker is not None and worker.said_hello:
                    worker.on_notice(now)  # on its IMDS, and through EventBridge:
                body = spot_warning(instance_id, pool.region, now)
                await self.interruptions.handle(ReceivedMessage(f"w-{instance_id}", "r", body, 1))
            elif now >= self.ending[instance_id]:
                await self.cloud.terminate([instance_id])
                self._gone(instance_id)

    def _sync_workers(self) -> None:
        live = dict(self.cloud.instances)
        for instance_id in [w for w in self.workers if w not in live]:
            self._gone(instance_id)  # scaled in
        for instance_id, observed in live.items():
            if instance_id in self.workers:
                continue
            kind = kind_of(observed.pool.instance_type)
            family = kind.family.value
            layout = LAYOUTS.get(family, SlotLayout())
            slots = layout.slots(family, kind.vram_gib, kind.gpus)
            model = WorkerModel(
                step_seconds=STEP_SECONDS,
                model_load_seconds=60.0,
                family=family,
                vram_gib=kind.vram_gib,
                gpus=len(slots),
            )
            ready = observed.launched_at + timedelta(seconds=PurchaseSettings().boot_seconds)
            self.workers[instance_id] = ScenarioWorker(
                SimInstance(observed, ready, silent=False),
                model,
                20 * 3600.0,
                self.bus.send,
                self._finished,
                layout=layout,
                family=family,
                gpu_vram_gib=kind.vram_gib,
                physical_gpus=kind.gpus,
            )

    def _gone(self, instance_id: str) -> None:
        worker = self.workers.pop(instance_id, None)
        if worker is not None and worker.said_hello:
            worker.offline(self.clock.now())

    def _finished(self, job_id: str, at: datetime) -> None:
        self.finished.setdefault(job_id, at)

    # -- what is measured ----------------------------------------------------------------------

    def _measure_idle(self, now: datetime) -> None:
        """Each up instance claimed for a job and running none: idle and billed for it."""
        claimed = {r.instance_id for r in self.store.reservations.live().values() if r.holds(now)}
        for instance_id in sorted(claimed):
            worker = self.workers.get(instance_id)
            if worker is not None and worker.said_hello and not worker.jobs:
                seconds = self.outcome.idle_claimed_seconds.get(instance_id, 0.0)
                self.outcome.idle_claimed_seconds[instance_id] = seconds + STEP.total_seconds()

    def _report(self) -> Outcome:
        outcome = self.outcome
        jobs = self.store.list_jobs()
        for job in jobs:
            if job.state is JobState.SUCCEEDED:
                outcome.done.append(job.job_id)
            elif job.state is JobState.FAILED:
                outcome.failed.append(job.job_id)
            else:
                outcome.waiting[job.job_id] = job.waiting_for or f"{job.state}, no reason given"
            history = self.store.history(job.job_id)
            if any(event.reason.startswith("split into stages") for event in history):
                outcome.split.append(job.job_id)
        faulted = self.store.faulted_on([job.job_id for job in jobs])
        outcome.machine_faults = sum(len(workers) for workers in faulted.values())
        outcome.limit_errors = self.cloud.limit_errors
        outcome.lapsed = sorted(self.autoscaler.lapses.types)
        outcome.quota_waits = sorted(self.quota_waits)
        outcome.minutes = (self.clock.now() - START).total_seconds() / 60
        return outcome
