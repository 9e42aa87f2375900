"""Pools that just failed us: insufficient capacity on launch, or a spot interruption.

A marked pool is avoided for `hold` (time from the injected clock); the policy then buys
elsewhere. Also the fleet's own interruption record, which refines the advisor's rates.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from datetime import datetime, timedelta

from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool
from kernel.clock import Clock


class CapacityMemory:
    def __init__(self, clock: Clock, hold: timedelta = timedelta(minutes=15)) -> None:
        self._clock = clock
        self._hold = hold
        self._until: dict[Pool, tuple[datetime, str]] = {}
        self._interruptions: dict[Pool, deque[datetime]] = {}

    def mark(self, pool: Pool, reason: str) -> None:
        self._until[pool] = (self._clock.now() + self._hold, reason)

    def interrupted(self, pool: Pool) -> None:
        self.mark(pool, "spot interruption")
        self._interruptions.setdefault(pool, deque(maxlen=1000)).append(self._clock.now())

    def unavailable(self, pool: Pool) -> str | None:
        """Why the pool is avoided now, or None."""
        entry = self._until.get(pool)
        if entry is None:
            return None
        until, reason = entry
        if self._clock.now() >= until:
            del self._until[pool]
            return None
        return f"{reason} (avoided until {until:%H:%M:%S})"

    def screen(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        """The snapshot with the pools held back marked unavailable (any market source)."""
        quotes = {}
        for pool, quote in snapshot.quotes.items():
            why = self.unavailable(pool)
            quotes[pool] = replace(quote, available=False, why_unavailable=why) if why else quote
        return MarketSnapshot(snapshot.at, quotes)

    def observed_rate(self, pool: Pool, window: timedelta = timedelta(days=7)) -> float | None:
        """Interruptions per instance-hour this fleet saw lately, if any."""
        seen = self._interruptions.get(pool)
        if not seen:
            return None
        since = self._clock.now() - window
        return sum(1 for at in seen if at >= since) / (window.total_seconds() / 3600)
