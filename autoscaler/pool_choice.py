"""Which pool a launch buys from (pure): the lowest expected cost of the video it will carry
(the GPU's share of the price x (start-up + the remaining steps at that family's pace), with the
rework interruptions cost), so a cheap slow GPU and a dear fast one are compared on what a video
costs; spot spread over the pools as good as the best, and the pools EC2 may take instead."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.market.quotes import PoolQuote
from autoscaler.pools import Pool
from autoscaler.quota_room import within_room
from autoscaler.snapshot import JobDemand, PlanInput, PurchaseSettings
from autoscaler.throughput import ThroughputModel
from kernel.gpu_fit import gpu_fits
from kernel.instance_types import InstanceKind, kind_of
from kernel.market import Market
from kernel.render_stage import RenderStage
from kernel.service_quotas import LimitScope, quota_of
from kernel.stage_cost import Video, decode_seconds, encode_seconds, span_step_seconds
from kernel.step_time import architecture_of

# How many of an instance's GPUs the queue would fill if that instance were bought now.
Sharing = Callable[[PoolQuote], int]


def fits(job: JobDemand, kind: InstanceKind) -> bool:
    return kind.gpus >= job.gpus and gpu_fits(
        kind.family.value, kind.vram_gib, job.min_vram_gib, job.families
    )


def video_of(job: JobDemand, steps: int = 1) -> Video:
    """What the stage-cost model prices the job's render by."""
    shape = job.shape
    return Video(architecture_of(shape.model), shape.width, shape.height, shape.frames, steps)


def step_seconds_on(job: JobDemand, model: ThroughputModel, instance_type: str) -> float:
    """A step of the job on its GPUs of `instance_type`: one GPU's pace, or, for a job that
    spans several, each GPU's share of it plus their exchanges (`kernel.stage_cost`)."""
    kind = kind_of(instance_type)
    alone = model.seconds_per_step(job.shape, kind.family)
    if job.gpus == 1:
        return alone
    return span_step_seconds(video_of(job), alone, job.gpus, instance_type)


def work_seconds_on(
    job: JobDemand, model: ThroughputModel, instance_type: str, least_steps: int = 0
) -> float:
    """The job's remaining work on a GPU of `instance_type`: its remaining steps (at least
    `least_steps`), or, for a stage of a split render, that stage's encoding or decoding
    (`kernel.stage_cost`)."""
    family = kind_of(instance_type).family.value
    if job.stage is RenderStage.ENCODE:
        return encode_seconds(family)
    if job.stage is RenderStage.DECODE:
        return decode_seconds(video_of(job), family)
    return step_seconds_on(job, model, instance_type) * max(least_steps, job.steps_left)


def spot_zone_allowed(job: JobDemand, pool: Pool) -> bool:
    return (
        pool.market is Market.ON_DEMAND
        or not job.spot_zones
        or (pool.availability_zone in job.spot_zones)
    )


def gpu_hour_cost(
    quote: PoolQuote, settings: PurchaseSettings, sharing: int | None = None
) -> float:
    """An hour of one GPU of this pool: the instance's price split over the GPUs that will be
    used (`sharing` jobs; all its GPUs when not given), with the expected rework an
    interruption costs."""
    kind = kind_of(quote.pool.instance_type)
    used = kind.gpus if sharing is None else max(1, min(kind.gpus, sharing))
    at_risk_hours = (
        settings.boot_seconds
        + settings.model_load_seconds
        + settings.checkpoint_interval_seconds / 2
    ) / 3600
    rework = quote.interruptions_per_hour * at_risk_hours
    return quote.price_per_hour / used * (1 + rework)


def cost_per_step(
    quote: PoolQuote,
    job: JobDemand,
    model: ThroughputModel,
    settings: PurchaseSettings,
    sharing: int | None = None,
) -> float:
    step_hours = step_seconds_on(job, model, quote.pool.instance_type) / 3600
    return gpu_hour_cost(quote, settings, sharing) * step_hours * job.gpus


def cost_per_video(
    quote: PoolQuote,
    job: JobDemand,
    model: ThroughputModel,
    settings: PurchaseSettings,
    sharing: int | None = None,
) -> float:
    """What the job's remaining video costs on a new instance of this pool: its GPU-hours for
    the start-up (boot, model load) and the remaining work at the family's pace."""
    startup_s = settings.boot_seconds + settings.model_load_seconds
    work_s = work_seconds_on(job, model, quote.pool.instance_type, least_steps=1)
    return gpu_hour_cost(quote, settings, sharing) * (startup_s + work_s) / 3600 * job.gpus


def candidates(
    state: PlanInput, settings: PurchaseSettings, job: JobDemand, market: Market
) -> list[PoolQuote]:
    return [
        q
        for q in state.market.quotes.values()
        if q.pool.market is market
        and q.pool.instance_type in settings.candidate_types
        and q.available
        and within_room(state.quota_room, q.pool)
        and fits(job, kind_of(q.pool.instance_type))
        and not lapsed_on(state, job, q.pool.instance_type)
        and spot_zone_allowed(job, q.pool)
    ]


def lapsed_on(state: PlanInput, job: JobDemand, instance_type: str) -> bool:
    """An instance of this type was bought or picked for the job and the scheduler did not
    give it to the job: another of the type would not hold it either."""
    lapsed = state.lapsed.get(job.job_id)
    return lapsed is not None and instance_type in lapsed.instance_types


def lapsed_wait(state: PlanInput, settings: PurchaseSettings, job: JobDemand) -> str | None:
    """Why the job waits when the only candidate types that fit it are those its claims
    lapsed on (None when another fits: then its own reason, a limit or no capacity, is why)."""
    lapsed = state.lapsed.get(job.job_id)
    if lapsed is None or any(
        fits(job, kind_of(t)) for t in settings.candidate_types if t not in lapsed.instance_types
    ):
        return None
    return (
        f"the {', '.join(sorted(lapsed.instance_types))} bought or picked for it (last "
        f"{lapsed.instance_id}) could not run it (its workers' GPUs are shared or sliced "
        "smaller than the type's, or the job must avoid them), and no other candidate type "
        "fits it"
    )


def limit_wait(
    state: PlanInput, settings: PurchaseSettings, job: JobDemand, market: Market
) -> tuple[str, str] | None:
    """Why `job` has no pool on `market` when only account limits keep it from some that fit
    it (a limit error held, or a quota without room), and that limit's name; None when
    something else is the reason (nothing fits, no capacity)."""
    limited = []
    for quote in state.market.quotes.values():
        pool = quote.pool
        if (
            pool.market is not market
            or pool.instance_type not in settings.candidate_types
            or not fits(job, kind_of(pool.instance_type))
            or not spot_zone_allowed(job, pool)
        ):
            continue
        if quote.limit:
            limited.append((quote.why_unavailable, quote.limit))
        elif not within_room(state.quota_room, pool):
            quota = quota_of(pool.instance_type, pool.market)
            assert quota is not None  # within_room holds a pool without one
            room = state.quota_room[quota.code]
            name = LimitScope(quota=quota).describe()  # as a limit error names it
            limited.append(
                (
                    f"{name} has {room:g} vCPUs of room, {pool.instance_type} needs "
                    f"{kind_of(pool.instance_type).vcpus}; ask AWS to raise it",
                    name,
                )
            )
        elif quote.available:
            return None  # a pool fits and is open: the limit is not why it waits
    if not limited:
        return None
    why, name = limited[0]
    return f"beyond the account's limits on {market}: {why}", name


def too_large(settings: PurchaseSettings, job: JobDemand) -> str | None:
    """Why no candidate type can ever hold the job (its GPU need past every one's), if so."""
    kinds = [kind_of(t) for t in settings.candidate_types]
    largest = max(kinds, key=lambda k: (k.vram_gib, k.gpus), default=None)
    if largest is None or job.min_vram_gib <= largest.vram_gib:
        return None
    return (
        f"needs {job.min_vram_gib:g} GiB per GPU; the largest GPU among the candidate types "
        f"has {largest.vram_gib:.4g} GiB ({largest.instance_type}): it waits for a larger type "
        "to be allowed (autoscaler.candidate_types)"
    )


@dataclass(frozen=True)
class PoolPick:
    quote: PoolQuote
    why: str
    # Spot pools as good as the chosen one, which CreateFleet may take instead.
    alternatives: tuple[Pool, ...]


def pick_pool(
    state: PlanInput,
    settings: PurchaseSettings,
    model: ThroughputModel,
    job: JobDemand,
    market: Market,
    spot_pools: Counter[Pool],
    sharing: Sharing = lambda quote: 1,
) -> PoolPick | None:
    """The pool for a launch that starts with `job`, and why. Each pool is judged by what the
    video costs for the jobs it would carry, so one 8-GPU instance wins over eight 1-GPU ones
    only when eight jobs are there to fill it and it is cheaper per job."""

    def cost(quote: PoolQuote) -> float:
        return cost_per_video(quote, job, model, settings, sharing(quote))

    ranked = sorted(candidates(state, settings, job, market), key=lambda q: (cost(q), q.pool))
    if job.max_cost_usd is not None:  # a pool that would cost the job more than its limit
        ranked = [q for q in ranked if cost(q) <= job.max_cost_usd]
    if not ranked:
        return None
    if market is Market.ON_DEMAND:
        why = "cheapest on-demand per video"
        return PoolPick(ranked[0], explain(ranked[0], job, cost(ranked[0]), why), ())
    fleet = sum(spot_pools.values()) + 1
    cap = max(1, math.floor(settings.max_pool_share * fleet))
    # Spreading is insurance against one pool failing at once; it is not worth paying much
    # more per video for (a pricier pool is often the riskier one too).
    ceiling = cost(ranked[0]) * (1 + settings.max_spread_premium)
    near = [q for q in ranked if cost(q) <= ceiling]
    open_near = [q for q in near if spot_pools[q.pool] + 1 <= cap]
    if open_near:
        quote = open_near[0]
        share = f"{settings.max_pool_share:.0%}"
        why = (
            "cheapest spot per video"
            if quote is ranked[0]
            else f"cheapest spot pool under the {share} spread cap"
        )
    else:
        # Every pool worth spreading to is at its share: the least loaded of them.
        quote = min(near, key=lambda q: spot_pools[q.pool])
        why = "least-loaded spot pool"
    others = tuple(q.pool for q in open_near if q is not quote)[: settings.max_alternatives]
    return PoolPick(quote, explain(quote, job, cost(quote), why), others)


def explain(quote: PoolQuote, job: JobDemand, video: float, why: str) -> str:
    return (
        f"{why}: {quote.pool} at ${quote.price_per_hour:.3f}/h, "
        f"{quote.interruptions_per_hour * 24:.2f} interruptions/day, "
        f"expected ${video:.2f} for the remaining {job.steps_left} steps, start-up included"
    )
