"""Which replica leads: a lease in the store, kept by its holder, waited for by the others.

The leader renews every third of the lease. It steps down on its own once it has not renewed
for the lease time less a margin (a quarter of it), counted on its monotonic clock from before
its last good renewal was sent: cut off from the database (a partition, a stalled connection),
it stops acting before its lease can run out and a standby take over. Whatever it still
writes carries its fence token, which the store refuses once another replica holds the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from kernel.clock import Clock, sleep_unless_stopped
from kernel.errors import FrameFleetError
from orchestrator.store.leases import Fence, NotLeader

log = logging.getLogger(__name__)


class LeaseStore(Protocol):
    def claim_lease(self, name: str, holder: str, ttl: timedelta) -> Fence | None: ...

    def release_lease(self, fence: Fence) -> None: ...


@dataclass
class Leadership:
    store: LeaseStore
    clock: Clock
    name: str
    holder: str
    ttl: timedelta = timedelta(seconds=10)
    margin: timedelta | None = None  # steps down this long before the lease ends (ttl / 4)
    fence: Fence | None = None
    _valid_until: float = 0.0  # monotonic
    _claim: asyncio.Task[Fence | None] | None = None

    def leading(self) -> bool:
        return self.fence is not None and self.clock.monotonic() < self._valid_until

    def current(self) -> Fence:
        if self.fence is None or not self.leading():
            raise NotLeader(self.fence or Fence(self.name, self.holder, 0))
        return self.fence

    async def step(self) -> None:
        """One renewal or claim, waiting at most until the lease would need giving up."""
        sent = self.clock.monotonic()
        if self._claim is None:  # else the last claim still hangs: wait on it, start none
            self._claim = asyncio.create_task(
                asyncio.to_thread(self.store.claim_lease, self.name, self.holder, self.ttl)
            )
        wait = max(0.1, self._valid_until - sent) if self.fence else self.ttl.total_seconds()
        done, _ = await asyncio.wait({self._claim}, timeout=wait)
        fence: Fence | None = self.fence
        if done:
            claim, self._claim = self._claim, None
            try:
                fence = claim.result()
            except FrameFleetError as error:
                log.warning("lease %s: the store did not answer: %s", self.name, error)
            else:
                if fence is not None:
                    margin = self.margin if self.margin is not None else self.ttl / 4
                    self._valid_until = sent + (self.ttl - margin).total_seconds()
        self._settle(fence)

    def _settle(self, fence: Fence | None) -> None:
        was = self.fence
        self.fence = (
            fence if fence is not None and self.clock.monotonic() < self._valid_until else None
        )
        if (was is None) != (self.fence is None) or (was and self.fence and was != self.fence):
            if self.fence is not None:
                log.info("%s leads %s (fence %d)", self.holder, self.name, self.fence.token)
            else:
                log.warning("%s stepped down from %s", self.holder, self.name)

    async def run(self, stop: asyncio.Event) -> None:
        every = self.ttl.total_seconds() / 3
        while not stop.is_set():
            await self.step()
            await sleep_unless_stopped(self.clock, stop, every)
        if self._claim is not None:
            self._claim.cancel()
            with contextlib.suppress(BaseException):
                await self._claim
        if self.fence is not None:
            fence, self.fence = self.fence, None
            with contextlib.suppress(FrameFleetError):
                await asyncio.to_thread(self.store.release_lease, fence)
            log.info("%s released %s", self.holder, self.name)


class ReplicaRole:
    """Whether this replica moves jobs now, and the fence its writes carry. The one place that
    says what no leadership means: a single replica always leads and its writes carry no
    fence."""

    def __init__(self, leadership: Leadership | None) -> None:
        self._leadership = leadership

    def leads(self) -> bool:
        return self._leadership is None or self._leadership.leading()

    def fence(self) -> Fence | None:
        """What every write of this replica carries while it leads (NotLeader once not)."""
        return self._leadership.current() if self._leadership is not None else None
