"""The EC2 calls the autoscaler makes, declared by it (the adapter and the fake implement it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from autoscaler.pools import Pool
from kernel.errors import FrameFleetError
from kernel.market import Market
from kernel.service_quotas import limit_scope

FLEET_TAG = "framefleet:fleet"
MARKET_TAG = "framefleet:market"
REASON_TAG = "framefleet:reason"


class CapacityUnavailable(FrameFleetError):
    """A pool could not serve a launch now (InsufficientInstanceCapacity and friends)."""

    def __init__(self, pool: Pool, code: str, message: str) -> None:
        super().__init__(f"{pool}: {code}: {message}")
        self.pool, self.code = pool, code


class LimitReached(FrameFleetError):
    """An account or subnet limit refused a launch (VcpuLimitExceeded and friends): every pool
    in `scope` fails alike until the limit frees or AWS raises it."""

    def __init__(self, pool: Pool, code: str, message: str) -> None:
        self.scope = limit_scope(code, pool.instance_type, pool.availability_zone, pool.market)
        super().__init__(f"{pool}: {code}: {message} (limits {self.scope.describe()})")
        self.pool, self.code = pool, code


@dataclass(frozen=True)
class LaunchRequest:
    fleet_id: str
    market: Market
    pools: tuple[Pool, ...]  # alternatives, all on `market`; EC2 picks by allocation strategy
    count: int
    client_token: str  # the same request after a crash returns the same instances
    reason: str
    job_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ObservedInstance:
    instance_id: str
    pool: Pool
    state: str  # pending | running | shutting-down | stopping | stopped | terminated
    launched_at: datetime
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchResult:
    instances: tuple[ObservedInstance, ...]
    errors: tuple[CapacityUnavailable, ...] = ()
    limits: tuple[LimitReached, ...] = ()


class Ec2Fleet(Protocol):
    async def launch(self, request: LaunchRequest) -> LaunchResult: ...

    async def terminate(self, instance_ids: Sequence[str]) -> None: ...

    async def describe(self, fleet_id: str) -> list[ObservedInstance]:
        """Live instances (not terminated) tagged with this fleet id."""
        ...
