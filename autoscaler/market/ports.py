"""The one port the autoscaler reads the market through (live AWS or a replayed trace)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool


class MarketData(Protocol):
    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        """Price, interruption rate and availability of each pool now (pools it has no data
        for are left out: the policy never buys what it cannot price)."""
        ...
