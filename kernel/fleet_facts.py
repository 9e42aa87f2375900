"""What the autoscaler observes of the fleet and the market, handed to the control plane's
cost ledger: instances as EC2 lists them and prices as they change. Money is `Decimal`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import StrEnum

from kernel.market import Market


@dataclass(frozen=True)
class InstanceSeen:
    instance_id: str
    instance_type: str
    availability_zone: str
    market: Market
    launched_at: datetime  # EC2's LaunchTime: billing starts there
    gpus: int
    gpu_family: str


@dataclass(frozen=True)
class PriceSeen:
    """A pool's price per hour, in effect from `at` until the next change."""

    instance_type: str
    availability_zone: str
    market: Market
    at: datetime
    usd_per_hour: Decimal


@dataclass(frozen=True)
class PoolMark:
    """A pool that failed the fleet: a capacity error on launch (avoided until `until`) or a
    spot interruption (also counted for the pool's observed rate). Kept in the store, so that
    whichever autoscaler replica buys next knows it."""

    instance_type: str
    availability_zone: str
    market: Market
    at: datetime
    until: datetime
    reason: str
    interruption: bool = False


class GpuFaultKind(StrEnum):
    STALL = "stall"  # a job made no step within the watchdog's bound there
    ERRORS = "errors"  # uncorrected ECC or critical XID errors
    SLOW = "slow"  # steps far slower than the family's learned rate
    QUARANTINE = "quarantine"  # no more work there; the instance is replaced
    # An operator lifted the quarantine: the faults before it no longer count.
    RELEASE = "release"


@dataclass(frozen=True)
class GpuFault:
    worker_id: str
    instance_id: str
    gpu_index: int
    kind: GpuFaultKind
    detail: str
    at: datetime
    job_id: str | None = None
