"""The spot market's interruptions, replayed from a trace onto the local fleet.

When a zone's capacity in the trace goes 1 -> 0, each spot worker in that zone is reclaimed, as
AWS does it: the instance-action appears in its IMDS and an "EC2 Spot Instance Interruption
Warning" goes to EventBridge (put_events; a rule routes it to the interruptions queue); when
its notice is up, its process is killed and the instance terminated in EC2, with the state-change
event AWS sends. AWS gives the notice best effort, and the demo shows both: the first
interruption of a worker that runs a job comes with notice (it checkpoints and the job resumes
elsewhere); after it, every `silent_every`-th interruption (the next one, then every
`silent_every` more) comes with none, and the process just dies.

The notice lasts two minutes of trace time, but never less than `min_notice_seconds` of wall
time: at a replay speed of 120 two trace minutes are one wall second, too short for a CPU
worker on a loaded machine to write a checkpoint, which a real GPU worker does in seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from autoscaler.ec2.ports import Ec2Fleet, ObservedInstance
from autoscaler.market.trace import Trace
from framefleet.local_fleet import LocalFleet
from kernel.clock import Clock
from kernel.errors import ConfigurationError
from kernel.market import Market
from kernel.replay_clock import ReplayClock
from orchestrator.interruptions.events import SPOT_WARNING, STATE_CHANGE

if TYPE_CHECKING:
    from types_aiobotocore_events.client import EventBridgeClient

log = logging.getLogger(__name__)
NOTICE = timedelta(minutes=2)


class Ec2Events(Protocol):
    async def put(self, detail_type: str, detail: Mapping[str, str]) -> None:
        """Publish an `aws.ec2` event on the default bus."""
        ...


class BusyInstances(Protocol):
    def running_a_job(self, instance_id: str) -> bool:
        """Whether a job's attempt runs on the instance now."""
        ...


@dataclass(frozen=True)
class ReplaySettings:
    min_notice_seconds: float = 4.0
    silent_every: int = 3  # 0: every interruption gives notice


class SpotReplay:
    def __init__(
        self,
        fleet: LocalFleet,
        ec2: Ec2Fleet,
        events: Ec2Events,
        trace: Trace,
        replay: ReplayClock,
        wall: Clock,
        settings: ReplaySettings,
        busy: BusyInstances | None = None,
    ) -> None:
        self._fleet, self._ec2, self._events = fleet, ec2, events
        self._trace, self._replay, self._wall, self.settings = trace, replay, wall, settings
        self._busy = busy
        self._last_tick: int | None = None
        self._reclaimed: set[str] = set()
        self.interruptions = 0
        self._noticed_busy = False  # the story's first notice went to a working instance
        self._after_first = 0  # interruptions since
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def notice_seconds(self) -> float:
        return max(
            self._replay.wall_seconds(NOTICE.total_seconds()), self.settings.min_notice_seconds
        )

    def zones_lost(self) -> set[str]:
        """Zones whose capacity went 1 -> 0 since the last call."""
        try:
            tick = self._trace.tick(self._replay.now())
        except ConfigurationError:
            return set()  # past the trace's end: the market stands still
        last, self._last_tick = self._last_tick, tick
        if last is None or tick <= last:
            return set()
        lost = set()
        for name, zone in self._trace.zones.items():
            series = zone.available[last : tick + 1]
            if any(a == 1 and b == 0 for a, b in itertools.pairwise(series)):
                lost.add(name)
        return lost

    async def on_poll(self, live: Mapping[str, ObservedInstance]) -> None:
        lost = self.zones_lost()
        if not lost:
            return
        taken = [
            instance
            for instance in live.values()
            if instance.pool.market is Market.SPOT
            and instance.pool.availability_zone in lost
            and instance.instance_id not in self._reclaimed
        ]
        working = {i.instance_id: await self._running_a_job(i.instance_id) for i in taken}
        # Those at work first: the zone's first notice goes to a job, the silent one after.
        for instance in sorted(taken, key=lambda i: not working[i.instance_id]):
            self._reclaimed.add(instance.instance_id)
            await self._reclaim(instance, working[instance.instance_id])

    async def _running_a_job(self, instance_id: str) -> bool:
        if self._busy is None:
            return True
        return await asyncio.to_thread(self._busy.running_a_job, instance_id)

    def _silent(self, busy: bool) -> bool:
        every = self.settings.silent_every
        if every <= 0:
            return False
        if not self._noticed_busy:
            self._noticed_busy = busy
            return False
        self._after_first += 1
        return self._after_first % every == 1

    async def _reclaim(self, instance: ObservedInstance, busy: bool) -> None:
        self.interruptions += 1
        timeline = self._fleet.timeline
        if self._silent(busy):
            timeline.write("spot_reclaimed", instance, notice=False, busy=busy)
            await self._terminate(instance)
            return
        notice = self.notice_seconds
        worker = self._fleet.workers.get(instance.instance_id)
        if worker is not None:
            worker.imds.set_instance_action(
                "terminate", self._wall.now() + timedelta(seconds=notice)
            )
        detail = {"instance-id": instance.instance_id, "instance-action": "terminate"}
        await self._events.put(SPOT_WARNING, detail)
        timeline.write("spot_notice", instance, notice_seconds=round(notice, 2), busy=busy)
        task = asyncio.create_task(self._after_notice(instance, notice, busy))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _after_notice(self, instance: ObservedInstance, notice: float, busy: bool) -> None:
        await self._wall.sleep(notice)
        self._fleet.timeline.write("spot_reclaimed", instance, notice=True, busy=busy)
        await self._terminate(instance)

    async def notices_run_out(self) -> None:
        """Wait until every notice given so far has run out and its instance is gone."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks))

    async def _terminate(self, instance: ObservedInstance) -> None:
        self._fleet.end(instance.instance_id, "reclaimed by the spot market", kill=True)
        await self._ec2.terminate([instance.instance_id])
        detail = {"instance-id": instance.instance_id, "state": "terminated"}
        await self._events.put(STATE_CHANGE, detail)
        log.warning(
            "spot instance %s in %s reclaimed",
            instance.instance_id,
            instance.pool.availability_zone,
        )


class EventBridgeEvents:
    """Ec2Events through an aioboto3 EventBridge client."""

    def __init__(self, events: EventBridgeClient) -> None:
        self._events = events

    async def put(self, detail_type: str, detail: Mapping[str, str]) -> None:
        await self._events.put_events(
            Entries=[{"Source": "aws.ec2", "DetailType": detail_type, "Detail": json.dumps(detail)}]
        )
