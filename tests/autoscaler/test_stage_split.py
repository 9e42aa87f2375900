"""Which queued renders the autoscaler splits into stages (autoscaler/stage_split.py): the
render planner's choice at the market's prices now, for renders that never ran, never for a
spanning or `exact` one; `split_renders` turns it off or on for every render."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from autoscaler.market.on_demand import fallback_price
from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.pools import Pool
from autoscaler.snapshot import JobDemand, PurchaseSettings, SplitMode
from autoscaler.stage_split import offers_now, splits
from autoscaler.throughput import WorkShape
from kernel.market import Market

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
TYPES = ("g6.xlarge", "g6e.xlarge", "g6e.12xlarge", "p5.48xlarge")
SETTINGS = PurchaseSettings(candidate_types=TYPES)


def on_demand_market(types: tuple[str, ...] = TYPES) -> MarketSnapshot:
    quotes = []
    for instance_type in types:
        price = fallback_price("us-east-1", instance_type)
        assert price is not None
        pool = Pool(instance_type, "us-east-1a", Market.ON_DEMAND)
        quotes.append(PoolQuote(pool, price, 0.0))
    return MarketSnapshot(NOW, {q.pool: q for q in quotes})


def demand(job_id: str, shape: WorkShape, **fields: object) -> JobDemand:
    base = JobDemand(job_id, 5, NOW, None, shape, 50, may_split=True)
    return replace(base, **fields)  # type: ignore[arg-type]


BIG = WorkShape("wan/wan2.1-t2v-14b", 832, 480, 81)  # whole past an L40S, its denoising not
SMALL = WorkShape("wan/wan2.1-t2v-1.3b", 832, 480, 81)


def test_offers_are_each_type_at_its_cheapest_available_price() -> None:
    spot = Pool("g6e.xlarge", "us-east-1b", Market.SPOT)
    gone = Pool("g6e.xlarge", "us-east-1c", Market.SPOT)
    market = on_demand_market()
    quotes = {
        **market.quotes,
        spot: PoolQuote(spot, 0.9, 0.01),
        gone: PoolQuote(gone, 0.1, 0.01, available=False, why_unavailable="no capacity"),
    }
    offers = {o.instance_type: o for o in offers_now(MarketSnapshot(NOW, quotes), TYPES)}
    assert set(offers) == set(TYPES)
    assert offers["g6e.xlarge"].price_per_hour == 0.9
    assert (offers["p5.48xlarge"].gpus, offers["p5.48xlarge"].family) == (8, "h100")
    assert offers_now(market, ("g6.xlarge",))[0].instance_type == "g6.xlarge"


def test_a_large_render_is_split_where_the_planner_finds_it_cheaper_and_a_small_one_not() -> None:
    offers = offers_now(on_demand_market(), TYPES)
    queued = [demand("big", BIG), demand("small", SMALL)]
    [split] = splits(queued, offers, NOW, SETTINGS)
    assert split.job_id == "big"
    assert split.why.startswith("stages save") or split.why.startswith("only")


def test_only_renders_that_may_be_split_are_and_the_mode_decides() -> None:
    offers = offers_now(on_demand_market(), TYPES)
    queued = [
        demand("big", BIG),
        demand("started", BIG, may_split=False),  # ran already, spans GPUs or asked `exact`
        demand("small", SMALL),
    ]
    never = replace(SETTINGS, split_renders=SplitMode.NEVER)
    always = replace(SETTINGS, split_renders=SplitMode.ALWAYS)
    assert splits(queued, offers, NOW, never) == []
    assert [s.job_id for s in splits(queued, offers, NOW, always)] == ["big", "small"]
    assert [s.job_id for s in splits(queued, offers, NOW, SETTINGS)] == ["big"]


def test_only_the_families_a_job_allows_are_priced_for_it() -> None:
    offers = offers_now(on_demand_market(), TYPES)
    # On the L4s alone (24 GiB) a 14B render fits neither whole nor as stages: not split.
    l4_only = demand("l4", BIG, families=frozenset({"l4"}))
    due = demand("due", BIG, deadline=NOW + timedelta(hours=30))
    assert [s.job_id for s in splits([l4_only, due], offers, NOW, SETTINGS)] == ["due"]
