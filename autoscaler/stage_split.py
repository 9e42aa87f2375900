"""Which queued renders are split into stages (prompt encoding, denoising, decoding, each an
attempt of its own on a GPU that fits it): those the render planner (`render_plan.py`) finds
cheaper split at the market's prices now, within their deadline. A pure rule over the queue
and the market; the loop writes what it decides to the jobs (`DemandSource.split_into_stages`)
before it plans what to buy, so the stage's own GPU need is what it buys for.

Only a render that never ran is split (a started one goes on whole), and only one of one GPU:
a spanning job's denoising stage would need its embeddings in every process of the span, which
the span's render processes do not read yet. A job that asked for `exact` is not split either:
its stages could compute on different GPU families.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pool_choice import video_of
from autoscaler.render_plan import GpuOffer, plan_render
from autoscaler.snapshot import JobDemand, PurchaseSettings, SplitMode
from kernel.instance_types import kind_of


@dataclass(frozen=True)
class Split:
    job_id: str
    why: str


def offers_now(market: MarketSnapshot, candidate_types: Iterable[str]) -> list[GpuOffer]:
    """Each candidate type at its cheapest available price now, in any zone or market."""
    cheapest: dict[str, float] = {}
    for quote in market.quotes.values():
        pool = quote.pool
        if quote.available and pool.instance_type in candidate_types:
            known = cheapest.get(pool.instance_type)
            if known is None or quote.price_per_hour < known:
                cheapest[pool.instance_type] = quote.price_per_hour
    offers = []
    for instance_type, price in sorted(cheapest.items()):
        kind = kind_of(instance_type)
        offers.append(GpuOffer(instance_type, kind.family.value, kind.gpus, kind.vram_gib, price))
    return offers


def splits(
    queued: Sequence[JobDemand],
    offers: Sequence[GpuOffer],
    now: datetime,
    settings: PurchaseSettings,
) -> list[Split]:
    """The queued renders to split now, and why (the planner's reason)."""
    mode = settings.split_renders
    if mode is SplitMode.NEVER:
        return []
    chosen = []
    for job in queued:
        if not job.may_split:
            continue
        if mode is SplitMode.ALWAYS:
            chosen.append(Split(job.job_id, "split_renders is always"))
            continue
        video = video_of(job, job.steps_total)
        window = None if job.deadline is None else (job.deadline - now).total_seconds()
        plan = plan_render(
            video,
            [o for o in offers if not job.families or o.family in job.families],
            may_span=False,
            may_split=True,
            window_seconds=window,
            wait_seconds=settings.boot_seconds + settings.model_load_seconds,
        )
        if plan is not None and plan.split:
            chosen.append(Split(job.job_id, plan.why))
    return chosen
