"""The plan within the account's vCPU quotas (pure): a pool fits the plan only while its quota
has room for one more instance of its type, and each launch the plan opens takes its vCPUs
from that room (`pool_choice.limit_wait` names the limit a job waits for)."""

from __future__ import annotations

from collections.abc import Mapping

from autoscaler.pools import Pool
from kernel.instance_types import kind_of
from kernel.service_quotas import quota_of


def within_room(room: Mapping[str, float], pool: Pool) -> bool:
    quota = quota_of(pool.instance_type, pool.market)
    if quota is None or quota.code not in room:
        return True  # no quota known for it: EC2's answer is the limit
    return kind_of(pool.instance_type).vcpus <= room[quota.code]


def took(room: Mapping[str, float], pool: Pool) -> dict[str, float]:
    """The room left after a launch in `pool`."""
    quota = quota_of(pool.instance_type, pool.market)
    left = dict(room)
    if quota is not None and quota.code in left:
        left[quota.code] -= kind_of(pool.instance_type).vcpus
    return left
