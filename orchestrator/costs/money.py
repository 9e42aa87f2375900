"""Money is `Decimal` dollars from the price list to the report; floats never touch it.

The rounding rule (the README's "How the ledger rounds"): every ledger line keeps full
precision; only what is shown is rounded, to the cent, half to even (banker's rounding, as
AWS's Cost and Usage Report does). Where parts of a shown total are shown too (an instance's
categories, a report's rows), the parts are apportioned by largest remainder so that they add
up to the shown total to the cent."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, Decimal
from typing import TypeVar

CENT = Decimal("0.01")
ZERO = Decimal(0)
SECONDS_PER_HOUR = Decimal(3600)

K = TypeVar("K")


def seconds_of(span: timedelta) -> Decimal:
    """Exact: a timedelta is whole microseconds."""
    return Decimal(span.days * 86400 + span.seconds) + Decimal(span.microseconds) / 10**6


def cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_EVEN)


def usd(amount: Decimal) -> str:
    """For people: $1,234.57."""
    return f"${cents(amount):,.2f}"


def apportion(parts: Mapping[K, Decimal]) -> dict[K, Decimal]:
    """Each part in cents, adding up to the total's cents exactly (largest remainder)."""
    total = cents(sum(parts.values(), ZERO))
    floors = {key: value.quantize(CENT, rounding=ROUND_DOWN) for key, value in parts.items()}
    left = int((total - sum(floors.values(), ZERO)) / CENT)
    by_remainder = sorted(parts, key=lambda key: parts[key] - floors[key], reverse=True)
    step = CENT if left >= 0 else -CENT
    for key in by_remainder[: abs(left)]:
        floors[key] += step
    return floors
