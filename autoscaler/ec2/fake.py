"""A programmable EC2 for policy and actuation tests: pools can be made to fail with
insufficient capacity (moto never returns fleet errors). Idempotent per client token."""

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
    ObservedInstance,
)
from autoscaler.pools import Pool
from kernel.clock import Clock


class FakeEc2:
    # What a capacity error says; the simulator's cloud says why in its own words.
    no_capacity = "no capacity (fake)"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.insufficient: set[Pool] = set()
        self.instances: dict[str, ObservedInstance] = {}
        self.requests: list[LaunchRequest] = []
        self._by_token: dict[str, LaunchResult] = {}
        self._ids = itertools.count(1)

    async def launch(self, request: LaunchRequest) -> LaunchResult:
        self.requests.append(request)
        if request.client_token in self._by_token:
            return self._by_token[request.client_token]
        errors = []
        for pool in request.pools:
            if not self.has_capacity(pool):
                errors.append(
                    CapacityUnavailable(pool, "InsufficientInstanceCapacity", self.no_capacity)
                )
                continue
            launched = tuple(self._start(pool, request) for _ in range(request.count))
            result = LaunchResult(launched, tuple(errors))
            self._by_token[request.client_token] = result
            return result
        return LaunchResult((), tuple(errors))

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
