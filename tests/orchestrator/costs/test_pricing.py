"""EC2's billing rules in the ledger: the price in effect at each moment, per second, 60 seconds
at least; money in Decimal, rounded to the cent only when shown, with parts that add up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.costs.money import apportion, cents
from orchestrator.costs.pricing import PriceSchedule, billed_end

T0 = datetime(2023, 2, 15, 10, 0, tzinfo=UTC)


def test_a_price_change_in_the_middle_of_a_life_is_priced_on_both_sides() -> None:
    prices = PriceSchedule(((T0, Decimal("0.918")), (T0 + timedelta(hours=1), Decimal("1.2"))))
    # 30 minutes before the change, 15 after.
    cost = prices.cost(T0 + timedelta(minutes=30), T0 + timedelta(minutes=75))
    assert cost == Decimal("0.918") / 2 + Decimal("1.2") / 4
    assert cents(cost) == Decimal("0.76")
    pieces = prices.pieces(T0 + timedelta(minutes=30), T0 + timedelta(minutes=75))
    assert [price for _, _, price in pieces] == [Decimal("0.918"), Decimal("1.2")]


def test_an_instance_is_billed_sixty_seconds_at_least_and_whole_seconds() -> None:
    assert billed_end(T0, T0 + timedelta(seconds=7), T0) == T0 + timedelta(seconds=60)
    assert billed_end(T0, T0 + timedelta(seconds=61.2), T0) == T0 + timedelta(seconds=62)
    # A live one is billed up to now, its minimum owed already.
    assert billed_end(T0, None, T0 + timedelta(seconds=5)) == T0 + timedelta(seconds=60)
    assert billed_end(T0, None, T0 + timedelta(hours=2)) == T0 + timedelta(hours=2)
    seven_seconds = PriceSchedule.fixed(Decimal("3.06"), T0).cost(T0, billed_end(T0, T0, T0))
    assert seven_seconds == Decimal("3.06") / 60


def test_before_the_first_recorded_price_the_first_price_applies() -> None:
    prices = PriceSchedule(((T0, Decimal("1.5")),))
    assert prices.at(T0 - timedelta(hours=3)) == Decimal("1.5")


AMOUNTS = st.decimals(min_value=0, max_value=10**6, places=12)


@given(st.dictionaries(st.text(min_size=1, max_size=3), AMOUNTS, max_size=30))
def test_apportioned_parts_add_up_to_the_rounded_total(parts: dict[str, Decimal]) -> None:
    shown = apportion(parts)
    assert set(shown) == set(parts)
    assert sum(shown.values(), Decimal(0)) == cents(sum(parts.values(), Decimal(0)))
    for key, value in parts.items():
        assert abs(shown[key] - value) < Decimal("0.01")
