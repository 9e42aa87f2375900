"""Pools that just failed us: insufficient capacity on launch, or a spot interruption.

A marked pool is avoided for `hold` (time from the injected clock); the policy then buys
elsewhere. Also the fleet's own interruption record, which refines the advisor's rates.
With a log (the store), every mark is shared: `sync` writes this replica's and reads the
others', so whichever autoscaler replica buys next avoids the same pools.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Protocol

from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.fleet_facts import PoolMark

# How far back a replica that starts (or takes over) reads the marks of the others.
REMEMBERED = timedelta(days=7)


class CapacityLog(Protocol):
    def record_pool_marks(self, marks: Sequence[PoolMark]) -> None: ...

    def pool_marks_after(self, after_id: int, since: datetime) -> list[tuple[int, PoolMark]]: ...


class CapacityMemory:
    def __init__(
        self, clock: Clock, hold: timedelta = timedelta(minutes=15), log: CapacityLog | None = None
    ) -> None:
        self._clock = clock
        self._hold = hold
        self._until: dict[Pool, tuple[datetime, str]] = {}
        self._interruptions: dict[Pool, deque[datetime]] = {}
        self._log = log
        self._unsaved: list[PoolMark] = []
        self._read_up_to = 0  # the log's id of the newest mark read

    def mark(self, pool: Pool, reason: str, interruption: bool = False) -> None:
        now = self._clock.now()
        self._avoid(pool, now + self._hold, reason)
        if self._log is not None:
            self._unsaved.append(
                PoolMark(
                    pool.instance_type,
                    pool.availability_zone,
                    pool.market,
                    now,
                    now + self._hold,
                    reason,
                    interruption,
                )
            )

    def _avoid(self, pool: Pool, until: datetime, reason: str) -> None:
        known = self._until.get(pool)
        if known is None or known[0] < until:
            self._until[pool] = (until, reason)

    def interrupted(self, pool: Pool) -> None:
        self.mark(pool, "spot interruption", interruption=True)
        self._interruptions.setdefault(pool, deque(maxlen=1000)).append(self._clock.now())

    async def sync(self) -> None:
        """Share this replica's marks and learn the others' (one round trip, in a thread)."""
        if self._log is None:
            return
        unsaved, self._unsaved = self._unsaved, []
        since = self._clock.now() - REMEMBERED
        fresh = await asyncio.to_thread(self._exchange, self._log, unsaved, since)
        for mark_id, mark in fresh:
            self._read_up_to = max(self._read_up_to, mark_id)
            if mark in unsaved:
                continue  # this replica's own, already applied
            pool = Pool(mark.instance_type, mark.availability_zone, mark.market)
            self._avoid(pool, mark.until, mark.reason)
            if mark.interruption:
                self._interruptions.setdefault(pool, deque(maxlen=1000)).append(mark.at)

    def _exchange(
        self, log: CapacityLog, unsaved: list[PoolMark], since: datetime
    ) -> list[tuple[int, PoolMark]]:
        log.record_pool_marks(unsaved)
        return log.pool_marks_after(self._read_up_to, since)

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
