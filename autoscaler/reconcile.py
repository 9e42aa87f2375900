"""Two-phase reconcile of the fleet (after Ray autoscaler v2): first sync what EC2 says exists
(by our fleet tag) into the ledger, then act: instances no worker ever registered from after a
grace period are orphans (a launch whose agent never came up) and are terminated. Running it
twice changes nothing the second time."""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import timedelta

from autoscaler.ec2.ports import Ec2Fleet, ObservedInstance
from kernel.clock import Clock

log = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    adopted: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    orphans_terminated: list[str] = field(default_factory=list)


class Reconciler:
    def __init__(
        self, ec2: Ec2Fleet, fleet_id: str, clock: Clock, grace: timedelta = timedelta(minutes=15)
    ) -> None:
        self._ec2, self._fleet_id, self._clock, self._grace = ec2, fleet_id, clock, grace
        self.ledger: dict[str, ObservedInstance] = {}

    async def reconcile(self, workers_seen: Collection[str]) -> ReconcileResult:
        result = await self.sync()
        result.orphans_terminated = await self._terminate_orphans(workers_seen)
        return result

    async def sync(self) -> ReconcileResult:
        """The passive phase alone: learn what exists (what `plan` needs, acting on nothing)."""
        result = ReconcileResult()
        observed = {i.instance_id: i for i in await self._ec2.describe(self._fleet_id)}
        for instance_id, instance in observed.items():
            if instance_id not in self.ledger:
                result.adopted.append(instance_id)
            self.ledger[instance_id] = instance
        for instance_id in list(self.ledger):
            if instance_id not in observed:
                result.forgotten.append(instance_id)
                del self.ledger[instance_id]
        return result

    async def _terminate_orphans(self, workers_seen: Collection[str]) -> list[str]:
        """The active phase: what no worker came up on within the grace period."""
        now = self._clock.now()
        orphans = [
            i.instance_id
            for i in self.ledger.values()
            if i.instance_id not in workers_seen and now - i.launched_at > self._grace
        ]
        if orphans:
            await self._ec2.terminate(orphans)
            for instance_id in orphans:
                log.warning(
                    "terminated orphan %s: no worker registered within %s", instance_id, self._grace
                )
                del self.ledger[instance_id]
        return orphans
