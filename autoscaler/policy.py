"""The purchase policy (pure): what to launch, where, on which market, and what to terminate,
each with its reason; never past the dollar budget.

1. Queued jobs take free GPUs already in the fleet first (most urgent first).
2. Each job left picks a market (`deadline.choose_market`) and then the pool with the lowest
   expected cost per denoising step: price per GPU x (1 + expected rework from the pool's
   interruption rate) x seconds per step on that GPU. Spot is spread so that no pool holds
   more than `max_pool_share` of the spot fleet; pools unavailable (capacity errors, recent
   interruptions, no capacity in the trace) are skipped.
3. A launch that would pass $/hour or $/day stops all launching; that job and the less urgent
   ones wait with the reason.
4. Idle instances past the idle timeout are terminated down to the warm minimum; an instance
   with unsaved work never is.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from autoscaler.catalog import InstanceKind, kind_of
from autoscaler.deadline import MarketChoice, MarketRule, choose_market
from autoscaler.market.quotes import PoolQuote
from autoscaler.pools import Pool
from autoscaler.snapshot import (
    InstanceView,
    JobDemand,
    Launch,
    Plan,
    PlanInput,
    PurchaseSettings,
    Terminate,
    Wait,
)
from autoscaler.throughput import ThroughputModel
from kernel.market import Market


@dataclass
class _FreeSlots:
    instance: InstanceView
    kind: InstanceKind
    free: int


def _fits(job: JobDemand, kind: InstanceKind) -> bool:
    return kind.vram_gib >= job.min_vram_gib and (not job.families or kind.family in job.families)


def _urgency(job: JobDemand) -> tuple[int, float, float, str]:
    deadline = job.deadline.timestamp() if job.deadline else math.inf
    return (-job.priority, deadline, job.submitted_at.timestamp(), job.job_id)


def cost_per_step(
    quote: PoolQuote, job: JobDemand, model: ThroughputModel, settings: PurchaseSettings
) -> float:
    kind = kind_of(quote.pool.instance_type)
    at_risk_hours = (
        settings.boot_seconds
        + settings.model_load_seconds
        + settings.checkpoint_interval_seconds / 2
    ) / 3600
    rework = quote.interruptions_per_hour * at_risk_hours
    step = model.seconds_per_step(job.shape, kind.family) / 3600
    return quote.price_per_hour / kind.gpus * (1 + rework) * step


def _market_allows(
    job: JobDemand,
    instance: InstanceView,
    market: Market,
    now: datetime,
    on_demand_seconds_left: float,
    settings: PurchaseSettings,
    rule: MarketRule,
) -> bool:
    """May the job take a free GPU on `instance`? A spot GPU for a job whose deadline wants
    on-demand only if the deadline still takes an interruption counting the start-up that GPU
    has left, not a whole new one: the instance bought for the job and now almost booted must
    not look worse each round than a new on-demand one."""
    if instance.pool.market is Market.ON_DEMAND:
        return True
    if job.spot_zones and instance.pool.availability_zone not in job.spot_zones:
        return False
    if market is Market.SPOT:
        return True
    booted_at = instance.launched_at + timedelta(seconds=settings.boot_seconds)
    boot_left = max(0.0, (booted_at - now).total_seconds())
    # Starting there costs only the boot it has left (an interruption there still costs a
    # whole new start-up elsewhere).
    startup = boot_left + settings.model_load_seconds
    return rule(job, now, on_demand_seconds_left, settings, startup).market is Market.SPOT


def _fastest_on_demand(
    state: PlanInput, settings: PurchaseSettings, model: ThroughputModel, job: JobDemand
) -> float:
    """The job's remaining work in seconds on the fastest on-demand pool that fits it."""
    return min(
        (model.seconds(job.shape, kind_of(q.pool.instance_type).family, job.steps_left)
         for q in _candidates(state, settings, job, Market.ON_DEMAND)),
        default=math.inf,
    )  # fmt: skip


def plan(
    state: PlanInput,
    settings: PurchaseSettings,
    model: ThroughputModel,
    rule: MarketRule = choose_market,
) -> Plan:
    queue = sorted(state.queued, key=_urgency)
    fastest = {job.job_id: _fastest_on_demand(state, settings, model, job) for job in queue}
    planning = _Round(
        state,
        settings,
        model,
        rule,
        slots=[_FreeSlots(i, kind_of(i.pool.instance_type), i.gpus - i.busy_gpus)
               for i in state.instances],
        hourly=sum(i.price_per_hour for i in state.instances),
        spot_pools=Counter(i.pool for i in state.instances if i.pool.market is Market.SPOT),
        fastest=fastest,
        choices={j.job_id: rule(j, state.now, fastest[j.job_id], settings) for j in queue},
    )  # fmt: skip
    kept = planning.keep_reserved(queue)
    for job in queue:
        if job.job_id not in kept:
            planning.serve(job)
    terminations = _scale_in(state, settings, planning.placed)
    return Plan(
        tuple(planning.launches), tuple(terminations), tuple(planning.waits),
        tuple(planning.placed),
    )  # fmt: skip


@dataclass
class _Round:
    """One plan's bookkeeping: the free GPUs left, what is bought so far and what it costs
    per hour, and the first budget limit reached (after which nothing more is bought)."""

    state: PlanInput
    settings: PurchaseSettings
    model: ThroughputModel
    rule: MarketRule
    slots: list[_FreeSlots]
    hourly: float
    spot_pools: Counter[Pool]
    fastest: dict[str, float]
    choices: dict[str, MarketChoice]
    launches: list[Launch] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    placed: list[tuple[str, str]] = field(default_factory=list)
    budget_block: str | None = None

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
        """A free GPU that fits, else a launch on the chosen market, else a wait and why."""
        slot = self._free_slot(job)
        if slot is not None:
            self._place(job, slot)
            return
        if self.budget_block is not None:
            self.waits.append(Wait(job.job_id, self.budget_block))
            return
        if len(self.launches) >= self.settings.max_launches:
            limit = self.settings.max_launches
            self.waits.append(Wait(job.job_id, f"launch limit of {limit} per plan"))
            return
        choice = self.choices[job.job_id]
        picked = _pick_pool(
            self.state, self.settings, self.model, job, choice.market, self.spot_pools
        )
        if picked is None and choice.market is Market.SPOT:
            # Slack is worth more than an early on-demand start: wait for spot; the safety
            # net sends the job to on-demand once one more interruption would be too many.
            why = (
                "no deadline"
                if job.deadline is None
                else (f"{choice.slack_seconds / 3600:.2f} h slack; on-demand once it runs short")
            )
            self.waits.append(Wait(job.job_id, f"no spot pool available now; {why}, so it waits"))
            return
        if picked is None:
            self.waits.append(
                Wait(job.job_id, "no pool fits this job (VRAM, GPU families, prices)")
            )
            return
        quote, why_pool, alternatives = picked
        self.budget_block = self._over_budget(quote)
        if self.budget_block is not None:
            self.waits.append(Wait(job.job_id, self.budget_block))
            return
        self.hourly += quote.price_per_hour
        if quote.pool.market is Market.SPOT:
            self.spot_pools[quote.pool] += 1
        self.launches.append(
            Launch(quote.pool, quote.price_per_hour, (job.job_id,),
                   f"job {job.job_id} (priority {job.priority}): {choice.reason}; {why_pool}",
                   alternatives)
        )  # fmt: skip

    def _free_slot(self, job: JobDemand, on_instance: str | None = None) -> _FreeSlots | None:
        market = self.choices[job.job_id].market
        for slot in self.slots:
            if (
                slot.free > 0
                and (on_instance is None or slot.instance.instance_id == on_instance)
                and _fits(job, slot.kind)
                and _market_allows(job, slot.instance, market, self.state.now,
                                   self.fastest[job.job_id], self.settings, self.rule)
            ):  # fmt: skip
                return slot
        return None

    def _place(self, job: JobDemand, slot: _FreeSlots) -> None:
        slot.free -= 1
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


def _candidates(
    state: PlanInput, settings: PurchaseSettings, job: JobDemand, market: Market
) -> list[PoolQuote]:
    return [
        q
        for q in state.market.quotes.values()
        if q.pool.market is market
        and q.pool.instance_type in settings.candidate_types
        and q.available
        and _fits(job, kind_of(q.pool.instance_type))
        and not (market is Market.SPOT and job.spot_zones
                 and q.pool.availability_zone not in job.spot_zones)
    ]  # fmt: skip


def _pick_pool(
    state: PlanInput,
    settings: PurchaseSettings,
    model: ThroughputModel,
    job: JobDemand,
    market: Market,
    spot_pools: Counter[Pool],
) -> tuple[PoolQuote, str, tuple[Pool, ...]] | None:
    """The pool, why, and (for spot) the pools as good as it that EC2 may take instead."""
    ranked = sorted(
        _candidates(state, settings, job, market),
        key=lambda q: (cost_per_step(q, job, model, settings), q.pool),
    )
    if not ranked:
        return None
    if market is Market.ON_DEMAND:
        why = _explain(ranked[0], job, model, settings, "cheapest on-demand per step")
        return ranked[0], why, ()
    fleet = sum(spot_pools.values()) + 1
    cap = max(1, math.floor(settings.max_pool_share * fleet))
    # Spreading is insurance against one pool failing at once; it is not worth paying much
    # more per step for (a pricier pool is often the riskier one too).
    ceiling = cost_per_step(ranked[0], job, model, settings) * (1 + settings.max_spread_premium)
    near = [q for q in ranked if cost_per_step(q, job, model, settings) <= ceiling]
    open_near = [q for q in near if spot_pools[q.pool] + 1 <= cap]
    if open_near:
        quote = open_near[0]
        share = f"{settings.max_pool_share:.0%}"
        why = (
            "cheapest spot per step"
            if quote is ranked[0]
            else f"cheapest spot pool under the {share} spread cap"
        )
    else:
        # Every pool worth spreading to is at its share: the least loaded of them.
        quote = min(near, key=lambda q: spot_pools[q.pool])
        why = "least-loaded spot pool"
    others = tuple(q.pool for q in open_near if q is not quote)[: settings.max_alternatives]
    return quote, _explain(quote, job, model, settings, why), others


def _explain(
    quote: PoolQuote, job: JobDemand, model: ThroughputModel, settings: PurchaseSettings, why: str
) -> str:
    per_hour_of_job = cost_per_step(quote, job, model, settings) * job.steps_left
    return (
        f"{why}: {quote.pool} at ${quote.price_per_hour:.3f}/h, "
        f"{quote.interruptions_per_hour * 24:.2f} interruptions/day, "
        f"expected ${per_hour_of_job:.2f} for the remaining {job.steps_left} steps"
    )


def _scale_in(
    state: PlanInput, settings: PurchaseSettings, placed: Iterable[tuple[str, str]]
) -> list[Terminate]:
    used = {instance_id for _, instance_id in placed}
    keep = settings.warm_minimum
    remaining = len(state.instances)
    terminations = []
    idle = sorted(
        (i for i in state.instances if i.busy_gpus == 0 and i.instance_id not in used),
        key=lambda i: (-i.price_per_hour, i.instance_id),  # the dearest go first
    )
    for instance in idle:
        if instance.unsaved_work or remaining <= keep:
            continue
        since = instance.idle_since or instance.launched_at
        idle_for = state.now - since
        if idle_for < settings.idle_timeout:
            continue
        minutes = idle_for.total_seconds() / 60
        timeout = settings.idle_timeout.total_seconds() / 60
        reason = f"idle {minutes:.0f} min (timeout {timeout:.0f}), no queued job fits it"
        terminations.append(Terminate(instance.instance_id, f"{reason}; warm minimum {keep}"))
        remaining -= 1
    return terminations
