"""When the next idle instance passes its idle timeout: an event of its own for the fleet
simulation, so scale-in happens when the live loop (every 30 s) would do it and not at the
next tick of whatever interval the trace was probed at (issue 47: a market probed every 60 s
and the same market every 195 s must cost the same)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from simulator.workers import SimulatedWorker

# Past the timeout by this much, so the autoscaler's own clock comparison sees it passed.
MARGIN = timedelta(seconds=1)


@dataclass
class IdleWatch:
    timeout: timedelta
    since: dict[str, datetime] = field(default_factory=dict)  # instance -> idle from

    def next_due(self, workers: Mapping[str, SimulatedWorker], now: datetime) -> datetime | None:
        """The earliest moment after `now` at which an idle worker's timeout has passed. A
        worker goes idle only at an event (its job finished or stopped), so the first look
        after it is that moment."""
        soonest = None
        for instance_id in [i for i in self.since if i not in workers]:
            del self.since[instance_id]
        for instance_id, worker in workers.items():
            if not worker.said_hello or worker.jobs:
                self.since.pop(instance_id, None)
                continue
            due = self.since.setdefault(instance_id, now) + self.timeout + MARGIN
            if due > now and (soonest is None or due < soonest):
                soonest = due
        return soonest
