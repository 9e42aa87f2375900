"""Setting (b): a fleet of video jobs over days of a real trace, all zones at once, run by the
product itself on a simulated cloud, on an injected clock.

What runs is the production object graph: the job store (SQLite, migrated by alembic), which
jobs enter as the intake accepts them; the control plane (`ControlPlaneService`), with an
in-memory link in place of MQTT;
- the interruptions loop (`InterruptionsLoop.handle`), fed the EventBridge spot warnings;
- the autoscaler (`AutoscalerLoop`: reconcile, capacity memory, the purchase policy,
  actuation) over the trace-driven market and the simulated EC2.
The simulation supplies only the cloud (`SimulatedEc2`) and the workers (`SimulatedWorker`,
which keep the agent's protocol and checkpoint policy), and moves the clock from one event to
the next: tick boundaries (autoscaler rounds, reclaimed instances), notices, boots, arrivals
and finishing jobs.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

from autoscaler.actuation import Actuator
from autoscaler.demand import StoreDemand
from autoscaler.fleet_record import FleetRecorder
from autoscaler.loop import AutoscalerLoop
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.trace import Trace, TraceMarket
from autoscaler.reconcile import Reconciler
from autoscaler.snapshot import SplitMode
from autoscaler.throughput import ThroughputModel
from kernel.clock import FakeClock
from kernel.errors import FrameFleetError
from kernel.instance_types import kind_of
from kernel.job_record import Submission
from kernel.job_spec import JobSpec
from kernel.job_state import JobState
from kernel.market import Market
from orchestrator.control.gpu_watch import WatchSettings
from orchestrator.control.refusals import RefusedMessages
from orchestrator.control.service import ControlPlaneService
from orchestrator.control.settings import ControlSettings
from orchestrator.costs.fleet_record import StoreFleetRecord
from orchestrator.costs.ledger import CostLedger
from orchestrator.intake.ports import ReceivedMessage
from orchestrator.interruptions.loop import InterruptionSettings, InterruptionsLoop
from orchestrator.store.cost_facts import AttemptSpan
from orchestrator.store.engine import make_engine
from orchestrator.store.job_store import JobStore
from simulator.cloud import SimulatedEc2, instance_kind
from simulator.companions import WithCompanions, companions_for, no_companions
from simulator.fakes import HandledQueue, HomeZones, KeptDeadLetters, MemoryLink, PricesOnly
from simulator.fleet_faults import FaultWaste, faults_for
from simulator.fleet_policies import (
    FRAMEFLEET,
    ROUND_SECONDS,
    FleetPolicy,
    seen_before,
)
from simulator.fleet_setup import FleetSetup, fleet_pace, purchase_settings
from simulator.idle_watch import IdleWatch
from simulator.message_bus import MessageBus
from simulator.on_demand_answers import OnDemandAnswers
from simulator.results import FleetResult, start_delays
from simulator.worker_model import WorkerModel
from simulator.workers import SimulatedWorker
from simulator.workload import MAX_STEPS, SimJob, job_spec
from worker_ami.agent.checkpoint_policy import ON_DEMAND_MTBI_HOURS

FLEET_ID = "simulated"
MIN_SPOT_INTERRUPTIONS_PER_HOUR = 1 / 24  # a pool with none seen yet is not assumed safe


MAX_ROUNDS_PER_ADVANCE = 100_000  # far above any real tick: more means the simulation loops


class SimulationStuck(FrameFleetError):
    pass


class FleetSimulation:
    def __init__(
        self,
        trace: Trace,
        jobs: Sequence[SimJob],
        setup: FleetSetup,
        start_tick: int,
        database: Path,
        policy: FleetPolicy = FRAMEFLEET,
    ) -> None:
        self.trace = trace
        self.policy = policy
        self.setup = setup
        self.start_tick = start_tick
        self.clock = FakeClock(trace.start + trace.gap * start_tick)
        kind = instance_kind(trace)
        family = kind.family.value
        longest = max(j.compute_hours for j in jobs)
        self.job_step_seconds, step = fleet_pace(setup, family, longest * 3600 / MAX_STEPS)
        self.worker_model = WorkerModel(
            **{
                **setup.worker.__dict__,
                "step_seconds": step,
                "family": family,
                "vram_gib": kind.vram_gib,
            }
        )
        self.store = JobStore(make_engine(f"sqlite:///{database}"), self.clock)
        self.store.upgrade()
        self.ledger = CostLedger(self.store.cost_facts, self.clock)
        self.link = MemoryLink()
        # Worker messages are handed to the service directly, so the link only takes commands.
        self.control = ControlPlaneService(
            self.store,
            self.clock,
            ControlSettings(
                watch=WatchSettings(enabled=not setup.faults or setup.faults.detection)
            ),
            connect=lambda _deliver, _admit: self.link,
            refusals=RefusedMessages(self.clock),
        )
        self.bus = MessageBus(self.control, self.link)
        self.queue = HandledQueue()
        # The trace's pools span regions; one simulated control plane serves them all.
        events, anywhere = self.control.instance_events, InterruptionSettings(region="")
        self.interruptions = InterruptionsLoop(
            self.queue, KeptDeadLetters(), events, self.clock, anywhere
        )
        companions = companions_for(trace) if setup.multi_gpu else no_companions(trace)
        self.cloud = SimulatedEc2(
            trace, self.clock, setup.boot_seconds, setup.silent_share, companions
        )
        self.market = TraceMarket(trace, self.clock)
        market = WithCompanions(self.market, companions)
        capacity = CapacityMemory(self.clock)
        # Simulated workers render whole; split renders are measured apart (gpu_fleet.py).
        purchase = purchase_settings(setup, (kind.instance_type, *companions.types))
        settings = replace(policy.purchase(purchase), split_renders=SplitMode.NEVER)
        history = seen_before(trace, start_tick, settings.candidate_types)
        self.answers = OnDemandAnswers(policy.make_rule(history))
        self.autoscaler = AutoscalerLoop(
            market=market if policy.risk_aware else PricesOnly(market),
            actuator=Actuator(self.cloud, capacity, FLEET_ID, self.clock),
            reconciler=Reconciler(self.cloud, FLEET_ID, self.clock),
            demand=HomeZones(self.store, trace) if policy.home_zone else StoreDemand(self.store),
            capacity=capacity,
            # The planner knows the fleet's pace, as the step-time model gives it (every
            # simulated job has one shape).
            model=ThroughputModel(prior=lambda _shape, _family: step),
            settings=settings,
            zones=sorted(trace.zones),
            clock=self.clock,
            interval_seconds=trace.gap.total_seconds(),
            market_rule=self.answers,
            spot_history=history,
            recorder=FleetRecorder(StoreFleetRecord(self.store.cost_facts, self.ledger)),
        )
        self.jobs = sorted(jobs, key=lambda j: (j.arrival_hours, j.job_id))
        self._arrivals = list(self.jobs)
        self.workers: dict[str, SimulatedWorker] = {}
        self.finished: dict[str, datetime] = {}
        self.finished_twice = 0
        self.waste = FaultWaste()  # what injected faults wasted (setup.faults)
        self.idle = IdleWatch(settings.idle_timeout)

    # -- the run -------------------------------------------------------------------------------

    async def run(self) -> FleetResult:
        gap = self.trace.gap
        notice = timedelta(seconds=self.worker_model.notice_seconds)
        lead = max(1, math.ceil(notice / gap))  # ticks ahead a notice is due (1 unless short)
        t = self.start_tick
        while t < self.trace.ticks - 1 and len(self.finished) < len(self.jobs):
            if not self.cloud.live() and len(self.finished) == len(self.jobs) - len(self._arrivals):
                # Nothing runs and nothing waits: on to the next arrival.
                t = max(t, self.trace.tick(self._arrival_at(self._arrivals[0])))
                self.clock.advance((self._tick_start(t) - self.clock.now()).total_seconds())
            await self._advance(self._tick_start(t))
            for instance in self.cloud.reclaim(t):
                self._gone(instance.instance_id)
            self._accept_arrivals()
            await self._round(autoscale=True)
            await self._advance(self._tick_start(t + lead) - notice)
            ahead = range(t + 1, min(t + lead, self.trace.ticks - 1) + 1)
            for instance in [i for k in ahead for i in self.cloud.notices_for(k)]:
                noticed = self.workers.get(instance.instance_id)
                if noticed is not None and noticed.said_hello:
                    noticed.on_notice(self.clock.now())  # the notice on its IMDS
                body = self.cloud.spot_warning(instance)  # and through EventBridge
                await self.interruptions.handle(
                    ReceivedMessage(f"warning-{instance.instance_id}", "r", body, 1)
                )
            # The live loop runs every 30 s; here it runs at every event that changes what it
            # would decide (tick, arrival, notice), so its reaction time stays that short.
            await self._round(autoscale=True)
            t += 1
        await self._advance(self._tick_start(t))
        return self.result()

    def result(self) -> FleetResult:
        misses = unfinished = avoidable = 0
        startup = self.setup.boot_seconds + self.worker_model.model_load_seconds
        for job in self.jobs:
            finished = self.finished.get(job.job_id)
            if job.deadline_hours is None:
                unfinished += finished is None
            elif finished is None or finished > self._deadline_of(job):
                misses += 1
                avoidable += startup / 3600 + job.compute_hours <= job.deadline_hours
        spot = on_demand = 0.0
        now = self.clock.now()
        for instance in self.cloud.records.values():
            hours = ((instance.ended_at or now) - instance.observed.launched_at).total_seconds()
            if instance.pool.market is Market.SPOT:
                spot += hours / 3600
            else:
                on_demand += hours / 3600
        succeeded = self.store.count_by_state().get(JobState.SUCCEEDED, 0)
        spans = self.store.cost_facts.attempts_on(list(self.cloud.records))  # one query, in chunks
        allowed = timedelta(seconds=startup + ROUND_SECONDS)
        late = self.answers.late_starts(((s.job_id, s.started_at) for s in spans), allowed, now)
        assert succeeded == len(self.finished), "the store and the workers disagree"
        return FleetResult(
            self.policy.name,
            sum(i.cost for i in self.cloud.records.values()),
            spot,
            on_demand,
            misses,
            unfinished,
            interruptions=sum(i.interrupted for i in self.cloud.records.values()),
            launches=len(self.cloud.records),
            finished_twice=self.finished_twice,
            **self._start_delays(spans),
            finished=len(self.finished),
            avoidable_misses=avoidable,
            late_on_demand=len(late),
            late_on_demand_hours=max((hours for _, hours in late), default=0.0),
        )

    def _start_delays(self, spans: list[AttemptSpan]) -> dict[str, float]:
        """Mean, p50 and p95 of arrival -> first start, over the jobs that started (hours)."""
        first_start: dict[str, datetime] = {}
        for span in spans:
            known = first_start.get(span.job_id)
            first_start[span.job_id] = min(known or span.started_at, span.started_at)
        return start_delays(
            [
                (first_start[job.job_id] - self._arrival_at(job)).total_seconds() / 3600
                for job in self.jobs
                if job.job_id in first_start
            ]
        )

    # -- moving the clock ----------------------------------------------------------------------

    async def _advance(self, until: datetime) -> None:
        """Let the workers work until `until`, stopping for every boot, arrival and finished
        job in between (each is a round of the control plane)."""
        for _ in range(MAX_ROUNDS_PER_ADVANCE):
            now = self.clock.now()
            moment = until
            for worker in self.workers.values():
                if not worker.said_hello:
                    moment = min(moment, max(now, worker.instance.ready_at))
                elif (ahead := worker.seconds_to_next_event()) < math.inf:  # inf: idle, hung
                    moment = min(moment, now + timedelta(seconds=max(1e-3, ahead)))
            if self._arrivals:
                moment = min(moment, max(now, self._arrival_at(self._arrivals[0])))
            idle_due = self.idle.next_due(self.workers, now)
            moment = min(moment, idle_due or moment)
            seconds = (moment - now).total_seconds()
            if seconds > 0:
                for worker in self.workers.values():
                    if worker.said_hello:
                        worker.run(now, seconds)
                self.cloud.bill(moment)
                self.clock.advance(seconds)
            if moment >= until:
                return
            arrived = self._accept_arrivals()
            await self._round(autoscale=arrived or moment == idle_due)
        raise SimulationStuck(f"no progress towards {until.isoformat()}")

    async def _round(self, autoscale: bool) -> None:
        """Workers report, the control plane applies, the autoscaler may act, the control plane
        schedules, commands reach the workers and their answers come back."""
        now = self.clock.now()
        await self.bus.report(self.workers, now)
        if autoscale:
            await self.autoscaler.once()
            self._sync_workers()
        await self.control.tick()
        await self.bus.commands(self.workers, now)

    # -- workers come and go with their instances ----------------------------------------------

    def _sync_workers(self) -> None:
        live = {i.instance_id: i for i in self.cloud.live()}
        for instance_id in [w for w in self.workers if w not in live]:
            self._gone(instance_id)  # terminated by the autoscaler (scale-in)
        for instance_id, instance in live.items():
            if instance_id not in self.workers:
                gpus = kind_of(instance.pool.instance_type).gpus
                mtbi = self._mtbi(instance.pool.availability_zone, instance.pool.market)
                injected = self.setup.faults
                faults = (
                    None
                    if injected is None
                    else faults_for(
                        instance_id, instance.observed.launched_at, injected, self.waste
                    )
                )
                self.workers[instance_id] = SimulatedWorker(
                    instance,
                    replace(self.worker_model, gpus=gpus),
                    mtbi,
                    self.bus.send,
                    self._finished,
                    faults=faults,
                )

    def _gone(self, instance_id: str) -> None:
        worker = self.workers.pop(instance_id, None)
        if worker is not None and worker.said_hello:
            worker.offline(self.clock.now())  # its last will

    def _mtbi(self, zone: str, market: Market) -> float:
        if market is Market.ON_DEMAND:
            return ON_DEMAND_MTBI_HOURS * 3600  # the worker's default: its host's failures
        rate = self.market.interruptions_per_hour(zone, self.trace.tick(self.clock.now()))
        return 3600 / max(rate, MIN_SPOT_INTERRUPTIONS_PER_HOUR)

    def _finished(self, job_id: str, at: datetime) -> None:
        if job_id in self.finished:
            self.finished_twice += 1
            return
        self.finished[job_id] = at

    # -- jobs arrive ---------------------------------------------------------------------------

    def _accept_arrivals(self) -> bool:
        now = self.clock.now()
        due = []
        while self._arrivals and self._arrival_at(self._arrivals[0]) <= now:
            due.append(self._arrivals.pop(0))
        self.store.intake.accept_batch([Submission(self._spec(j), f"sim-{j.job_id}") for j in due])
        return bool(due)

    def _spec(self, job: SimJob) -> JobSpec:
        deadline = None if job.deadline_hours is None else self._deadline_of(job)
        model = self.worker_model
        return job_spec(job, self.job_step_seconds, self.setup.video, model, deadline)

    def _arrival_at(self, job: SimJob) -> datetime:
        return self._tick_start(self.start_tick) + timedelta(hours=job.arrival_hours)

    def _deadline_of(self, job: SimJob) -> datetime:
        assert job.deadline_hours is not None
        return self._arrival_at(job) + timedelta(hours=job.deadline_hours)

    def _tick_start(self, tick: int) -> datetime:
        return self.trace.start + self.trace.gap * tick


async def run_fleet(
    trace: Trace,
    jobs: Sequence[SimJob],
    setup: FleetSetup,
    start_tick: int = 0,
    policy: FleetPolicy = FRAMEFLEET,
) -> FleetResult:
    with tempfile.TemporaryDirectory(prefix="framefleet-sim-") as folder:
        simulation = FleetSimulation(
            trace, jobs, setup, start_tick, Path(folder) / "jobs.db", policy
        )
        try:
            return await simulation.run()
        finally:
            simulation.store.dispose()
