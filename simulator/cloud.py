"""The simulated cloud: the autoscaler's EC2 port (`Ec2Fleet`) over a spot trace.

- A spot launch in a zone the trace has no capacity in fails with
  InsufficientInstanceCapacity, as EC2 would.
- A running spot instance gets the two-minute notice (on its IMDS and as an EventBridge spot
  warning) before its zone's availability goes 1 -> 0, and is gone when it does. A share of
  interruptions come without a usable notice (AWS sends it best effort), chosen by a seeded
  hash so every run of the same setup is the same.
- Every instance is billed per second, from launch to termination, at its pool's price at the
  time: the trace's spot price of the tick, or on-demand.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from autoscaler.ec2.fake import FakeEc2
from autoscaler.ec2.ports import LaunchRequest, ObservedInstance
from autoscaler.market.trace import Trace
from autoscaler.pools import Pool
from kernel.clock import Clock
from kernel.errors import ConfigurationError
from kernel.instance_types import CATALOG, InstanceKind
from kernel.market import Market
from orchestrator.interruptions.events import SPOT_WARNING
from simulator.companions import Companions


@dataclass
class SimInstance:
    observed: ObservedInstance
    ready_at: datetime  # booted: its agent says hello
    silent: bool  # its interruption (if any) comes without a usable notice
    noticed: bool = False
    ended_at: datetime | None = None
    interrupted: bool = False
    billed_until: datetime | None = None
    cost: float = 0.0

    @property
    def instance_id(self) -> str:
        return self.observed.instance_id

    @property
    def pool(self) -> Pool:
        return self.observed.pool


class SimulatedEc2(FakeEc2):
    """FakeEc2 (idempotent launches, tags, describe) whose capacity is the trace's, with
    notices, reclaims and billing on top."""

    no_capacity = "no spot capacity in the trace now"

    def __init__(
        self,
        trace: Trace,
        clock: Clock,
        boot_seconds: float,
        silent_share: float = 0.0,
        companions: Companions | None = None,
    ) -> None:
        super().__init__(clock)
        self.trace = trace
        self._companions = companions
        self._boot = timedelta(seconds=boot_seconds)
        self._silent_share = silent_share
        self.records: dict[str, SimInstance] = {}  # every instance ever launched

    async def terminate(self, instance_ids: Sequence[str]) -> None:
        for instance_id in instance_ids:
            instance = self.records.get(instance_id)
            if instance is not None and instance.ended_at is None:
                self._end(instance)

    def has_capacity(self, pool: Pool) -> bool:
        if pool.market is Market.ON_DEMAND:
            return True
        return self._available(pool.availability_zone, self.trace.tick(self._clock.now()))

    # -- what the simulation asks of the cloud --------------------------------------------------

    def live(self) -> list[SimInstance]:
        return [i for i in self.records.values() if i.ended_at is None]

    def bill(self, until: datetime) -> None:
        """Charge every live instance up to `until` at its pool's current price (the caller
        never bills across a tick boundary, so one price holds)."""
        for instance in self.live():
            since = instance.billed_until or instance.observed.launched_at
            hours = (until - since).total_seconds() / 3600
            if hours > 0:
                instance.cost += self.price(instance.pool, since) * hours
                instance.billed_until = until

    def price(self, pool: Pool, at: datetime) -> float:
        base = self._companions.base(pool) if self._companions is not None else None
        if base is not None and self._companions is not None:
            return self._companions.price(pool, self.price(base, at))
        if pool.market is Market.ON_DEMAND:
            return self.trace.zones[pool.availability_zone].on_demand_price
        return self.trace.zones[pool.availability_zone].prices[self.trace.tick(at)]

    def notices_for(self, tick: int) -> list[SimInstance]:
        """Spot instances whose zone has no capacity at `tick`: their two-minute notice is due
        now (once each; a silent one gets none)."""
        due = []
        for instance in self.live():
            spot = instance.pool.market is Market.SPOT and not instance.noticed
            if spot and not self._available(instance.pool.availability_zone, tick):
                instance.noticed = True
                if not instance.silent:
                    due.append(instance)
        return due

    def reclaim(self, tick: int) -> list[SimInstance]:
        """Spot instances whose zone has no capacity at `tick` are gone."""
        gone = []
        for instance in self.live():
            zone = instance.pool.availability_zone
            if instance.pool.market is Market.SPOT and not self._available(zone, tick):
                instance.interrupted = True
                self._end(instance)
                gone.append(instance)
        return gone

    def spot_warning(self, instance: SimInstance) -> str:
        """The EventBridge event AWS sends with the notice."""
        return spot_warning(instance.instance_id, instance.pool.region, self._clock.now())

    # -- inside --------------------------------------------------------------------------------

    def _available(self, zone: str, tick: int) -> bool:
        series = self.trace.zones[zone].available
        return tick >= len(series) or series[tick] == 1

    def _start(self, pool: Pool, request: LaunchRequest) -> ObservedInstance:
        observed = super()._start(pool, request)
        digest = hashlib.sha256(observed.instance_id.encode()).digest()
        silent = digest[0] / 256 < self._silent_share
        self.records[observed.instance_id] = SimInstance(
            observed, observed.launched_at + self._boot, silent
        )
        return observed

    def _end(self, instance: SimInstance) -> None:
        self.bill(self._clock.now())
        instance.ended_at = self._clock.now()
        self.instances.pop(instance.instance_id, None)


def spot_warning(instance_id: str, region: str, now: datetime) -> str:
    """The EventBridge event AWS sends with a spot instance's interruption notice."""
    return json.dumps(
        {
            "version": "0",
            "id": f"sim-{instance_id}",
            "detail-type": SPOT_WARNING,
            "source": "aws.ec2",
            "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": region,
            "resources": [],
            "detail": {"instance-id": instance_id, "instance-action": "terminate"},
        }
    )


def instance_kind(trace: Trace) -> InstanceKind:
    """The trace's instance type, which the fleet simulator buys (with its family's other sizes,
    simulator/companions.py). It says plainly what it cannot replay instead of replaying it
    wrongly."""
    types = sorted({zone.instance_type for zone in trace.zones.values()})
    if len(types) != 1:
        raise ConfigurationError(f"the fleet simulator replays one instance type, not {types}")
    kind = CATALOG.get(types[0])
    if kind is None:
        raise ConfigurationError(
            f"{types[0]} is not in the instance catalog (autoscaler/catalog.py): its GPU family "
            f"and memory are unknown, so no job could be placed on it"
        )
    return kind
