"""What the autoscaler knows of each instance of its fleet: one state machine (one table, one
`transition()` with the history an operator asks "why" of), and the book of them all.

booting --(a job ran on it)--> working; either --(FrameFleet asks EC2 to end it: idle past the
timeout, or an orphan)--> terminating --(gone from EC2)--> terminated. Gone from EC2 without
being asked: a spot instance was interrupted (its pool learns from it), an on-demand one was
ended by someone else. Records of instances EC2 has not listed for FORGET_AFTER are dropped, so
the book stays the size of the fleet.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.pools import Pool
from kernel.errors import FrameFleetError
from kernel.market import Market

FORGET_AFTER = timedelta(days=1)
HISTORY = 8


class InstanceState(StrEnum):
    BOOTING = "booting"  # launched or adopted; no job has run on it yet
    WORKING = "working"  # a worker on it has run jobs
    TERMINATING = "terminating"  # FrameFleet asked EC2 to end it
    TERMINATED = "terminated"  # gone from EC2: asked to, or ended outside FrameFleet
    INTERRUPTED = "interrupted"  # a spot instance gone without being asked


_GONE = {InstanceState.TERMINATED, InstanceState.INTERRUPTED}
TRANSITIONS: dict[InstanceState, frozenset[InstanceState]] = {
    InstanceState.BOOTING: frozenset({InstanceState.WORKING, InstanceState.TERMINATING, *_GONE}),
    InstanceState.WORKING: frozenset({InstanceState.TERMINATING, *_GONE}),
    InstanceState.TERMINATING: frozenset({InstanceState.TERMINATED}),
    InstanceState.TERMINATED: frozenset(),
    InstanceState.INTERRUPTED: frozenset(),
}


class InvalidInstanceTransition(FrameFleetError):
    pass


@dataclass(frozen=True)
class InstanceChange:
    before: InstanceState
    after: InstanceState
    at: datetime
    reason: str


@dataclass(frozen=True)
class InstanceRecord:
    instance_id: str
    pool: Pool
    bought: bool  # launched by this process (else adopted from EC2's list)
    price_per_hour: float | None  # at launch; unknown for an adopted one
    last_listed: datetime
    state: InstanceState = InstanceState.BOOTING
    idle_since: datetime | None = None
    history: tuple[InstanceChange, ...] = ()


def transition(
    record: InstanceRecord, after: InstanceState, at: datetime, reason: str
) -> InstanceRecord:
    if after is record.state:
        return record
    if after not in TRANSITIONS[record.state]:
        raise InvalidInstanceTransition(
            f"instance {record.instance_id}: {record.state} -> {after} is not allowed"
        )
    change = InstanceChange(record.state, after, at, reason)
    return replace(record, state=after, history=(*record.history, change)[-HISTORY:])


class InstanceBook:
    def __init__(self) -> None:
        self.records: dict[str, InstanceRecord] = {}

    def bought(self, instance: ObservedInstance, price_per_hour: float, at: datetime) -> None:
        self.records[instance.instance_id] = InstanceRecord(
            instance.instance_id, instance.pool, True, price_per_hour, at
        )

    def listed(self, instances: Iterable[ObservedInstance], at: datetime) -> None:
        """EC2 lists these now: adopt the ones this process did not launch."""
        for instance in instances:
            record = self.records.get(instance.instance_id)
            if record is None:
                record = InstanceRecord(instance.instance_id, instance.pool, False, None, at)
            self.records[instance.instance_id] = replace(record, last_listed=at)

    def spoken_for(self) -> set[str]:
        """Instances that are not orphans: bought here, or a job has run on them."""
        return {
            i for i, r in self.records.items() if r.bought or r.state is not InstanceState.BOOTING
        }

    def worked(self, instance_ids: Iterable[str], at: datetime) -> None:
        for instance_id in instance_ids:
            record = self.records.get(instance_id)
            if record is not None and record.state is InstanceState.BOOTING:
                self.records[instance_id] = transition(
                    record, InstanceState.WORKING, at, "a job ran on it"
                )

    def asked_to_end(self, instance_ids: Iterable[str], at: datetime, reason: str) -> None:
        for instance_id in instance_ids:
            record = self.records.get(instance_id)
            if record is not None and record.state not in _GONE:
                self.records[instance_id] = transition(
                    record, InstanceState.TERMINATING, at, reason
                )

    def gone(self, instance_id: str, pool: Pool, at: datetime) -> InstanceState:
        """EC2 no longer lists it: terminated if asked to (or on-demand), else interrupted."""
        record = self.records.get(instance_id) or InstanceRecord(instance_id, pool, False, None, at)
        if record.state in _GONE:
            return record.state
        if record.state is InstanceState.TERMINATING:
            after, why = InstanceState.TERMINATED, "gone, as asked"
        elif pool.market is Market.SPOT:
            after, why = InstanceState.INTERRUPTED, "gone without being asked: spot reclaimed"
        else:
            after, why = InstanceState.TERMINATED, "gone without being asked: ended elsewhere"
        self.records[instance_id] = transition(record, after, at, why)
        return after

    def idle_since(self, instance_id: str, in_use: bool, at: datetime) -> datetime | None:
        """When the instance's GPUs last fell idle (None while it works)."""
        record = self.records[instance_id]
        since = None if in_use else (record.idle_since or at)
        if since != record.idle_since:
            self.records[instance_id] = replace(record, idle_since=since)
        return since

    def forget_long_gone(self, at: datetime) -> None:
        for instance_id in [
            i for i, r in self.records.items() if at - r.last_listed > FORGET_AFTER
        ]:
            del self.records[instance_id]
