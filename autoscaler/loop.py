"""The autoscaler loop: reconcile the fleet, read the market, plan, act; again after capacity
errors (the policy then picks other pools), then sleep. Every decision is logged with its reason
and each waiting job's is kept in the store (wait_notes.py)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from autoscaler.actuation import Actuation, Actuator
from autoscaler.credentials.issuer import WorkerCredentials
from autoscaler.deadline import MarketRule, choose_market, new_instance_startup
from autoscaler.demand import DemandSource, moving_off
from autoscaler.drains import Drains
from autoscaler.fleet_record import FleetRecorder
from autoscaler.fleet_views import instance_views
from autoscaler.instances import InstanceBook
from autoscaler.learning import ThroughputLearning
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.ports import MarketData
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.metrics import AutoscalerMetrics
from autoscaler.planned_market import SpotHistory
from autoscaler.policy import plan
from autoscaler.pools import Pool
from autoscaler.prewarm import Prewarming
from autoscaler.rate_sharing import RateSharing
from autoscaler.reconcile import Reconciler
from autoscaler.reported_kinds import ReportedKinds
from autoscaler.reservations import Lapses, reservations_for
from autoscaler.snapshot import (
    InstanceView,
    JobDemand,
    Plan,
    PlanInput,
    PurchaseSettings,
    RunningDemand,
    SplitMode,
)
from autoscaler.spot_return import ready_to_move, spot_launches
from autoscaler.stage_split import offers_now, splits
from autoscaler.throughput import ThroughputModel
from autoscaler.wait_notes import WaitNotes
from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from kernel.instance_state import GONE, InstanceState
from kernel.instance_types import CATALOG
from kernel.instance_types import learn as learn_kinds
from kernel.market import GpuFamily, Market
from kernel.outage import Outage

log = logging.getLogger(__name__)


@dataclass
class AutoscalerLoop:
    market: MarketData
    actuator: Actuator
    reconciler: Reconciler
    demand: DemandSource
    capacity: CapacityMemory
    model: ThroughputModel
    settings: PurchaseSettings
    zones: Sequence[str]
    clock: Clock
    interval_seconds: float = 30.0
    max_rounds: int = 3
    market_rule: MarketRule = choose_market  # the planner's (planned_market.py) or a baseline
    spot_history: SpotHistory | None = None  # what the planner learns capacity from
    book: InstanceBook = field(default_factory=InstanceBook)  # each instance's state
    # What the cost ledger is told, and today's spend (without a ledger, as in the planning
    # CLI, it is accrued in memory from the instances' prices).
    recorder: FleetRecorder = field(default_factory=FleetRecorder)
    metrics: AutoscalerMetrics | None = None
    # Each listed instance's own broker account (None: no per-worker accounts, as in the demo).
    credentials: WorkerCredentials | None = None
    prewarming: Prewarming = field(default_factory=Prewarming)
    wait_notes: WaitNotes | None = None  # None: nothing kept (the simulator, `plan`)
    rate_sharing: RateSharing = field(default_factory=RateSharing)
    reported_kinds: ReportedKinds = field(default_factory=ReportedKinds)
    lapses: Lapses = field(default_factory=Lapses)
    # Built from the loop's parts: the drains it asked for, and the model's learning.
    drains: Drains = field(init=False)
    learning: ThroughputLearning = field(init=False)

    def __post_init__(self) -> None:
        self.drains = Drains(self.demand, self.actuator)
        self.learning = ThroughputLearning(self.model)

    def pools(self) -> list[Pool]:
        return [
            Pool(t, z, m) for t in self.settings.candidate_types for z in self.zones for m in Market
        ]

    async def once(self) -> list[Plan]:
        await self.capacity.sync()  # the pools other replicas found failing, and ours
        await self.actuator.limits.refresh()  # the account's vCPU quotas, now and then
        busy = await self._sync_fleet()
        await self._finish_drains()
        await asyncio.to_thread(self.learn)
        now = self.clock.now()
        if self.reported_kinds.due(now):
            learn_kinds(await asyncio.to_thread(self.demand.instance_kinds))
            self.reported_kinds.read(now)
        queued = await asyncio.to_thread(self.demand.queued, now)
        warned = self.drains.warned
        warned_jobs: list[JobDemand] = []
        if warned:  # their jobs need GPUs within two minutes: bought in this round
            running = await asyncio.to_thread(self.demand.running)
            warned_jobs = moving_off(running, warned, queued)
            queued = [*queued, *warned_jobs]
        self.prewarming.saw(queued)
        running, moving = await self._moving_to_spot(now)
        plans = []
        covered: set[str] = set()
        for round_number in range(self.max_rounds):
            state = await self.plan_input(
                busy, [j for j in queued if j.job_id not in covered], moving=moving
            )
            if round_number == 0 and await self._split(state):
                # The split jobs' next attempts encode: their stage's GPU need is bought for.
                queued = [*await asyncio.to_thread(self.demand.queued, now), *warned_jobs]
                state = replace(state, queued=tuple(queued))
            decided = plan(state, self.settings, self.model, self.market_rule)
            plans.append(decided)
            for wait in decided.waits:
                log.info("job %s waits: %s", wait.job_id, wait.reason)
            # Scale-in goes through the control plane: it empties the instance first.
            await asyncio.to_thread(self.drains.ask, decided.terminations)
            done = await self._launch(state, replace(decided, terminations=()), busy)
            covered.update(j for launch, _ in done.launched for j in launch.job_ids)
            if self.metrics is not None:
                self.metrics.planned(state, decided, done, self.settings)
                fleet = (i.pool for i in self.reconciler.ledger.values())
                self.metrics.quotas(self.actuator.limits.uses(fleet))
            if not done.failed:
                break
        if running:  # read only when back to spot is on and an on-demand instance exists
            await self._back_to_spot(state, running, moving, busy)
        await self._sync_credentials()
        if self.wait_notes is not None:
            await asyncio.to_thread(self.wait_notes.note, [j.job_id for j in queued], plans)
        return plans

    async def _split(self, state: PlanInput) -> bool:
        """Split the queued renders the planner finds cheaper in stages; True if any was."""
        if self.settings.split_renders is SplitMode.NEVER:
            return False  # the offers are not worth reading every round (the simulator)
        offers = offers_now(state.market, self.settings.candidate_types)
        chosen = splits(state.queued, offers, state.now, self.settings)
        if not chosen:
            return False
        done = await asyncio.to_thread(
            self.demand.split_into_stages, {s.job_id: s.why for s in chosen}
        )
        for split in chosen:
            if split.job_id in done:
                log.info("job %s split into stages: %s", split.job_id, split.why)
        return bool(done)

    async def _launch(self, state: PlanInput, decided: Plan, busy: Counter[str]) -> Actuation:
        """Carry out the plan; book what it bought and reserve it for its jobs."""
        done: Actuation = await self.actuator.execute(decided)
        now = self.clock.now()
        if done.launched:
            await self.recorder.instances_seen(instance for _, instance in done.launched)
        for launch, instance in done.launched:
            # EC2 may have taken one of the launch's alternatives: that pool's price.
            quote = state.market.quote(instance.pool)
            price = quote.price_per_hour if quote is not None else launch.price_per_hour
            self.book.bought(instance, price, now)
            self.reconciler.ledger[instance.instance_id] = instance
            # Its GPUs are spoken for by the jobs it was bought for (left out above).
            busy[instance.instance_id] += len(launch.job_ids)
        await self._record_moves()
        jobs = [*state.queued, *(r.demand for r in state.running)]
        chosen = reservations_for(
            decided, done, jobs, self.reconciler.ledger, self.settings, self.model, now
        )
        await asyncio.to_thread(self.demand.reserve, chosen)
        return done

    async def _moving_to_spot(self, now: datetime) -> tuple[list[RunningDemand], dict[str, str]]:
        """The running jobs, and instance -> job for the spot instances held for those of them
        moving back to spot (no other job may take those GPUs, and scale-in leaves them)."""
        on_demand = (i.pool.market is Market.ON_DEMAND for i in self.reconciler.ledger.values())
        if not self.settings.return_to_spot or not any(on_demand):
            return [], {}  # no job runs on on-demand: nothing to read

        def read() -> tuple[list[RunningDemand], dict[str, str]]:
            running = self.demand.running()
            held = self.demand.reservations(now, [job.demand.job_id for job in running])
            return running, held

        running, held = await asyncio.to_thread(read)
        return running, {instance_id: job_id for job_id, instance_id in held.items()}

    async def _back_to_spot(
        self,
        state: PlanInput,
        running: Sequence[RunningDemand],
        moving: Mapping[str, str],
        busy: Counter[str],
    ) -> None:
        """Jobs on on-demand whose spot instance has booted move there; others worth moving
        get one (`autoscaler/spot_return.py`)."""
        held = {job_id: instance_id for instance_id, job_id in moving.items()}
        await asyncio.to_thread(self.drains.ask, ready_to_move(state, running, held, self.settings))
        waiting = [job for job in running if job.demand.job_id not in held]
        launches = spot_launches(state, waiting, self.settings, self.model, self.market_rule)
        if launches:
            await self._launch(
                replace(state, running=tuple(running)), Plan(launches=tuple(launches)), busy
            )

    async def _sync_credentials(self) -> None:
        """After the launches, so a new instance's account is there while it boots. A broker
        that does not answer costs a warning: the next round catches up."""
        if self.credentials is None:
            return
        try:
            await self.credentials.sync(self.reconciler.ledger)
        except FrameFleetError as error:
            log.warning("worker credentials not synced, retrying next round: %s", error)

    async def _sync_fleet(self) -> Counter[str]:
        """Reconcile with EC2; returns the busy GPUs per instance (a copy the caller may add
        this round's launches to)."""
        busy = Counter(await asyncio.to_thread(self.demand.busy_gpus))
        # Instances this process bought are the idle timeout's business; an adopted one
        # that never ran a job within the grace period is an orphan.
        known = dict(self.reconciler.ledger)
        live = await asyncio.to_thread(self.demand.instance_statuses, set(InstanceState) - GONE)
        states = {instance_id: status.state for instance_id, status in live.items()}
        self.drains.saw(states)
        synced = await self.reconciler.reconcile(workers_seen=set(busy) | self.book.spoken_for())
        now = self.clock.now()
        self.book.listed(self.reconciler.ledger.values(), now, states)
        self.book.worked(busy, now)
        orphan = "orphan: no worker came up on it within the grace period"
        self.book.asked_to_end(synced.orphans_terminated, now, orphan)
        ended = [(instance_id, orphan) for instance_id in synced.orphans_terminated]
        for instance_id in synced.forgotten:
            pool = known[instance_id].pool
            state = self.book.gone(instance_id, pool, now)
            ended.append((instance_id, f"no longer listed by EC2 ({state.value})"))
            if state is InstanceState.INTERRUPTED:
                # Its pool's rate and the capacity memory learn from it.
                self.capacity.interrupted(pool)
                if self.metrics is not None:
                    self.metrics.interrupted(pool)
                log.warning("spot instance %s in %s was interrupted", instance_id, pool)
        await self.recorder.instances_seen(self.reconciler.ledger[i] for i in synced.adopted)
        await self.recorder.ended(ended, now)
        await self._record_moves()
        self.book.forget_long_gone(now)
        if self.metrics is not None:
            self.metrics.fleet(self.book.records.values())
        return busy

    async def _record_moves(self) -> None:
        """The book's moves go to the instance's one record in the store."""
        moves = self.book.take_moves()
        if moves:
            await asyncio.to_thread(self.demand.record_moves, moves)

    async def _finish_drains(self) -> None:
        """Terminate the instances the control plane has emptied (or left alone past the drain
        timeout)."""
        now = self.clock.now()
        ended = await self.drains.finish(self.reconciler.ledger, now)
        if ended:
            for termination in ended:
                self.book.asked_to_end([termination.instance_id], now, termination.reason)
            await self._record_moves()
            await self.recorder.ended([(t.instance_id, t.reason) for t in ended], now)

    def learn(self) -> None:
        """The throughput model learns from the jobs that finished since it last looked."""

        def family_of(instance_id: str) -> GpuFamily | None:
            record = self.book.records.get(instance_id)
            kind = CATALOG.get(record.pool.instance_type) if record else None
            return kind.family if kind is not None else None

        self.learning.learn(self.demand.finished_since, family_of, self.clock.now())

    def remembered(self) -> int:
        """Instances the loop remembers (for the bounded-memory test)."""
        return len(self.book.records)

    async def plan_input(
        self,
        busy: Mapping[str, int],
        queued: Sequence[JobDemand],
        spent_today: float | None = None,
        moving: Mapping[str, str] | None = None,
    ) -> PlanInput:
        """The policy's snapshot now: the market (capacity holds applied), the fleet, the
        queue, and today's spend (accrued unless given)."""
        now = self.clock.now()
        limits = self.actuator.limits
        market = limits.screen(self.capacity.screen(await self.market.snapshot(self.pools())))
        if self.spot_history is not None:
            self.spot_history.record(market)
        rates = self.rate_sharing.due(market, now)
        if rates is not None:
            await asyncio.to_thread(self.demand.record_pool_rates, rates)
            self.rate_sharing.written(rates, now)
        instances = tuple(self.instance_views(busy, market))
        await self.recorder.prices(market)
        if spent_today is None:
            fleet_per_hour = sum(i.price_per_hour for i in instances)
            spent_today = await self.recorder.spent_today(now, fleet_per_hour)
        ids = [job.job_id for job in queued]
        reserved, lapsed = await asyncio.to_thread(self.demand.claims, now, ids)
        return PlanInput(
            now,
            tuple(queued),
            instances,
            market,
            spent_today=spent_today,
            reservations=reserved,
            expected_arrivals=await self._expected(now),
            typical_job=self.prewarming.latest_job,
            moving_to_spot=dict(moving or {}),
            quota_room=limits.room(i.pool for i in self.reconciler.ledger.values()),
            lapsed=self.lapses.claims(lapsed, self.book.records, ids),
        )

    async def _expected(self, now: datetime) -> float:
        """Jobs the forecast expects within a new instance's start-up (only read when
        pre-warming is on: the fit is not free)."""
        if self.settings.prewarm_wait_value_per_job_hour <= 0:
            return 0.0
        startup = new_instance_startup(self.settings)
        return await self.prewarming.expected(now, self.demand.arrivals_since, startup)

    def instance_views(self, busy: Mapping[str, int], market: MarketSnapshot) -> list[InstanceView]:
        ledger, now = self.reconciler.ledger.values(), self.clock.now()
        return instance_views(ledger, self.drains.leaving, self.book, busy, market, now)

    async def run(self, stop: asyncio.Event, leads: Callable[[], bool] = lambda: True) -> None:
        """Rounds until `stop`; only while `leads` says this replica holds the buying lease."""
        outage = Outage("a dependency of the autoscaler's round", log, self.clock)
        while not stop.is_set():
            wait = self.interval_seconds
            try:
                if leads():
                    await self.once()
                outage.answered()
            except FrameFleetError as error:
                wait = max(wait, outage.failed(error))
            except Exception:
                # A bug, not an input: log it loudly; the next round may fare better.
                log.exception("autoscaler round failed unexpectedly, retrying")
            await sleep_unless_stopped(self.clock, stop, wait)
