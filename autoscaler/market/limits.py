"""The account's limits, as facts to plan within rather than failures.

Two sources: the vCPU quotas read from Service Quotas (on-demand and spot, G and VT, P), and
the limit errors EC2 answers a launch with (VcpuLimitExceeded, InstanceLimitExceeded,
MaxSpotInstanceCountExceeded, InsufficientFreeAddressesInSubnet). An error holds back what it
limits (the quota's every pool, or the subnet's zone) for `hold`; the round's other launches go
on. A quota read gives the plan its room: the quota less the vCPUs this fleet runs under it
(other workloads of the account share it: their use shows as an error, which holds it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from autoscaler.ec2.ports import LimitReached
from autoscaler.market.quotes import MarketSnapshot
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.errors import FrameFleetError
from kernel.instance_types import CATALOG
from kernel.service_quotas import GPU_VCPU_QUOTAS, LimitScope, VcpuQuota, quota_of

log = logging.getLogger(__name__)


class QuotaSource(Protocol):
    async def vcpu_quota(self, quota: VcpuQuota) -> float | None:
        """The vCPUs the account may run under this quota; None when it cannot be read."""
        ...


@dataclass(frozen=True)
class QuotaUse:
    """One quota as the autoscaler sees it (its metrics show these)."""

    quota: VcpuQuota
    vcpus: float | None  # the quota; None: not known
    used: float  # vCPUs of this fleet's live instances under it


@dataclass(frozen=True)
class HeldLimit:
    name: str  # what it limits: "the quota '...' (L-...)", "the subnet in ..."
    why: str


class AccountLimits:
    def __init__(
        self,
        clock: Clock,
        source: QuotaSource | None = None,
        hold: timedelta = timedelta(minutes=15),
        refresh: timedelta = timedelta(hours=1),
    ) -> None:
        self._clock, self._source = clock, source
        self._hold, self._refresh = hold, refresh
        self._quotas: dict[str, float] = {}  # quota code -> vCPUs
        self._read_at: datetime | None = None
        self._held: dict[LimitScope, tuple[datetime, str]] = {}

    async def refresh(self) -> None:
        """Read the quotas, at most once per `refresh` (a quota changes when AWS raises it)."""
        now = self._clock.now()
        if self._source is None or (self._read_at and now - self._read_at < self._refresh):
            return
        self._read_at = now
        for quota in GPU_VCPU_QUOTAS:
            try:
                value = await self._source.vcpu_quota(quota)
            except FrameFleetError as error:  # not read: plan without it, errors still hold
                log.warning("quotas not read, next try in %s: %s", self._refresh, error)
                return
            if value is not None:
                self._quotas[quota.code] = value

    def reached(self, error: LimitReached) -> None:
        until = self._clock.now() + self._hold
        self._held[error.scope] = (until, f"{error.code}: {error.scope.describe()} is reached")

    def _held_now(self) -> dict[LimitScope, tuple[datetime, str]]:
        now = self._clock.now()
        self._held = {scope: held for scope, held in self._held.items() if held[0] > now}
        return self._held

    def holding(self, pool: Pool) -> HeldLimit | None:
        """The limit met lately that holds `pool` back, or None."""
        return _holding(pool, self._held_now())

    def screen(self, snapshot: MarketSnapshot) -> MarketSnapshot:
        """The snapshot with the pools under a limit just met marked unavailable, and why."""
        held_now = self._held_now()
        if not held_now:
            return snapshot
        quotes = {}
        for pool, quote in snapshot.quotes.items():
            held = _holding(pool, held_now)
            quotes[pool] = (
                replace(quote, available=False, why_unavailable=held.why, limit=held.name)
                if held
                else quote
            )
        return MarketSnapshot(snapshot.at, quotes)

    def room(self, fleet: Iterable[Pool]) -> dict[str, float]:
        """Quota code -> the vCPUs a plan may still launch under it (known quotas only)."""
        used = _used(fleet)
        return {code: max(0.0, vcpus - used.get(code, 0.0)) for code, vcpus in self._quotas.items()}

    def uses(self, fleet: Iterable[Pool]) -> list[QuotaUse]:
        used = _used(fleet)
        return [
            QuotaUse(quota, self._quotas.get(quota.code), used.get(quota.code, 0.0))
            for quota in GPU_VCPU_QUOTAS
        ]


def _holding(pool: Pool, held: dict[LimitScope, tuple[datetime, str]]) -> HeldLimit | None:
    return next(
        (
            HeldLimit(
                scope.describe(), f"{reason}; ask AWS to raise it (held until {until:%H:%M:%S})"
            )
            for scope, (until, reason) in held.items()
            if scope.covers(pool.instance_type, pool.availability_zone, pool.market)
        ),
        None,
    )


def _used(fleet: Iterable[Pool]) -> dict[str, float]:
    used: dict[str, float] = {}
    for pool in fleet:
        quota = quota_of(pool.instance_type, pool.market)
        kind = CATALOG.get(pool.instance_type)
        if quota is not None and kind is not None:
            used[quota.code] = used.get(quota.code, 0.0) + kind.vcpus
    return used
