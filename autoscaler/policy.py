"""The purchase policy (pure): what to launch, where, on which market, and what to terminate,
each with its reason; never past the dollar budget.

1. Queued jobs take free GPUs already in the fleet first (most urgent first).
2. Each job left picks a market (`deadline.choose_market`). It takes a free GPU of an instance
   this plan already buys (first fit, in urgency order), else it opens a launch: the pool with
   the lowest expected cost per denoising step of the jobs that instance would carry, price /
   GPUs the queue fills x (1 + expected rework from the pool's interruption rate) x seconds per
   step on that GPU. So four queued one-GPU jobs buy one 4-GPU instance when that is cheaper
   per job, and one job alone never pays for GPUs nobody will use. Spot is spread so that no
   pool holds more than `max_pool_share` of the spot fleet; pools unavailable (capacity
   errors, recent interruptions, no capacity in the trace) are skipped.
3. Each launch is judged against $/hour and $/day on its own: a job whose launch would pass a
   limit waits with the reason, and the cheaper jobs after it are still bought while they fit
   (one dear job does not stop the cheap ones).
4. Spot GPUs are pre-warmed for the jobs the forecast expects when the waiting they save is
   worth their idle time (`prewarm.py`; off unless a value of waiting is set).
5. Idle instances past the idle timeout are terminated down to the warm minimum and the
   pre-warmed count; an instance with unsaved work, or held for a job moving back to spot
   (`spot_return.py`), never is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from autoscaler.deadline import MarketChoice, MarketRule, choose_market, new_instance_startup
from autoscaler.job_fit import fastest_on_demand, market_allows, urgency
from autoscaler.market.quotes import PoolQuote
from autoscaler.opening import Opening
from autoscaler.pool_choice import (
    fits,
    lapsed_on,
    lapsed_wait,
    limit_wait,
    pick_pool,
    too_large,
)
from autoscaler.pools import Pool
from autoscaler.prewarm import warm_gpus
from autoscaler.quota_room import took
from autoscaler.snapshot import (
    CapacityWait,
    InstanceView,
    JobDemand,
    Plan,
    PlanInput,
    PurchaseSettings,
    Terminate,
)
from autoscaler.throughput import ThroughputModel
from autoscaler.zone_risk import type_level_risk, zone_risk_beyond_noise
from kernel.gpu_fit import gpu_fits
from kernel.instance_types import InstanceKind, kind_of
from kernel.market import Market

_Need = tuple[Market, float, frozenset[str], frozenset[str]]


@dataclass
class _FreeSlots:
    instance: InstanceView
    kind: InstanceKind
    free: int


def plan(
    state: PlanInput,
    settings: PurchaseSettings,
    model: ThroughputModel,
    rule: MarketRule = choose_market,
) -> Plan:
    ranked = zone_risk_beyond_noise if settings.zone_risk else type_level_risk
    state = replace(state, market=ranked(state.market))
    queue = sorted(state.queued, key=urgency)
    fastest = {job.job_id: fastest_on_demand(state, settings, model, job) for job in queue}
    planning = _Round(
        state,
        settings,
        model,
        rule,
        # A GPU held for a job moving back to spot is not free for another.
        slots=[
            _FreeSlots(
                i,
                kind_of(i.pool.instance_type),
                i.gpus - i.busy_gpus - (i.instance_id in state.moving_to_spot),
            )
            for i in state.instances
        ],
        hourly=sum(i.price_per_hour for i in state.instances),
        spot_pools=Counter(i.pool for i in state.instances if i.pool.market is Market.SPOT),
        fastest=fastest,
        choices={j.job_id: rule(j, state.now, fastest[j.job_id], settings) for j in queue},
    )
    kept = planning.keep_reserved(queue)
    unserved = [job for job in queue if job.job_id not in kept]
    planning.later = Counter(planning.needs(job) for job in unserved)
    for job in unserved:
        planning.later[planning.needs(job)] -= 1
        planning.serve(job)
    warm = planning.prewarm()
    terminations = _scale_in(state, settings, planning.placed, warm)
    return Plan(
        tuple(o.launch() for o in planning.openings),
        tuple(terminations),
        tuple(planning.waits),
        tuple(planning.placed),
    )


@dataclass
class _Round:
    """One plan's bookkeeping: the free GPUs left, what is bought so far and what it costs
    per hour (each further launch must fit the budget left)."""

    state: PlanInput
    settings: PurchaseSettings
    model: ThroughputModel
    rule: MarketRule
    slots: list[_FreeSlots]
    hourly: float
    spot_pools: Counter[Pool]
    fastest: dict[str, float]
    choices: dict[str, MarketChoice]
    openings: list[Opening] = field(default_factory=list)
    partial: list[Opening] = field(default_factory=list)  # openings with GPUs left
    # The jobs after the one being served, by what they need (their market, VRAM, families,
    # spot zones): a count per kind of need keeps sizing a launch cheap with 10,000 queued.
    later: Counter[_Need] = field(default_factory=Counter)
    waits: list[CapacityWait] = field(default_factory=list)
    placed: list[tuple[str, str]] = field(default_factory=list)

    def keep_reserved(self, queue: list[JobDemand]) -> set[str]:
        """Jobs keep what earlier rounds bought or picked for them (the control plane's
        scheduler gives it to them too), so a more urgent job arriving meanwhile buys its
        own. Returns the jobs placed so."""
        kept: set[str] = set()
        for job in queue:
            reserved = self.state.reservations.get(job.job_id)
            slot = self._free_slot(job, reserved) if reserved is not None else None
            if slot is not None:
                self._place(job, slot)
                kept.add(job.job_id)
        return kept

    def serve(self, job: JobDemand) -> None:
        """A free GPU that fits, else one of a launch this plan makes, else a launch of its own
        on the chosen market, else a wait and why."""
        slot = self._free_slot(job)
        if slot is not None:
            self._place(job, slot)
            return
        choice = self.choices[job.job_id]
        if choice.wait:
            self.waits.append(CapacityWait(job.job_id, choice.reason))
            return
        opening = next(
            (
                o
                for o in self.partial
                if o.takes(job, choice.market)
                and not lapsed_on(self.state, job, o.kind.instance_type)
            ),
            None,
        )
        if opening is not None:
            opening.jobs.append(job)
            if opening.free == 0:
                self.partial.remove(opening)
            return
        if len(self.openings) >= self.settings.max_launches:
            limit = self.settings.max_launches
            self.waits.append(CapacityWait(job.job_id, f"launch limit of {limit} per plan"))
            return
        picked = pick_pool(
            self.state,
            self.settings,
            self.model,
            job,
            choice.market,
            self.spot_pools,
            lambda quote: self._sharing(job, quote),
        )
        oversized = too_large(self.settings, job) or lapsed_wait(self.state, self.settings, job)
        oversized = oversized if not picked else None
        if oversized is not None:
            self.waits.append(CapacityWait(job.job_id, oversized))
            return
        limited = limit_wait(self.state, self.settings, job, choice.market) if not picked else None
        if limited is not None:
            self.waits.append(CapacityWait(job.job_id, *limited))
            return
        if picked is None and choice.market is Market.SPOT:
            # Slack is worth more than an early on-demand start: wait for spot; the safety
            # net sends the job to on-demand once one more interruption would be too many.
            why = (
                "no deadline"
                if job.deadline is None
                else (f"{choice.slack_seconds / 3600:.2f} h slack; on-demand once it runs short")
            )
            self.waits.append(
                CapacityWait(job.job_id, f"no spot pool available now; {why}, so it waits")
            )
            return
        if picked is None:
            self.waits.append(
                CapacityWait(
                    job.job_id, "no pool fits this job (VRAM, GPU families, prices, its cost limit)"
                )
            )
            return
        quote = picked.quote
        over = self._over_budget(quote)
        if over is not None:
            self.waits.append(CapacityWait(job.job_id, over))
            return
        self.hourly += quote.price_per_hour
        if quote.pool.market is Market.SPOT:
            self.spot_pools[quote.pool] += 1
        self._open(
            Opening(
                quote,
                kind_of(quote.pool.instance_type),
                f"job {job.job_id} (priority {job.priority}): {choice.reason}; {picked.why}",
                picked.alternatives,
                [job],
            )
        )

    def prewarm(self) -> int:
        """Spot GPUs bought for no job yet, up to what the forecast makes worth keeping warm
        (`autoscaler/prewarm.py`) counting the free ones that fit the latest job; returns that
        count, which scale-in keeps."""
        typical, settings = self.state.typical_job, self.settings
        if typical is None or settings.prewarm_wait_value_per_job_hour <= 0:
            return 0
        probe = replace(typical, job_id="pre-warm", steps_done=0)
        picked = pick_pool(self.state, settings, self.model, probe, Market.SPOT, self.spot_pools)
        if picked is None:
            return 0
        kind = kind_of(picked.quote.pool.instance_type)
        window = new_instance_startup(settings) / 3600
        wanted = warm_gpus(
            self.state.expected_arrivals,
            window,
            settings.boot_seconds / 3600,
            picked.quote.price_per_hour / kind.gpus,
            settings.prewarm_wait_value_per_job_hour,
        )
        free = sum(s.free for s in self.slots if fits(typical, s.kind))
        free += sum(o.free for o in self.openings if fits(typical, o.kind))
        for number in range(free + 1, wanted + 1, kind.gpus):
            if len(self.openings) >= settings.max_launches:
                break
            if self._over_budget(picked.quote) is not None:
                break
            self.hourly += picked.quote.price_per_hour
            self.spot_pools[picked.quote.pool] += 1
            why = (
                f"pre-warm GPU {number} of {wanted}: "
                f"{self.state.expected_arrivals:.2f} jobs expected within {window * 60:.0f} "
                f"min; {picked.why}"
            )
            self._open(Opening(picked.quote, kind, why, picked.alternatives, [], typical))
        return wanted

    def _open(self, opening: Opening) -> None:
        self.openings.append(opening)
        if self.state.quota_room:  # its vCPUs come off its quota's room for the next launch
            room = took(self.state.quota_room, opening.quote.pool)
            self.state = replace(self.state, quota_room=room)
        if opening.free > 0:
            self.partial.append(opening)

    def needs(self, job: JobDemand) -> _Need:
        return (self.choices[job.job_id].market, job.min_vram_gib, job.families, job.spot_zones)

    def _sharing(self, job: JobDemand, quote: PoolQuote) -> int:
        """The GPUs of an instance from `quote` that `job` and the queue after it would fill:
        on spot, the jobs that would take spot there; on on-demand, the jobs that need it
        (a spot job may still fill a GPU left over, but is not bought one)."""
        kind = kind_of(quote.pool.instance_type)
        pool = quote.pool
        fellows = sum(
            count
            for (market, vram, families, zones), count in self.later.items()
            if market is pool.market
            and gpu_fits(kind.family.value, kind.vram_gib, vram, families)
            and (market is Market.ON_DEMAND or not zones or pool.availability_zone in zones)
        )
        return min(kind.gpus, job.gpus + fellows)

    def _free_slot(self, job: JobDemand, on_instance: str | None = None) -> _FreeSlots | None:
        market = self.choices[job.job_id].market
        for slot in self.slots:
            if (
                slot.free >= job.gpus
                and (on_instance is None or slot.instance.instance_id == on_instance)
                and fits(job, slot.kind)
                and not lapsed_on(self.state, job, slot.kind.instance_type)
                and market_allows(
                    job,
                    slot.instance,
                    market,
                    self.state.now,
                    self.fastest[job.job_id],
                    self.settings,
                    self.rule,
                )
            ):
                return slot
        return None

    def _place(self, job: JobDemand, slot: _FreeSlots) -> None:
        slot.free -= job.gpus
        self.placed.append((job.job_id, slot.instance.instance_id))

    def _over_budget(self, quote: PoolQuote) -> str | None:
        hourly, settings, spent = self.hourly, self.settings, self.state.spent_today
        if hourly + quote.price_per_hour > settings.budget_per_hour:
            return (
                f"budget: ${hourly:.2f}/h running + ${quote.price_per_hour:.2f}/h would pass "
                f"${settings.budget_per_hour:.2f}/h"
            )
        if spent + (hourly + quote.price_per_hour) > settings.budget_per_day:
            return (
                f"budget: ${spent:.2f} spent today + the next hour at "
                f"${hourly + quote.price_per_hour:.2f}/h would pass "
                f"${settings.budget_per_day:.2f}/day"
            )
        return None


def _scale_in(
    state: PlanInput,
    settings: PurchaseSettings,
    placed: Iterable[tuple[str, str]],
    warm_gpus: int = 0,
) -> list[Terminate]:
    used = {instance_id for _, instance_id in placed}
    keep = settings.warm_minimum
    remaining = len(state.instances)
    terminations = []
    idle = sorted(
        (i for i in state.instances if i.busy_gpus == 0 and i.instance_id not in used),
        key=lambda i: (-i.price_per_hour, i.instance_id),  # the dearest go first
    )
    idle_gpus = sum(i.gpus for i in idle)
    for instance in idle:
        if (
            instance.unsaved_work
            or remaining <= keep
            or instance.instance_id in state.moving_to_spot
        ):
            continue
        if idle_gpus - instance.gpus < warm_gpus:
            continue  # kept warm for the jobs the forecast expects
        since = instance.idle_since or instance.launched_at
        idle_for = state.now - since
        if idle_for < settings.idle_timeout:
            continue
        minutes = idle_for.total_seconds() / 60
        timeout = settings.idle_timeout.total_seconds() / 60
        reason = f"idle {minutes:.0f} min (timeout {timeout:.0f}), no queued job fits it"
        terminations.append(Terminate(instance.instance_id, f"{reason}; warm minimum {keep}"))
        remaining -= 1
        idle_gpus -= instance.gpus
    return terminations
