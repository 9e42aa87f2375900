"""What the autoscaler knows of each instance of its fleet: its pool, price and idle time, and
its state in the one state machine every part shares (`kernel.instance_state`). Each move the
book makes is also queued for the store (`take_moves`), where the instance's one durable record
lives; an instance adopted from EC2's list starts in the state the store has for it, so a new
replica knows which instances worked.

booting --(a job ran on it)--> working; either --(FrameFleet asks EC2 to end it: idle past the
timeout, or an orphan)--> terminating --(gone from EC2)--> terminated. Gone from EC2 without
being asked: a spot instance was interrupted (its pool learns from it), an on-demand one was
ended by someone else. Records of instances EC2 has not listed for FORGET_AFTER are dropped, so
the book stays the size of the fleet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from autoscaler.ec2.ports import ObservedInstance
from autoscaler.pools import Pool
from kernel.instance_state import GONE, INSTANCE_MACHINE, InstanceChange, InstanceState, may_move
from kernel.market import Market

FORGET_AFTER = timedelta(days=1)
HISTORY = 8


ACTOR = "autoscaler"


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
    INSTANCE_MACHINE.check(record.instance_id, record.state, after)
    change = InstanceChange(record.instance_id, at, record.state, after, ACTOR, reason)
    return replace(record, state=after, history=(*record.history, change)[-HISTORY:])


class InstanceBook:
    def __init__(self) -> None:
        self.records: dict[str, InstanceRecord] = {}
        self._moves: list[InstanceChange] = []  # for the store, in order

    def take_moves(self) -> list[InstanceChange]:
        """The moves made since the last call, in order, for the store."""
        moves, self._moves = self._moves, []
        return moves

    def _move(self, record: InstanceRecord, after: InstanceState, at: datetime, why: str) -> None:
        moved = transition(record, after, at, why)
        self.records[record.instance_id] = moved
        if moved is not record:
            self._moves.append(moved.history[-1])

    def bought(self, instance: ObservedInstance, price_per_hour: float, at: datetime) -> None:
        self.records[instance.instance_id] = InstanceRecord(
            instance.instance_id, instance.pool, True, price_per_hour, at
        )
        launch = f"launched on {instance.pool.market.value} in {instance.pool.availability_zone}"
        self._moves.append(
            InstanceChange(instance.instance_id, at, None, InstanceState.BOOTING, ACTOR, launch)
        )

    def listed(
        self,
        instances: Iterable[ObservedInstance],
        at: datetime,
        known: Mapping[str, InstanceState] | None = None,
    ) -> None:
        """EC2 lists these now: adopt the ones this process did not launch. `known`: the state
        the store's record has for each (the control plane moves instances too: a drain, a
        warning), which the book takes; an instance it has none for is booting."""
        known = known or {}
        for instance in instances:
            record = self.records.get(instance.instance_id)
            if record is None:
                record = InstanceRecord(instance.instance_id, instance.pool, False, None, at)
            state = known.get(instance.instance_id, record.state)
            self.records[instance.instance_id] = replace(record, last_listed=at, state=state)

    def spoken_for(self) -> set[str]:
        """Instances that are not orphans: bought here, or a job has run on them."""
        return {
            i for i, r in self.records.items() if r.bought or r.state is not InstanceState.BOOTING
        }

    def worked(self, instance_ids: Iterable[str], at: datetime) -> None:
        for instance_id in instance_ids:
            record = self.records.get(instance_id)
            if record is not None and record.state is InstanceState.BOOTING:
                self._move(record, InstanceState.WORKING, at, "a job ran on it")

    def asked_to_end(self, instance_ids: Iterable[str], at: datetime, reason: str) -> None:
        for instance_id in instance_ids:
            record = self.records.get(instance_id)
            if record is not None and may_move(record.state, InstanceState.TERMINATING):
                self._move(record, InstanceState.TERMINATING, at, reason)

    def gone(self, instance_id: str, pool: Pool, at: datetime) -> InstanceState:
        """EC2 no longer lists it: terminated if asked to (or on-demand), else interrupted."""
        record = self.records.get(instance_id) or InstanceRecord(instance_id, pool, False, None, at)
        if record.state in GONE:
            return record.state
        if record.state is InstanceState.TERMINATING:
            after, why = InstanceState.TERMINATED, "gone, as asked"
        elif pool.market is Market.SPOT:
            after, why = InstanceState.INTERRUPTED, "gone without being asked: spot reclaimed"
        else:
            after, why = InstanceState.TERMINATED, "gone without being asked: ended elsewhere"
        self._move(record, after, at, why)
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
