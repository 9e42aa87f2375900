"""What EC2 charges for an instance's life: the price in effect at each moment (spot prices
change, hourly at most), per second with a 60-second minimum (Linux instances, both markets),
and its EBS root volume by the second at the gp3 monthly rate."""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from orchestrator.costs.money import SECONDS_PER_HOUR, ZERO, seconds_of

MINIMUM_BILLED = timedelta(seconds=60)
HOURS_PER_MONTH = Decimal(730)  # AWS's convention for monthly rates


class MissingPrice(ValueError):
    """No price is known for a pool at a moment the ledger must price."""


@dataclass(frozen=True)
class PriceSchedule:
    """A pool's prices (USD per hour) as they changed, oldest first. Before the first change
    the first price applies (the market was read after the instance started)."""

    changes: tuple[tuple[datetime, Decimal], ...]

    def __post_init__(self) -> None:
        if not self.changes:
            raise MissingPrice("a price schedule needs at least one price")

    @classmethod
    def fixed(cls, usd_per_hour: Decimal, since: datetime) -> PriceSchedule:
        return cls(((since, usd_per_hour),))

    def at(self, moment: datetime) -> Decimal:
        index = bisect.bisect_right([at for at, _ in self.changes], moment) - 1
        return self.changes[max(index, 0)][1]

    def pieces(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime, Decimal]]:
        """[start, end) cut at each price change, with the price of each piece."""
        cuts = [at for at, _ in self.changes if start < at < end]
        bounds = [start, *cuts, end]
        return [(a, b, self.at(a)) for a, b in itertools.pairwise(bounds) if b > a]

    def cost(self, start: datetime, end: datetime) -> Decimal:
        return sum(
            (
                price * seconds_of(b - a) / SECONDS_PER_HOUR
                for a, b, price in self.pieces(start, end)
            ),
            ZERO,
        )


def billed_end(launched_at: datetime, ended_at: datetime | None, now: datetime) -> datetime:
    """Per-second billing rounds a life up to whole seconds, and bills at least 60 seconds.
    A live instance is billed up to `now` (its minimum is owed already)."""
    end = ended_at if ended_at is not None else now
    seconds = max(math.ceil((end - launched_at).total_seconds()), 0)
    return launched_at + max(timedelta(seconds=seconds), MINIMUM_BILLED)


def ebs_per_hour(gib: int, usd_per_gib_month: Decimal) -> Decimal:
    return Decimal(gib) * usd_per_gib_month / HOURS_PER_MONTH
