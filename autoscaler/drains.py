"""Scale-in goes through the control plane: the autoscaler asks it to drain an instance, and
terminates the instance once the control plane has emptied it, or once the drain has taken
longer than its timeout (its jobs then resume elsewhere from their checkpoints, as after an
interruption). Which instances are leaving, as the store's records say each round, is kept
here: they are no capacity."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from autoscaler.actuation import Actuator
from autoscaler.snapshot import Plan, Terminate
from kernel.instance_state import LEAVING, InstanceState
from kernel.job_record import DrainKind, DrainRequest

log = logging.getLogger(__name__)


class DrainAsks(Protocol):
    def ask_to_drain(self, instance_ids: Sequence[str], reason: str) -> None: ...

    def drains(self) -> dict[str, DrainRequest]: ...


@dataclass
class Drains:
    demand: DrainAsks
    actuator: Actuator
    # A drain the control plane has not finished by then is cut short.
    timeout: timedelta = timedelta(minutes=10)
    # The instances whose record (the store's, shared with the control plane) says they are
    # leaving (draining, drained, warned, terminating), as read this round.
    leaving: set[str] = field(default_factory=set)
    warned: set[str] = field(default_factory=set)  # of those, the spot-warned ones

    def saw(self, states: Mapping[str, InstanceState]) -> None:
        """This round's states of the live instances' records."""
        self.leaving = {i for i, state in states.items() if state in LEAVING}
        self.warned = {i for i, state in states.items() if state is InstanceState.WARNED}

    def ask(self, terminations: Sequence[Terminate]) -> None:
        """Ask the control plane to empty these instances (blocking: run it in a thread)."""
        for termination in terminations:
            log.info(
                "asked the control plane to drain %s: %s",
                termination.instance_id,
                termination.reason,
            )
            self.demand.ask_to_drain([termination.instance_id], termination.reason)
            self.leaving.add(termination.instance_id)

    async def finish(self, listed: Container[str], now: datetime) -> list[Terminate]:
        """Terminate the listed instances the control plane has emptied (or left alone past
        the timeout); returns those EC2 took the termination of."""
        requests = await asyncio.to_thread(self.demand.drains)
        ready = []
        for instance_id, request in requests.items():
            if instance_id not in listed:
                continue  # gone already: its record says so once the book sees it
            if request.drained_at is not None:
                ready.append(Terminate(instance_id, f"drained: {request.reason}"))
            elif request.kind is DrainKind.SCALE_IN and now - request.asked_at >= self.timeout:
                ready.append(Terminate(instance_id, f"not drained in time: {request.reason}"))
        if not ready:
            return []
        done = await self.actuator.execute(Plan(terminations=tuple(ready)))
        return [t for t in ready if t.instance_id in done.terminated]
