"""The account limits EC2 puts on GPU instances, one name each: the Service Quotas that count
vCPUs per instance class and market, and the scope an account-limit error holds back.

A new AWS account starts with small G and P quotas (often 0 or a few vCPUs), so these are met
on day one. Their codes are Service Quotas' (service `ec2`); their names are what the console
and a quota increase request show.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernel.market import Market


@dataclass(frozen=True)
class VcpuQuota:
    code: str  # Service Quotas' code, e.g. L-DB2E81BA
    name: str
    market: Market
    classes: tuple[str, ...]  # instance type prefixes it counts ("g", "vt"; "p")


GPU_VCPU_QUOTAS: tuple[VcpuQuota, ...] = (
    VcpuQuota("L-DB2E81BA", "Running On-Demand G and VT instances", Market.ON_DEMAND, ("g", "vt")),
    VcpuQuota("L-417A185B", "Running On-Demand P instances", Market.ON_DEMAND, ("p",)),
    VcpuQuota("L-3819A6DF", "All G and VT Spot Instance Requests", Market.SPOT, ("g", "vt")),
    VcpuQuota("L-7212CCBC", "All P Spot Instance Requests", Market.SPOT, ("p",)),
)


def instance_class(instance_type: str) -> str:
    """EC2's instance class: the letters its family starts with ("g6e.xlarge" -> "g")."""
    family = instance_type.split(".", 1)[0]
    letters = ""
    for ch in family:
        if not ch.isalpha():
            break
        letters += ch
    return letters.lower()


def quota_of(instance_type: str, market: Market) -> VcpuQuota | None:
    """The vCPU quota a launch of this type on this market counts against, if one is known."""
    cls = instance_class(instance_type)
    for quota in GPU_VCPU_QUOTAS:
        if quota.market is market and any(cls == c or cls.startswith(c) for c in quota.classes):
            return quota
    return None


@dataclass(frozen=True)
class LimitScope:
    """What an account-limit error holds back: a vCPU quota (every type of its class on its
    market), a subnet (every pool in its zone), or, where no quota is known for the type, that
    type on that market."""

    quota: VcpuQuota | None = None
    zone: str | None = None
    instance_type: str | None = None
    market: Market | None = None

    def covers(self, instance_type: str, availability_zone: str, market: Market) -> bool:
        if self.quota is not None:
            return quota_of(instance_type, market) == self.quota
        if self.zone is not None:
            return availability_zone == self.zone
        return instance_type == self.instance_type and market is self.market

    def describe(self) -> str:
        if self.quota is not None:
            return f"the quota '{self.quota.name}' ({self.quota.code})"
        if self.zone is not None:
            return f"the subnet in {self.zone} (no free addresses)"
        return f"the account's limit on {self.instance_type} ({self.market})"


def limit_scope(
    code: str, instance_type: str, availability_zone: str, market: Market
) -> LimitScope:
    """What an EC2 limit error code limits, for a launch of this pool."""
    if code == "InsufficientFreeAddressesInSubnet":
        return LimitScope(zone=availability_zone)
    quota = quota_of(instance_type, market)
    if quota is not None:
        return LimitScope(quota=quota)
    return LimitScope(instance_type=instance_type, market=market)
