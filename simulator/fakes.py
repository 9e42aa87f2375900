"""Fakes of the outside world for the simulator and tests: a worker link without a broker, an
interruptions queue that needs no polling, a dead-letter queue that keeps what it is sent, and
the market and queue as the baselines see them."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from autoscaler.demand import JobSource, StoreDemand
from autoscaler.market.ports import MarketData
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.market.trace import Trace
from autoscaler.pools import Pool
from autoscaler.snapshot import JobDemand
from kernel.worker_protocol import Command
from orchestrator.intake.ports import ReceivedMessage


class MemoryLink:
    """The control plane's WorkerLink without a broker: commands wait here for delivery."""

    def __init__(self) -> None:
        self.commands: list[Command] = []

    async def publish(self, topic: str, payload: str, retain: bool = False) -> None:
        self.commands.append(Command.model_validate_json(payload))

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


class HandledQueue:
    """The interruptions queue: events are handed to the loop directly, so there is never
    anything left to receive or delete."""

    async def receive(
        self, max_messages: int, wait_seconds: int, visibility_timeout: int
    ) -> list[ReceivedMessage]:
        return []

    async def delete(self, receipt_handles: Sequence[str]) -> None:
        return None

    async def extend_visibility(self, receipt_handles: Sequence[str], seconds: int) -> None:
        return None


class KeptDeadLetters:
    """A dead-letter queue that keeps what it is sent, for reading back."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Mapping[str, str]]] = []

    async def send(self, body: str, attributes: Mapping[str, str]) -> None:
        self.sent.append((body, attributes))


class PricesOnly:
    """The market as a baseline sees it: prices and capacity, no interruption rates."""

    def __init__(self, market: MarketData) -> None:
        self._market = market

    async def snapshot(self, pools: Sequence[Pool]) -> MarketSnapshot:
        seen = await self._market.snapshot(pools)
        blind = {pool: replace(q, interruptions_per_hour=0.0) for pool, q in seen.quotes.items()}
        return MarketSnapshot(seen.at, blind)


class HomeZones(StoreDemand):
    """The queue as a single-job baseline sees it: each job may use spot only in its home
    zone, the cheapest with capacity when the job is first seen (the cheapest of all when
    none has). The rest of the store is read and written as the product does."""

    def __init__(self, store: JobSource, trace: Trace) -> None:
        super().__init__(store)
        self._trace = trace
        self.homes: dict[str, str] = {}

    def queued(self, now: datetime) -> list[JobDemand]:
        return [
            replace(j, spot_zones=frozenset({self._home(j.job_id, now)}))
            for j in super().queued(now)
        ]

    def _home(self, job_id: str, now: datetime) -> str:
        if job_id not in self.homes:
            tick = self._trace.tick(now)
            zones = self._trace.zones.values()
            open_zones = [z for z in zones if z.available[tick]] or list(zones)
            self.homes[job_id] = min(open_zones, key=lambda z: (z.prices[tick], z.zone)).zone
        return self.homes[job_id]
