"""Market data: the capacity memory, the advisor's rates, the dated on-demand table, the
Pricing API's product documents, and the trace-driven market that never reads the future."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from autoscaler.market.advisor import SpotAdvisor
from autoscaler.market.aws_prices import on_demand_price_of, pricing_filters
from autoscaler.market.capacity import CapacityMemory
from autoscaler.market.on_demand import fallback_price
from autoscaler.market.trace import TraceMarket, load_trace
from autoscaler.pools import Pool
from kernel.clock import FakeClock
from kernel.errors import ConfigurationError
from kernel.market import Market
from tests.support.paths import TEST_TRACES

TRACES = TEST_TRACES / "v100-slice"
POOL = Pool("g6e.xlarge", "us-east-1a", Market.SPOT)


def test_a_capacity_error_holds_a_pool_back_for_a_while(clock: FakeClock) -> None:
    memory = CapacityMemory(clock, hold=timedelta(minutes=15))
    assert memory.unavailable(POOL) is None
    memory.mark(POOL, "InsufficientInstanceCapacity on launch")
    assert "InsufficientInstanceCapacity" in (memory.unavailable(POOL) or "")
    clock.advance(14 * 60)
    assert memory.unavailable(POOL) is not None
    clock.advance(61)
    assert memory.unavailable(POOL) is None


def test_observed_interruptions_raise_the_pool_rate(clock: FakeClock) -> None:
    memory = CapacityMemory(clock)
    assert memory.observed_rate(POOL) is None
    for _ in range(3):
        memory.interrupted(POOL)
    assert memory.observed_rate(POOL, window=timedelta(hours=1)) == pytest.approx(3.0)
    assert memory.unavailable(POOL) is not None


def test_the_shipped_advisor_snapshot_covers_the_gpu_families() -> None:
    advisor = SpotAdvisor.shipped()
    for instance_type in ("g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge", "p4d.24xlarge"):
        entry = advisor.entry("us-east-1", instance_type)
        assert entry is not None, instance_type
        assert 0 < entry.interruptions_per_hour < 0.001  # at most ~25% a month
    assert advisor.entry("us-east-1", "m5.large") is None  # not a GPU type: not shipped


def test_the_advisor_feed_is_read_when_it_answers_and_the_snapshot_otherwise(
    tmp_path: Path,
) -> None:
    feed = {"spot_advisor": {"us-east-1": {"Linux": {"g6e.xlarge": {"s": 60, "r": 0}}}}}
    path = tmp_path / "feed.json"
    path.write_text(json.dumps(feed))
    fresh = SpotAdvisor.fetch_or_shipped(path.as_uri())
    entry = fresh.entry("us-east-1", "g6e.xlarge")
    assert entry is not None
    assert entry.bucket == 0
    assert fresh.entry("us-east-1", "g5.xlarge") is None  # only what the feed said
    fallback = SpotAdvisor.fetch_or_shipped((tmp_path / "missing.json").as_uri())
    assert fallback.entry("us-east-1", "g5.xlarge") is not None  # the shipped snapshot


def test_on_demand_fallback_table_is_dated_and_covers_the_main_regions() -> None:
    for region in ("us-east-1", "us-east-2", "us-west-2"):
        for instance_type in ("g4dn.xlarge", "g5.xlarge", "g6.xlarge", "g6e.xlarge", "p5.48xlarge"):
            assert (fallback_price(region, instance_type) or 0) > 0
    assert fallback_price("us-east-1", "p3.2xlarge") == pytest.approx(3.06)
    assert fallback_price("mars-1", "g5.xlarge") is None


def test_a_pricing_api_product_document_gives_the_hourly_price() -> None:
    product = {
        "product": {"attributes": {"instanceType": "g6e.xlarge"}},
        "terms": {
            "OnDemand": {
                "ABC.JRTCKXETXF": {
                    "priceDimensions": {
                        "ABC.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "pricePerUnit": {"USD": "1.8610000000"},
                        }
                    }
                }
            }
        },
    }
    assert on_demand_price_of(json.dumps(product)) == pytest.approx(1.861)
    assert on_demand_price_of(json.dumps({"terms": {}})) is None
    fields = {f["Field"]: f["Value"] for f in pricing_filters("g6e.xlarge", "us-east-1")}
    assert fields["location"] == "US East (N. Virginia)"
    assert fields["capacitystatus"] == "Used"


async def test_the_trace_market_prices_and_availability_follow_the_trace() -> None:
    trace = load_trace(TRACES)
    assert set(trace.zones) == {"us-east-1a", "us-west-2b", "us-west-2c"}
    clock = FakeClock(trace.start)
    market = TraceMarket(trace, clock)
    for tick in (0, 1000, 2999):
        clock_at = trace.start + trace.gap * tick
        clock.advance((clock_at - clock.now()).total_seconds())
        snapshot = await market.snapshot(market.pools())
        for zone in trace.zones.values():
            spot = snapshot.quotes[Pool("p3.2xlarge", zone.zone, Market.SPOT)]
            assert spot.price_per_hour == zone.prices[tick]
            assert spot.available == (zone.available[tick] == 1)
            on_demand = snapshot.quotes[Pool("p3.2xlarge", zone.zone, Market.ON_DEMAND)]
            assert on_demand.price_per_hour == pytest.approx(3.06)


async def test_the_trace_market_never_reads_the_future() -> None:
    trace = load_trace(TRACES)
    at = trace.start + trace.gap * 1500
    before = await TraceMarket(trace, FakeClock(at)).snapshot(
        TraceMarket(trace, FakeClock(at)).pools()
    )
    # Rewrite everything after `at`: what the market says at `at` must not change.
    zones = {
        name: replace(
            zone,
            available=zone.available[:1501] + (0,) * (len(zone.available) - 1501),
            prices=zone.prices[:1501] + (99.0,) * (len(zone.prices) - 1501),
        )
        for name, zone in trace.zones.items()
    }
    future_changed = replace(trace, zones=zones)
    market = TraceMarket(future_changed, FakeClock(at))
    after = await market.snapshot(market.pools())
    assert after == before


def test_a_moment_outside_the_trace_is_a_clear_error() -> None:
    trace = load_trace(TRACES)
    with pytest.raises(ConfigurationError, match="outside the trace"):
        trace.tick(trace.end + timedelta(days=1))
    with pytest.raises(ConfigurationError, match="no trace folder"):
        load_trace(TRACES / "missing")
