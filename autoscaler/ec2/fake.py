"""A programmable EC2 for policy and actuation tests: pools can be made to fail with
insufficient capacity, vCPU quotas to run out, and launches to fail outright (moto never
returns fleet errors). Idempotent per client token."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from autoscaler.ec2.ports import (
    FLEET_TAG,
    MARKET_TAG,
    REASON_TAG,
    CapacityUnavailable,
    LaunchRequest,
    LaunchResult,
    LimitReached,
    ObservedInstance,
)
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.errors import AwsError
from kernel.instance_types import kind_of
from kernel.service_quotas import quota_of


class FakeEc2:
    # What a capacity error says; the simulator's cloud says why in its own words.
    no_capacity = "no capacity (fake)"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.insufficient: set[Pool] = set()
        # Service Quotas code -> the vCPUs the account may run under it (left out: no limit).
        self.vcpu_quotas: dict[str, int] = {}
        self.broken: set[Pool] = set()  # a launch there fails with an error of no known kind
        self.instances: dict[str, ObservedInstance] = {}
        self.requests: list[LaunchRequest] = []
        self._by_token: dict[str, LaunchResult] = {}
        self._ids = itertools.count(1)

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        self.requests.append(request)
        if request.client_token in self._by_token:
            return self._by_token[request.client_token]
        errors, limits = [], []
        for pool in request.pools:
            if pool in self.broken:
                raise AwsError(f"CreateFleet: SomethingNobodyDocumented: {pool}")
            if not self.within_quota(pool, request.count):
                quota = quota_of(pool.instance_type, pool.market)
                name = quota.name if quota else pool.instance_type
                limits.append(LimitReached(pool, "VcpuLimitExceeded", f"{name} (fake)"))
                continue
            if not self.has_capacity(pool):
                errors.append(
                    CapacityUnavailable(pool, "InsufficientInstanceCapacity", self.no_capacity)
                )
                continue
            launched = tuple(self._start(pool, request) for _ in range(request.count))
            result = LaunchResult(launched, tuple(errors), tuple(limits))
            self._by_token[request.client_token] = result
            return result
        return LaunchResult((), tuple(errors), tuple(limits))

    def within_quota(self, pool: Pool, count: int) -> bool:
        quota = quota_of(pool.instance_type, pool.market)
        if quota is None or quota.code not in self.vcpu_quotas:
            return True
        running = sum(
            kind_of(i.pool.instance_type).vcpus
            for i in self.instances.values()
            if quota_of(i.pool.instance_type, i.pool.market) == quota
        )
        return running + count * kind_of(pool.instance_type).vcpus <= self.vcpu_quotas[quota.code]

    def has_capacity(self, pool: Pool) -> bool:
        return pool not in self.insufficient

    def _start(self, pool: Pool, request: LaunchRequest) -> ObservedInstance:
        instance = ObservedInstance(
            f"i-{next(self._ids):017x}",
            pool,
            "running",
            self._clock.now(),
            {
                FLEET_TAG: request.fleet_id,
                MARKET_TAG: pool.market.value,
                REASON_TAG: request.reason,
            },
        )
        self.instances[instance.instance_id] = instance
        return instance

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        for instance_id in instance_ids:
            self.instances.pop(instance_id, None)

    async def describe(self, fleet_id: str) -> list[ObservedInstance]:
        return [i for i in self.instances.values() if i.tags.get(FLEET_TAG) == fleet_id]
