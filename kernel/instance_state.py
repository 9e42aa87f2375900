"""One state machine for an EC2 instance of the fleet, shared by the autoscaler and the control
plane (Ray autoscaler v2's instance manager is the model): each writes the moves it sees through
one store port, and every replica reads the same record.

booting --(a job ran on it)--> working. Either may be asked to drain (scale-in, a rebalance
recommendation, a quarantine): draining --(nothing runs there)--> drained. A spot warning makes
any live instance warned: its jobs checkpoint and move, and its GPUs stop counting as capacity
at once, so the replacement is bought in the same round. FrameFleet asks EC2 to end it:
terminating. Gone from EC2: terminated, or interrupted for a spot instance gone without being
asked. The last two are final.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from kernel.state_machine import StateMachine


class InstanceState(StrEnum):
    BOOTING = "booting"  # launched or adopted; no job has run on it yet
    WORKING = "working"  # a worker on it has run jobs
    DRAINING = "draining"  # no new work; its jobs finish or move, then it is terminated
    DRAINED = "drained"  # nothing runs there any more: ready to terminate
    WARNED = "warned"  # a spot interruption warning: two minutes left
    TERMINATING = "terminating"  # FrameFleet asked EC2 to end it
    TERMINATED = "terminated"  # gone from EC2: asked to, or ended outside FrameFleet
    INTERRUPTED = "interrupted"  # a spot instance gone without being asked


GONE = frozenset({InstanceState.TERMINATED, InstanceState.INTERRUPTED})
# No new work goes there and its GPUs are no capacity to plan with.
LEAVING = frozenset(
    {
        InstanceState.DRAINING,
        InstanceState.DRAINED,
        InstanceState.WARNED,
        InstanceState.TERMINATING,
    }
)
# A hello from one of these is refused (instance ids are never reused).
NOT_WELCOME = GONE | {InstanceState.WARNED, InstanceState.TERMINATING}

_ENDS = frozenset({InstanceState.WARNED, InstanceState.TERMINATING, *GONE})
TRANSITIONS: dict[InstanceState, frozenset[InstanceState]] = {
    InstanceState.BOOTING: frozenset({InstanceState.WORKING, InstanceState.DRAINING, *_ENDS}),
    InstanceState.WORKING: frozenset({InstanceState.DRAINING, *_ENDS}),
    InstanceState.DRAINING: frozenset({InstanceState.DRAINED, *_ENDS}),
    InstanceState.DRAINED: _ENDS,
    InstanceState.WARNED: frozenset({InstanceState.TERMINATING, *GONE}),
    InstanceState.TERMINATING: GONE,
    InstanceState.TERMINATED: frozenset(),
    InstanceState.INTERRUPTED: frozenset(),
}


INSTANCE_MACHINE = StateMachine("instance", TRANSITIONS)


def may_move(before: InstanceState | None, after: InstanceState) -> bool:
    """`before` None: an instance not recorded yet, which may start in any state (a warning or
    an end can be the first the store hears of it)."""
    return before is None or INSTANCE_MACHINE.allows(before, after)


@dataclass(frozen=True)
class InstanceStatus:
    """An instance's record as the store keeps it."""

    instance_id: str
    state: InstanceState
    reason: str
    since: datetime


@dataclass(frozen=True)
class InstanceChange:
    """One move of an instance, in its history."""

    instance_id: str
    at: datetime
    before: InstanceState | None
    after: InstanceState
    actor: str
    reason: str
