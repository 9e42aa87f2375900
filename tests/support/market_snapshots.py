"""A market snapshot of one GPU type in three zones and a job's demand, for the purchase
policy's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from autoscaler.market.quotes import MarketSnapshot, PoolQuote
from autoscaler.pools import Pool
from autoscaler.snapshot import JobDemand, PurchaseSettings
from autoscaler.throughput import WorkShape
from kernel.market import Market

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TYPE = "g6e.xlarge"

SHAPE = WorkShape("wan/t2v", 832, 480, 81)  # ~2 s per step on an L40S (prior)


def pool(zone: str, market: Market = Market.SPOT) -> Pool:
    return Pool(TYPE, f"us-east-1{zone}", market)


def market(*quotes: PoolQuote) -> MarketSnapshot:
    return MarketSnapshot(NOW, {q.pool: q for q in quotes})


# The pace rule as Uniform Progress has it (off by default): three interruptions of slack.
# Spreading and per-zone risk on, as an operator may set them (both off by default).
SETTINGS = PurchaseSettings(
    candidate_types=(TYPE,), behind_slack_factor=3.0, max_pool_share=0.34, zone_risk=True
)

SPOT_A = PoolQuote(pool("a"), 0.70, 0.002)

SPOT_B = PoolQuote(pool("b"), 0.75, 0.002)

SPOT_C = PoolQuote(pool("c"), 0.76, 0.002)

ON_DEMAND = PoolQuote(pool("a", Market.ON_DEMAND), 1.861, 0.0)

MARKET = market(SPOT_A, SPOT_B, SPOT_C, ON_DEMAND)


def job(
    job_id: str = "j",
    *,
    deadline_in: timedelta | None = None,
    submitted_ago: timedelta = timedelta(0),
    done: int = 0,
    steps: int = 1500,  # ~49 minutes on an L40S (prior)
    priority: int = 5,
) -> JobDemand:
    return JobDemand(
        job_id,
        priority,
        NOW - submitted_ago,
        NOW + deadline_in if deadline_in is not None else None,
        SHAPE,
        steps,
        done,
    )
